#pragma once
// A running member-side MapService for unit tests (map_service_test.cc, map_tx_test.cc), and
// helpers to watch what its listeners receive.

#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tessera/base/clock.h"
#include "tessera/map/entry_processor.h"
#include "tessera/map/map_service.h"
#include "tessera/partition/partitioner.h"
#include "tessera/runtime/shard_set.h"

namespace tessera::map::testing {

using base::ManualClock;

// A running member-side map service on `shard_count` shards with a ManualClock.
struct ServiceFixture {
  explicit ServiceFixture(std::size_t shard_count = 3, MapServiceOptions options = Fast())
      : shards(shard_count),
        service(shards, tessera::partition::Partitioner(), clock, Builtins(processors),
                std::make_shared<spdlog::logger>("map-test",
                                                 std::make_shared<spdlog::sinks::null_sink_mt>()),
                options) {
    shards.Start();
    service.Start();
  }
  ~ServiceFixture() {
    service.Stop();
    shards.Stop();
  }
  static MapServiceOptions Fast() {
    MapServiceOptions o;
    o.sweep_interval_ms = 5;
    return o;
  }
  static const EntryProcessorRegistry& Builtins(EntryProcessorRegistry& r) {
    r.RegisterBuiltins();
    return r;
  }

  static MapRequest Rq(MapOp op, std::string map, std::string key = "", std::string value = "") {
    MapRequest rq;
    rq.op = op;
    rq.map_name = std::move(map);
    rq.key = std::move(key);
    rq.value = std::move(value);
    return rq;
  }
  MapResult Run(MapRequest rq) {
    auto r = service.ExecuteSync(std::move(rq));
    if (!r) throw std::runtime_error(r.error().ToString());
    return std::move(*r);
  }

  ManualClock clock;
  EntryProcessorRegistry processors;
  tessera::runtime::ShardSet shards;
  MapService service;
};

// Collects events delivered on shard threads.
struct EventLog {
  std::mutex mu;
  std::vector<EntryEvent> events;
  EntryListener Listener() {
    return [this](const EntryEvent& e) {
      std::lock_guard lock(mu);
      events.push_back(e);
    };
  }
  std::vector<EntryEvent> Snapshot() {
    std::lock_guard lock(mu);
    return events;
  }
};

template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

}  // namespace tessera::map::testing
