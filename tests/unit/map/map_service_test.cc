#include "tessera/map/map_service.h"

#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "service_fixture.h"
#include "tessera/map/entry_processor.h"

using namespace tessera::map;  // NOLINT
using tessera::base::ErrorCode;
using tessera::base::ManualClock;
using tessera::map::testing::EventLog;
using tessera::map::testing::ServiceFixture;
using tessera::map::testing::WaitFor;
using tessera::record::GenericRecord;

TEST_CASE("MapService runs keyed operations on the owning shards", "[map][service]") {
  ServiceFixture f(4);
  for (int i = 0; i < 200; ++i) {
    f.Run(ServiceFixture::Rq(MapOp::kSet, "m", "k" + std::to_string(i), "v" + std::to_string(i)));
  }
  for (int i = 0; i < 200; ++i) {
    CHECK(f.Run(ServiceFixture::Rq(MapOp::kGet, "m", "k" + std::to_string(i))).value ==
          "v" + std::to_string(i));
  }
  CHECK(f.Run(ServiceFixture::Rq(MapOp::kRemove, "m", "k7")).value == "v7");
  CHECK_FALSE(f.Run(ServiceFixture::Rq(MapOp::kGet, "m", "k7")).value.has_value());
  CHECK(f.Run(ServiceFixture::Rq(MapOp::kSize, "m")).count == 199);
  CHECK(f.service.MapNames() == std::vector<std::string>{"m"});
}

TEST_CASE("MapService fans out multi-partition operations and merges", "[map][service]") {
  ServiceFixture f(3);
  auto put_all = ServiceFixture::Rq(MapOp::kPutAll, "people");
  for (int i = 0; i < 300; ++i) {
    put_all.entries.emplace_back(
        "p" + std::to_string(i),
        GenericRecord::Build("Person").Int64("age", i % 100).Done().Encode());
  }
  CHECK(f.Run(put_all).count == 300);
  CHECK(f.Run(ServiceFixture::Rq(MapOp::kSize, "people")).count == 300);
  auto get_all = ServiceFixture::Rq(MapOp::kGetAll, "people");
  get_all.keys = {"p1", "p150", "p299", "nope"};
  auto got = f.Run(get_all).entries;
  std::set<std::string> keys;
  for (auto& [k, v] : got) keys.insert(k);
  CHECK(keys == std::set<std::string>{"p1", "p150", "p299"});
  auto query = ServiceFixture::Rq(MapOp::kQuery, "people");
  query.predicate = Predicate::GreaterEqual("age", std::int64_t{90});
  query.projection = Projection::kKeys;
  CHECK(f.Run(query).entries.size() == 30);
  auto exec = ServiceFixture::Rq(MapOp::kExecuteOnEntries, "people");
  exec.processor = "increment";
  exec.argument = GenericRecord::Build().String("field", "age").Int64("delta", 1).Done();
  exec.predicate = Predicate::Less("age", std::int64_t{10});
  CHECK(f.Run(exec).processor_results.size() == 30);
  auto on_keys = ServiceFixture::Rq(MapOp::kExecuteOnKeys, "people");
  on_keys.processor = "get";
  on_keys.keys = {"p5", "p6"};
  CHECK(f.Run(on_keys).processor_results.size() == 2);
  query.predicate = Predicate::Equal("age", std::int64_t{0});
  CHECK(f.Run(query).entries.empty());  // every age-0 person was incremented
  auto stats = f.Run(ServiceFixture::Rq(MapOp::kStats, "people")).stats;
  CHECK(stats.entries == 300);
  CHECK(stats.puts == 330);  // 300 putAll + 30 processor writes
  CHECK(stats.memory_bytes > 300 * 48);
  CHECK(f.Run(ServiceFixture::Rq(MapOp::kClear, "people")).count == 300);
  CHECK(f.Run(ServiceFixture::Rq(MapOp::kSize, "people")).count == 0);
}

