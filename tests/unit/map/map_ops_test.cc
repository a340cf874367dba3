#include "tessera/map/map_ops.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <limits>

#include "map_test_util.h"
#include "tessera/map/family.h"

using namespace tessera::map;  // NOLINT
using tessera::base::ErrorCode;
using tessera::map::testing::Rq;
using tessera::map::testing::StoreFixture;
using tessera::map::testing::WithTtl;

TEST_CASE("put returns the old value, set returns none, get reads", "[map][ops]") {
  StoreFixture f;
  CHECK_FALSE(f.Run(Rq(MapOp::kPut, "k", "v1")).value.has_value());
  CHECK(f.Run(Rq(MapOp::kPut, "k", "v2")).value == "v1");
  CHECK_FALSE(f.Run(Rq(MapOp::kSet, "k", "v3")).value.has_value());
  CHECK(f.Get("k") == "v3");
  CHECK_FALSE(f.Get("missing").has_value());
}

TEST_CASE("remove, delete and containsKey", "[map][ops]") {
  StoreFixture f;
  f.Put("k", "v");
  CHECK(f.Run(Rq(MapOp::kContainsKey, "k")).flag);
  CHECK(f.Run(Rq(MapOp::kRemove, "k")).value == "v");
  CHECK_FALSE(f.Run(Rq(MapOp::kContainsKey, "k")).flag);
  CHECK_FALSE(f.Run(Rq(MapOp::kRemove, "k")).value.has_value());
  f.Put("k", "v");
  CHECK(f.Run(Rq(MapOp::kDelete, "k")).flag);
  CHECK_FALSE(f.Run(Rq(MapOp::kDelete, "k")).flag);
}

TEST_CASE("putIfAbsent stores only when absent", "[map][ops]") {
  StoreFixture f;
  CHECK_FALSE(f.Run(Rq(MapOp::kPutIfAbsent, "k", "first")).value.has_value());
  CHECK(f.Run(Rq(MapOp::kPutIfAbsent, "k", "second")).value == "first");
  CHECK(f.Get("k") == "first");
}

TEST_CASE("putIfAbsent on an expired entry succeeds", "[map][ops][ttl]") {
  StoreFixture f;
  f.Run(WithTtl(Rq(MapOp::kSet, "k", "old"), 100));
  f.clock.Advance(100);
  CHECK_FALSE(f.Run(Rq(MapOp::kPutIfAbsent, "k", "new")).value.has_value());
  CHECK(f.Get("k") == "new");
}

TEST_CASE("replace and replaceIfSame only touch present entries", "[map][ops]") {
  StoreFixture f;
  CHECK_FALSE(f.Run(Rq(MapOp::kReplace, "k", "v")).value.has_value());
  CHECK_FALSE(f.Get("k").has_value());  // replace never inserts
  f.Put("k", "a");
  CHECK(f.Run(Rq(MapOp::kReplace, "k", "b")).value == "a");
  CHECK(f.Get("k") == "b");
  auto same = Rq(MapOp::kReplaceIfSame, "k", "c");
  same.expected = "wrong";
  CHECK_FALSE(f.Run(same).flag);
  CHECK(f.Get("k") == "b");
  same.expected = "b";
  CHECK(f.Run(same).flag);
  CHECK(f.Get("k") == "c");
  auto absent = Rq(MapOp::kReplaceIfSame, "nope", "x");
  CHECK_FALSE(f.Run(absent).flag);
  CHECK_FALSE(f.Get("nope").has_value());
}

TEST_CASE("removeIfSame removes only a matching value", "[map][ops]") {
  StoreFixture f;
  f.Put("k", "v");
  auto rq = Rq(MapOp::kRemoveIfSame, "k");
  rq.expected = "other";
  CHECK_FALSE(f.Run(rq).flag);
  CHECK(f.Get("k") == "v");
  rq.expected = "v";
  CHECK(f.Run(rq).flag);
  CHECK_FALSE(f.Get("k").has_value());
}

TEST_CASE("TTL: an entry expires exactly at ttl, not 1 ms before", "[map][ops][ttl]") {
  StoreFixture f;
  f.Run(WithTtl(Rq(MapOp::kSet, "k", "v"), 1000));
  f.clock.Advance(999);
  CHECK(f.Get("k") == "v");
  f.clock.Advance(1);
  CHECK_FALSE(f.Get("k").has_value());
  CHECK(f.store.size() == 0);  // removed lazily on access
  CHECK(f.store.stats().expirations == 1);
}

