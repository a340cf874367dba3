#pragma once
// Shard-local map operations: the semantics of every MapOp against one partition's
// RecordStore. Synchronous, never suspends, no sockets and no threads: MapService calls
// these on the owning shard; tests call them directly with a ManualClock time.
//
// Semantics (Hazelcast IMap):
//   - Expiry is checked on every access: an expired entry is never returned; it is removed
//     when touched (an Expired event) and otherwise by SweepExpired.
//   - Writes follow the TTL rule of map_request.h. Reads (get, getAll, containsKey,
//     putIfAbsent that finds a value, executeOn*) refresh the idle clock.
//   - putIfAbsent/replace/replaceIfSame/removeIfSame treat an expired entry as absent.
//   - With MapConfig::max_entries > 0, inserting beyond ceil(max_entries / partition_count)
//     entries evicts the approximately least recently used entry (sampled LRU), Evicted.
//   - Multi-partition ops (putAll, getAll, executeOnKeys, size, clear, query,
//     executeOnEntries, stats) run the part for this store only: the caller passes the keys
//     / entries of this partition and merges the parts with MergeResult.
//   - Entry processors run atomically: a processor error leaves the entry untouched and is
//     returned. executeOnEntries stops at the first failing entry (entries already processed
//     keep their changes) and returns that error.
//   - clear fires one Cleared event per partition that held entries (count in old_value).
//
// Shard: every function here runs on the shard owning the store.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/base/clock.h"
#include "tessera/base/error.h"
#include "tessera/map/entry_processor.h"
#include "tessera/map/map_request.h"
#include "tessera/map/map_service.h"
#include "tessera/map/record_store.h"
#include "tessera/map/stream_format.h"

namespace tessera::map {

class PartitionMaps;

// Everything an operation needs besides the store and the request.
struct OpContext {
  base::Millis now_ms = 0;   // the member's monotonic time for this operation
  base::Millis wall_ms = 0;  // wall-clock time (ms since 1970): event streams' append times
  MapConfig config;          // the map's configuration
  std::string_view map_name;
  std::uint32_t partition_id = 0;
  std::uint32_t partition_count = 1;  // for the per-partition max_entries share
  // Needed for executeOn*; nullptr -> kUnknownProcessor.
  const EntryProcessorRegistry* processors = nullptr;
  // Events produced by the operation are appended here, in order; nullptr when nobody
  // listens (events are then not built at all). The caller delivers them after the
  // operation returns, so a listener may safely issue map operations.
  std::vector<EntryEvent>* events = nullptr;
  bool event_values = true;  // fill EntryEvent::value/old_value
  // The other maps of this partition, for operations that keep data in more than one map (a
  // companion maps, family.h); nullptr when the caller offers none (such an
  // operation then keeps everything in its own store).
  PartitionMaps* maps = nullptr;
  // Requests for other partitions that the operation's changes call for, run by the caller
  // after it (the entries of a stream whose keyspace marker went: families/streams); nullptr when
  // the caller runs none (a backup's copy: its owner does).
  std::vector<MapRequest>* follow_ups = nullptr;
  // When set, an event stream operation leaves here its sub-stream's meta record as it read
  // or last wrote it (stream_format.h), so the owner's stream metrics need not parse the
  // record again; nullptr when the caller does not want it.
  std::optional<StreamMeta>* stream_meta = nullptr;
};

// The stores of the other maps of one partition on its shard. What an operation changes
// through it is replicated with the operation's own changes (one replica version); those
// maps' listeners are not told.
class PartitionMaps {
 public:
  virtual ~PartitionMaps() = default;
  // The store of map `name` in this partition; nullptr when it has none and !create.
  virtual RecordStore* Find(const std::string& name, bool create) = 0;
  // A context for changing that store: same time and partition; its events feed replication.
  virtual OpContext ContextFor(const std::string& name) = 0;
  // Whether changes are undone if the operation's transaction fails (a partition transaction):
  // then a store must be changed entry by entry (RecordStore::Clear is not undoable).
  virtual bool undoable() const = 0;
};

// Checks what can be checked without the data: map name, key presence, negative TTLs,
// processor names, predicate structure. Errors: kBadRequest, kUnknownProcessor,
// kBadPredicate (each message names the problem).
base::Result<void> ValidateRequest(const MapRequest& request,
                                   const EntryProcessorRegistry* processors);

// Runs `request` (validated) against `store`. Errors: kBadRequest (e.g. setTtl without
// options.ttl_ms), kUnknownProcessor, kWrongType / others returned by processors.
base::Result<MapResult> ExecuteOnStore(RecordStore& store, const MapRequest& request,
                                       OpContext& ctx);

// Folds the per-partition result `part` of a multi-partition `op` into `into` (counts add,
// entries and processor results concatenate, stats add).
void MergeResult(MapOp op, MapResult& into, MapResult&& part);

// Background expiry: examines up to `budget` entries from the store's cursor and removes the
// expired ones, counting expirations and appending Expired events to ctx.events.
RecordStore::SweepResult SweepStore(RecordStore& store, OpContext& ctx, std::size_t budget);

// The store's counters as they are reported: its latency totals, which it keeps in
// base::CycleClock ticks (ExecuteOnStore), in nanoseconds. Every reader of a store's stats
// outside the store goes through this (or StatsOf).
MapStats ReportedStats(const RecordStore& store);
// ReportedStats with `entries` (live entries) and `memory_bytes` filled in.
MapStats StatsOf(const RecordStore& store, base::Millis now_ms);
// Adds `part`'s counts and sizes to `into`.
void AddStats(MapStats& into, const MapStats& part);

}  // namespace tessera::map
