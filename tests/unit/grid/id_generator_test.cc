// IdGenerator: node ids reserved through the cluster (two members and a client over loopback),
// ids unique across them and increasing per generator, the documented layout.
#include "tessera/grid/id_generator.h"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <set>
#include <thread>

#include "cluster_test_util.h"
#include "tessera/grid/client.h"
#include "tessera/grid/member.h"

using namespace tessera;  // NOLINT
using grid::IdGenerator;
using grid::testing::AddressOf;
using grid::testing::AllList;
using grid::testing::ClusterMember;
using grid::testing::WaitUntil;

TEST_CASE("An id carries its time and node id, and a generator's ids increase", "[grid][ids]") {
  IdGenerator generator(12345);
  const auto before = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const std::int64_t first = generator.Next();
  CHECK(first > 0);
  CHECK(IdGenerator::NodeOf(first) == 12345);
  CHECK(IdGenerator::TimestampMsOf(first) >= before);
  CHECK(IdGenerator::TimestampMsOf(first) <= before + 1000);
  // Far more than 128 per millisecond: it runs ahead of the clock, still strictly increasing.
  std::int64_t last = first;
  int increasing = 0;
  for (int i = 0; i < 200'000; ++i) {
    const std::int64_t id = generator.Next();
    increasing += id > last;
    last = id;
  }
  CHECK(increasing == 200'000);
  CHECK(IdGenerator::NodeOf(last) == 12345);
}

namespace {

// Clocks a test moves by hand (IdGenerator::Clocks), in ns.
std::atomic<std::int64_t> test_wall_ns{0};
std::atomic<std::int64_t> test_steady_ns{0};
std::int64_t TestWallNs() { return test_wall_ns.load(); }
std::int64_t TestSteadyNs() { return test_steady_ns.load(); }
void Advance(std::int64_t ns) {
  test_wall_ns += ns;
  test_steady_ns += ns;
}

}  // namespace

TEST_CASE(
    "A wall clock step forward goes into ids at once and a step back neither goes into them nor "
    "stalls Next",
    "[grid][ids]") {
  constexpr std::int64_t kMs = 1'000'000;
  const std::int64_t start_ms = IdGenerator::kEpochMs + 1'000'000'000;  // ~11.6 days in
  test_wall_ns = start_ms * kMs + 400'000;  // not on a millisecond: no ms lost to rounding
  test_steady_ns = 7'000 * kMs;
  IdGenerator generator(7, IdGenerator::Clocks{&TestWallNs, &TestSteadyNs});
  std::int64_t last = generator.Next();
  CHECK(IdGenerator::TimestampMsOf(last) == start_ms);
  Advance(kMs);
  std::int64_t id = generator.Next();
  CHECK(IdGenerator::TimestampMsOf(id) == start_ms + 1);

  // Forward by a minute (an NTP step, a VM resumed after a suspend): the next id has it.
  test_wall_ns += 60'000 * kMs;
  last = id;
  id = generator.Next();
  CHECK(id > last);
  CHECK(IdGenerator::TimestampMsOf(id) == start_ms + 1 + 60'000);

  // Back by an hour, far beyond the 10 s a generator may run ahead: ids keep their time and go
  // on with the steady clock; Next returns at once (with a stall it would never return here,
  // the test's clocks do not move by themselves).
  test_wall_ns -= 3'600'000 * kMs;
  Advance(2 * kMs);
  last = id;
  id = generator.Next();
  CHECK(id > last);
  CHECK(IdGenerator::TimestampMsOf(id) == start_ms + 3 + 60'000);
  for (int i = 0; i < 1'000; ++i) {
    Advance(kMs);
    last = id;
    id = generator.Next();
    REQUIRE(id > last);
  }
  CHECK(IdGenerator::TimestampMsOf(id) == start_ms + 1'003 + 60'000);

  // The wall clock catching up and passing the generator's clock takes it forward again.
  test_wall_ns += 3'600'000 * kMs + 5'000 * kMs;
  last = id;
  id = generator.Next();
  CHECK(id > last);
  CHECK(IdGenerator::TimestampMsOf(id) == start_ms + 1'003 + 65'000);
  CHECK(IdGenerator::NodeOf(id) == 7);
}

TEST_CASE("Ids from two members and a client are unique, each generator's increasing",
          "[grid][ids][cluster]") {
  grid::Member a(ClusterMember());
  REQUIRE(a.Start());
  grid::Member b(ClusterMember({AddressOf(a)}));
  REQUIRE(b.Start());
  REQUIRE(WaitUntil([&] { return AllList({&a, &b}, 2); }));
  grid::ClientOptions options;
  options.addresses = {AddressOf(a)};
  auto client = grid::Client::Connect(options);
  REQUIRE(client);

  std::vector<std::unique_ptr<IdGenerator>> generators;
  for (grid::Instance* instance :
       {static_cast<grid::Instance*>(&a), static_cast<grid::Instance*>(&b),
        static_cast<grid::Instance*>(client->get())}) {
    auto generator = IdGenerator::Create(*instance);
    REQUIRE(generator);
    generators.push_back(std::move(*generator));
  }
  std::set<std::uint32_t> nodes;
  for (const auto& g : generators) nodes.insert(g->node_id());
  CHECK(nodes.size() == 3);

  // 1M ids from 4 threads: thread t uses generator t % 3 (two threads share one).
  constexpr int kThreads = 4, kPerThread = 250'000;
  std::vector<std::vector<std::int64_t>> ids(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ids[t].reserve(kPerThread);
      for (int i = 0; i < kPerThread; ++i) ids[t].push_back(generators[t % 3]->Next());
    });
  }
  for (auto& t : threads) t.join();
  std::vector<std::int64_t> all;
  for (int t = 0; t < kThreads; ++t) {
    CHECK(std::is_sorted(ids[t].begin(), ids[t].end()));
    CHECK(std::adjacent_find(ids[t].begin(), ids[t].end()) == ids[t].end());
    all.insert(all.end(), ids[t].begin(), ids[t].end());
  }
  std::sort(all.begin(), all.end());
  CHECK(std::adjacent_find(all.begin(), all.end()) == all.end());
  CHECK(all.size() == 1'000'000);
  CHECK(all.front() > 0);
  (*client)->Shutdown();
  b.Shutdown();
  a.Shutdown();
}
