// ShardSnapshot: readers on the shards see every value set before their read began, a nested
// read keeps the value the outer read holds, and readers off the shards see the current value.
#include "tessera/runtime/shard_snapshot.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <thread>

using tessera::runtime::ShardSet;
using tessera::runtime::ShardSnapshot;

namespace {

// Runs fn on `shard` and returns its result.
template <typename Fn>
auto OnShard(ShardSet& shards, std::size_t shard, Fn fn) {
  std::promise<decltype(fn())> result;
  shards.InvokeOn(shard, [&] { result.set_value(fn()); });
  return result.get_future().get();
}

}  // namespace

TEST_CASE("A read after a Set sees the new value on every shard and off them", "[runtime]") {
  ShardSet shards(2);
  shards.Start();
  ShardSnapshot<int> snapshot(shards, std::make_shared<const int>(1));
  auto read = [&] { return snapshot.Read([](const int& v) { return v; }); };
  CHECK(read() == 1);  // off the shards
  for (std::size_t s = 0; s < 2; ++s) CHECK(OnShard(shards, s, read) == 1);
  snapshot.Set(std::make_shared<const int>(2));
  CHECK(read() == 2);
  for (std::size_t s = 0; s < 2; ++s) CHECK(OnShard(shards, s, read) == 2);  // caches refreshed
  CHECK(*snapshot.Load() == 2);
  shards.Stop();
}

TEST_CASE("A nested read keeps the value the outer read holds", "[runtime]") {
  ShardSet shards(1);
  shards.Start();
  ShardSnapshot<int> snapshot(shards, std::make_shared<const int>(1));
  auto seen = OnShard(shards, 0, [&] {
    return snapshot.Read([&](const int& outer) {
      snapshot.Set(std::make_shared<const int>(2));  // e.g. a view change meanwhile
      const int inner = snapshot.Read([](const int& v) { return v; });
      return std::pair{outer, inner};  // `outer` still refers to a live value
    });
  });
  CHECK(seen == std::pair{1, 1});
  CHECK(OnShard(shards, 0, [&] { return snapshot.Read([](const int& v) { return v; }); }) == 2);
  shards.Stop();
}

TEST_CASE("Shards reading while another thread sets see values only grow, then the last",
          "[runtime]") {
  ShardSet shards(2);
  shards.Start();
  ShardSnapshot<int> snapshot(shards, std::make_shared<const int>(0));
  constexpr int kLast = 2000;
  std::atomic<bool> stop{false};
  std::atomic<int> went_back{0};
  std::promise<void> done[2];
  for (std::size_t s = 0; s < 2; ++s) {
    shards.InvokeOn(s, [&, s] {
      int last = 0;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!stop.load() && std::chrono::steady_clock::now() < deadline) {
        const int v = snapshot.Read([](const int& x) { return x; });
        if (v < last) went_back.fetch_add(1);
        last = v;
      }
      done[s].set_value();
    });
  }
  for (int i = 1; i <= kLast; ++i) snapshot.Set(std::make_shared<const int>(i));
  stop.store(true);
  for (auto& d : done) d.get_future().get();
  CHECK(went_back.load() == 0);
  for (std::size_t s = 0; s < 2; ++s) {
    CHECK(OnShard(shards, s, [&] { return snapshot.Read([](const int& v) { return v; }); }) ==
          kLast);
  }
  shards.Stop();
}
