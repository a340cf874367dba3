// Event stream operations (kStreamAppend .. kStreamJoin) against one partition's store.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>

#include "map_test_util.h"
#include "tessera/map/stream_format.h"
#include "tessera/record/generic_record.h"

using namespace tessera::map;           // NOLINT
using namespace tessera::map::testing;  // NOLINT
using tessera::base::ErrorCode;
using tessera::record::GenericRecord;

namespace {

const std::string kMeta = "meta@orders#3";

struct Limits {
  std::int64_t max_events = 100;
  std::int64_t max_bytes = 1 << 20;
  std::int64_t max_age_ms = 0;
  std::int64_t dedup_ms = 60'000;
};

MapRequest Append(std::vector<std::pair<std::string, std::string>> events,
                  std::vector<std::string> ids = {}, Limits limits = {}) {
  MapRequest rq = Rq(MapOp::kStreamAppend, kMeta);
  rq.entries = std::move(events);
  rq.keys = std::move(ids);
  rq.argument = GenericRecord::Build()
                    .Int64("max_events", limits.max_events)
                    .Int64("max_bytes", limits.max_bytes)
                    .Int64("max_age_ms", limits.max_age_ms)
                    .Int64("dedup_ms", limits.dedup_ms)
                    .Done();
  return rq;
}

MapRequest Read(std::int64_t from, std::int64_t max = 100) {
  MapRequest rq = Rq(MapOp::kStreamRead, kMeta);
  rq.argument = GenericRecord::Build().Int64("from", from).Int64("max", max).Done();
  return rq;
}

MapRequest Group(const std::string& group, const std::string& action) {
  MapRequest rq = Rq(MapOp::kStreamGroup, kMeta);
  rq.argument = GenericRecord::Build().String("group", group).String("action", action).Done();
  return rq;
}

MapRequest Lease(const std::string& group, const std::string& consumer, bool release = false,
                 std::int64_t ttl_ms = 1'000) {
  MapRequest rq = Rq(MapOp::kStreamLease, kMeta);
  rq.argument = GenericRecord::Build()
                    .String("group", group)
                    .String("consumer", consumer)
                    .Int64("ttl_ms", ttl_ms)
                    .Bool("release", release)
                    .Done();
  return rq;
}

MapRequest Commit(const std::string& group, const std::string& consumer, std::int64_t offset) {
  MapRequest rq = Rq(MapOp::kStreamCommit, kMeta);
  rq.argument = GenericRecord::Build()
                    .String("group", group)
                    .String("consumer", consumer)
                    .Int64("offset", offset)
                    .Done();
  return rq;
}

std::vector<std::string> Payloads(const MapResult& r) {
  std::vector<std::string> out;
  for (const auto& [offset, bytes] : r.entries) {
    auto e = DecodeStoredEvent(bytes);
    out.push_back(offset + ":" + (e ? e->key + "=" + e->payload : "damaged"));
  }
  return out;
}

StreamMeta Meta(StoreFixture& f) { return ParseStreamMeta(f.Get(kMeta).value_or("")); }

}  // namespace

TEST_CASE("Stream formats round-trip and reject damaged bytes", "[map][stream]") {
  StoredEvent e{"id-1", "order-7@cust-2", 1'700'000'000'123, std::string("pay\0load;1:", 11)};
  auto bytes = EncodeStoredEvent(e);
  auto back = DecodeStoredEvent(bytes);
  REQUIRE(back);
  CHECK(back->id == e.id);
  CHECK(back->key == e.key);
  CHECK(back->payload == e.payload);
  CHECK(back->time_ms == e.time_ms);
  CHECK(StoredEventTime(bytes) == e.time_ms);
  // The size an append accounts for is the size it stores, whatever the digits' lengths.
  for (const StoredEvent& sized : {e, StoredEvent{"", "k", 0, ""}, StoredEvent{"", "", -42, "x"},
                                   StoredEvent{std::string(1000, 'i'), std::string(12, 'k'),
                                               9'999'999'999'999, std::string(100, 'p')}}) {
    CHECK(StoredEventSize(sized.id, sized.key, sized.time_ms, sized.payload) ==
          EncodeStoredEvent(sized).size());
    std::string reused = "left over from an earlier event";
    EncodeStoredEventInto(reused, sized.id, sized.key, sized.time_ms, sized.payload);
    CHECK(reused == EncodeStoredEvent(sized));
  }
  CHECK_FALSE(DecodeStoredEvent("12;99:short"));
  CHECK_FALSE(DecodeStoredEvent("garbage"));

  StreamMeta m;
  m.head = 5;
  m.tail = 9;
  m.bytes = 321;
  m.groups = {{"billing", 6}, {"shipping", 4}};
  auto parsed = ParseStreamMeta(StreamMetaText(m));
  CHECK(parsed.head == 5);
  CHECK(parsed.tail == 9);
  CHECK(parsed.bytes == 321);
  CHECK(parsed.groups == m.groups);
  CHECK(parsed.Slowest()->first == "shipping");
  CHECK(ParseStreamMeta("nonsense").tail == 0);

  CHECK(StreamNameProblem("group", "billing").empty());
  CHECK(StreamNameProblem("group", "").find("empty") != std::string::npos);
  CHECK(StreamNameProblem("stream", "a@b").find("'@'") != std::string::npos);
  CHECK(StreamNameProblem("stream", "a b") != "");
}

