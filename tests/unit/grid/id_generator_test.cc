// IdGenerator: node ids reserved through the cluster (two members and a client over loopback),
// ids unique across them and increasing per generator, the documented layout.
#include "tessera/grid/id_generator.h"

#include <algorithm>
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
