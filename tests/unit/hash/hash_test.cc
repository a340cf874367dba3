// The hash family's commands (MapOp::kRedisKey, hash/redis_hash.h) run straight on one partition's
// store, without a member or a socket.
#include <catch2/catch.hpp>
#include <limits>

#include "map_test_util.h"
#include "tessera/hash/redis_hash.h"
#include "tessera/partition/partitioner.h"

using namespace tessera::map;  // NOLINT
using tessera::base::ErrorCode;
using tessera::base::ErrorReason;
using tessera::hash::RedisKeyCommandWrites;
using tessera::map::testing::Rq;
using tessera::map::testing::StoreFixture;
using tessera::map::testing::WithTtl;

namespace {

const bool kRegistered = (tessera::hash::Register(), true);

MapRequest Hash(const std::string& cmd, const std::string& key,
                std::vector<std::string> fields = {}) {
  MapRequest rq = Rq(MapOp::kRedisKey, key);
  rq.processor = cmd;
  rq.keys = std::move(fields);
  return rq;
}

MapRequest HSet(const std::string& key, std::vector<std::pair<std::string, std::string>> fields,
                bool nx = false) {
  MapRequest rq = Hash("hset", key);
  rq.entries = std::move(fields);
  if (nx) rq.argument = tessera::record::GenericRecord::Build().Bool("nx", true).Done();
  return rq;
}

MapRequest HIncrBy(const std::string& key, const std::string& field, std::int64_t delta) {
  MapRequest rq = Hash("hincrby", key, {field});
  rq.argument = tessera::record::GenericRecord::Build().Int64("delta", delta).Done();
  return rq;
}

MapRequest Rename(const std::string& from, const std::string& to, bool nx = false) {
  MapRequest rq = Hash("rename", from);
  rq.argument = tessera::record::GenericRecord::Build().String("to", to).Bool("nx", nx).Done();
  return rq;
}

}  // namespace

TEST_CASE("A hash's fields are set, read, counted and removed, and the hash goes with its last",
          "[map][hash]") {
  StoreFixture f;
  CHECK(f.Run(HSet("h", {{"b", "2"}, {"a", "1"}})).count == 2);
  CHECK(f.Run(HSet("h", {{"a", "one"}, {"c", "3"}})).count == 1);  // a replaced, c added
  const auto got = f.Run(Hash("hget", "h", {"c", "missing", "a"})).entries;
  CHECK(got == std::vector<std::pair<std::string, std::string>>{{"c", "3"}, {"a", "one"}});
  CHECK(f.Run(Hash("hlen", "h")).count == 3);
  const auto all = f.Run(Hash("hgetall", "h")).entries;  // insertion order while inline
  CHECK(all ==
        std::vector<std::pair<std::string, std::string>>{{"b", "2"}, {"a", "one"}, {"c", "3"}});
  auto exists = f.Run(Hash("hexists", "h", {"a"}));
  CHECK(exists.flag);
  CHECK(f.Run(Hash("hstrlen", "h", {"a"})).count == 3);
  CHECK_FALSE(f.Run(Hash("hexists", "h", {"zz"})).flag);
  CHECK(f.Run(Hash("hdel", "h", {"a", "b", "zz"})).count == 2);
  CHECK(f.Run(Rq(MapOp::kContainsKey, "h")).flag);
  CHECK(f.Run(Hash("hdel", "h", {"c"})).count == 1);
  CHECK_FALSE(f.Run(Rq(MapOp::kContainsKey, "h")).flag);
  CHECK(f.Run(Hash("hlen", "h")).count == 0);
}

TEST_CASE("HSET NX sets only absent fields, HINCRBY counts and refuses non-integers and overflow",
          "[map][hash]") {
  StoreFixture f;
  f.Run(HSet("h", {{"n", "5"}, {"s", "text"}}));
  CHECK(f.Run(HSet("h", {{"n", "9"}, {"new", "x"}}, /*nx=*/true)).count == 1);
  CHECK(f.Run(Hash("hget", "h", {"n"})).entries.front().second == "5");
  CHECK(f.Run(HIncrBy("h", "n", 10)).count == 15);
  CHECK(f.Run(HIncrBy("h", "fresh", -2)).count == -2);
  auto text = f.Try(HIncrBy("h", "s", 1));
  REQUIRE_FALSE(text);
  CHECK(text.error().code() == ErrorCode::kBadRequest);
  f.Run(HSet("h", {{"big", std::to_string(std::numeric_limits<std::int64_t>::max())}}));
  auto overflow = f.Try(HIncrBy("h", "big", 1));
  REQUIRE_FALSE(overflow);
  CHECK(overflow.error().message().find("overflow") != std::string::npos);
  auto two = f.Try(Hash("hexists", "h", {"a", "b"}));
  REQUIRE_FALSE(two);
  CHECK(two.error().code() == ErrorCode::kBadRequest);
}

