// outbox-node: grid-node (same flags, same ready line) whose member runs the saga outbox relay:
// the events staged in its partitions go to the stream "order-events" (4 sub-streams) of the
// shared cluster at $OUTBOX_SHARED (host:port, cluster name "shared"). Tests stage events
// through a client of this node's cluster and watch them arrive, while they SIGSTOP the
// shared cluster and SIGKILL outbox nodes. A test program, not a tool.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>

#include "node_main.h"
#include "tessera/grid/client.h"
#include "tessera/saga/outbox.h"

int main(int argc, char** argv) {
  try {
    const char* shared_address = std::getenv("OUTBOX_SHARED");
    if (shared_address == nullptr) {
      std::fprintf(stderr, "outbox-node: set OUTBOX_SHARED to the shared cluster's host:port\n");
      return 2;
    }
    tessera::grid::ClientOptions options;
    options.addresses = {shared_address};
    options.cluster_name = "shared";
    options.call_timeout = std::chrono::milliseconds(2000);
    auto client = tessera::grid::Client::Connect(options);
    if (!client) {
      std::fprintf(stderr, "outbox-node: %s\n", client.error().ToString().c_str());
      return 1;
    }
    std::shared_ptr<tessera::grid::Instance> shared = std::move(*client);
    std::unique_ptr<tessera::saga::Outbox> outbox;
    const int rc = tessera::tools::node::RunNode(
        argc, argv,
        [&](tessera::grid::Member& member) {
          tessera::saga::OutboxOptions o;
          o.stream = "order-events";
          o.stream_config.sub_streams = 4;
          o.backoff.max_delay_ms = 500;
          outbox = std::make_unique<tessera::saga::Outbox>(member, shared, o);
        },
        [&] { outbox.reset(); });  // before the member goes
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "outbox-node: internal error: %s\n", e.what());
    return 1;
  }
}
