// Ring buffer operations (a reliable topic's storage) against one partition's store.
#include <catch2/catch.hpp>

#include "map_test_util.h"
#include "tessera/map/merge.h"
#include "tessera/record/generic_record.h"

using namespace tessera::map;           // NOLINT
using namespace tessera::map::testing;  // NOLINT
using tessera::base::ErrorCode;
using tessera::record::GenericRecord;

namespace {

MapRequest Append(std::vector<std::string> messages, std::int64_t capacity,
                  RingOverflow overflow = RingOverflow::kError) {
  MapRequest rq = Rq(MapOp::kRingAppend, "ring@news");
  rq.keys = std::move(messages);
  rq.argument = GenericRecord::Build()
                    .Int64("capacity", capacity)
                    .Int64("overflow", static_cast<std::int64_t>(overflow))
                    .Done();
  return rq;
}

MapRequest Read(std::int64_t from, std::int64_t max = 100) {
  MapRequest rq = Rq(MapOp::kRingRead, "ring@news");
  rq.argument = GenericRecord::Build().Int64("from", from).Int64("max", max).Done();
  return rq;
}

std::vector<std::string> Payloads(const MapResult& r) {
  std::vector<std::string> out;
  for (const auto& [seq, message] : r.entries) out.push_back(seq + "=" + message);
  return out;
}

}  // namespace

TEST_CASE("A ring numbers messages from 1 and reads them back from any sequence", "[map][ring]") {
  StoreFixture f;
  auto first = f.Run(Append({"a", "b"}, 10));
  CHECK(first.count == 1);
  CHECK(first.flag);
  CHECK(f.Run(Append({"c"}, 10)).count == 3);
  CHECK(Payloads(f.Run(Read(1))) == std::vector<std::string>{"1=a", "2=b", "3=c"});
  CHECK(Payloads(f.Run(Read(2, 1))) == std::vector<std::string>{"2=b"});
  auto past_tail = f.Run(Read(4));
  CHECK(past_tail.entries.empty());
  CHECK_FALSE(past_tail.flag);
  CHECK(past_tail.value == "1 3");
  // An empty ring: nothing to read, nothing lost.
  auto other = Read(1);
  other.key = "ring@other";
  auto empty = f.Run(other);
  CHECK(empty.entries.empty());
  CHECK_FALSE(empty.flag);
}

TEST_CASE("A full ring discards the oldest, the newest, or refuses, as configured", "[map][ring]") {
  StoreFixture f;
  f.Run(Append({"1", "2", "3"}, 3));
  SECTION("discard oldest: a reader behind the head is told it lost messages") {
    f.Run(Append({"4", "5"}, 3, RingOverflow::kDiscardOldest));
    auto r = f.Run(Read(1));
    CHECK(r.flag);        // 1 and 2 are gone
    CHECK(r.count == 3);  // the oldest readable
    CHECK(Payloads(r) == std::vector<std::string>{"3=3", "4=4", "5=5"});
  }
  SECTION("discard newest: the new message is dropped and counted") {
    auto r = f.Run(Append({"4"}, 3, RingOverflow::kDiscardNewest));
    CHECK(r.count == -1);
    CHECK_FALSE(r.flag);
    CHECK(r.entries == std::vector<std::pair<std::string, std::string>>{{"discarded", "1"}});
    CHECK(Payloads(f.Run(Read(1))) == std::vector<std::string>{"1=1", "2=2", "3=3"});
  }
  SECTION("error: kOverloaded naming the topic and what to do, nothing changed") {
    auto r = f.Try(Append({"4"}, 3, RingOverflow::kError));
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == ErrorCode::kOverloaded);
    CHECK(r.error().message().find("reliable topic 'news' is full: 3 unexpired messages") !=
          std::string::npos);
    CHECK(Payloads(f.Run(Read(1))).size() == 3);
  }
}

TEST_CASE("Expired ring messages free their slots and count as lost for late readers",
          "[map][ring]") {
  StoreFixture f;
  f.Run(WithTtl(Append({"old1", "old2"}, 2), 1000));
  f.clock.Advance(1500);
  // Both expired: room for new ones even with the error policy.
  auto r = f.Run(Append({"new"}, 2, RingOverflow::kError));
  CHECK(r.count == 3);
  auto read = f.Run(Read(1));
  CHECK(read.flag);
  CHECK(read.count == 3);
  CHECK(Payloads(read) == std::vector<std::string>{"3=new"});
}

TEST_CASE("ringMerge appends the merging side's messages the ring lacks, with their TTL",
          "[map][ring][merge]") {
  StoreFixture f;
  f.Run(Append({"before", "ours"}, 3));
  auto message = [](const std::string& text, std::int64_t ttl_left_ms = 0) {
    MergeEntry e;
    e.value = text;
    e.ttl_left_ms = ttl_left_ms;
    return EncodeMergeEntry(e);
  };
  MapRequest merge = Rq(MapOp::kRingMerge, "ring@news");
  merge.entries = {{"1", message("before")},  // published before the split: the same
                   {"2", message("theirs")},
                   {"3", message("short-lived", 50)}};
  auto result = f.Run(merge);
  CHECK(result.count == 2);
  CHECK(result.entries == std::vector<std::pair<std::string, std::string>>{{"discarded", "1"}});
  // Beyond the capacity of 3: a merge never drops what either side accepted.
  CHECK(Payloads(f.Run(Read(1))) ==
        std::vector<std::string>{"1=before", "2=ours", "3=theirs", "4=short-lived"});
  f.clock.Advance(50);
  CHECK(Payloads(f.Run(Read(1))) == std::vector<std::string>{"1=before", "2=ours", "3=theirs"});
  // The ring goes on from there.
  CHECK(f.Run(Append({"after"}, 10)).count == 5);

  merge.entries = {{"6", "not a merge entry"}};
  auto bad = f.Try(merge);
  REQUIRE(!bad);
  CHECK(bad.error().code() == ErrorCode::kBadRequest);
}
