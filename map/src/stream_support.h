#pragma once
// Pieces the event stream operations share (map_ops_stream.cc, map_ops_redis_stream.cc).
//
// Shard: as map_ops.h.

#include <string>
#include <string_view>

#include "op_support.h"
#include "tessera/map/stream_format.h"

namespace tessera::map::detail {

// Records that never expire, and records that live `ttl_ms`.
WriteOptions Forever();
WriteOptions Lasting(base::Millis ttl_ms);

// A sub-stream's meta record as read, whether it existed, and its key. LoadMeta (of a record
// that exists) and SaveMeta also leave a copy in ctx.stream_meta when the caller asked for it
// (map_ops.h).
struct LoadedMeta {
  StreamMeta meta;
  bool existed = false;
  std::string key;  // StreamMetaKey(sub)
};
LoadedMeta LoadMeta(RecordStore& store, std::string_view sub, OpContext& ctx);
void SaveMeta(RecordStore& store, std::string_view sub, const LoadedMeta& loaded, OpContext& ctx);

// Removes the event at head (if stored) and moves head on. `key`: the head event's key when
// the caller has it built already (empty: built here).
void DropHead(RecordStore& store, std::string_view sub, StreamMeta& m, OpContext& ctx,
              std::string_view key = {});

// "S#3" -> "S".
std::string StreamOfSub(std::string_view sub);

}  // namespace tessera::map::detail
