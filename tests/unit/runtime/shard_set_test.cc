#include "tessera/runtime/shard_set.h"

#include <time.h>

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <numeric>
#include <thread>

namespace asio = boost::asio;
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

namespace {

// Posts 1000 handlers to `shard` from this thread, back to back; true if they ran in order.
bool PostsRunInOrder(ShardSet& shards, std::size_t shard) {
  std::vector<int> order;
  std::promise<void> done;
  for (int i = 0; i < 1000; ++i) shards.InvokeOn(shard, [&order, i] { order.push_back(i); });
  shards.InvokeOn(shard, [&] { done.set_value(); });
  done.get_future().get();
  std::vector<int> expected(1000);
  std::iota(expected.begin(), expected.end(), 0);
  return order == expected;
}

}  // namespace

TEST_CASE("Handlers posted from one thread run in order", "[runtime]") {
  ShardSet shards(2);
  shards.Start();
  CHECK(PostsRunInOrder(shards, 1));
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

namespace {

// CPU time the calling thread has used.
std::chrono::nanoseconds ThreadCpuTime() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

std::chrono::nanoseconds ShardCpuTime(ShardSet& shards, std::size_t shard) {
  std::promise<std::chrono::nanoseconds> cpu;
  shards.InvokeOn(shard, [&] { cpu.set_value(ThreadCpuTime()); });
  return cpu.get_future().get();
}

}  // namespace

TEST_CASE("A polling shard runs posts in order, fires timers and stops while busy", "[runtime]") {
  ShardSet shards(2, std::chrono::microseconds(200));
  shards.Start();
  // Posts from one thread, back to back (the shard keeps polling between them).
  CHECK(PostsRunInOrder(shards, 1));

  // A timer fires on a shard that is polling (its work keeps coming every few µs) and on one
  // that sleeps.
  for (std::size_t shard : {0, 1}) {
    std::promise<boost::system::error_code> fired;
    shards.InvokeOn(shard, [&] {
      auto timer = std::make_shared<asio::steady_timer>(shards.Context(shard));
      timer->expires_after(std::chrono::milliseconds(20));
      timer->async_wait([&fired, timer](boost::system::error_code ec) { fired.set_value(ec); });
    });
    auto result = fired.get_future();
    std::atomic<bool> keep_posting{shard == 0};
    std::thread poster([&] {
      while (keep_posting.load()) {
        shards.InvokeOn(0, [] {});
        std::this_thread::sleep_for(std::chrono::microseconds(5));
      }
    });
    CHECK(result.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
    keep_posting = false;
    poster.join();
    CHECK(result.get() == boost::system::error_code());
  }

  // Stop returns while a shard is polling between a stream of posts.
  std::atomic<bool> keep_posting{true};
  std::atomic<int> ran{0};
  std::thread poster([&] {
    while (keep_posting.load()) {
      shards.InvokeOn(0, [&ran] { ran.fetch_add(1); });
      std::this_thread::sleep_for(std::chrono::microseconds(5));
    }
  });
  while (ran.load() < 100) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  shards.Stop();
  keep_posting = false;
  poster.join();
}

TEST_CASE("A polling shard stops polling once work stops coming", "[runtime]") {
  ShardSet shards(1, std::chrono::microseconds(200));
  shards.Start();
  // A burst of work less than the poll window apart, then nothing.
  for (int i = 0; i < 2000; ++i) shards.InvokeOn(0, [] {});
  const auto before = ShardCpuTime(shards, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto used = ShardCpuTime(shards, 0) - before;
  // Asleep, it uses next to nothing; had it kept polling it would have used ~500 ms.
  INFO("shard CPU while idle: " << used.count() / 1000 << " us");
  CHECK(used < std::chrono::milliseconds(50));
  shards.Stop();
}

TEST_CASE("Idle polling is accounted per shard, and not at all when it is off", "[runtime]") {
  const auto stream_of_posts = [](ShardSet& shards) {
    std::atomic<int> ran{0};
    for (int i = 0; i < 2000; ++i) {
      shards.InvokeOn(0, [&ran] { ran.fetch_add(1); });
      std::this_thread::sleep_for(std::chrono::microseconds(5));  // ~60 us with timer slack
    }
    while (ran.load() < 2000) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  SECTION("off") {
    ShardSet shards(1);
    shards.Start();
    stream_of_posts(shards);
    CHECK(shards.IdlePollStats(0).polled.count() == 0);
    CHECK(shards.IdlePollStats(0).contended_samples == 0);
  }
  SECTION("on") {
    ShardSet shards(1, std::chrono::microseconds(500));
    shards.Start();
    stream_of_posts(shards);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the last poll ends
    const auto after_work = shards.IdlePollStats(0);
    // Work came every ~60 us, inside the window: the shard polled between posts, unless its
    // core was contended (a busy machine), which it then counted.
    CHECK((after_work.polled.count() > 0 || after_work.contended_samples > 0));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto after_idle = shards.IdlePollStats(0);
    INFO("polled while idle: " << (after_idle.polled - after_work.polled).count() << " us");
    CHECK(after_idle.polled - after_work.polled < std::chrono::milliseconds(50));
  }
}