TEST_CASE("A member's per-map stats report latency totals in nanoseconds as the stats op does",
          "[map][service]") {
  ServiceFixture f(2);
  for (int i = 0; i < 2000; ++i) {
    f.Run(ServiceFixture::Rq(MapOp::kSet, "timed", "k" + std::to_string(i), "v"));
    f.Run(ServiceFixture::Rq(MapOp::kGet, "timed", "k" + std::to_string(i)));
  }
  const MapStats op = f.Run(ServiceFixture::Rq(MapOp::kStats, "timed")).stats;
  const auto local = f.service.LocalMapStats();
  REQUIRE(local);
  const auto it = std::find_if(local->begin(), local->end(),
                               [](const auto& entry) { return entry.first == "timed"; });
  REQUIRE(it != local->end());
  const MapStats& metrics = it->second;
  REQUIRE(op.put_latency_ns > 0);
  REQUIRE(op.get_latency_ns > 0);
  // The same totals read twice (no operation between): equal up to the rate's rounding, not
  // off by the counter's frequency (ticks are not nanoseconds).
  CHECK(std::abs(metrics.put_latency_ns - op.put_latency_ns) <= op.put_latency_ns / 100 + 1000);
  CHECK(std::abs(metrics.get_latency_ns - op.get_latency_ns) <= op.get_latency_ns / 100 + 1000);
  CHECK(metrics.puts == 2000);
}

TEST_CASE("MapService validates requests", "[map][service]") {
  ServiceFixture f(2);
  auto empty_name = f.service.ExecuteSync(ServiceFixture::Rq(MapOp::kGet, "", "k"));
  REQUIRE_FALSE(empty_name);
  CHECK(empty_name.error().code() == ErrorCode::kBadRequest);
  CHECK(empty_name.error().message() == "map name is empty");
  auto negative = ServiceFixture::Rq(MapOp::kSet, "m", "k", "v");
  negative.options.ttl_ms = -5;
  CHECK(f.service.ExecuteSync(negative).error().code() == ErrorCode::kBadRequest);
  auto unknown = ServiceFixture::Rq(MapOp::kExecuteOnKey, "m", "k");
  unknown.processor = "nope";
  CHECK(f.service.ExecuteSync(unknown).error().code() == ErrorCode::kUnknownProcessor);
  auto bad_predicate = ServiceFixture::Rq(MapOp::kQuery, "m");
  bad_predicate.predicate = Predicate::Equal("", std::int64_t{1});
  CHECK(f.service.ExecuteSync(bad_predicate).error().code() == ErrorCode::kBadPredicate);
}

TEST_CASE("MapService refuses requests after Stop", "[map][service]") {
  ServiceFixture f(2);
  f.Run(ServiceFixture::Rq(MapOp::kSet, "m", "k", "v"));
  f.service.Stop();
  auto r = f.service.ExecuteSync(ServiceFixture::Rq(MapOp::kGet, "m", "k"));
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == ErrorCode::kShuttingDown);
}

TEST_CASE("Configure applies a map's default TTL and capacity", "[map][service]") {
  ServiceFixture f(2);
  MapConfig config;
  config.default_ttl_ms = 100;
  f.service.Configure("short", config);
  CHECK(f.service.ConfigOf("short").default_ttl_ms == 100);
  CHECK(f.service.ConfigOf("other").default_ttl_ms == 0);
  f.Run(ServiceFixture::Rq(MapOp::kSet, "short", "k", "v"));
  f.Run(ServiceFixture::Rq(MapOp::kSet, "other", "k", "v"));
  f.clock.Advance(100);
  CHECK_FALSE(f.Run(ServiceFixture::Rq(MapOp::kGet, "short", "k")).value.has_value());
  CHECK(f.Run(ServiceFixture::Rq(MapOp::kGet, "other", "k")).value == "v");

  MapConfig bounded;
  bounded.max_entries = 271 * 2;  // two per partition
  f.service.Configure("bounded", bounded);
  for (int i = 0; i < 3000; ++i) {
    f.Run(ServiceFixture::Rq(MapOp::kSet, "bounded", "k" + std::to_string(i), "v"));
  }
  CHECK(f.Run(ServiceFixture::Rq(MapOp::kSize, "bounded")).count <= 271 * 2);
  CHECK(f.Run(ServiceFixture::Rq(MapOp::kStats, "bounded")).stats.evictions >= 3000 - 271 * 2);
}

