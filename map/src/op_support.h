#pragma once
// Building blocks shared by the shard-local operations (map_ops.cc, map_ops_multi.cc):
// expiry-aware lookup, writes that apply the TTL rule and capacity limit, removals, events.
//
// Shard: as map_ops.h.

#include <optional>
#include <string>
#include <string_view>

#include "tessera/map/family.h"
#include "tessera/map/map_ops.h"
#include "tessera/map/stream_storage.h"

namespace tessera::map::detail {

// The building blocks families use too (family.h).
using map::ClearLive;
using map::FindLive;
using map::IntArg;
using map::RemoveLive;
using map::StringArg;
using map::WriteLive;
using map::WriteLiveKind;

using map::AfterFirstAt;  // stream_storage.h

// Appends an event when someone listens.
void Emit(OpContext& ctx, EntryEventType type, std::string_view key,
          std::optional<std::string_view> value, std::optional<std::string_view> old_value);

// An entry `key` of kind `kind` (holding `value`) is leaving its store (removed, expired,
// evicted, replaced by another kind): its family's hook takes what goes with it (family.h).
inline void EntryLeaving(OpContext& ctx, std::string_view key, ValueKind kind,
                         std::string_view value) {
  if (kind == ValueKind::kPlain) return;
  const FamilySpec* family = FamilyOfKind(kind);
  if (family != nullptr && family->leaving != nullptr) family->leaving(ctx, key, kind, value);
}

// kWrongType unless `r` (a live entry or nullptr) holds a plain value.
base::Result<void> CheckPlain(const Record* r);

// Runs the named processor on `key` atomically (see map_ops.h). REQUIRES: processor exists.
base::Result<record::GenericRecord> RunProcessor(RecordStore& store, std::string_view key,
                                                 const EntryProcessor& processor,
                                                 const record::GenericRecord& argument,
                                                 const WriteOptions& options, OpContext& ctx);

// Looks up the processor named by `name`. Errors: kUnknownProcessor with how to fix it.
base::Result<const EntryProcessor*> LookupProcessor(const EntryProcessorRegistry* registry,
                                                    std::string_view name);

// Per-partition parts of the multi-partition operations (map_ops_multi.cc).
base::Result<MapResult> OpPutAll(RecordStore& store, const MapRequest& request, OpContext& ctx);
base::Result<MapResult> OpMergeEntries(RecordStore& store, const MapRequest& request,
                                       OpContext& ctx);
base::Result<MapResult> OpGetAll(RecordStore& store, const MapRequest& request, OpContext& ctx);
base::Result<MapResult> OpExecuteOnKeys(RecordStore& store, const MapRequest& request,
                                        OpContext& ctx);
base::Result<MapResult> OpSize(RecordStore& store, OpContext& ctx);
base::Result<MapResult> OpClear(RecordStore& store, OpContext& ctx);
base::Result<MapResult> OpQuery(RecordStore& store, const MapRequest& request, OpContext& ctx);
base::Result<MapResult> OpExecuteOnEntries(RecordStore& store, const MapRequest& request,
                                           OpContext& ctx);
// Ring buffers (map_ops_ring.cc).
base::Result<MapResult> OpRingAppend(RecordStore& store, const MapRequest& request, OpContext& ctx);
base::Result<MapResult> OpRingRead(RecordStore& store, const MapRequest& request, OpContext& ctx);
// Event streams (map_ops_stream.cc).
base::Result<MapResult> OpStreamAppend(RecordStore& store, const MapRequest& request,
                                       OpContext& ctx);
base::Result<MapResult> OpStreamRead(RecordStore& store, const MapRequest& request, OpContext& ctx);
base::Result<MapResult> OpStreamCommit(RecordStore& store, const MapRequest& request,
                                       OpContext& ctx);
base::Result<MapResult> OpStreamLease(RecordStore& store, const MapRequest& request,
                                      OpContext& ctx);
base::Result<MapResult> OpStreamGroup(RecordStore& store, const MapRequest& request,
                                      OpContext& ctx);
base::Result<MapResult> OpStreamInfo(RecordStore& store, const MapRequest& request, OpContext& ctx);
base::Result<MapResult> OpStreamJoin(RecordStore& store, const MapRequest& request, OpContext& ctx);
base::Result<MapResult> OpStreamMerge(RecordStore& store, const MapRequest& request,
                                      OpContext& ctx);
base::Result<MapResult> OpRingMerge(RecordStore& store, const MapRequest& request, OpContext& ctx);

}  // namespace tessera::map::detail