TEST_CASE("Appends get consecutive offsets and are read back in order", "[map][stream]") {
  StoreFixture f;
  auto r = f.Run(Append({{"k1", "a"}, {"k2", "b"}}));
  CHECK(r.count == 2);
  REQUIRE(r.entries.size() == 2);
  CHECK(r.entries[0] == std::make_pair(std::string("1"), std::string("")));
  CHECK(r.entries[1] == std::make_pair(std::string("2"), std::string("")));
  f.Run(Append({{"k1", "c"}}));
  CHECK(Payloads(f.Run(Read(1))) == std::vector<std::string>{"1:k1=a", "2:k2=b", "3:k1=c"});
  CHECK(Payloads(f.Run(Read(2, 1))) == std::vector<std::string>{"2:k2=b"});
  auto empty = f.Run(Read(4));
  CHECK(empty.entries.empty());
  CHECK(empty.value == "1 3");
  CHECK_FALSE(empty.flag);
}

TEST_CASE(
    "Reads return the next stored events in order across runs of lookups, skipping "
    "missing ones",
    "[map][stream]") {
  // Reads look events up 32 at a time; a read of `max` events goes on past a missing event
  // (a damaged or lost record) to the next stored ones, in and across those runs.
  StoreFixture f;
  std::vector<std::pair<std::string, std::string>> events;
  for (int i = 1; i <= 100; ++i) events.emplace_back("k", std::to_string(i));
  REQUIRE(f.Run(Append(events)).count == 100);
  for (int missing : {3, 31, 32, 33, 64}) {
    REQUIRE(f.store.Erase(StreamEventKey("orders#3", missing)));
  }
  auto offsets = [](const MapResult& r) {
    std::vector<int> out;
    for (const auto& [offset, bytes] : r.entries) out.push_back(std::stoi(offset));
    return out;
  };
  CHECK(offsets(f.Run(Read(1, 3))) == std::vector<int>{1, 2, 4});
  CHECK(offsets(f.Run(Read(29, 4))) == std::vector<int>{29, 30, 34, 35});
  auto long_read = f.Run(Read(1, 90));
  REQUIRE(long_read.entries.size() == 90);
  CHECK(offsets(long_read).back() == 95);
  CHECK(Payloads(long_read)[59] == "65:k=65");  // 3, 31, 32, 33 and 64 skipped before it
  auto all = offsets(f.Run(Read(1, 1000)));
  CHECK(all.size() == 95);
  CHECK(std::is_sorted(all.begin(), all.end()));
}