TEST_CASE("the sweeper reclaims expired entries in the background", "[map][service][ttl]") {
  ServiceFixture f(3);
  EventLog log;
  ListenerOptions only_expired;
  only_expired.types = {EntryEventType::kExpired};
  f.service.AddEntryListener("cache", only_expired, log.Listener());
  auto put_all = ServiceFixture::Rq(MapOp::kPutAll, "cache");
  put_all.options.ttl_ms = 1000;
  for (int i = 0; i < 500; ++i) put_all.entries.emplace_back("k" + std::to_string(i), "v");
  f.Run(put_all);
  f.Run(ServiceFixture::Rq(MapOp::kSet, "cache", "forever", "v"));
  auto expirations = [&f] {
    return f.Run(ServiceFixture::Rq(MapOp::kStats, "cache")).stats.expirations;
  };
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // several ticks
  CHECK(expirations() == 0);                                   // nothing is due yet
  f.clock.Advance(1000);
  CHECK(WaitFor([&expirations] { return expirations() == 500; }));
  CHECK(log.Snapshot().size() == 500);
  auto stats = f.Run(ServiceFixture::Rq(MapOp::kStats, "cache")).stats;
  CHECK(stats.entries == 1);
}

TEST_CASE("listeners get events in order per key, filtered by options", "[map][service][events]") {
  ServiceFixture f(2);
  EventLog all, key_only, no_values;
  f.service.AddEntryListener("m", {}, all.Listener());
  ListenerOptions one_key;
  one_key.key = "a";
  f.service.AddEntryListener("m", one_key, key_only.Listener());
  ListenerOptions bare;
  bare.include_values = false;
  bare.types = {EntryEventType::kUpdated, EntryEventType::kRemoved};
  const ListenerId bare_id = f.service.AddEntryListener("m", bare, no_values.Listener());
  f.Run(ServiceFixture::Rq(MapOp::kSet, "m", "a", "1"));
  f.Run(ServiceFixture::Rq(MapOp::kSet, "m", "b", "1"));
  f.Run(ServiceFixture::Rq(MapOp::kSet, "m", "a", "2"));
  f.Run(ServiceFixture::Rq(MapOp::kRemove, "m", "a"));
  f.Run(ServiceFixture::Rq(MapOp::kSet, "other-map", "a", "1"));
  auto events = all.Snapshot();
  std::vector<EntryEventType> of_a;
  for (const auto& e : events) {
    CHECK(e.map_name == "m");
    if (e.key == "a") of_a.push_back(e.type);
  }
  CHECK(events.size() == 4);
  CHECK(of_a == std::vector<EntryEventType>{EntryEventType::kAdded, EntryEventType::kUpdated,
                                            EntryEventType::kRemoved});
  CHECK(key_only.Snapshot().size() == 3);
  auto bare_events = no_values.Snapshot();
  REQUIRE(bare_events.size() == 2);
  for (const auto& e : bare_events) {
    CHECK_FALSE(e.value.has_value());
    CHECK_FALSE(e.old_value.has_value());
  }
  CHECK(f.service.RemoveEntryListener(bare_id));
  CHECK_FALSE(f.service.RemoveEntryListener(bare_id));
  f.Run(ServiceFixture::Rq(MapOp::kSet, "m", "b", "2"));
  CHECK(no_values.Snapshot().size() == 2);
  CHECK(all.Snapshot().size() == 5);
}

TEST_CASE("maps of any size keep, count and expire their entries", "[map][service][ttl]") {
  // A budget of 7 entries or stores per tick makes the sweeper resume across many ticks.
  auto options = ServiceFixture::Fast();
  options.sweep_budget_per_tick = GENERATE(4000, 7);
  INFO("sweep budget " << options.sweep_budget_per_tick);
  ServiceFixture f(1, options);  // one shard: all 271 partitions' stores of a map in one table
  auto set_with_ttl = [&f](const std::string& map, const std::string& key) {
    auto rq = ServiceFixture::Rq(MapOp::kSet, map, key, "v" + key);
    rq.options.ttl_ms = 1000;
    f.Run(rq);
  };
  auto all_there = [&f](const std::string& map, int count) {
    for (int i = 0; i < count; ++i) {
      const std::string key = "k" + std::to_string(i);
      if (f.Run(ServiceFixture::Rq(MapOp::kGet, map, key)).value != "v" + key) return false;
    }
    return f.Run(ServiceFixture::Rq(MapOp::kSize, map)).count == count;
  };
  // Key by key from one partition to many: every entry stays readable as the map's stores
  // go from the few a small map has to one per partition.
  for (int i = 0; i < 300; ++i) {
    set_with_ttl("growing", "k" + std::to_string(i));
    if (i < 30 || i == 299) {
      INFO("after key " << i);
      REQUIRE(all_there("growing", i + 1));
    }
  }
  // Many one-entry maps, as RESP hashes often are.
  for (int i = 0; i < 200; ++i) set_with_ttl("small" + std::to_string(i), "k0");
  for (int i = 0; i < 200; ++i) REQUIRE(all_there("small" + std::to_string(i), 1));
  // The sweeper finds and expires the entries of both kinds.
  auto expirations = [&f](const std::string& map) {
    return f.Run(ServiceFixture::Rq(MapOp::kStats, map)).stats.expirations;
  };
  f.clock.Advance(1000);
  CHECK(WaitFor([&] {
    if (expirations("growing") != 300) return false;
    for (int i = 0; i < 200; ++i) {
      if (expirations("small" + std::to_string(i)) != 1) return false;
    }
    return true;
  }));
}

