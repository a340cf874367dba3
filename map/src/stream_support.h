#pragma once
// The stream storage operations (tessera/map/stream_storage.h) as the engine's stream ops
// (map_ops_stream.cc) name them.
//
// Shard: as map_ops.h.

#include "op_support.h"
#include "tessera/map/stream_storage.h"

namespace tessera::map::detail {

using map::DropHead;
using map::Forever;
using map::Lasting;
using map::LoadedMeta;
using map::LoadMeta;
using map::SaveMeta;
using map::StreamOfSub;

}  // namespace tessera::map::detail
