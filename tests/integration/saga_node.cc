// saga-node: grid-node (same flags, same ready line) whose member orchestrates the saga
// "fulfillment" (reserve on "inventory.commands", charge on "payment.commands", ship on
// "shipping.commands"; replies on "orders.saga-replies") through the shared cluster at
// $SAGA_SHARED (host:port, cluster name "shared"). With $SAGA_BEGIN=N it begins sagas
// "order-<i>@cust-<i>" for i < N once started. A test program, not a tool.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>

#include "node_main.h"
#include "tessera/grid/client.h"
#include "tessera/saga/inbox.h"
#include "tessera/saga/orchestrator.h"
#include "tessera/saga/outbox.h"

int main(int argc, char** argv) {
  namespace saga = tessera::saga;
  try {
    const char* shared_address = std::getenv("SAGA_SHARED");
    if (shared_address == nullptr) {
      std::fprintf(stderr, "saga-node: set SAGA_SHARED to the shared cluster's host:port\n");
      return 2;
    }
    const char* begin = std::getenv("SAGA_BEGIN");
    tessera::grid::ClientOptions options;
    options.addresses = {shared_address};
    options.cluster_name = "shared";
    options.call_timeout = std::chrono::milliseconds(2000);
    auto client = tessera::grid::Client::Connect(options);
    if (!client) {
      std::fprintf(stderr, "saga-node: %s\n", client.error().ToString().c_str());
      return 1;
    }
    std::shared_ptr<tessera::grid::Instance> shared = std::move(*client);
    std::unique_ptr<saga::Outbox> outbox;
    std::unique_ptr<saga::Inbox> inbox;
    std::unique_ptr<saga::Orchestrator> orchestrator;
    return tessera::tools::node::RunNode(
        argc, argv,
        [&](tessera::grid::Member& member) {
          saga::OutboxOptions o;
          o.service = "orders";
          outbox = std::make_unique<saga::Outbox>(member, shared, o);
          inbox = std::make_unique<saga::Inbox>(member);
          saga::OrchestratorOptions oo;
          oo.service = "orders";
          oo.deadlines.poll_ms = 50;
          orchestrator = std::make_unique<saga::Orchestrator>(member, shared, *inbox, oo);
          saga::SagaDefinition d;
          d.type = "fulfillment";
          auto step = [](const char* name, const char* stream, const char* cmd, const char* comp) {
            saga::SagaStepDef s;
            s.name = name;
            s.stream = stream;
            s.command = cmd;
            s.compensation = comp;
            s.timeout_ms = 60'000;  // the test holds the ship step; it must not time out
            return s;
          };
          d.steps = {step("reserve", "inventory.commands", "ReserveStock", "ReleaseStock"),
                     step("charge", "payment.commands", "ChargeCard", "RefundCard"),
                     step("ship", "shipping.commands", "Ship", "")};
          orchestrator->Define(d);
        },
        [&] {  // before the member goes
          orchestrator.reset();
          outbox.reset();
        },
        [&](tessera::grid::Member&) -> tessera::base::Result<void> {
          if (auto ok = orchestrator->Start(); !ok) return ok;
          const int n = begin == nullptr ? 0 : std::atoi(begin);
          for (int i = 0; i < n; ++i) {
            const std::string id = "order-" + std::to_string(i) + "@cust-" + std::to_string(i);
            auto r = orchestrator->Begin(
                id, "fulfillment",
                tessera::record::GenericRecord::Build("Order").Int64("n", i).Done());
            if (!r) return std::unexpected(r.error());
          }
          return {};
        });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "saga-node: internal error: %s\n", e.what());
    return 1;
  }
}