TEST_CASE("listener counts per map follow adds and removes", "[map][service][events]") {
  ServiceFixture f(2);
  using Counts = std::vector<std::pair<std::string, std::size_t>>;
  CHECK(f.service.EntryListenerCounts().empty());
  EventLog log;
  const ListenerId a1 = f.service.AddEntryListener("a", {}, log.Listener());
  const ListenerId a2 = f.service.AddEntryListener("a", {}, log.Listener());
  const ListenerId b1 = f.service.AddEntryListener("b", {}, log.Listener());
  CHECK(f.service.EntryListenerCounts() == Counts{{"a", 2}, {"b", 1}});
  CHECK(f.service.RemoveEntryListener(a1));
  CHECK(f.service.RemoveEntryListener(b1));
  CHECK(f.service.EntryListenerCounts() == Counts{{"a", 1}, {"b", 0}});
  CHECK(f.service.RemoveEntryListener(a2));
  CHECK(f.service.EntryListenerCounts() == Counts{{"a", 0}, {"b", 0}});
}

TEST_CASE("a listener may call the service from its callback", "[map][service][events]") {
  ServiceFixture f(2);
  std::atomic<int> copies{0};
  ListenerOptions added;
  added.types = {EntryEventType::kAdded};
  f.service.AddEntryListener("src", added, [&f, &copies](const EntryEvent& e) {
    f.service.Execute(ServiceFixture::Rq(MapOp::kSet, "src", e.key + "-copy", "x"),
                      [&copies](auto) { ++copies; });
  });
  f.Run(ServiceFixture::Rq(MapOp::kSet, "src", "k", "v"));
  CHECK(WaitFor([&copies] { return copies.load() >= 2; }));  // k, then k-copy, ...
  CHECK(f.Run(ServiceFixture::Rq(MapOp::kGet, "src", "k-copy")).value == "x");
}

