#pragma once
// The streams family: Redis streams over Tessera streams (MapOp::kRedisStream,
// families/streams/src/redis_stream_ops.cc; the RESP front-end's XADD, XRANGE, XREADGROUP, ...
// in resp/src/stream_commands.cc). Both APIs share one storage: the engine keeps the stream
// records and runs the Tessera stream ops (map/stream_format.h, map/stream_storage.h); this
// family adds the Redis records and commands, and registers with the engine (Register).
//
// A Redis stream S is the Tessera stream S with one sub-stream, P = "S#0", stored as
// stream_format.h describes (so grid-cli, Stream::Info and Stream::Read see it), plus:
//   "<offset>@P"     the entry: a StoredEvent whose key is its Redis ID ("<ms>-<seq>") and whose
//                    payload is its fields and values (EncodeStreamFields)
//   "xmeta@P"        the last ID given out, the number of entries ever added, and the greatest
//                    deleted ID (0-0: as in Redis, trimming does not set it, and there is no
//                    XDEL yet) (RedisStreamMeta)
//   "xgroup:<g>@P"   group g (map::StreamGroupStateKey): its last delivered ID and offset, its
//   consumers (name, last seen,
//                    last active) and its pending entries list (offset, ID, last delivery,
//                    deliveries, consumer)
// A group is also a Tessera group of the sub-stream: its committed cursor (StreamMeta) is the
// offset below which every entry delivered to the group was acknowledged, so retention keeps
// every entry some group has not read or acknowledged, and Trim requests (MAXLEN, MINID) stop
// there.
//
// Request (MapRequest): map "__streams", key "meta@P", argument {cmd, ...}; per cmd:
//   "add"      {id: "*" | "<ms>-*" | "<ms>-<seq>", nomkstream, trim: "" | "maxlen" | "minid",
//              maxlen, minid, approximate, limit (approximate: default 10,000), max_events,
//              max_bytes, epoch}, value = EncodeStreamFields;
//              value out = the new ID (nullopt: nomkstream and no stream), flag = created,
//              count = the stream's epoch (its incarnation, families/hash "mark_stream"; a
//              stream without one takes the request's)
//   "set_epoch" {epoch}: the stream's incarnation becomes `epoch`; flag = the stream exists
//   "trim"     {trim, maxlen, minid, approximate, limit}; count = entries removed
//   "len"      count = entries; flag = the stream exists
//   "delete"   {all, keyspace_entry, epoch} (RedisStreamDeleteRequest):
//              removes every record of a stream XADD or XGROUP CREATE made (entries, meta,
//              groups, leases; not the Tessera API's dedup markers, consumer records or its
//              configuration "stream@S"); count = 1 if it existed. At most kMaxRemovals
//              (50,000) entries per call: without `all` a longer stream is refused (trim it
//              first), with `all` its oldest 50,000 go and flag = call again; trims remove at
//              most that many per command too. With an epoch, a stream of another known epoch
//              (made again since) is left alone
//   "range"    {start, end (IDs, inclusive), count (0: all), rev}; entries = [(ID, fields)]
//   "read"     {after: ID | "$", count}; entries after `after`; value = the last ID
//   "create_group" {group, id: ID | "$", mkstream}; flag = stream created
//   "destroy_group", "create_consumer", "del_consumer" {group, consumer}: count = the reply
//   "readgroup" {group, consumer, after: ">" | ID, count, noack}; entries = [(ID, fields)]; with
//              an ID, a pending entry no longer stored comes as (ID, "")
//   "ack"      {group}, keys = IDs; count = acknowledged
//   "pending"  {group}; summary: count, value = "<min> <max>", entries = [(consumer, n)];
//              with {start, end, count, consumer, idle}: entries = [(ID, "<idle> <n> <consumer>")]
//   "claim"    {group, consumer, min_idle, idle, time, retrycount, force, justid, lastid},
//              keys = IDs; entries = [(ID, fields)] claimed
//   "autoclaim" {group, consumer, min_idle, start, count, justid}; entries claimed, value =
//              the next start ID, then (space-separated) pending IDs no longer stored
//   "info_stream", "info_groups", "info_consumers" {group}: entries = [(field, value)] as the
//              RESP front-end prints them
// Errors keep Redis's texts (without "ERR "); a missing group starts with "NOGROUP ", an
// existing one with "BUSYGROUP " (kNotFound / kConflict).

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/map/map_request.h"

namespace tessera::streams {

using map::MapRequest;

// A Redis stream entry ID.
struct StreamId {
  std::uint64_t ms = 0;
  std::uint64_t seq = 0;
  auto operator<=>(const StreamId&) const = default;
  std::string Text() const { return std::to_string(ms) + "-" + std::to_string(seq); }
  static constexpr StreamId Max() { return {~std::uint64_t{0}, ~std::uint64_t{0}}; }
};

// "<ms>-<seq>", or "<ms>" with seq = missing_seq; nullopt for anything else.
std::optional<StreamId> ParseStreamId(std::string_view text, std::uint64_t missing_seq = 0);

// Fields and values as "<n>:<bytes>" each, in order.
std::string EncodeStreamFields(const std::vector<std::string_view>& fields_and_values);
// nullopt if `bytes` is not what EncodeStreamFields produces.
std::optional<std::vector<std::string_view>> DecodeStreamFields(std::string_view bytes);

// Whether the kRedisStream command `command` (argument "cmd") stores a new entry when it
// succeeds with a value (XADD): what wakes a blocked XREAD.
bool RedisStreamCommandAppends(std::string_view command);
std::string RedisStreamMetaKey(std::string_view sub);
std::string RedisStreamGroupKey(std::string_view sub, std::string_view group);

// The request that removes every record of Redis stream `key` (kRedisStream "delete" with
// {all}: a long stream goes in steps of 50,000 entries, flag = send it again). With
// `keyspace_entry` (its keyspace entry went), also a stream XADD did not make (a merged one).
// With an `epoch` (the keyspace entry's), only that incarnation of the stream (or one whose
// incarnation is not known): a stream made again since under the same key stays.
MapRequest RedisStreamDeleteRequest(std::string_view key, bool keyspace_entry = false,
                                    std::int64_t epoch = 0);

// Registers the family with the engine (map/family.h): MapOp::kRedisStream, the kind
// ValueKind::kStream (TYPE "stream") whose keyspace entry's removal removes the stream's
// records. Call before the first request of the op (a grid member and the RESP server do);
// calling it again does nothing.
void Register();

}  // namespace tessera::streams
