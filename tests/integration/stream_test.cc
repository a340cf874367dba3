// Event streams across real processes: 3 grid-node members (1 backup), 2 consumer groups of
// 3 stream-consumer processes each, 100k events over 1,000 keys appended by this process; one
// consumer and one member are SIGKILLed mid-run. Every event reaches each group, per-key
// order holds within every consumer, and duplicates come only from the killed consumer's
// uncommitted tail.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "child_process.h"

namespace tessera::integration {
namespace {

using Clock = std::chrono::steady_clock;

struct Delivery {
  std::uint32_t sub = 0;
  std::int64_t offset = 0;
  std::string key;
  int seq = 0;
};

std::vector<Delivery> ReadDeliveries(const std::string& path) {
  std::vector<Delivery> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    Delivery d;
    std::string payload;
    if (!(fields >> d.sub >> d.offset >> d.key >> payload)) continue;  // a torn last line
    d.seq = std::stoi(payload.substr(payload.find(':') + 1));
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace

TEST_CASE("Stream consumer groups across processes survive a consumer and a member SIGKILL",
          "[tools][cluster][stream]") {
  constexpr int kEvents = 100'000, kKeys = 1'000, kBatch = 500;
  auto a = NodeProcess::StartOrFail(FastClusterArgs({"--backup-count", "1"}));
  auto b =
      NodeProcess::StartOrFail(FastClusterArgs({"--backup-count", "1", "--join", a->address()}));
  auto c =
      NodeProcess::StartOrFail(FastClusterArgs({"--backup-count", "1", "--join", a->address()}));
  WaitForMembers(*a, 3);

  const auto dir =
      std::filesystem::temp_directory_path() / ("tessera-stream-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  struct Consumer {
    std::string group, name, out;
    std::unique_ptr<NodeProcess> process;
  };
  std::vector<Consumer> consumers;
  for (const std::string group : {"billing", "shipping"}) {
    for (int i = 1; i <= 3; ++i) {
      Consumer k{group, group + "-" + std::to_string(i),
                 (dir / (group + "-" + std::to_string(i))).string(), nullptr};
      k.process = NodeProcess::StartProgramOrFail(
          STREAM_CONSUMER_PATH, {"--address", a->address(), "--address", b->address(), "--address",
                                 c->address(), "--stream", "orders", "--group", group, "--consumer",
                                 k.name, "--out", k.out, "--lease-ttl-ms", "5000"});
      consumers.push_back(std::move(k));
    }
  }

  auto options = ClientOptionsFor(*a, 10'000ms);
  options.addresses = {a->address(), b->address(), c->address()};
  auto client = grid::Client::Connect(options);
  REQUIRE(client);
  auto stream = (*client)->GetStream("orders");
  // Every consumer holds leases before the first append: a consumer that subscribed last gets
  // its share only at the others' next rebalance (a third of the lease TTL), by when a fast
  // machine has appended the 30,000 events before the kill, and the consumer to be killed
  // would have consumed nothing.
  const auto balancing = Clock::now();
  const auto balanced_by = balancing + 30s;
  std::set<std::string> holders;
  for (bool balanced = false; !balanced;) {
    if (Clock::now() > balanced_by) {
      std::string seen;
      for (const auto& h : holders) seen += " '" + h + "'";
      FAIL("the consumers did not all hold leases within 30 s; holders:" << seen);
    }
    std::this_thread::sleep_for(100ms);
    auto info = stream->Info();
    if (!info) continue;
    holders.clear();
    for (const auto& sub : info->sub_streams) {
      for (const auto& g : sub.groups) holders.insert(g.holder);
    }
    balanced = true;  // a holder is "<consumer id>/<subscription>"
    for (const auto& k : consumers) {
      balanced = balanced && std::any_of(holders.begin(), holders.end(), [&](const auto& h) {
                   return h.starts_with(k.name + "/");
                 });
    }
  }
  WARN("every consumer held leases "
       << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - balancing).count()
       << " ms after the last one was ready");
  int retried_batches = 0;
  const auto start = Clock::now();
  for (int from = 0; from < kEvents; from += kBatch) {
    if (from == 30'000) {  // billing-2, once it recorded deliveries: killed while consuming
      const auto consuming_by = Clock::now() + 30s;
      while (std::filesystem::file_size(consumers[1].out) == 0) {
        if (Clock::now() > consuming_by) FAIL("billing-2 recorded no delivery within 30 s");
        std::this_thread::sleep_for(10ms);
      }
      consumers[1].process->Stop(SIGKILL);
    }
    if (from == 60'000) c->Stop(SIGKILL);  // a member
    std::vector<grid::StreamAppend> batch;
    for (int i = from; i < from + kBatch; ++i) {
      const std::string key = "k" + std::to_string(i % kKeys);
      batch.push_back({key, key + ":" + std::to_string(i / kKeys), "e" + std::to_string(i)});
    }
    auto r = stream->AppendAll(batch);
    for (int attempt = 0; !r && attempt < 20; ++attempt) {  // the same ids: applied once
      ++retried_batches;
      std::this_thread::sleep_for(200ms);
      r = stream->AppendAll(batch);
    }
    REQUIRE(r);
  }
  const double append_s = std::chrono::duration<double>(Clock::now() - start).count();

  // Both groups catch up: nothing left uncommitted on any sub-stream.
  std::int64_t stored = 0;
  bool caught_up = false;
  const auto deadline = Clock::now() + 120s;
  while (!caught_up && Clock::now() < deadline) {
    std::this_thread::sleep_for(250ms);
    auto info = stream->Info();
    if (!info || info->groups.size() != 2) continue;
    caught_up = info->groups[0].lag == 0 && info->groups[1].lag == 0;
    stored = 0;
    for (const auto& sub : info->sub_streams) stored += sub.tail;
  }
  REQUIRE(caught_up);
  CHECK(stored == kEvents);  // retried batches were not stored twice
  for (auto& k : consumers) {
    if (k.process->running()) CHECK(k.process->Stop(SIGTERM) == 0);
  }

  std::set<std::pair<std::uint32_t, std::int64_t>> killed_saw;
  for (const auto& d : ReadDeliveries(consumers[1].out)) killed_saw.insert({d.sub, d.offset});
  CHECK(!killed_saw.empty());  // it was consuming when it died
  for (const std::string group : {"billing", "shipping"}) {
    std::map<std::pair<std::uint32_t, std::int64_t>, int> times;
    std::set<std::pair<std::string, int>> events;
    int out_of_order = 0, duplicates = 0, duplicates_not_from_killed = 0;
    for (const auto& k : consumers) {
      if (k.group != group) continue;
      std::map<std::string, int> last;
      for (const auto& d : ReadDeliveries(k.out)) {
        auto it = last.find(d.key);
        if (it != last.end() && d.seq <= it->second) ++out_of_order;
        last[d.key] = d.seq;
        events.insert({d.key, d.seq});
        if (++times[{d.sub, d.offset}] > 1) {
          ++duplicates;
          if (!killed_saw.count({d.sub, d.offset})) ++duplicates_not_from_killed;
        }
      }
    }
    INFO("group " << group << ": " << duplicates << " duplicate deliveries");
    WARN("group " << group << ": " << events.size() << " distinct events, " << duplicates
                  << " duplicates (killed consumer's uncommitted tail), append "
                  << kEvents / append_s << " events/s, " << retried_batches << " batches retried");
    CHECK(events.size() == static_cast<std::size_t>(kEvents));  // nothing lost
    CHECK(out_of_order == 0);
    CHECK(duplicates_not_from_killed == 0);
    if (group == "shipping") CHECK(duplicates == 0);  // nobody of this group died
  }
  std::filesystem::remove_all(dir);
}

}  // namespace tessera::integration
