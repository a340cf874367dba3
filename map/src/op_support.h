#pragma once
// Building blocks shared by the shard-local operations (map_ops.cc, map_ops_multi.cc):
// expiry-aware lookup, writes that apply the TTL rule and capacity limit, removals, events.
//
// Shard: as map_ops.h.

#include <optional>
#include <string>
#include <string_view>

#include "tessera/map/map_ops.h"

namespace tessera::map::detail {

// The live entry for `key`, or nullptr. An expired entry is removed on the way (Expired
// event, expirations counter).
Record* FindLive(RecordStore& store, std::string_view key, OpContext& ctx);

// Arguments of the ring and stream operations (MapRequest::argument), with a fallback when
// absent or of another type (probed with Find: no error text for an absent one).
inline std::int64_t IntArg(const MapRequest& rq, std::string_view name, std::int64_t fallback) {
  const record::Value* v = rq.argument.Find(name);
  return v != nullptr && v->type() == record::FieldType::kInt64 ? v->AsInt64() : fallback;
}
inline std::string StringArg(const MapRequest& rq, std::string_view name) {
  const record::Value* v = rq.argument.Find(name);
  return v != nullptr && v->type() == record::FieldType::kString ? v->AsString() : std::string();
}

// "ring@R" -> R, "meta@S#3" -> S#3: the name after a bookkeeping key's first '@' (the name may
// hold '@' itself; every key of the ring or stream then partitions by the text after its last).
inline std::string_view AfterFirstAt(std::string_view key) {
  auto at = key.find('@');
  return at == std::string_view::npos ? key : key.substr(at + 1);
}

// Appends an event when someone listens.
void Emit(OpContext& ctx, EntryEventType type, std::string_view key,
          std::optional<std::string_view> value, std::optional<std::string_view> old_value);

// Writes `value` under `key` applying the TTL rule with `options`, counts a put, fires
// Added/Updated (`old_value` is the previous live value when `existed`), and enforces the
// partition's capacity when the entry is new. `old_value` may be nullopt when not needed
// for events (it is only read if ctx.events && ctx.event_values).
void WriteLive(RecordStore& store, std::string_view key, std::string_view value,
               const WriteOptions& options, OpContext& ctx, bool existed,
               const std::optional<std::string>& old_value);

// WriteLive for an entry of kind `kind` (map_request.h): writes, then sets the kind.
void WriteLiveKind(RecordStore& store, std::string_view key, std::string_view value,
                   const WriteOptions& options, OpContext& ctx, bool existed,
                   const std::optional<std::string>& old_value, ValueKind kind);

// Removes the live entry `record` of `key`, counts a remove and fires `type` with its value.
void RemoveLive(RecordStore& store, const Record& record, OpContext& ctx, EntryEventType type);

// An entry `key` of kind `kind` (holding `value`) is leaving its store (removed, expired,
// evicted, replaced by another kind): a spilled hash takes its field map with it, a stream's
// keyspace entry its stream (redis_hash.h). Cheap otherwise.
void DropHashFields(OpContext& ctx, std::string_view key);  // map_ops_redis_key.cc
void StreamKeyLeaving(OpContext& ctx, std::string_view key, std::string_view value);
inline void EntryLeaving(OpContext& ctx, std::string_view key, ValueKind kind,
                         std::string_view value) {
  if (kind == ValueKind::kSpilledHash) DropHashFields(ctx, key);
  if (kind == ValueKind::kStream) StreamKeyLeaving(ctx, key, value);
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
// Redis stream commands (map_ops_redis_stream.cc).
base::Result<MapResult> OpRedisStream(RecordStore& store, const MapRequest& request,
                                      OpContext& ctx);
// Redis hash and key commands on the RESP keyspace (map_ops_redis_key.cc).
base::Result<MapResult> OpRedisKey(RecordStore& store, const MapRequest& request, OpContext& ctx);

}  // namespace tessera::map::detail