TEST_CASE("racing putIfAbsent has exactly one winner per key", "[map][service][concurrency]") {
  ServiceFixture f(4);
  constexpr int kThreads = 8, kKeys = 200;
  std::vector<std::vector<int>> wins(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&f, &wins, t] {
      for (int k = 0; k < kKeys; ++k) {
        auto r = f.service.ExecuteSync(ServiceFixture::Rq(
            MapOp::kPutIfAbsent, "race", "k" + std::to_string(k), std::to_string(t)));
        if (r && !r->value.has_value()) wins[t].push_back(k);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::map<int, int> winner_of;
  for (int t = 0; t < kThreads; ++t) {
    for (int k : wins[t]) {
      CHECK(winner_of.count(k) == 0);
      winner_of[k] = t;
    }
  }
  CHECK(winner_of.size() == kKeys);
  for (auto& [k, t] : winner_of) {
    CHECK(f.Run(ServiceFixture::Rq(MapOp::kGet, "race", "k" + std::to_string(k))).value ==
          std::to_string(t));
  }
}

TEST_CASE("concurrent increments on one key add up exactly", "[map][service][concurrency]") {
  ServiceFixture f(4);
  constexpr int kThreads = 6, kPerThread = 300;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&f, &failures] {
      for (int i = 0; i < kPerThread; ++i) {
        auto rq = ServiceFixture::Rq(MapOp::kExecuteOnKey, "counters", "hits");
        rq.processor = "increment";
        rq.argument = GenericRecord::Build().String("field", "n").Done();
        if (!f.service.ExecuteSync(rq)) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failures == 0);
  auto value = f.Run(ServiceFixture::Rq(MapOp::kGet, "counters", "hits")).value;
  REQUIRE(value.has_value());
  CHECK(GenericRecord::Decode(*value)->GetInt64("n") == kThreads * kPerThread);
}

TEST_CASE("Execute from a shard thread runs keyed ops inline", "[map][service]") {
  ServiceFixture f(2);
  std::promise<bool> inline_done;
  f.shards.InvokeOn(0, [&f, &inline_done] {
    // Find a key owned by shard 0, then call Execute from shard 0.
    std::string key;
    for (int i = 0;; ++i) {
      key = "k" + std::to_string(i);
      if (f.shards.ShardOfPartition(f.service.partitioner().PartitionOf(key)) == 0) break;
    }
    bool ran = false;
    f.service.Execute(ServiceFixture::Rq(MapOp::kSet, "m", key, "v"),
                      [&ran](auto r) { ran = r.has_value(); });
    inline_done.set_value(ran);
  });
  CHECK(inline_done.get_future().get());
}

TEST_CASE("PrefetchKeys changes nothing and creates no map", "[map][service]") {
  ServiceFixture f(2);
  std::vector<std::string> keys;
  for (int i = 0; i < 40; ++i) {
    keys.push_back("k" + std::to_string(i));
    f.Run(ServiceFixture::Rq(MapOp::kSet, "m", keys.back(), "v" + std::to_string(i)));
  }
  // Keys of both shards, of a map that exists and of one that does not, more than the limit.
  std::vector<MapService::KeyRef> refs;
  for (const auto& key : keys) {
    refs.push_back({"m", key});
    refs.push_back({"absent", key});
  }
  for (std::size_t shard : {0, 1}) {
    std::promise<void> done;
    f.shards.InvokeOn(shard, [&] {
      f.service.PrefetchKeys(refs);
      done.set_value();
    });
    done.get_future().get();
  }
  f.service.PrefetchKeys(refs);  // off the shards: nothing to hint
  CHECK(f.service.MapNames() == std::vector<std::string>{"m"});
  for (int i = 0; i < 40; ++i) {
    CHECK(f.Run(ServiceFixture::Rq(MapOp::kGet, "m", keys[i])).value ==
          std::optional<std::string>("v" + std::to_string(i)));
  }
  CHECK(f.Run(ServiceFixture::Rq(MapOp::kSize, "m")).count == 40);
}

TEST_CASE("ExecuteIfLocal runs a keyed request only on the shard that owns the key") {
  ServiceFixture f(2);
  f.Run(ServiceFixture::Rq(MapOp::kSet, "m", "k", "v1"));
  const auto owner = f.shards.ShardOfPartition(tessera::partition::Partitioner().PartitionOf("k"));

  auto on_shard = [&f](std::size_t shard, auto fn) {
    std::promise<decltype(fn())> p;
    f.shards.InvokeOn(shard, [&] { p.set_value(fn()); });
    return p.get_future().get();
  };
  // On the owner: runs now, with the same result Execute would give.
  auto local = on_shard(owner, [&f] {
    return f.service.ExecuteIfLocal(ServiceFixture::Rq(MapOp::kPut, "m", "k", "v2"));
  });
  REQUIRE(local.has_value());
  REQUIRE(local->has_value());
  CHECK((*local)->value == std::optional<std::string>("v1"));
  CHECK(f.Run(ServiceFixture::Rq(MapOp::kGet, "m", "k")).value == std::optional<std::string>("v2"));

  // On the other shard, off any shard, or for a non-keyed op: nothing runs.
  auto remote = on_shard(1 - owner, [&f] {
    return f.service.ExecuteIfLocal(ServiceFixture::Rq(MapOp::kSet, "m", "k", "v3"));
  });
  CHECK_FALSE(remote.has_value());
  CHECK_FALSE(
      f.service.ExecuteIfLocal(ServiceFixture::Rq(MapOp::kSet, "m", "k", "v4")).has_value());
  auto fan_out = on_shard(
      owner, [&f] { return f.service.ExecuteIfLocal(ServiceFixture::Rq(MapOp::kSize, "m")); });
  CHECK_FALSE(fan_out.has_value());
  CHECK(f.Run(ServiceFixture::Rq(MapOp::kGet, "m", "k")).value == std::optional<std::string>("v2"));

  // A bad request on the owner is answered with the validation error, not run.
  auto bad = on_shard(owner, [&f] {
    return f.service.ExecuteIfLocal(ServiceFixture::Rq(MapOp::kSet, "", "k", "x"));
  });
  REQUIRE(bad.has_value());
  REQUIRE_FALSE(bad->has_value());
  CHECK(bad->error().code() == ErrorCode::kBadRequest);
}
