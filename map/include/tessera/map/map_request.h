#pragma once
// MapRequest / MapResult: every map operation as one value, the common currency of the
// embedded proxy, the native wire protocol and the RESP front-end. A front-end builds a
// MapRequest, MapService executes it on the owning shard(s), and the result travels back.
// Key-level operations run on the key's partition; the others fan out to all partitions and
// merge (SpecOf(op).scope, map_op.h).
//
// TTL rule (one rule for every write):
//   - options.ttl_ms set: >0 the entry lives that long from this write; 0 it never expires.
//   - options.ttl_ms unset: the map's default TTL applies (MapConfig::default_ttl_ms; 0 = none).
//   - options.keep_ttl: the entry keeps its current expiry (new entries use the default).
//   max_idle_ms follows the same rule: an entry not read or written for that long expires.
//   Neither may exceed kMaxExpiryMs (about 68 years); a longer one is refused.
//   Expiry is checked on every access; a background sweeper reclaims expired entries.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/base/clock.h"
#include "tessera/map/map_op.h"
#include "tessera/map/predicate.h"
#include "tessera/record/generic_record.h"

namespace tessera::map {

// The internal map reliable topics keep their rings in (grid::ReliableTopic).
inline constexpr const char* kRingMap = "__reliable_topics";

// What kRingAppend does when the ring holds `capacity` unexpired messages.
enum class RingOverflow : std::uint8_t {
  kError = 0,          // fail with kOverloaded (messages already stored by the call stay)
  kDiscardOldest = 1,  // drop the oldest message
  kDiscardNewest = 2,  // do not store the new message (counted in "discarded")
};

// The longest a kStreamRead with wait_ms is parked on the owner.
inline constexpr std::int64_t kMaxStreamWaitMs = 2'000;

// The longest TTL or idle limit a map keeps: a record holds durations in whole seconds up to
// 2^31 - 1 (record_store.cc), about 68 years. Longer ones are refused (ValidateRequest).
inline constexpr base::Millis kMaxExpiryMs = 2'147'483'647LL * 1000;

struct WriteOptions {
  std::optional<base::Millis> ttl_ms;       // see the TTL rule above
  std::optional<base::Millis> max_idle_ms;  // nullopt: map default; 0: no idle limit
  bool keep_ttl = false;
  friend bool operator==(const WriteOptions&, const WriteOptions&) = default;
};

enum class Projection : std::uint8_t { kEntries = 0, kKeys = 1, kValues = 2 };

struct TxOp;

struct MapRequest {
  MapOp op = MapOp::kGet;
  std::string map_name;
  std::string key;
  std::string value;     // new value (put, set, putIfAbsent, replace, replaceIfSame)
  std::string expected;  // replaceIfSame, removeIfSame
  WriteOptions options;
  std::vector<std::pair<std::string, std::string>> entries;  // putAll
  std::vector<std::string> keys;                             // getAll, executeOnKeys
  std::string processor;                                     // executeOn*
  record::GenericRecord argument;                            // executeOn*
  Predicate predicate;                                       // query, executeOnEntries
  Projection projection = Projection::kEntries;              // query
  std::vector<TxOp> transaction;                             // transact: the operations
  // transact: the batch's id (empty: none). The owner remembers the ids of committed batches
  // for MapServiceOptions::transaction_id_ttl_ms, in the same partition: a batch sent again
  // with the same id (a client retrying after losing the connection) is not applied again,
  // and gets the first run's result.
  std::string transaction_id;
  // Run on this member only, over the partitions it owns; never forward (set on requests
  // another member forwarded here). Not encoded: it is a property of where a request came from.
  bool local_only = false;

