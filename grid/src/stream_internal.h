#pragma once
// Shared by stream.cc and stream_consumer.cc.

#include <string>

#include "tessera/map/map_request.h"

namespace tessera::grid {

// A request on the internal stream map.
map::MapRequest StreamRequest(map::MapOp op, std::string key);

}  // namespace tessera::grid
