// The streams family's commands (MapOp::kRedisStream, streams/redis_stream.h) run straight on
// one partition's store, without a member or a socket.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "map_test_util.h"
#include "tessera/map/family.h"
#include "tessera/map/stream_format.h"
#include "tessera/streams/redis_stream.h"

using namespace tessera::map;  // NOLINT
using tessera::base::ErrorCode;
using tessera::map::testing::Rq;
using tessera::map::testing::StoreFixture;
using tessera::record::GenericRecord;
using tessera::streams::EncodeStreamFields;
using tessera::streams::RedisStreamGroupKey;
using Entries = std::vector<std::pair<std::string, std::string>>;

namespace {

const bool kRegistered = (tessera::streams::Register(), true);

// A command on stream `key` (its one sub-stream "key#0").
MapRequest X(const std::string& cmd, const std::string& key,
             tessera::record::GenericRecordBuilder args = GenericRecord::Build()) {
  MapRequest rq = Rq(MapOp::kRedisStream, StreamMetaKey(key + "#0"));
  rq.map_name = kStreamMap;
  rq.argument = args.String("cmd", cmd).Done();
  return rq;
}

MapRequest XAdd(const std::string& key, const std::string& id,
                const std::vector<std::string_view>& fields) {
  MapRequest rq = X("add", key, GenericRecord::Build().String("id", id));
  rq.value = EncodeStreamFields(fields);
  return rq;
}

std::vector<std::string> Ids(const Entries& entries) {
  std::vector<std::string> out;
  for (const auto& [id, fields] : entries) out.push_back(id);
  return out;
}

}  // namespace

TEST_CASE("XADD gives growing IDs, refuses a smaller one, and XLEN and XRANGE read the entries",
          "[streams]") {
  StoreFixture f;
  CHECK(f.Run(XAdd("s", "5-1", {"a", "1"})).value == "5-1");
  // "*": the owner's wall clock in ms (far past 5), then the next sequence number or ms.
  const std::string first = f.Run(XAdd("s", "*", {"b", "2"})).value.value_or("");
  const std::string second = f.Run(XAdd("s", "*", {"c", "3"})).value.value_or("");
  const auto first_id = tessera::streams::ParseStreamId(first);
  const auto second_id = tessera::streams::ParseStreamId(second);
  REQUIRE(first_id);
  REQUIRE(second_id);
  CHECK(*first_id > tessera::streams::StreamId{5, 1});
  CHECK(*second_id > *first_id);
  auto smaller = f.Try(XAdd("s", "6-0", {"d", "4"}));
  REQUIRE_FALSE(smaller);
  CHECK(smaller.error().code() == ErrorCode::kBadRequest);
  CHECK(smaller.error().message().find("equal or smaller than the target stream top item") !=
        std::string::npos);
  auto len = f.Run(X("len", "s"));
  CHECK(len.flag);
  CHECK(len.count == 3);
  auto range =
      f.Run(X("range", "s", GenericRecord::Build().String("start", "0-0").String("end", first)));
  REQUIRE(Ids(range.entries) == std::vector<std::string>{"5-1", first});
  auto fields = tessera::streams::DecodeStreamFields(range.entries[1].second);
  REQUIRE(fields);
  CHECK(*fields == std::vector<std::string_view>{"b", "2"});
  CHECK_FALSE(f.Run(X("len", "missing")).flag);
}

TEST_CASE(
    "A consumer group reads new entries once, keeps them pending until acknowledged, and "
    "names a missing or existing group as Redis does",
    "[streams]") {
  StoreFixture f;
  f.Run(XAdd("s", "1-0", {"k", "v"}));
  f.Run(XAdd("s", "2-0", {"k", "v"}));
  auto group = [](const std::string& g) { return GenericRecord::Build().String("group", g); };
  auto created = f.Run(X("create_group", "s", group("g").String("id", "0")));
  CHECK_FALSE(created.flag);  // the stream existed
  auto busy = f.Try(X("create_group", "s", group("g").String("id", "0")));
  REQUIRE_FALSE(busy);
  CHECK(busy.error().code() == ErrorCode::kConflict);
  CHECK(busy.error().message().starts_with("BUSYGROUP "));
  auto read = [&](const std::string& after) {
    return f.Run(X("readgroup", "s",
                   group("g").String("consumer", "c1").String("after", after).Int64("count", 10)));
  };
  CHECK(Ids(read(">").entries) == std::vector<std::string>{"1-0", "2-0"});
  CHECK(read(">").entries.empty());  // delivered once
  CHECK(f.Run(X("pending", "s", group("g"))).count == 2);
  MapRequest ack = X("ack", "s", group("g"));
  ack.keys = {"1-0", "9-9"};
  CHECK(f.Run(ack).count == 1);
  CHECK(f.Run(X("pending", "s", group("g"))).count == 1);
  CHECK(Ids(read("0").entries) == std::vector<std::string>{"2-0"});  // its pending entries
  auto missing =
      f.Try(X("readgroup", "s", group("nope").String("consumer", "c").String("after", ">")));
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code() == ErrorCode::kNotFound);
  CHECK(missing.error().message().starts_with("NOGROUP "));
}

