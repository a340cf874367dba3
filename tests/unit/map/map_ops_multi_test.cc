#include <catch2/catch.hpp>
#include <set>

#include "map_test_util.h"
#include "tessera/map/map_ops.h"
#include "tessera/map/merge.h"

using namespace tessera::map;  // NOLINT
using tessera::map::testing::Rq;
using tessera::map::testing::StoreFixture;
using tessera::map::testing::WithTtl;
using tessera::record::GenericRecord;

namespace {
std::string Person(const std::string& name, std::int64_t age) {
  return GenericRecord::Build("Person").String("name", name).Int64("age", age).Done().Encode();
}
}  // namespace

TEST_CASE("putAll part writes every entry, getAll part returns the present ones",
          "[map][ops][multi]") {
  StoreFixture f;
  auto put_all = Rq(MapOp::kPutAll);
  put_all.entries = {{"a", "1"}, {"b", "2"}, {"c", "3"}};
  CHECK(f.Run(put_all).count == 3);
  auto get_all = Rq(MapOp::kGetAll);
  get_all.keys = {"a", "c", "missing"};
  auto result = f.Run(get_all);
  std::set<std::pair<std::string, std::string>> got(result.entries.begin(), result.entries.end());
  CHECK(got == std::set<std::pair<std::string, std::string>>{{"a", "1"}, {"c", "3"}});
}

TEST_CASE("size and clear ignore expired entries", "[map][ops][multi]") {
  StoreFixture f;
  f.Put("a", "1");
  f.Run(WithTtl(Rq(MapOp::kSet, "b", "2"), 10));
  CHECK(f.Run(Rq(MapOp::kSize)).count == 2);
  f.clock.Advance(10);
  CHECK(f.Run(Rq(MapOp::kSize)).count == 1);
  f.events.clear();
  CHECK(f.Run(Rq(MapOp::kClear)).count == 1);
  CHECK(f.Run(Rq(MapOp::kSize)).count == 0);
  REQUIRE(f.events.size() == 1);
  CHECK(f.events[0].type == EntryEventType::kCleared);
  CHECK(f.events[0].old_value == "1");
}

TEST_CASE("query filters with the predicate and applies the projection", "[map][ops][multi]") {
  StoreFixture f;
  f.Put("p1", Person("Ann", 30));
  f.Put("p2", Person("Bob", 17));
  f.Put("p3", Person("Cid", 45));
  f.Put("raw", "not a record");
  auto query = Rq(MapOp::kQuery);
  query.predicate = Predicate::GreaterEqual("age", std::int64_t{18});
  query.projection = Projection::kKeys;
  auto keys = f.Run(query).entries;
  std::set<std::string> got;
  for (auto& [k, v] : keys) {
    got.insert(k);
    CHECK(v.empty());
  }
  CHECK(got == std::set<std::string>{"p1", "p3"});
  query.projection = Projection::kEntries;
  query.predicate = Predicate::Equal("name", std::string("Bob"));
  auto entries = f.Run(query).entries;
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].first == "p2");
  CHECK(entries[0].second == Person("Bob", 17));
  query.projection = Projection::kValues;
  query.predicate = Predicate::Equal("__key", std::string("raw"));
  auto values = f.Run(query).entries;
  REQUIRE(values.size() == 1);
  CHECK(values[0].first.empty());
  CHECK(values[0].second == "not a record");
}

TEST_CASE("query does not return expired entries", "[map][ops][multi][ttl]") {
  StoreFixture f;
  f.Run(WithTtl(Rq(MapOp::kSet, "short", "v"), 5));
  f.Put("long", "v");
  f.clock.Advance(5);
  auto result = f.Run(Rq(MapOp::kQuery));
  REQUIRE(result.entries.size() == 1);
  CHECK(result.entries[0].first == "long");
}

