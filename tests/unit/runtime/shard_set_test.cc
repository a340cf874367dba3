#include "tessera/runtime/shard_set.h"

#include <catch2/catch.hpp>
#include <future>
#include <numeric>

using tessera::runtime::ShardSet;

TEST_CASE("InvokeOn runs on the named shard's thread", "[runtime]") {
  ShardSet shards(3);
  shards.Start();
  for (std::size_t i = 0; i < 3; ++i) {
    std::promise<std::optional<std::size_t>> seen;
    shards.InvokeOn(i, [&] { seen.set_value(shards.CurrentShard()); });
    CHECK(seen.get_future().get() == i);
  }
  CHECK_FALSE(shards.CurrentShard().has_value());
  shards.Stop();
}

TEST_CASE("Handlers posted from one thread run in order", "[runtime]") {
  ShardSet shards(2);
  shards.Start();
  std::vector<int> order;
  std::promise<void> done;
  for (int i = 0; i < 1000; ++i) shards.InvokeOn(1, [&order, i] { order.push_back(i); });
  shards.InvokeOn(1, [&] { done.set_value(); });
  done.get_future().get();
  std::vector<int> expected(1000);
  std::iota(expected.begin(), expected.end(), 0);
  CHECK(order == expected);
}

TEST_CASE("MapReduce gathers one value per shard", "[runtime]") {
  ShardSet shards(4);
  shards.Start();
  std::promise<std::vector<std::size_t>> result;
  shards.MapReduce<std::size_t>([](std::size_t s) { return s * 10; },
                                [&](std::vector<std::size_t> v) { result.set_value(v); });
  CHECK(result.get_future().get() == std::vector<std::size_t>{0, 10, 20, 30});
}

TEST_CASE("DispatchOn runs inline on the same shard", "[runtime]") {
  ShardSet shards(2);
  shards.Start();
  std::promise<bool> inline_ran;
  shards.InvokeOn(0, [&] {
    bool ran = false;
    shards.DispatchOn(0, [&] { ran = true; });
    inline_ran.set_value(ran);
  });
  CHECK(inline_ran.get_future().get());
}

TEST_CASE("MapReduce runs the calling shard's part inline, the others in post order", "[runtime]") {
  ShardSet shards(2);
  shards.Start();
  // On shard 0: a post to shard 1 made before MapReduce runs before MapReduce's part there;
  // shard 0's own part has run by the time MapReduce returns.
  std::promise<std::pair<bool, std::vector<int>>> result;
  shards.InvokeOn(0, [&] {
    auto log = std::make_shared<std::vector<int>>();  // touched on shard 1 only
    shards.InvokeOn(1, [log] { log->push_back(1); });
    bool own_part_ran = false;
    shards.MapReduce<int>(
        [&own_part_ran, log](std::size_t s) {
          if (s == 0) own_part_ran = true;
          if (s == 1) log->push_back(2);
          return 0;
        },
        [](std::vector<int>) {});
    const bool inline_ran = own_part_ran;
    shards.InvokeOn(1, [&result, log, inline_ran] { result.set_value({inline_ran, *log}); });
  });
  auto [inline_ran, order] = result.get_future().get();
  CHECK(inline_ran);
  CHECK(order == std::vector<int>{1, 2});
}

TEST_CASE("The default shard count leaves one hardware thread free, and is at least 1",
          "[runtime]") {
  const std::size_t hardware = std::thread::hardware_concurrency();
  CHECK(tessera::runtime::DefaultShardCount() >= 1);
  CHECK(tessera::runtime::DefaultShardCount() == (hardware > 1 ? hardware - 1 : 1));
}
