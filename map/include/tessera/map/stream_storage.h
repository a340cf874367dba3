#pragma once
// The operations on a sub-stream's records (stream_format.h) that every API over the stream
// storage shares: the engine's event streams (map_ops_stream.cc) and the streams family's Redis
// streams (families/streams). Each runs inside an op on the sub-stream's partition.
//
// Shard: the store's (as map_ops.h).

#include <string>
#include <string_view>

#include "tessera/map/map_ops.h"
#include "tessera/map/stream_format.h"

namespace tessera::map {

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

// "ring@R" -> R, "meta@S#3" -> S#3: the name after a bookkeeping key's first '@' (the name may
// hold '@' itself; every key of the ring or stream then partitions by the text after its last).
inline std::string_view AfterFirstAt(std::string_view key) {
  auto at = key.find('@');
  return at == std::string_view::npos ? key : key.substr(at + 1);
}

}  // namespace tessera::map