TEST_CASE("events: added, updated, removed, expired in order with values", "[map][ops][events]") {
  StoreFixture f;
  f.Put("k", "v1");
  f.Put("k", "v2");
  f.Run(Rq(MapOp::kRemove, "k"));
  f.Run(WithTtl(Rq(MapOp::kSet, "t", "tv"), 10));
  f.clock.Advance(10);
  f.Get("t");
  REQUIRE(f.events.size() == 5);
  CHECK(f.events[0].type == EntryEventType::kAdded);
  CHECK(f.events[0].value == "v1");
  CHECK_FALSE(f.events[0].old_value.has_value());
  CHECK(f.events[1].type == EntryEventType::kUpdated);
  CHECK(f.events[1].value == "v2");
  CHECK(f.events[1].old_value == "v1");
  CHECK(f.events[2].type == EntryEventType::kRemoved);
  CHECK(f.events[2].old_value == "v2");
  CHECK(f.events[3].type == EntryEventType::kAdded);
  CHECK(f.events[4].type == EntryEventType::kExpired);
  CHECK(f.events[4].key == "t");
  CHECK(f.events[4].old_value == "tv");
  CHECK(f.events[4].map_name == "m");
}

TEST_CASE("events without values carry none", "[map][ops][events]") {
  StoreFixture f;
  f.event_values = false;
  f.Put("k", "v1");
  f.Put("k", "v2");
  REQUIRE(f.events.size() == 2);
  CHECK_FALSE(f.events[1].value.has_value());
  CHECK_FALSE(f.events[1].old_value.has_value());
}

TEST_CASE("eviction keeps the partition bounded and evicts the least recently used",
          "[map][ops][eviction]") {
  StoreFixture f;
  f.config.max_entries = 100;
  f.partition_count = 4;  // share per partition: ceil(100 / 4) = 25
  for (int i = 0; i < 25; ++i) {
    f.Put("old-" + std::to_string(i), "v");
    f.clock.Advance(1);
  }
  // Keep the first five hot: they are read after everything else was written.
  for (int i = 0; i < 5; ++i) f.Get("old-" + std::to_string(i));
  f.clock.Advance(1);
  f.events.clear();
  for (int i = 0; i < 10; ++i) {
    f.Put("new-" + std::to_string(i), "v");
    f.clock.Advance(1);
    CHECK(f.store.size() == 25);
  }
  CHECK(f.store.stats().evictions == 10);
  int evicted = 0;
  for (const auto& e : f.events) {
    if (e.type != EntryEventType::kEvicted) continue;
    ++evicted;
    CHECK(e.key.rfind("old-", 0) == 0);  // never a new entry
    CHECK(e.old_value == "v");
  }
  CHECK(evicted == 10);
  for (int i = 0; i < 5; ++i) CHECK(f.Get("old-" + std::to_string(i)).has_value());
  for (int i = 0; i < 10; ++i) CHECK(f.Get("new-" + std::to_string(i)).has_value());
}

TEST_CASE("updating an entry at the limit evicts nothing", "[map][ops][eviction]") {
  StoreFixture f;
  f.config.max_entries = 3;
  for (int i = 0; i < 3; ++i) f.Put("k" + std::to_string(i), "v");
  f.Put("k0", "v2");
  CHECK(f.store.size() == 3);
  CHECK(f.store.stats().evictions == 0);
}

TEST_CASE("SweepStore removes expired entries and fires Expired events", "[map][ops][ttl]") {
  StoreFixture f;
  for (int i = 0; i < 50; ++i) f.Run(WithTtl(Rq(MapOp::kSet, "k" + std::to_string(i), "v"), 10));
  f.Put("forever", "v");
  f.clock.Advance(10);
  f.events.clear();
  OpContext ctx = f.Context();
  std::size_t expired = 0;
  for (int round = 0; round < 20; ++round) {
    auto r = SweepStore(f.store, ctx, 8);
    expired += r.expired;
    if (r.wrapped) break;
  }
  CHECK(expired == 50);
  CHECK(f.store.size() == 1);
  CHECK(f.events.size() == 50);
  for (const auto& e : f.events) CHECK(e.type == EntryEventType::kExpired);
  CHECK(f.store.stats().expirations == 50);
}

TEST_CASE("MergeResult adds counts, concatenates entries and sums stats", "[map][ops][multi]") {
  MapResult a, b;
  a.count = 2;
  a.entries = {{"x", "1"}};
  a.stats.entries = 3;
  a.stats.hits = 1;
  b.count = 5;
  b.entries = {{"y", "2"}};
  b.stats.entries = 4;
  b.stats.hits = 2;
  MergeResult(MapOp::kSize, a, std::move(b));
  CHECK(a.count == 7);
  CHECK(a.entries.size() == 2);
  CHECK(a.stats.entries == 7);
  CHECK(a.stats.hits == 3);
}