TEST_CASE("TTL: the map default applies when a write names none", "[map][ops][ttl]") {
  StoreFixture f;
  f.config.default_ttl_ms = 500;
  f.Put("k", "v");
  f.Run(WithTtl(Rq(MapOp::kSet, "explicit", "v"), 2000));
  f.clock.Advance(500);
  CHECK_FALSE(f.Get("k").has_value());
  CHECK(f.Get("explicit") == "v");
}

TEST_CASE("TTL: 0 means never expires, even with a map default", "[map][ops][ttl]") {
  StoreFixture f;
  f.config.default_ttl_ms = 500;
  f.Run(WithTtl(Rq(MapOp::kSet, "k", "v"), 0));
  f.clock.Advance(100'000'000);
  CHECK(f.Get("k") == "v");
}

TEST_CASE("TTL: a later write without ttl resets the expiry, keep_ttl keeps it",
          "[map][ops][ttl]") {
  StoreFixture f;
  f.Run(WithTtl(Rq(MapOp::kSet, "reset", "v"), 1000));
  f.Run(WithTtl(Rq(MapOp::kSet, "kept", "v"), 1000));
  f.clock.Advance(600);
  f.Put("reset", "v2");  // no default TTL: now never expires
  auto keep = Rq(MapOp::kSet, "kept", "v2");
  keep.options.keep_ttl = true;
  f.Run(keep);
  f.clock.Advance(400);
  CHECK(f.Get("reset") == "v2");
  CHECK_FALSE(f.Get("kept").has_value());
}

TEST_CASE("TTL: keep_ttl on a new entry uses the map default", "[map][ops][ttl]") {
  StoreFixture f;
  f.config.default_ttl_ms = 300;
  auto keep = Rq(MapOp::kSet, "k", "v");
  keep.options.keep_ttl = true;
  f.Run(keep);
  f.clock.Advance(299);
  CHECK(f.Get("k") == "v");
  f.clock.Advance(1);
  CHECK_FALSE(f.Get("k").has_value());
}

TEST_CASE("max-idle is refreshed by reads and writes", "[map][ops][ttl]") {
  StoreFixture f;
  auto rq = Rq(MapOp::kSet, "k", "v");
  rq.options.max_idle_ms = 100;
  f.Run(rq);
  for (int i = 0; i < 5; ++i) {
    f.clock.Advance(99);
    CHECK(f.Get("k") == "v");
  }
  f.clock.Advance(99);
  f.Run(rq);  // a write refreshes too
  f.clock.Advance(99);
  CHECK(f.Run(Rq(MapOp::kContainsKey, "k")).flag);
  f.clock.Advance(100);
  CHECK_FALSE(f.Get("k").has_value());
}

TEST_CASE("max-idle default comes from the map config", "[map][ops][ttl]") {
  StoreFixture f;
  f.config.default_max_idle_ms = 50;
  f.Put("k", "v");
  f.clock.Advance(50);
  CHECK_FALSE(f.Get("k").has_value());
}

TEST_CASE("setTtl changes the expiry of an existing entry", "[map][ops][ttl]") {
  StoreFixture f;
  f.Put("k", "v");
  CHECK(f.Run(WithTtl(Rq(MapOp::kSetTtl, "k"), 200)).flag);
  CHECK_FALSE(f.Run(WithTtl(Rq(MapOp::kSetTtl, "missing"), 200)).flag);
  f.clock.Advance(150);
  CHECK(f.Run(WithTtl(Rq(MapOp::kSetTtl, "k"), 0)).flag);  // persist
  f.clock.Advance(1000);
  CHECK(f.Get("k") == "v");
  auto no_ttl = f.Try(Rq(MapOp::kSetTtl, "k"));
  REQUIRE_FALSE(no_ttl);
  CHECK(no_ttl.error().code() == ErrorCode::kBadRequest);
}

TEST_CASE("getEntryView reports metadata", "[map][ops]") {
  StoreFixture f;
  const auto t0 = f.clock.NowMs();
  f.Run(WithTtl(Rq(MapOp::kSet, "k", "v"), 1000));
  f.clock.Advance(10);
  f.Get("k");
  f.Get("k");
  f.clock.Advance(10);
  f.Put("k", "v2");
  auto result = f.Run(Rq(MapOp::kGetEntryView, "k"));
  REQUIRE(result.view.has_value());
  CHECK(result.value == "v2");
  CHECK(result.view->creation_ms == t0);
  CHECK(result.view->last_update_ms == t0 + 20);
  CHECK(result.view->last_access_ms == t0 + 20);
  CHECK(result.view->hits == 2);
  CHECK(result.view->version == 2);
  CHECK(result.view->ttl_ms == 0);  // the second write had no TTL and no default applies
  CHECK_FALSE(f.Run(Rq(MapOp::kGetEntryView, "missing")).view.has_value());
}

