// stream-consumer (test program): a client process that consumes one group of a stream and
// records every delivery, for the multi-process stream tests.
//
//   stream-consumer --address HOST:PORT [--address ...] --stream S --group G --consumer C
//                   --out FILE [--lease-ttl-ms N] [--sub-streams N]
//
// Appends "<sub-stream> <offset> <key> <payload>\n" to FILE (one write per event, before the
// handler returns, so a SIGKILL loses no record of what was handled). Prints
// "stream-consumer ready: native 127.0.0.1:0 ..." once subscribed (the line NodeProcess
// waits for), then runs until SIGTERM or SIGINT, when it unsubscribes (committing and
// releasing its leases) and exits 0.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tessera/grid/client.h"

using namespace tessera;

int main(int argc, char** argv) {
  grid::ClientOptions options;
  std::string stream_name, group, consumer, out;
  grid::StreamConfig config;
  grid::SubscribeOptions subscribe;
  subscribe.max_batch = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--address")
      options.addresses.push_back(value);
    else if (flag == "--stream")
      stream_name = value;
    else if (flag == "--group")
      group = value;
    else if (flag == "--consumer")
      subscribe.consumer_id = value;
    else if (flag == "--out")
      out = value;
    else if (flag == "--lease-ttl-ms")
      subscribe.lease_ttl_ms = std::stoll(value);
    else if (flag == "--port" || flag == "--log-level" || flag == "--threads")
      continue;  // from NodeProcess
    else if (flag == "--sub-streams")
      config.sub_streams = static_cast<std::uint32_t>(std::stoul(value));
    else {
      std::fprintf(stderr, "stream-consumer: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (options.addresses.empty() || stream_name.empty() || group.empty() || out.empty()) {
    std::fprintf(stderr, "stream-consumer: needs --address, --stream, --group and --out\n");
    return 2;
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before any thread starts

  const int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) {
    std::fprintf(stderr, "stream-consumer: cannot open %s: %s\n", out.c_str(),
                 std::strerror(errno));
    return 1;
  }
  auto client = grid::Client::Connect(options);
  if (!client) {
    std::fprintf(stderr, "stream-consumer: %s\n", client.error().ToString().c_str());
    return 1;
  }
  auto stream = (*client)->GetStream(stream_name, config);
  auto id = stream->Subscribe(
      group,
      [fd](const grid::StreamEvent& e) -> base::Result<void> {
        std::string line = std::to_string(e.sub_stream) + " " + std::to_string(e.offset) + " " +
                           e.key + " " + e.payload + "\n";
        if (write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
          return base::Fail(base::ErrorCode::kInternal, "cannot record the delivery");
        }
        return {};
      },
      subscribe);
  if (!id) {
    std::fprintf(stderr, "stream-consumer: %s\n", id.error().ToString().c_str());
    return 1;
  }
  std::printf("stream-consumer ready: native 127.0.0.1:0 group %s consumer %s\n", group.c_str(),
              subscribe.consumer_id.c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  stream->Unsubscribe(*id);
  (*client)->Shutdown();
  close(fd);
  return 0;
}