TEST_CASE("An event id appended again within the window returns its first offset",
          "[map][stream]") {
  StoreFixture f;
  f.Run(Append({{"k", "a"}}, {"e1"}));
  auto again = f.Run(Append({{"k", "a"}, {"k", "b"}, {"k", "b-again"}}, {"e1", "e2", "e2"}));
  CHECK(again.count == 1);  // only e2 is new; its repeat in the batch is a duplicate too
  CHECK(again.entries[0] == std::make_pair(std::string("1"), std::string("dup")));
  CHECK(again.entries[1] == std::make_pair(std::string("2"), std::string("")));
  CHECK(again.entries[2] == std::make_pair(std::string("2"), std::string("dup")));
  CHECK(Payloads(f.Run(Read(1))) == std::vector<std::string>{"1:k=a", "2:k=b"});

  f.clock.Advance(60'001);  // past the window: the id is new again
  auto later = f.Run(Append({{"k", "a"}}, {"e1"}));
  CHECK(later.entries[0] == std::make_pair(std::string("3"), std::string("")));

  // Repeats in any order take their first occurrence's offset; events without an id are
  // never duplicates of each other.
  auto mixed =
      f.Run(Append({{"k", "p0"}, {"k", "p1"}, {"k", "p2"}, {"k", "p3"}, {"k", "p4"}, {"k", "p5"}},
                   {"z", "a", "z", "", "", "a"}));
  CHECK(mixed.count == 4);
  using P = std::pair<std::string, std::string>;
  CHECK(mixed.entries ==
        std::vector<P>{{"4", ""}, {"5", ""}, {"4", "dup"}, {"6", ""}, {"7", ""}, {"5", "dup"}});
  CHECK(Payloads(f.Run(Read(4))) ==
        std::vector<std::string>{"4:k=p0", "5:k=p1", "6:k=p3", "7:k=p4"});
}

TEST_CASE(
    "A full sub-stream refuses appends naming the slowest group, and frees room as "
    "groups commit",
    "[map][stream]") {
  StoreFixture f;
  Limits small{.max_events = 3};
  f.Run(Group("fast", "oldest"));
  f.Run(Group("slow", "oldest"));
  f.Run(Append({{"k", "1"}, {"k", "2"}, {"k", "3"}}, {}, small));
  f.Run(Lease("fast", "c1"));
  f.Run(Lease("slow", "c2"));
  f.Run(Commit("fast", "c1", 3));
  auto full = f.Try(Append({{"k", "4"}}, {}, small));
  REQUIRE_FALSE(full);
  CHECK(full.error().code() == ErrorCode::kOverloaded);
  CHECK(full.error().message().find("stream 'orders'") != std::string::npos);
  CHECK(full.error().message().find("'slow', 3 events behind") != std::string::npos);
  CHECK(Payloads(f.Run(Read(1))).size() == 3);  // nothing overwritten

  CHECK_FALSE(f.Try(Append({{"k", "4"}}, {}, small)));  // "slow" still holds all three
  f.Run(Commit("slow", "c2", 2));
  CHECK(Meta(f).head == 3);  // 1 and 2 are gone: both groups committed them
  f.Run(Append({{"k", "4"}, {"k", "5"}}, {}, small));
  CHECK(Payloads(f.Run(Read(1))) == std::vector<std::string>{"3:k=3", "4:k=4", "5:k=5"});

  auto too_big = f.Try(Append({{"k", "a"}, {"k", "b"}, {"k", "c"}, {"k", "d"}}, {}, small));
  REQUIRE_FALSE(too_big);
  CHECK(too_big.error().code() == ErrorCode::kBadRequest);

  SECTION("deleting the slow group releases its hold") {
    f.Run(Group("slow", "delete"));
    CHECK(Meta(f).head == 4);  // "fast" committed 3
    CHECK(Meta(f).groups.size() == 1);
  }
}

TEST_CASE("Without groups a full sub-stream drops its oldest events", "[map][stream]") {
  StoreFixture f;
  Limits small{.max_events = 2};
  f.Run(Append({{"k", "1"}, {"k", "2"}}, {}, small));
  f.Run(Append({{"k", "3"}}, {}, small));
  CHECK(Payloads(f.Run(Read(1))) == std::vector<std::string>{"2:k=2", "3:k=3"});
  auto lost = f.Run(Read(1));
  CHECK(lost.flag);  // offset 1 is gone
  CHECK(lost.count == 2);
}

TEST_CASE("Byte limits count the stored events", "[map][stream]") {
  StoreFixture f;
  f.Run(Group("g", "oldest"));
  Limits small{.max_bytes = 100};
  f.Run(Append({{"k", std::string(60, 'x')}}, {}, small));
  CHECK(Meta(f).bytes > 60);
  auto full = f.Try(Append({{"k", std::string(60, 'y')}}, {}, small));
  REQUIRE_FALSE(full);
  CHECK(full.error().code() == ErrorCode::kOverloaded);
  f.Run(Lease("g", "c"));
  f.Run(Commit("g", "c", 1));
  CHECK(Meta(f).bytes == 0);
  f.Run(Append({{"k", std::string(60, 'y')}}, {}, small));
}

TEST_CASE("Leases: one holder per group, renewable, released, expiring, commits are fenced",
          "[map][stream]") {
  StoreFixture f;
  f.Run(Group("g", "oldest"));
  f.Run(Append({{"k", "1"}, {"k", "2"}, {"k", "3"}}));
  auto a = f.Run(Lease("g", "a"));
  CHECK(a.flag);
  CHECK(a.count == 0);
  auto b = f.Run(Lease("g", "b"));
  CHECK_FALSE(b.flag);
  CHECK(b.value == "a");
  CHECK(f.Run(Lease("g", "a")).flag);  // renewal

  auto fenced = f.Try(Commit("g", "b", 2));
  REQUIRE_FALSE(fenced);
  CHECK(fenced.error().code() == ErrorCode::kConflict);
  CHECK(f.Run(Commit("g", "a", 2)).count == 2);
  CHECK(f.Run(Commit("g", "a", 1)).count == 2);  // a cursor never goes back

  f.clock.Advance(1'001);  // a's lease expired: its commits are refused, b takes over
  CHECK(f.Try(Commit("g", "a", 3)).error().code() == ErrorCode::kConflict);
  auto taken = f.Run(Lease("g", "b"));
  CHECK(taken.flag);
  CHECK(taken.count == 2);  // resumes after the committed cursor

  f.Run(Lease("g", "b", /*release=*/true));
  CHECK(f.Run(Lease("g", "a")).flag);  // released: free at once

  auto past = f.Try(Commit("g", "a", 4));
  REQUIRE_FALSE(past);
  CHECK(past.error().code() == ErrorCode::kBadRequest);
  auto unknown = f.Try(Commit("nobody", "a", 1));
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().code() == ErrorCode::kNotFound);
  CHECK(unknown.error().message().find("subscribe") != std::string::npos);
}

TEST_CASE("Groups start at the oldest event or at the tail, creating twice changes nothing",
          "[map][stream]") {
  StoreFixture f;
  f.Run(Append({{"k", "1"}, {"k", "2"}}));
  CHECK(f.Run(Group("old", "oldest")).count == 0);
  CHECK(f.Run(Group("new", "latest")).count == 2);
  auto again = f.Run(Group("new", "oldest"));
  CHECK_FALSE(again.flag);
  CHECK(again.count == 2);
  CHECK(f.Try(Group("g", "sideways")).error().code() == ErrorCode::kBadRequest);
  CHECK(f.Try(Group("bad name", "oldest")).error().code() == ErrorCode::kBadRequest);

  auto info = f.Run(Rq(MapOp::kStreamInfo, kMeta));
  REQUIRE(info.entries.size() == 2);
  CHECK(info.entries[0].first == "new");
  CHECK(info.entries[0].second.starts_with("2 0 -"));  // nothing uncommitted
  CHECK(info.entries[1].first == "old");
  CHECK(info.entries[1].second == "0 " + std::to_string(f.clock.WallMs()) + " -");
}

TEST_CASE("With a max age, committed events stay until they are that old", "[map][stream]") {
  StoreFixture f;
  Limits aged{.max_age_ms = 5'000};
  f.Run(Group("g", "oldest"));
  f.Run(Append({{"k", "1"}, {"k", "2"}}, {}, aged));
  f.Run(Lease("g", "c", false, 60'000));
  MapRequest commit = Commit("g", "c", 2);
  commit.argument.Set("max_age_ms", tessera::record::Value(std::int64_t{5'000}));
  f.Run(commit);
  CHECK(Meta(f).head == 1);  // committed but young: kept
  f.clock.Advance(5'000);
  f.Run(Append({{"k", "3"}}, {}, aged));  // appends trim too
  CHECK(Meta(f).head == 3);
}

TEST_CASE("Join keeps the group's live consumers, sorted, forgetting expired ones",
          "[map][stream]") {
  StoreFixture f;
  auto join = [&](const std::string& consumer, bool leave = false) {
    MapRequest rq = Rq(MapOp::kStreamJoin, "consumers:g@orders");
    rq.argument = GenericRecord::Build()
                      .String("consumer", consumer)
                      .Int64("ttl_ms", 1'000)
                      .Bool("leave", leave)
                      .Done();
    std::vector<std::string> names;
    for (const auto& [name, expiry] : f.Run(rq).entries) names.push_back(name);
    return names;
  };
  CHECK(join("b") == std::vector<std::string>{"b"});
  CHECK(join("a") == std::vector<std::string>{"a", "b"});
  f.clock.Advance(600);
  CHECK(join("a") == std::vector<std::string>{"a", "b"});
  f.clock.Advance(600);  // b's time is up
  CHECK(join("c") == std::vector<std::string>{"a", "c"});
  CHECK(join("a", true) == std::vector<std::string>{"c"});
}

TEST_CASE(
    "Events kept only for their max age make room when the sub-stream is full, and the "
    "meta record counts what an append removed even when it fails",
    "[map][stream]") {
  StoreFixture f;
  Limits aged{.max_events = 3, .max_age_ms = 60'000};
  f.Run(Group("g", "oldest"));
  f.Run(Lease("g", "c", false, 600'000));
  f.Run(Append({{"k", "1"}, {"k", "2"}, {"k", "3"}}, {}, aged));
  auto aged_commit = [&](std::int64_t offset) {
    MapRequest commit = Commit("g", "c", offset);
    commit.argument.Set("max_age_ms", tessera::record::Value(std::int64_t{60'000}));
    return f.Run(commit);
  };
  aged_commit(3);
  CHECK(Meta(f).head == 1);                           // committed but young: kept
  f.Run(Append({{"k", "4"}, {"k", "5"}}, {}, aged));  // full: committed events go first
  CHECK(Meta(f).head == 3);
  CHECK(Payloads(f.Run(Read(1))) == std::vector<std::string>{"3:k=3", "4:k=4", "5:k=5"});

  // A failing append still records what its trim removed (bytes and head stay true).
  aged_commit(5);
  f.clock.Advance(60'000);  // 3..5 are old enough to go
  Limits tiny{.max_events = 3, .max_bytes = 10, .max_age_ms = 60'000};
  auto too_big = f.Try(Append({{"k", std::string(100, 'x')}}, {}, tiny));
  REQUIRE_FALSE(too_big);
  CHECK(Meta(f).head == 6);
  CHECK(Meta(f).bytes == 0);
}

MapRequest CommitIn(const std::string& group, const std::string& consumer, std::int64_t offset,
                    const std::string& epoch) {
  MapRequest rq = Commit(group, consumer, offset);
  rq.argument = GenericRecord::Build()
                    .String("group", group)
                    .String("consumer", consumer)
                    .Int64("offset", offset)
                    .Int64("epoch", std::stoll(epoch))
                    .Done();
  return rq;
}

std::string EpochOf(const MapResult& lease) {
  REQUIRE(lease.entries.size() == 1);
  CHECK(lease.entries[0].first == "epoch");
  return lease.entries[0].second;
}

TEST_CASE(
    "A commit carries its lease's epoch: after the lease lapsed and was taken again, even by "
    "the same consumer, the old holding's commit is refused",
    "[map][stream][lease]") {
  StoreFixture f;
  f.Run(Group("g", "oldest"));
  f.Run(Append({{"k", "1"}, {"k", "2"}, {"k", "3"}, {"k", "4"}}));
  const std::string first = EpochOf(f.Run(Lease("g", "a")));
  CHECK(first == "1");
  CHECK(EpochOf(f.Run(Lease("g", "a"))) == first);  // a renewal keeps the epoch
  CHECK(f.Run(CommitIn("g", "a", 1, first)).count == 1);

  // a stalls past its lease; b takes it, handles 2 and 3 and gives it back (not committed, say
  // b crashed before its commit); a comes back and takes the lease again.
  f.clock.Advance(1'001);
  const std::string b_epoch = EpochOf(f.Run(Lease("g", "b")));
  CHECK(b_epoch == "2");
  f.Run(Lease("g", "b", /*release=*/true));
  auto again = f.Run(Lease("g", "a"));
  REQUIRE(again.flag);
  CHECK(again.count == 1);  // the cursor it must resume after
  const std::string second = EpochOf(again);
  CHECK(second == "3");
  // What a read under its first holding: refused, naming both epochs.
  auto stale = f.Try(CommitIn("g", "a", 3, first));
  REQUIRE_FALSE(stale);
  CHECK(stale.error().code() == ErrorCode::kConflict);
  CHECK(stale.error().message().find("epoch 1") != std::string::npos);
  CHECK(stale.error().message().find("(epoch 3)") != std::string::npos);
  CHECK(f.Run(CommitIn("g", "a", 2, second)).count == 2);
  // Without an epoch (an older client) the holder's name alone fences, as before.
  CHECK(f.Run(Commit("g", "a", 3)).count == 3);
  // Lapsed and taken again by the same consumer, with nobody in between: a new epoch too.
  f.clock.Advance(1'001);
  CHECK(EpochOf(f.Run(Lease("g", "a"))) == "4");
  CHECK(f.Try(CommitIn("g", "a", 4, second)).error().code() == ErrorCode::kConflict);
  // Not held: no epoch.
  CHECK(f.Run(Lease("g", "z")).entries.empty());
}

TEST_CASE("A commit with a TTL renews the committer's lease", "[map][stream]") {
  StoreFixture f;
  f.Run(Group("g", "oldest"));
  f.Run(Append({{"k", "1"}, {"k", "2"}}));
  f.Run(Lease("g", "a", false, 1'000));
  f.clock.Advance(800);
  MapRequest commit = Commit("g", "a", 1);
  commit.argument.Set("ttl_ms", tessera::record::Value(std::int64_t{1'000}));
  f.Run(commit);
  f.clock.Advance(800);  // 1.6 s after taking it, 0.8 s after the commit: still a's
  CHECK_FALSE(f.Run(Lease("g", "b")).flag);
  CHECK(f.Run(Commit("g", "a", 2)).count == 2);
}

TEST_CASE(
    "streamMerge appends the merging side's events the owner lacks, once, and adds its "
    "groups at the oldest event",
    "[map][stream][merge]") {
  StoreFixture f;
  f.Run(Append({{"k1", "before"}, {"k2", "ours"}}, {"id-before", "id-ours"}));
  f.Run(Group("g-ours", "latest"));
  // The merging side: offset 1 is the same event (appended before the split), offset 2 its
  // own, offset 3 an event this side also has by id, offset 4 one without id.
  const std::string before = f.Run(Read(1)).entries[0].second;
  auto theirs = [](const std::string& id, const std::string& key, const std::string& payload) {
    return EncodeStoredEvent(StoredEvent{id, key, 1'700'000'000'000, payload});
  };
  MapRequest merge = Rq(MapOp::kStreamMerge, kMeta);
  merge.entries = {{"1", before},
                   {"2", theirs("id-theirs", "k1", "theirs")},
                   {"3", theirs("id-ours", "k2", "ours again")},
                   {"4", theirs("", "k3", "no id")}};
  merge.keys = {"g-theirs", "g-ours"};
  auto result = f.Run(merge);
  CHECK(result.count == 2);
  REQUIRE(result.entries.size() == 1);
  CHECK(result.entries[0] == std::pair<std::string, std::string>{"discarded", "2"});
  CHECK(Payloads(f.Run(Read(1))) ==
        std::vector<std::string>{"1:k1=before", "2:k2=ours", "3:k1=theirs", "4:k3=no id"});
  // The merged event keeps its id: appending it again is a duplicate.
  auto again = f.Run(Append({{"k1", "theirs"}}, {"id-theirs"}));
  CHECK(again.count == 0);
  // The merging side's group sees everything stored; ours keeps its cursor.
  auto info = f.Run(Rq(MapOp::kStreamInfo, kMeta));
  std::map<std::string, std::string> cursors;
  for (const auto& [group, text] : info.entries) cursors[group] = text.substr(0, text.find(' '));
  CHECK(cursors == std::map<std::string, std::string>{{"g-ours", "2"}, {"g-theirs", "0"}});
  // Merging the same batch twice changes nothing.
  CHECK(f.Run(merge).count == 0);

  merge.entries = {{"5", "not an event"}};
  auto bad = f.Try(merge);
  REQUIRE(!bad);
  CHECK(bad.error().code() == ErrorCode::kBadRequest);
}