namespace {
std::string Merging(const std::string& value, std::int64_t update_wall_ms, std::int64_t hits,
                    std::int64_t ttl_left_ms = 0) {
  MergeEntry e;
  e.value = value;
  e.update_wall_ms = update_wall_ms;
  e.hits = hits;
  e.ttl_left_ms = ttl_left_ms;
  return EncodeMergeEntry(e);
}

// Merges {absent: "m", present: "m"} into a store holding present = "here" (written at wall
// time `here_wall`, read `here_hits` times); returns what the store holds after.
std::pair<std::string, std::string> MergeWith(MergePolicy policy, std::int64_t merging_wall,
                                              std::int64_t merging_hits,
                                              std::int64_t* discarded = nullptr) {
  StoreFixture f;
  f.config.merge_policy = policy;
  f.Put("present", "here");  // wall time of the write: the fixture clock's
  for (int i = 0; i < 3; ++i) f.Get("present");
  auto merge = Rq(MapOp::kMergeEntries);
  merge.entries = {{"absent", Merging("m", merging_wall, merging_hits)},
                   {"present", Merging("m", merging_wall, merging_hits)}};
  auto result = f.Run(merge);
  REQUIRE(result.entries.size() == 1);
  CHECK(result.entries[0].first == "discarded");
  if (discarded) *discarded = std::stoll(result.entries[0].second);
  CHECK(result.count + std::stoll(result.entries[0].second) == 2);
  return {*f.Get("absent"), *f.Get("present")};
}
}  // namespace

TEST_CASE(
    "mergeEntries applies each merge policy: absent keys always merge, present ones by "
    "the policy",
    "[map][ops][multi][merge]") {
  const std::int64_t here_wall = StoreFixture{}.clock.WallMs();
  std::int64_t discarded = -1;
  CHECK(MergeWith(MergePolicy::kPutIfAbsent, here_wall + 1000, 100, &discarded) ==
        std::pair<std::string, std::string>{"m", "here"});
  CHECK(discarded == 1);
  CHECK(MergeWith(MergePolicy::kPassThrough, here_wall - 1000, 0, &discarded) ==
        std::pair<std::string, std::string>{"m", "m"});
  CHECK(discarded == 0);
  // Latest update: the later write wins, either way.
  CHECK(MergeWith(MergePolicy::kLatestUpdate, here_wall + 1, 0).second == "m");
  CHECK(MergeWith(MergePolicy::kLatestUpdate, here_wall - 1, 0).second == "here");
  // Higher hits: "here" was read 3 times.
  CHECK(MergeWith(MergePolicy::kHigherHits, here_wall, 4).second == "m");
  CHECK(MergeWith(MergePolicy::kHigherHits, here_wall, 3).second == "here");
}

TEST_CASE("mergeEntries keeps the TTL left, and refuses bytes that are not merge entries",
          "[map][ops][multi][merge]") {
  StoreFixture f;
  auto merge = Rq(MapOp::kMergeEntries);
  merge.entries = {{"k", Merging("v", 0, 0, 50)}};
  CHECK(f.Run(merge).count == 1);
  f.clock.Advance(49);
  CHECK(f.Get("k") == "v");
  f.clock.Advance(1);
  CHECK(!f.Get("k"));

  merge.entries = {{"k", "plain value"}};
  auto bad = f.Try(merge);
  REQUIRE(!bad);
  CHECK(bad.error().code() == tessera::base::ErrorCode::kBadRequest);
  CHECK(bad.error().message().find("not a merge entry") != std::string::npos);
  CHECK(!f.Get("k"));
}

TEST_CASE("Merge policies parse from their names, other names are refused with the list",
          "[map][merge]") {
  for (auto policy : {MergePolicy::kPutIfAbsent, MergePolicy::kPassThrough,
                      MergePolicy::kHigherHits, MergePolicy::kLatestUpdate}) {
    CHECK(ParseMergePolicy(MergePolicyName(policy)) == policy);
  }
  auto bad = ParseMergePolicy("newest");
  REQUIRE(!bad);
  CHECK(bad.error().message() ==
        "unknown merge policy 'newest'; use put_if_absent, pass_through, higher_hits or "
        "latest_update");
  MergeEntry e{std::string("value\0with nul", 14), 1234567890123, 7, 5000, 60};
  CHECK(DecodeMergeEntry(EncodeMergeEntry(e)) == e);
}
