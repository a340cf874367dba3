// order-chaos: fault injection for scripts/chaos-orders that needs the grid's API.
//
//   order-chaos duplicate --shared HOST:PORT --stream NAME --count K [--shared-cluster NAME]
//
// Publishes K events of stream NAME again, as a producer that lost an append's answer and
// published again would: the same event (type, key, saga headers, payload) under a new event
// id, so the stream's id dedup does not absorb it and the consumers get it twice. It takes the
// newest events of each sub-stream, round robin. Prints {"stream": NAME, "duplicated": N}.
// Exit 0; 1 on an error; 2 on bad usage.
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tessera/grid/client.h"
#include "tessera/grid/id_generator.h"
#include "tessera/grid/stream.h"
#include "tessera/saga/event.h"

namespace {

[[noreturn]] void Usage(const std::string& problem) {
  std::fprintf(stderr,
               "order-chaos: %s\nusage: order-chaos duplicate --shared HOST:PORT --stream NAME "
               "--count K [--shared-cluster NAME]\n",
               problem.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  namespace grid = tessera::grid;
  namespace saga = tessera::saga;
  if (argc < 2 || std::string(argv[1]) != "duplicate") Usage("the command is 'duplicate'");
  std::vector<std::string> shared;
  std::string stream_name, cluster = "shared";
  long count = -1;
  for (int i = 2; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) Usage(flag + " needs a value");
    const std::string value = argv[i + 1];
    if (flag == "--shared") {
      shared.push_back(value);
    } else if (flag == "--stream") {
      stream_name = value;
    } else if (flag == "--shared-cluster") {
      cluster = value;
    } else if (flag == "--count") {
      char* end = nullptr;
      count = std::strtol(value.c_str(), &end, 10);
      if (*end != '\0' || count < 1) Usage("--count takes a whole number >= 1");
    } else {
      Usage("unknown option '" + flag + "'");
    }
  }
  if (shared.empty() || stream_name.empty() || count < 1) {
    Usage("--shared, --stream and --count are required");
  }
  grid::ClientOptions co;
  co.addresses = shared;
  co.cluster_name = cluster;
  co.client_name = "order-chaos";
  auto client = grid::Client::Connect(co);
  if (!client) {
    std::fprintf(stderr, "order-chaos: %s\n", client.error().message().c_str());
    return 1;
  }
  auto ids = grid::IdGenerator::Create(**client);
  if (!ids) {
    std::fprintf(stderr, "order-chaos: %s\n", ids.error().message().c_str());
    return 1;
  }
  auto stream = (*client)->GetStream(stream_name);
  auto info = stream->Info();
  if (!info) {
    std::fprintf(stderr, "order-chaos: stream %s: %s\n", stream_name.c_str(),
                 info.error().message().c_str());
    return 1;
  }
  // The newest `count` events of each sub-stream, then round robin over the sub-streams.
  std::vector<std::vector<grid::StreamEvent>> newest;
  for (const auto& sub : info->sub_streams) {
    if (sub.tail < sub.head) continue;
    const std::int64_t from = std::max(sub.head, sub.tail - count + 1);
    auto slice = stream->Read(sub.index, from, static_cast<int>(count));
    if (!slice) {
      std::fprintf(stderr, "order-chaos: %s\n", slice.error().message().c_str());
      return 1;
    }
    newest.push_back(std::move(slice->events));
  }
  std::vector<grid::StreamAppend> again;
  for (std::size_t round = 0; static_cast<long>(again.size()) < count; ++round) {
    bool any = false;
    for (const auto& events : newest) {
      if (round >= events.size() || static_cast<long>(again.size()) >= count) continue;
      any = true;
      const auto& e = events[events.size() - 1 - round];
      auto event = saga::DecodeEvent(e.payload);
      if (!event) continue;  // not an Event: nothing a consumer would handle
      event->id = (*ids)->Next();
      again.push_back({e.key, saga::EncodeEvent(*event), std::to_string(event->id)});
    }
    if (!any) break;
  }
  for (const auto& a : again) {
    if (auto r = stream->Append(a.key, a.payload, a.id); !r) {
      std::fprintf(stderr, "order-chaos: append: %s\n", r.error().message().c_str());
      return 1;
    }
  }
  std::printf("%s\n",
              nlohmann::json{{"stream", stream_name}, {"duplicated", again.size()}}.dump().c_str());
  return 0;
}
