#pragma once
// Wire codec of the map module: MapRequest, MapResult, EntryEvent and ListenerOptions to and
// from bytes (Cap'n Proto messages, schema map/src/map.capnp; the generated types stay
// private). GenericRecords and Predicates travel as their own Encode() bytes.
//
// Decoding never trusts its input: bytes that are not a valid message, exceed the reader
// limits (64 MiB traversal, nesting 64), carry unknown enum codes or invalid nested
// records/predicates fail with kBadRequest naming the problem; they never crash.
//
// Thread-safety: stateless free functions, safe from any thread.

#include <string>
#include <string_view>

#include "tessera/base/error.h"
#include "tessera/map/map_request.h"
#include "tessera/map/map_service.h"
#include "tessera/map/replica.h"

namespace tessera::map {

std::string EncodeRequest(const MapRequest& request);
base::Result<MapRequest> DecodeRequest(std::string_view bytes);

std::string EncodeResult(const MapResult& result);
base::Result<MapResult> DecodeResult(std::string_view bytes);

std::string EncodeEvent(const EntryEvent& event);
base::Result<EntryEvent> DecodeEvent(std::string_view bytes);

std::string EncodeListenerOptions(const ListenerOptions& options);
base::Result<ListenerOptions> DecodeListenerOptions(std::string_view bytes);
// ReplicaUpdate lists: see replica.h.

}  // namespace tessera::map
