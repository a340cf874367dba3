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

#include <cstddef>
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
// The same result in a compact form, for results kept in a map (a transaction id's marker):
// canonical Cap'n Proto, whose structs end at their last non-zero field, with the `stored`
// bit set in each so that no struct in a list is empty (a reader charges an empty one a word
// against its limit, which follows the message's size: a thousand of them would not be
// read). DecodeResult, of this build or an earlier one, reads it as it reads EncodeResult's.
// A transaction of three sets: 112 bytes against 344. Costs the canonical copy
// (wire::CanonicalFlatString, slower than EncodeResult), so replies use EncodeResult.
std::string EncodeStoredResult(const MapResult& result);

std::string EncodeEvent(const EntryEvent& event);
base::Result<EntryEvent> DecodeEvent(std::string_view bytes);

// Lean encoding (lean frames; wire/frame_codec.h) of the hot operations. Protocol version 2:
// get, set, put, putIfAbsent, remove, delete, containsKey, replace, with the map name, key,
// value and write options only. Version 3 adds the stream append (kStreamAppend) with its
// entries (events), keys (event ids) and integer arguments (the stream's limits), and results
// with entries (offsets). Version 4 adds the partition transaction (kTransact) whose
// operations are keyed ones, replaceIfSame, removeIfSame, setTtl or getEntryView with any
// precondition (not entry processors), and results with nested results and a conflict.
// Little-endian, no Cap'n Proto; a string is a u32 length + bytes:
//   request: op (1 byte), flags (1: bit 0 ttl, bit 1 max-idle, bit 2 keep_ttl, bit 3
//            entries, bit 4 keys, bit 5 integer arguments, bit 6 transaction, bit 7
//            expected), then map name, key and value, then ttl_ms and max_idle_ms as i64
//            when their bit is set, then, when set and never empty: entries (u32 count,
//            then key and value each), keys (u32 count, then each), arguments (u8 count,
//            then name and i64 value each); a transaction: its id, u32 count, then each
//            operation as a request of its own without bits 3-6 (op, flags, strings,
//            times), then its precondition (u8), the precondition's value (a string) for
//            value-equals or version (i64) for version-equals, and `expected` (a string)
//            when bit 7 is set;
//   result:  flags (1: bit 0 value present, bit 1 flag, bit 2 entries, bit 3 results, bit
//            4 conflict), count (i64), then the entries when set (u32 count, then both
//            strings each), the results when set (u32 count, then each as a string holding
//            a lean result), the conflict when set (u32 index, then map, key and found),
//            then the value bytes.
// LeanEncodable says whether a request fits the given negotiated version (a request with
// anything else set does not, nor a transaction of more than 4,096 operations);
// EncodeLeanResult returns nullopt for a result with more than value, flag, count, entries
// and a transaction's results and conflict (send it with EncodeResult then; a version-2
// request never has a result with entries, nor one before version 4 results or a conflict).
// Decoding fails with kBadRequest naming the problem.
bool LeanEncodable(const MapRequest& request, std::uint32_t protocol_version);
// `room`: zero bytes before the encoding, in the same allocation (a frame's header, filled in
// place by wire::SealLeanFrame).
std::string EncodeLeanRequest(const MapRequest& request, std::size_t room = 0);
// The same bytes EncodeLeanRequest writes for a keyed request (get, set, put, putIfAbsent,
// remove, delete, containsKey, replace) with only these fields set, from the fields
// themselves: a caller with them at hand (the client's async map calls) builds no
// MapRequest. REQUIRES: `op` is one of those.
std::string EncodeLeanKeyed(MapOp op, std::string_view map_name, std::string_view key,
                            std::string_view value, const WriteOptions& options,
                            std::size_t room = 0);
// The same into `out` (replaced; its capacity is reused: a caller's scratch buffer).
void EncodeLeanKeyedInto(std::string& out, MapOp op, std::string_view map_name,
                         std::string_view key, std::string_view value, const WriteOptions& options,
                         std::size_t room = 0);
base::Result<MapRequest> DecodeLeanRequest(std::string_view bytes);
// The same into `request` (cleared first), which keeps its strings' capacity, its entries'
// and event ids' strings, and its integer arguments when the next request has the same names
// in the same order (a stream's limits, sent with every append): a caller that decodes one
// request after another into one MapRequest allocates for none after the first few.
// On failure `request` holds whatever was decoded before the problem.
base::Result<void> DecodeLeanRequestInto(std::string_view bytes, MapRequest& request);
// The map name and key of a lean keyed request (get, set, ...; not a stream append), as
// views into `bytes`, without decoding the rest; nullopt when it is not one or does not
// parse that far. For hints only (MapService::PrefetchKeys): the request itself is decoded
// and checked when it runs.
struct LeanKey {
  std::string_view map_name;
  std::string_view key;
};
std::optional<LeanKey> PeekLeanKey(std::string_view bytes);
std::optional<std::string> EncodeLeanResult(const MapResult& result, std::size_t room = 0);
// The same into `out` (replaced; its capacity is reused); false, and `out` untouched, where
// EncodeLeanResult gives nullopt.
bool EncodeLeanResultInto(std::string& out, const MapResult& result, std::size_t room = 0);
base::Result<MapResult> DecodeLeanResult(std::string_view bytes);
// The same from bytes the caller gives up (a frame's payload): the value keeps their
// allocation (what is before it is erased) instead of being copied into one of its own.
base::Result<MapResult> DecodeLeanResult(std::string&& bytes);

std::string EncodeListenerOptions(const ListenerOptions& options);
base::Result<ListenerOptions> DecodeListenerOptions(std::string_view bytes);
// ReplicaUpdate lists: see replica.h.

}  // namespace tessera::map
