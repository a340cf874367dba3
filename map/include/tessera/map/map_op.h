#pragma once
// MapOp: every map operation's code, and its one row of properties (SpecOf). The engine, the
// codec, the client and the front-ends ask the row (is it keyed, does it write, may it be sent
// again, may a transaction carry it, ...) instead of keeping lists of their own; the row also
// holds the op's argument and result contract. Adding an op is one enumerator and one row:
// SpecOf is a switch without a default, so an op without a row does not compile (-Werror).

#include <cstdint>
#include <string_view>

namespace tessera::map {

// Stable numeric codes (they travel on the wire; append only). Contracts: SpecOf.
enum class MapOp : std::uint8_t {
  kPut = 1,
  kSet = 2,
  kGet = 3,
  kRemove = 4,
  kDelete = 5,
  kContainsKey = 6,
  kPutIfAbsent = 7,
  kReplace = 8,
  kReplaceIfSame = 9,
  kRemoveIfSame = 10,
  kSetTtl = 11,
  kGetEntryView = 12,
  kExecuteOnKey = 13,
  kRingAppend = 14,
  kRingRead = 15,
  kTransact = 16,
  kStreamAppend = 17,
  kStreamRead = 18,
  kStreamCommit = 19,
  kPutAll = 20,
  kGetAll = 21,
  kExecuteOnKeys = 22,
  kSize = 23,
  kClear = 24,
  kQuery = 25,
  kExecuteOnEntries = 26,
  kStats = 27,
  kMergeEntries = 28,
  // 29 is unused.
  kStreamLease = 30,
  kStreamGroup = 31,
  kStreamInfo = 32,
  kStreamJoin = 33,
  kStreamMerge = 34,
  kRingMerge = 35,
  kRedisStream = 36,
  kRedisKey = 37,
};

// Where an op runs.
enum class OpScope : std::uint8_t {
  kUnknown,        // not an op (a code no row has)
  kKeyed,          // on the partition of request.key
  kListedKeys,     // on the partitions of its keys (or entries), each part on its owner
  kAllPartitions,  // on every partition, the results merged
};

// How the lean codec (map_codec.h) may carry an op outside a transaction.
enum class OpLean : std::uint8_t {
  kNo,       // Cap'n Proto only
  kKeyed,    // the head alone (op, map, key, value, options)
  kEntries,  // the head, entries, keys and integer arguments (a stream append)
};

// Which latency histogram an op counts in (map metrics).
enum class OpLatency : std::uint8_t { kNone, kGet, kPut, kRemove };

struct MapOpSpec {
  std::string_view name = "unknown";  // "put", "putIfAbsent", ... for logs and errors
  OpScope scope = OpScope::kUnknown;
  // Changes entries at a caller's request: a quorum map refuses it without its quorum, and
  // the transaction marker map refuses it. kMergeEntries is not counted (it heals a split).
  bool writes = false;
  // May be sent again after an unknown outcome (a lost connection): reads, and writes whose
  // repetition changes nothing more.
  bool retryable = false;
  bool in_transaction = false;  // a partition transaction may carry it (TxOp)
  bool stream = false;          // works on a stream's sub-stream (stream metadata, wake-ups)
  OpLean lean = OpLean::kNo;
  bool lean_in_transaction = false;  // a lean transaction may carry it
  OpLatency latency = OpLatency::kNone;
};

// The row of `op`; a code no row has gets scope kUnknown and the name "unknown".
constexpr MapOpSpec SpecOf(MapOp op) {
  using enum OpScope;
  switch (op) {
    // Keyed ops of the Java-style API. value = the old value.
    case MapOp::kPut:
      return {.name = "put",
              .scope = kKeyed,
              .writes = true,
              .in_transaction = true,
              .lean = OpLean::kKeyed,
              .lean_in_transaction = true,
              .latency = OpLatency::kPut};
    // Like put, no old value returned.
    case MapOp::kSet:
      return {.name = "set",
              .scope = kKeyed,
              .writes = true,
              .in_transaction = true,
              .lean = OpLean::kKeyed,
              .lean_in_transaction = true,
              .latency = OpLatency::kPut};
    // value = the current value.
    case MapOp::kGet:
      return {.name = "get",
              .scope = kKeyed,
              .retryable = true,
              .in_transaction = true,
              .lean = OpLean::kKeyed,
              .lean_in_transaction = true,
              .latency = OpLatency::kGet};
    // value = the old value.
    case MapOp::kRemove:
      return {.name = "remove",
              .scope = kKeyed,
              .writes = true,
              .in_transaction = true,
              .lean = OpLean::kKeyed,
              .lean_in_transaction = true,
              .latency = OpLatency::kRemove};
    // flag = whether it existed.
    case MapOp::kDelete:
      return {.name = "delete",
              .scope = kKeyed,
              .writes = true,
              .in_transaction = true,
              .lean = OpLean::kKeyed,
              .lean_in_transaction = true,
              .latency = OpLatency::kRemove};
    // flag.
    case MapOp::kContainsKey:
      return {.name = "containsKey",
              .scope = kKeyed,
              .retryable = true,
              .in_transaction = true,
              .lean = OpLean::kKeyed,
              .lean_in_transaction = true,
              .latency = OpLatency::kGet};
    // value = the existing value (not stored) or nullopt (stored).
    case MapOp::kPutIfAbsent:
      return {.name = "putIfAbsent",
              .scope = kKeyed,
              .writes = true,
              .in_transaction = true,
              .lean = OpLean::kKeyed,
              .lean_in_transaction = true,
              .latency = OpLatency::kPut};
    // Only if present; value = the old value, or nullopt (nothing replaced).
    case MapOp::kReplace:
      return {.name = "replace",
              .scope = kKeyed,
              .writes = true,
              .in_transaction = true,
              .lean = OpLean::kKeyed,
              .lean_in_transaction = true,
              .latency = OpLatency::kPut};
    // Only if current == expected; flag = replaced.
    case MapOp::kReplaceIfSame:
      return {.name = "replaceIfSame",
              .scope = kKeyed,
              .writes = true,
              .in_transaction = true,
              .lean_in_transaction = true,
              .latency = OpLatency::kPut};
    // Only if current == expected; flag = removed.
    case MapOp::kRemoveIfSame:
      return {.name = "removeIfSame",
              .scope = kKeyed,
              .writes = true,
              .in_transaction = true,
              .lean_in_transaction = true,
              .latency = OpLatency::kRemove};
    // Changes the expiry of an existing entry (options.ttl_ms; 0 = persist); flag.
    case MapOp::kSetTtl:
      return {.name = "setTtl",
              .scope = kKeyed,
              .writes = true,
              .in_transaction = true,
              .lean_in_transaction = true};
    // view = metadata (expiry, hits, ...), value = the current value.
    case MapOp::kGetEntryView:
      return {.name = "getEntryView",
              .scope = kKeyed,
              .retryable = true,
              .in_transaction = true,
              .lean_in_transaction = true,
              .latency = OpLatency::kGet};
    // processor_result.
    case MapOp::kExecuteOnKey:
      return {.name = "executeOnKey", .scope = kKeyed, .writes = true, .in_transaction = true};
    // Ring buffers (a reliable topic's storage, map_ops_ring.cc): key = "ring@R" for ring R;
    // its messages are the entries "<sequence>@R" of the same partition. Append: keys = the
    // messages; argument {capacity, overflow}; options.ttl_ms per message; count = the first
    // sequence stored (-1: none), flag = stored any, value = "HEAD TAIL", entries =
    // [("discarded", N)].
    case MapOp::kRingAppend:
      return {.name = "ringAppend", .scope = kKeyed, .writes = true};
    // argument {from, max}; entries = [(sequence, message)] from max(from, oldest), count = the
    // oldest readable sequence, flag = from was lost (below the oldest), value = "HEAD TAIL".
    case MapOp::kRingRead:
      return {.name = "ringRead", .scope = kKeyed, .retryable = true};
    // Partition transaction (map_service_tx.cc): key = the partition key, transaction = the
    // operations, all on keys of that key's partition, applied all-or-nothing on its owner.
    // flag = committed; results = each operation's result (committed); conflict = the first
    // precondition that failed (not committed: nothing applied). See TxOp. Its operations are
    // judged by their own rows (quorum, marker map); the lean codec carries it by its own rule.
    case MapOp::kTransact:
      return {.name = "transact", .scope = kKeyed, .writes = true};
    // Event streams (map_ops_stream.cc, formats in stream_format.h): key = "meta@P" for
    // sub-stream P unless noted. Append: entries = [(event key, payload)], keys = event ids
    // (none, or one per event; "" = no id); argument {max_events, max_bytes, max_age_ms,
    // dedup_ms}; all or nothing: entries out = [(offset, "dup" or "")] per event, count =
    // events stored, value = "HEAD TAIL". kOverloaded when it does not fit (naming the slowest
    // group).
    case MapOp::kStreamAppend:
      return {.name = "streamAppend",
              .scope = kKeyed,
              .writes = true,
              .stream = true,
              .lean = OpLean::kEntries};
    // argument {from, max, max_bytes}; entries = [(offset, stored event)] from max(from, head);
    // count = head; flag = from < head (lost); value = "HEAD TAIL". With wait_ms > 0 (and
    // wait_group, optional wait_consumer) it is a long poll instead, answered without entries:
    // value = "ready" once an event at `from` or later is stored (at once if it is), "timeout"
    // after wait_ms (at most kMaxStreamWaitMs); a newer wait of the same group and consumer on
    // the sub-stream answers the older one "timeout". With wait_read = N > 0 as well, "ready"
    // comes as the plain read of up to N events from `from` (counted delivered to wait_group)
    // instead.
    case MapOp::kStreamRead:
      return {.name = "streamRead", .scope = kKeyed, .retryable = true, .stream = true};
    // argument {group, consumer, offset, max_age_ms, ttl_ms, epoch}: the group's cursor becomes
    // max(cursor, offset) if `consumer` holds its lease, and with `epoch` (optional) holds it
    // still in that epoch (kConflict if not: the lease lapsed or changed hands since, even back
    // to `consumer`), and with ttl_ms the lease is renewed for that long; count = the cursor.
    case MapOp::kStreamCommit:
      return {.name = "streamCommit",
              .scope = kKeyed,
              .writes = true,
              .retryable = true,
              .stream = true};
    // argument {group, consumer, ttl_ms, release}: take or renew (release: give back) the
    // group's lease on the sub-stream; flag = held by consumer, value = the holder, count = the
    // group's cursor, entries = [("epoch", N)] when held: N counts the takings of the lease (a
    // renewal keeps it), for kStreamCommit's fence.
    case MapOp::kStreamLease:
      return {.name = "streamLease",
              .scope = kKeyed,
              .writes = true,
              .retryable = true,
              .stream = true};
    // argument {group, action: "oldest" | "latest" | "delete", max_age_ms}: create the group
    // with its cursor before the oldest stored event or at the tail, or delete it; flag =
    // changed, count = its cursor.
    case MapOp::kStreamGroup:
      return {.name = "streamGroup",
              .scope = kKeyed,
              .writes = true,
              .retryable = true,
              .stream = true};
    // value = StreamMetaText; entries = [(group, "CURSOR OLDEST_MS HOLDER")], OLDEST_MS = the
    // append time of its oldest uncommitted event (0: none), HOLDER = the lease holder or "-";
    // count = the append time of the head event.
    case MapOp::kStreamInfo:
      return {.name = "streamInfo", .scope = kKeyed, .retryable = true, .stream = true};
    // key = "consumers:<g>@S"; argument {consumer, ttl_ms, leave}: record the consumer as live
    // until now + ttl_ms (leave: remove it); entries = the live consumers [(consumer,
    // expiry_ms)] sorted by name.
    case MapOp::kStreamJoin:
      return {
          .name = "streamJoin", .scope = kKeyed, .writes = true, .retryable = true, .stream = true};
    // Split-brain merge of one sub-stream (merge.h): entries = the merging side's [(offset,
    // stored event)] in offset order, keys = its groups; appends every event the owner lacks
    // (not the same bytes at the same offset, id not in the dedup window) with its id and
    // time, beyond the limits; creates missing groups at the oldest event; argument
    // {dedup_ms}; count = appended, entries = [("discarded", N)].
    case MapOp::kStreamMerge:
      return {.name = "streamMerge", .scope = kKeyed, .writes = true, .stream = true};
    // Split-brain merge of one ring (key "ring@R"): entries = the merging side's [(sequence,
    // EncodeMergeEntry(message, its TTL left))] in order; appends every message the owner
    // lacks (not the same bytes at the same sequence) after its tail, beyond the capacity;
    // count = appended, entries = [("discarded", N)].
    case MapOp::kRingMerge:
      return {.name = "ringMerge", .scope = kKeyed, .writes = true};
    // The streams family's op (families/streams, registered with family.h): a command on a
    // Redis stream's one sub-stream, key = "meta@S#0", argument {cmd, ...}; see the family's
    // header for each command's arguments and result.
    case MapOp::kRedisStream:
      return {.name = "redisStream", .scope = kKeyed, .writes = true, .stream = true};
    // The hash family's op (families/hash, registered with family.h): a command on the RESP
    // keyspace map, key = the Redis key, processor = the command; see families/hash (the
    // family's writes() says which of them write).
    case MapOp::kRedisKey:
      return {.name = "redisKey", .scope = kKeyed, .writes = true, .in_transaction = true};
    // Multi-partition ops. entries in; count = the number written.
    case MapOp::kPutAll:
      return {.name = "putAll", .scope = kListedKeys, .writes = true, .latency = OpLatency::kPut};
    // keys in; entries out (missing keys omitted).
    case MapOp::kGetAll:
      return {
          .name = "getAll", .scope = kListedKeys, .retryable = true, .latency = OpLatency::kGet};
    // keys in; processor_results.
    case MapOp::kExecuteOnKeys:
      return {.name = "executeOnKeys", .scope = kListedKeys, .writes = true};
    // count.
    case MapOp::kSize:
      return {.name = "size", .scope = kAllPartitions, .retryable = true};
    // count = the entries removed.
    case MapOp::kClear:
      return {.name = "clear", .scope = kAllPartitions, .writes = true};
    // predicate + projection; entries (keys only: values empty).
    case MapOp::kQuery:
      return {.name = "query", .scope = kAllPartitions, .retryable = true};
    // predicate; processor_results.
    case MapOp::kExecuteOnEntries:
      return {.name = "executeOnEntries", .scope = kAllPartitions, .writes = true};
    // stats.
    case MapOp::kStats:
      return {.name = "stats", .scope = kAllPartitions, .retryable = true};
    // entries in: (key, EncodeMergeEntry) from a member that leaves its cluster (merge.h),
    // applied by the map's merge policy; count = the entries applied, entries out =
    // [("discarded", N)] per partition.
    case MapOp::kMergeEntries:
      return {.name = "mergeEntries", .scope = kListedKeys};
  }
  return {};
}

// True for operations that address one key (and so one partition).
constexpr bool MapOpIsKeyed(MapOp op) { return SpecOf(op).scope == OpScope::kKeyed; }
// "put", "putIfAbsent", ... for logs and errors ("unknown" for a code no op has).
constexpr std::string_view MapOpName(MapOp op) { return SpecOf(op).name; }

}  // namespace tessera::map
