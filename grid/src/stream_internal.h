#pragma once
// Shared by stream.cc and stream_consumer.cc.

#include <string>

#include "tessera/grid/stream.h"
#include "tessera/map/map_request.h"

namespace tessera::grid {

// A request on the internal stream map.
map::MapRequest StreamRequest(map::MapOp op, std::string key);

// The sub-stream's stored range a kStreamRead answered ("HEAD TAIL"; {1, 0} if it did not
// say).
struct ReadRange {
  std::int64_t head = 1, tail = 0;
};
ReadRange RangeOf(const map::MapResult& read);

// A stored event as read (kStreamRead's entry); damaged bytes become the payload.
StreamEvent DecodeEvent(std::uint32_t sub, const std::string& offset, const std::string& bytes);

}  // namespace tessera::grid