TEST_CASE("A hash and a string refuse each other's commands with the wrong-kind reason",
          "[map][hash][errors]") {
  StoreFixture f;
  f.Run(HSet("h", {{"a", "1"}}));
  f.Put("s", "text");
  auto get_hash = f.Try(Rq(MapOp::kGet, "h"));
  REQUIRE_FALSE(get_hash);
  CHECK(get_hash.error().code() == ErrorCode::kWrongType);
  CHECK(get_hash.error().reason() == ErrorReason::kWrongKind);
  auto hset_string = f.Try(HSet("s", {{"a", "1"}}));
  REQUIRE_FALSE(hset_string);
  CHECK(hset_string.error().reason() == ErrorReason::kWrongKind);
  CHECK(f.Get("s") == "text");                  // untouched
  f.Run(Rq(MapOp::kSet, "h", "now a string"));  // SET replaces a hash, as Redis's does
  CHECK(f.Get("h") == "now a string");
}

TEST_CASE("RENAME moves a key with its TTL within its partition and names a cross-partition one",
          "[map][hash]") {
  StoreFixture f;
  f.Run(HSet("h", {{"a", "1"}}));
  f.Run(WithTtl(Rq(MapOp::kSetTtl, "h"), 5'000));
  CHECK(f.Run(Rename("h", "g")).flag);
  CHECK_FALSE(f.Run(Rq(MapOp::kContainsKey, "h")).flag);
  CHECK(f.Run(Hash("hget", "g", {"a"})).entries.size() == 1);
  CHECK(f.Run(Rq(MapOp::kGetEntryView, "g")).view->ttl_ms == 5'000);
  f.Put("taken", "x");
  CHECK_FALSE(f.Run(Rename("g", "taken", /*nx=*/true)).flag);
  CHECK(f.Get("taken") == "x");
  auto missing = f.Try(Rename("nothing", "z"));
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code() == ErrorCode::kNotFound);

  StoreFixture cluster;
  cluster.partition_count = 271;  // the store is partition 0; most keys are elsewhere
  cluster.Put("k", "v");
  std::string elsewhere = "x0";
  for (int i = 1; tessera::partition::Partitioner(271).PartitionOf(elsewhere) == 0; ++i) {
    elsewhere = "x" + std::to_string(i);
  }
  auto across = cluster.Try(Rename("k", elsewhere));
  REQUIRE_FALSE(across);
  CHECK(across.error().code() == ErrorCode::kBadRequest);
  CHECK(across.error().reason() == ErrorReason::kCrossPartition);
  CHECK(across.error().message().find("hash tag") != std::string::npos);
}

TEST_CASE("The hash commands' table says which write, and an unknown one is named",
          "[map][hash][op_table]") {
  CHECK(RedisKeyCommandWrites("hset"));
  CHECK(RedisKeyCommandWrites("hincrby"));
  CHECK(RedisKeyCommandWrites("rename"));
  CHECK_FALSE(RedisKeyCommandWrites("hget"));
  CHECK_FALSE(RedisKeyCommandWrites("hgetall"));
  CHECK_FALSE(RedisKeyCommandWrites("merge"));  // heals a split: served without a quorum
  CHECK(RedisKeyCommandWrites("hfrobnicate"));  // unknown: judged as a write, then refused
  StoreFixture f;
  auto unknown = f.Try(Hash("hfrobnicate", "h"));
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().code() == ErrorCode::kBadRequest);
  CHECK(unknown.error().message().find("hgetall") != std::string::npos);
}

TEST_CASE(
    "A hash command on a string key fails with the wrong-kind reason, an increment of a "
    "non-number with none",
    "[map][ops][errors]") {
  StoreFixture f;
  f.Put("k", "text");
  MapRequest hget = Rq(MapOp::kRedisKey, "k");
  hget.processor = "hget";
  hget.keys = {"field"};
  auto wrong_kind = f.Try(hget);
  REQUIRE_FALSE(wrong_kind);
  CHECK(wrong_kind.error().code() == ErrorCode::kWrongType);
  CHECK(wrong_kind.error().reason() == tessera::base::ErrorReason::kWrongKind);
  CHECK(IsWrongKindError(wrong_kind.error()));
  MapRequest increment = Rq(MapOp::kExecuteOnKey, "k");
  increment.processor = "incrementRaw";
  increment.argument = tessera::record::GenericRecord::Build().Int64("delta", 1).Done();
  auto not_a_number = f.Try(increment);
  REQUIRE_FALSE(not_a_number);
  CHECK(not_a_number.error().code() == ErrorCode::kWrongType);
  CHECK(not_a_number.error().reason() == tessera::base::ErrorReason::kNone);
  CHECK_FALSE(IsWrongKindError(not_a_number.error()));
  // A member of the release before sends the code and text without the reason.
  CHECK(
      IsWrongKindError(tessera::base::Error(ErrorCode::kWrongType, wrong_kind.error().message())));
}