TEST_CASE("requests are validated", "[map][ops]") {
  StoreFixture f;
  auto no_name = Rq(MapOp::kGet, "k");
  no_name.map_name.clear();
  auto r = f.Try(no_name);
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == ErrorCode::kBadRequest);
  CHECK(r.error().message() == "map name is empty");
  auto negative = f.Try(WithTtl(Rq(MapOp::kSet, "k", "v"), -1));
  REQUIRE_FALSE(negative);
  CHECK(negative.error().code() == ErrorCode::kBadRequest);
  CHECK(negative.error().message().find("ttl_ms is negative") != std::string::npos);
  auto no_key = f.Try(Rq(MapOp::kGet, ""));
  REQUIRE_FALSE(no_key);
  CHECK(no_key.error().code() == ErrorCode::kBadRequest);
  auto bad_op = Rq(static_cast<MapOp>(99), "k");
  CHECK(f.Try(bad_op).error().code() == ErrorCode::kBadRequest);
}

TEST_CASE("A TTL or idle limit longer than a map keeps is refused, the longest is kept",
          "[map][ops][ttl]") {
  using tessera::map::kMaxExpiryMs;
  StoreFixture f;
  f.Put("k", "before");
  // INT64_MAX used to overflow the deadline: the entry expired at once.
  for (const auto ttl : {std::numeric_limits<std::int64_t>::max(), kMaxExpiryMs + 1}) {
    auto refused = f.Try(WithTtl(Rq(MapOp::kSet, "k", "v"), ttl));
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code() == ErrorCode::kBadRequest);
    CHECK(refused.error().message().find("more than the longest TTL") != std::string::npos);
  }
  auto idle = Rq(MapOp::kSet, "k", "v");
  idle.options.max_idle_ms = std::numeric_limits<std::int64_t>::max();
  auto refused = f.Try(idle);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message().find("more than the longest idle limit") != std::string::npos);
  CHECK(f.Get("k") == "before");  // nothing applied
  // The longest is kept, and expires when it says.
  f.Run(WithTtl(Rq(MapOp::kSet, "k", "v"), kMaxExpiryMs));
  f.clock.Advance(kMaxExpiryMs - 1);
  CHECK(f.Get("k") == "v");
  f.clock.Advance(1);
  CHECK_FALSE(f.Get("k").has_value());
}

TEST_CASE("stats count gets, hits, misses, puts and removes", "[map][ops][stats]") {
  StoreFixture f;
  const auto start = std::chrono::steady_clock::now();
  f.Put("a", "1");
  f.Put("b", "2");
  f.Get("a");
  f.Get("zzz");
  f.Run(Rq(MapOp::kRemove, "b"));
  const auto stats = f.Run(Rq(MapOp::kStats)).stats;
  const auto elapsed_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  CHECK(stats.entries == 1);
  CHECK(stats.puts == 2);
  CHECK(stats.gets == 2);
  CHECK(stats.hits == 1);
  CHECK(stats.misses == 1);
  CHECK(stats.removes == 1);
  CHECK(stats.memory_bytes >= 48 + 2);
  CHECK(stats.memory_bytes == f.store.memory_bytes());
  CHECK(stats.get_latency_ns > 0);
  CHECK(stats.put_latency_ns > 0);
  CHECK(stats.remove_latency_ns > 0);
  // Nanoseconds (a store counts CycleClock ticks; the stats convert them): the operations'
  // latencies add up to no more than the time they all took.
  CHECK(stats.get_latency_ns + stats.put_latency_ns + stats.remove_latency_ns <= elapsed_ns);
}

TEST_CASE("An op of a family this process has not registered fails, naming the op",
          "[map][ops][errors]") {
  // map_ops_test registers no family (the hash family's tests are hash_test): a member that
  // lacks one answers its op with a clear error instead of running nothing.
  StoreFixture f;
  MapRequest hget = Rq(MapOp::kRedisKey, "k");
  hget.processor = "hget";
  hget.keys = {"field"};
  auto refused = f.Try(hget);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == ErrorCode::kUnsupported);
  CHECK(refused.error().message().find("redisKey") != std::string::npos);
}
