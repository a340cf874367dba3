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