  // Sets every field back to its default but keeps the strings' and vectors' buffers, for a
  // caller that reuses one request per operation (RESP builds each keyed command in one).
  // Cheaper than `*this = MapRequest{}`, which costs noticeably more per RESP command. A
  // field added above must be cleared here too (a size check in the .cc fails the build until
  // it is).
  void Clear();
};

// A precondition of one operation of a partition transaction, checked against the entry as
// the batch's earlier operations left it. An expired entry is absent.
enum class TxCondition : std::uint8_t {
  kNone = 0,
  kAbsent = 1,        // no live entry under the key
  kPresent = 2,       // a live entry under the key
  kValueEquals = 3,   // a live entry whose value is condition_value
  kVersionEquals = 4  // a live entry whose version (EntryView::version) is condition_version;
                      // condition_version 0 means absent
};

// One operation of a partition transaction: a keyed request (put, set, get, remove, delete,
// containsKey, putIfAbsent, replace, replaceIfSame, removeIfSame, setTtl, getEntryView,
// executeOnKey) on any map, with an optional precondition. A map that does not exist has no
// entries: its keys are absent.
struct TxOp {
  MapRequest request;
  TxCondition condition = TxCondition::kNone;
  std::string condition_value;         // kValueEquals
  std::int64_t condition_version = 0;  // kVersionEquals
};

// Why a partition transaction did not commit: the first operation whose precondition failed.
struct TxConflict {
  std::uint32_t index = 0;  // the operation's position in the batch
  std::string map_name;
  std::string key;
  std::string found;  // what was there: "absent", "present", or "value of N bytes, version V"
  friend bool operator==(const TxConflict&, const TxConflict&) = default;
};

// What an entry's value holds. The maps of the Java-style API hold plain values only; the
// RESP front-end keeps every Redis key in one map (its keyspace, "default"), where a key may
// hold a string (plain), a hash (its fields, families/hash) or a stream (a marker: the stream's
// records are in kStreamMap). The kind travels with the entry to backups, migration copies and
// split-brain merges. Operations that read a value as bytes (get, put and remove, which
// return the old value, replaceIfSame, removeIfSame, executeOn*) refuse an entry of another
// kind with kWrongType (WrongKindError, family.h); getAll, queries with values and
// executeOnEntries skip it; a keys-only query lists it with its ValueKindName as the value
// (plain keys have ""). set, putAll, delete, containsKey, setTtl, replace and putIfAbsent act
// on any kind (the last two answer "" for another kind's value), and getEntryView gives its
// kind and "" as its value; so a set replaces a hash with a string, as Redis's SET does.
// Kinds other than kPlain belong to a family (family.h), which gives their behaviour; their
// numbers are fixed here because they travel on the wire.
enum class ValueKind : std::uint8_t {
  kPlain = 0,
  kHash = 1,         // families/hash: fields inline in the value
  kSpilledHash = 2,  // families/hash: fields in the hash's companion map
  kStream = 3,       // a Redis stream's keyspace entry (families/streams)
};
// How many kinds this release knows (the numbers above are 0 .. kValueKindCount - 1): a
// replica update naming another is refused.
inline constexpr std::uint8_t kValueKindCount = 4;
// The name Redis's TYPE gives it: "string" for kPlain, else its family's kind_name ("hash",
// "stream"; "unknown" for a kind no registered family owns). Defined in family.cc.
std::string_view ValueKindName(ValueKind kind);

// Metadata of one entry.
struct EntryView {
  base::Millis creation_ms = 0;     // monotonic time of first write
  base::Millis last_update_ms = 0;  // monotonic time of last write
  base::Millis last_access_ms = 0;  // monotonic time of last read or write
  base::Millis expire_at_ms = 0;    // monotonic deadline from TTL; 0 = none
  base::Millis ttl_ms = 0;          // the TTL in force (0 = none)
  base::Millis max_idle_ms = 0;     // the max-idle in force (0 = none)
  std::int64_t hits = 0;            // reads since creation
  std::int64_t version = 0;         // incremented on every write
  ValueKind kind = ValueKind::kPlain;
  friend bool operator==(const EntryView&, const EntryView&) = default;
};

// Per-map statistics (merged over partitions for kStats).
struct MapStats {
  std::int64_t entries = 0;
  std::int64_t memory_bytes = 0;  // estimate of the memory the entries cost
  std::int64_t hits = 0;          // reads that found an entry
  std::int64_t misses = 0;
  std::int64_t gets = 0, puts = 0, removes = 0;
  std::int64_t expirations = 0, evictions = 0;
  std::int64_t get_latency_ns = 0, put_latency_ns = 0, remove_latency_ns = 0;  // totals
  friend bool operator==(const MapStats&, const MapStats&) = default;
};

struct MapResult {
  std::optional<std::string> value;
  bool flag = false;
  std::int64_t count = 0;
  std::vector<std::pair<std::string, std::string>> entries;
  std::optional<record::GenericRecord> processor_result;
  std::vector<std::pair<std::string, record::GenericRecord>> processor_results;
  std::optional<EntryView> view;
  MapStats stats;
  std::vector<MapResult> results;      // transact: each operation's result, when committed
  std::optional<TxConflict> conflict;  // transact: why it did not commit
};

}  // namespace tessera::map
