#pragma once
// Shared helpers for the map unit tests: a store + context fixture driven by a ManualClock.

#include <string>
#include <vector>

#include "tessera/base/clock.h"
#include "tessera/map/entry_processor.h"
#include "tessera/map/map_ops.h"
#include "tessera/map/record_store.h"

namespace tessera::map::testing {

inline MapRequest Rq(MapOp op, std::string key = "", std::string value = "") {
  MapRequest rq;
  rq.op = op;
  rq.map_name = "m";
  rq.key = std::move(key);
  rq.value = std::move(value);
  return rq;
}

inline MapRequest WithTtl(MapRequest rq, base::Millis ttl) {
  rq.options.ttl_ms = ttl;
  return rq;
}

// One partition's store with a context: time from a ManualClock, events captured.
struct StoreFixture {
  base::ManualClock clock{10'000};
  RecordStore store;
  EntryProcessorRegistry processors;
  MapConfig config;
  std::vector<EntryEvent> events;
  bool listen = true;
  bool event_values = true;
  std::uint32_t partition_count = 1;

  StoreFixture() { processors.RegisterBuiltins(); }

  OpContext Context() {
    OpContext ctx;
    ctx.now_ms = clock.NowMs();
    ctx.wall_ms = clock.WallMs();
    ctx.config = config;
    ctx.map_name = "m";
    ctx.partition_id = 0;
    ctx.partition_count = partition_count;
    ctx.processors = &processors;
    ctx.events = listen ? &events : nullptr;
    ctx.event_values = event_values;
    return ctx;
  }

  base::Result<MapResult> Try(const MapRequest& rq) {
    if (auto ok = ValidateRequest(rq, &processors); !ok) return std::unexpected(ok.error());
    OpContext ctx = Context();
    return ExecuteOnStore(store, rq, ctx);
  }

  // Runs a request that must succeed.
  MapResult Run(const MapRequest& rq) {
    auto r = Try(rq);
    if (!r) throw std::runtime_error("request failed: " + r.error().ToString());
    return std::move(*r);
  }

  std::optional<std::string> Get(const std::string& key) { return Run(Rq(MapOp::kGet, key)).value; }
  void Put(const std::string& key, const std::string& value) { Run(Rq(MapOp::kSet, key, value)); }
};

}  // namespace tessera::map::testing