TEST_CASE("A Redis group is a group of the engine's stream: deleting it there removes its record",
          "[streams]") {
  StoreFixture f;
  f.Run(XAdd("s", "1-0", {"k", "v"}));
  f.Run(X("create_group", "s", GenericRecord::Build().String("group", "g").String("id", "$")));
  const std::string record = RedisStreamGroupKey("s#0", "g");
  CHECK(record == StreamGroupStateKey("s#0", "g"));
  CHECK(f.store.Find(record) != nullptr);
  MapRequest del = Rq(MapOp::kStreamGroup, StreamMetaKey("s#0"));
  del.map_name = kStreamMap;
  del.argument = GenericRecord::Build().String("group", "g").String("action", "delete").Done();
  CHECK(f.Run(del).flag);
  CHECK(f.store.Find(record) == nullptr);
  auto gone = f.Try(X("pending", "s", GenericRecord::Build().String("group", "g")));
  REQUIRE_FALSE(gone);
  CHECK(gone.error().message().starts_with("NOGROUP "));
}

TEST_CASE(
    "The family tells the engine which commands append, and removes a stream's records "
    "when its keyspace entry leaves",
    "[streams]") {
  const FamilySpec* family = FamilyOfOp(MapOp::kRedisStream);
  REQUIRE(family != nullptr);
  CHECK(FamilyOfKind(ValueKind::kStream) == family);
  CHECK(family->kind_name == "stream");
  MapResult added;
  added.value = "1-0";
  CHECK(family->appended(XAdd("s", "*", {"k", "v"}), added));
  CHECK_FALSE(family->appended(XAdd("s", "*", {"k", "v"}), MapResult{}));  // NOMKSTREAM, none
  CHECK_FALSE(family->appended(X("range", "s"), added));

  // The keyspace entry "s" (kind stream, value its incarnation) removed by a DEL: the family
  // asks for a follow-up that removes that incarnation's records, on the stream's partition.
  StoreFixture f;
  f.Put("s", "7");
  f.store.Find("s")->set_kind(ValueKind::kStream);
  std::vector<MapRequest> follow_ups;
  OpContext ctx = f.Context();
  ctx.follow_ups = &follow_ups;
  REQUIRE(ExecuteOnStore(f.store, Rq(MapOp::kDelete, "s"), ctx));
  REQUIRE(follow_ups.size() == 1);
  const MapRequest& removal = follow_ups[0];
  CHECK(removal.op == MapOp::kRedisStream);
  CHECK(removal.key == StreamMetaKey("s#0"));
  CHECK(removal.argument.GetString("cmd").value_or("") == "delete");
  CHECK(removal.argument.GetInt64("epoch").value_or(0) == 7);
}

TEST_CASE("DELETE removes every record of a stream and says when there is more", "[streams]") {
  StoreFixture f;
  for (int i = 1; i <= 5; ++i) f.Run(XAdd("s", std::to_string(i) + "-0", {"k", "v"}));
  f.Run(X("create_group", "s", GenericRecord::Build().String("group", "g").String("id", "0")));
  auto removed = f.Run(tessera::streams::RedisStreamDeleteRequest("s"));
  CHECK(removed.count == 1);
  CHECK_FALSE(removed.flag);  // all gone in one step
  CHECK(f.store.size() == 0);
  CHECK_FALSE(f.Run(X("len", "s")).flag);
}
