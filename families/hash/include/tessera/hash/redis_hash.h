#pragma once
// The hash family: Redis hashes and the key commands that span kinds, in the RESP keyspace
// (MapOp::kRedisKey, families/hash/src/redis_hash.cc; the RESP front-end's HSET, HGET, ..., RENAME
// in resp/src).
//
// The keyspace is one map (the RESP front-end's "default"): every Redis key is one entry of it,
// whose ValueKind (map_request.h) says what it holds. A hash H is the entry H:
//   - kHash while small, as Redis keeps a listpack: at most kHashMaxInlineFields fields, each
//     field and value at most kHashMaxInlineBytes bytes. The value holds the fields and values
//     in insertion order, each as a varint length and its bytes (EncodeHashFields). One
//     one-field hash is one entry: about the size of a string key.
//   - kSpilledHash beyond that (and it stays so, as in Redis): the entry's value is empty and
//     the fields are the entries of map HashFieldMap(keyspace, H) in the same partition, so a
//     write to a large hash changes (and replicates) one field, not the whole hash. The field
//     map is changed only through the hash (OpContext::maps): the hash's removal, expiry,
//     eviction, or replacement by a SET clears it; it keeps no TTL of its own.
// The hash's TTL, version (WATCH) and hits are its entry's; an HSET or HDEL bumps the version.
//
// Request: map = the keyspace map, key = H, the command in MapRequest::processor, its options
// in the argument; per command:
//   "hset"     entries = [(field, value)], {nx}: sets them (nx: only absent fields); count =
//              fields added
//   "hget"     keys = fields; entries = [(field, value)] of those present, in the keys' order
//   "hdel"     keys = fields; count = removed; the hash goes when its last field does
//   "hexists"  keys = [field]; flag
//   "hlen"     count
//   "hstrlen"  keys = [field]; count = the value's length (0: absent)
//   "hgetall"  entries = every (field, value) (insertion order while inline)
//   "hincrby"  keys = [field], {delta}; count = the new value. kBadRequest "hash value is not
//              an integer" / "increment or decrement would overflow" (Redis's texts)
//   "merge"    entries = [(field, value)] of a spilled hash a member leaving its cluster took out
//              (merge.h): sets the fields the owner's hash lacks; a key of another kind there
//              keeps it; count = applied, entries out = [("discarded", N)]
//   "mark_stream" {epoch}: the keyspace entry of stream H (kind kStream, value = the epoch, the
//              stream's incarnation, which the stream's appends record too), sent by the RESP
//              front-end with the XADD that may make the stream (and after XGROUP CREATE
//              MKSTREAM); flag = made, value = the entry's epoch; kWrongType when H holds a
//              string or hash. When that entry goes (DEL, expiry, SET over it), the owner
//              removes that incarnation of the stream too (OpContext::follow_ups)
//   "unmark_stream" {epoch}: removes the entry if it is still of kind stream with that epoch
//              (the XADD sent with the mark failed); flag = removed
//   "rename"   {to, nx}: moves the entry (any kind but a stream, with its TTL and a spilled
//              hash's fields) to key `to` of the same partition, replacing what `to` held
//              (nx: only if `to` is absent); flag = moved, kNotFound "no such key" when H is
//              absent, kBadRequest when `to` is in another partition or H is a stream
// A hash command on a key of another kind fails kWrongType (map::WrongKindError). With no
// OpContext::maps (an operation run straight on a store), a hash never spills.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/map/family.h"
#include "tessera/map/map_request.h"

namespace tessera::hash {

using map::IsWrongKindError;  // family.h
using map::WrongKindError;

// Registers the family (MapOp::kRedisKey, kinds kHash and kSpilledHash) with the engine
// (map/family.h); idempotent. A grid member calls it before it starts.
void Register();

inline constexpr std::size_t kHashMaxInlineFields = 128;  // Redis's hash-max-listpack-entries
inline constexpr std::size_t kHashMaxInlineBytes = 64;    // Redis's hash-max-listpack-value

// Whether the kRedisKey command `command` changes the keyspace (unknown ones count as writes);
// reads and "merge" do not, and a quorum map serves them without its quorum.
bool RedisKeyCommandWrites(std::string_view command);
// The map that holds the fields of spilled hash `key` of keyspace map `keyspace`, and back:
// (keyspace, key) of such a map's name, nullopt for any other name.
std::string HashFieldMap(std::string_view keyspace, std::string_view key);
std::optional<std::pair<std::string, std::string>> ParseHashFieldMap(std::string_view name);

using HashFields = std::vector<std::pair<std::string_view, std::string_view>>;
std::string EncodeHashFields(const HashFields& fields);
// nullopt if `bytes` is not what EncodeHashFields produces. The views point into `bytes`.
std::optional<HashFields> DecodeHashFields(std::string_view bytes);

}  // namespace tessera::hash
