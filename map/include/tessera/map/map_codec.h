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

#include <optional>
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

// Lean encoding (protocol version 2, lean frames; wire/frame_codec.h) of the hot keyed
// operations: get, set, put, putIfAbsent, remove, delete, containsKey, replace, with the map
// name, key, value and write options only. Little-endian, no Cap'n Proto:
//   request: op (1 byte), flags (1: bit 0 ttl, bit 1 max-idle, bit 2 keep_ttl), then a
//            u32 length + bytes each for map name, key and value, then ttl_ms and
//            max_idle_ms as i64 when their bit is set;
//   result:  flags (1: bit 0 value present, bit 1 flag), count (i64), then the value bytes.
// LeanEncodable says whether a request fits (a request with anything else set does not);
// EncodeLeanResult returns nullopt for a result with more than value, flag and count (send it
// with EncodeResult then). Decoding fails with kBadRequest naming the problem.
bool LeanEncodable(const MapRequest& request);
std::string EncodeLeanRequest(const MapRequest& request);
base::Result<MapRequest> DecodeLeanRequest(std::string_view bytes);
std::optional<std::string> EncodeLeanResult(const MapResult& result);
base::Result<MapResult> DecodeLeanResult(std::string_view bytes);

std::string EncodeListenerOptions(const ListenerOptions& options);
base::Result<ListenerOptions> DecodeListenerOptions(std::string_view bytes);
// ReplicaUpdate lists: see replica.h.

}  // namespace tessera::map
