@0xb3c3f9dd5d49bd52;
# Wire form of the map module's values (tessera::map::MapRequest, MapResult, EntryEvent,
# ListenerOptions). Converted to and from the domain types by map_codec.cc only.
# Never reuse or renumber a field; only append. Enum-like fields are UInt8 holding the
# stable numeric codes of the C++ enums, so a newer peer's value is rejected, not misread.
# GenericRecords and Predicates travel as their own Encode() bytes in Data fields.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tessera::map::wire");

# MapRequest::options.
struct WriteOptions {
  hasTtl @0 :Bool;       # whether ttlMs is set (unset: the map's default TTL)
  ttlMs @1 :Int64;       # >0 lifetime in ms from this write, 0 never expires
  hasMaxIdle @2 :Bool;   # whether maxIdleMs is set (unset: the map's default)
  maxIdleMs @3 :Int64;   # idle limit in ms, 0 none
  keepTtl @4 :Bool;      # keep the entry's current expiry
}

# One key and its value (putAll in, getAll/query out).
struct KeyValue {
  key @0 :Data;
  value @1 :Data;
}

# One key and a processor's result record (executeOnKeys/executeOnEntries out).
struct KeyRecord {
  key @0 :Data;
  record @1 :Data;   # GenericRecord::Encode() bytes
}

struct MapRequest {
  op @0 :UInt8;               # MapOp code
  mapName @1 :Text;           # the map's name
  key @2 :Data;               # keyed ops
  value @3 :Data;             # new value (put, set, putIfAbsent, replace, replaceIfSame)
  expected @4 :Data;          # replaceIfSame, removeIfSame
  options @5 :WriteOptions;   # TTL / max-idle options of writes
  entries @6 :List(KeyValue); # putAll
  keys @7 :List(Data);        # getAll, executeOnKeys
  processor @8 :Text;         # entry processor name (executeOn*)
  argument @9 :Data;          # processor argument, GenericRecord bytes; empty = empty record
  predicate @10 :Data;        # Predicate::Encode() bytes; empty = match all
  projection @11 :UInt8;      # Projection code (query)
  transaction @12 :List(TxOp);  # transact: the operations (none of them a transact)
  transactionId @13 :Text;      # transact: the batch's id, empty = none
}

# One operation of a partition transaction (tessera::map::TxOp).
struct TxOp {
  request @0 :MapRequest;
  condition @1 :UInt8;           # TxCondition code
  conditionValue @2 :Data;       # value-equals
  conditionVersion @3 :Int64;    # version-equals
}

# Why a partition transaction did not commit (tessera::map::TxConflict).
struct TxConflict {
  index @0 :UInt32;
  mapName @1 :Text;
  key @2 :Data;
  found @3 :Text;
}

# MapResult::view.
struct EntryView {
  creationMs @0 :Int64;     # monotonic time of first write
  lastUpdateMs @1 :Int64;   # monotonic time of last write
  lastAccessMs @2 :Int64;   # monotonic time of last read or write
  expireAtMs @3 :Int64;     # TTL deadline, 0 none
  ttlMs @4 :Int64;          # TTL in force, 0 none
  maxIdleMs @5 :Int64;      # max-idle in force, 0 none
  hits @6 :Int64;           # reads since creation
  version @7 :Int64;        # writes since creation
  kind @8 :UInt8;           # ValueKind: 0 plain, 1 hash, 2 spilled hash, 3 stream
}

# MapResult::stats (see MapStats).
struct MapStats {
  entries @0 :Int64;
  memoryBytes @1 :Int64;
  hits @2 :Int64;
  misses @3 :Int64;
  gets @4 :Int64;
  puts @5 :Int64;
  removes @6 :Int64;
  expirations @7 :Int64;
  evictions @8 :Int64;
  getLatencyNs @9 :Int64;
  putLatencyNs @10 :Int64;
  removeLatencyNs @11 :Int64;
}

struct MapResult {
  hasValue @0 :Bool;                     # whether value is set (nullopt otherwise)
  value @1 :Data;                        # value of get/put/remove/...
  flag @2 :Bool;                         # boolean outcome (delete, containsKey, ...)
  count @3 :Int64;                       # putAll, size, clear
  entries @4 :List(KeyValue);            # getAll, query
  hasProcessorResult @5 :Bool;           # whether processorResult is set
  processorResult @6 :Data;              # executeOnKey result, GenericRecord bytes
  processorResults @7 :List(KeyRecord);  # executeOnKeys/executeOnEntries results
  hasView @8 :Bool;                      # whether view is set
  view @9 :EntryView;                    # getEntryView
  stats @10 :MapStats;                   # stats
  results @11 :List(MapResult);          # transact: each operation's result (committed)
  hasConflict @12 :Bool;                 # whether conflict is set
  conflict @13 :TxConflict;              # transact: the failed precondition (not committed)
  stored @14 :Bool;                      # set in a result kept in a map (EncodeStoredResult) and
                                         # in each of its results, read by no one: in canonical
                                         # form it keeps a word in every struct of a list (a
                                         # reader charges a list of empty structs a word per
                                         # element against a limit set by the message's size)
}

struct EntryEvent {
  mapName @0 :Text;       # the map the event happened in
  type @1 :UInt8;         # EntryEventType code
  key @2 :Data;           # the entry's key (empty for cleared)
  hasValue @3 :Bool;      # whether value is set
  value @4 :Data;         # new value (added/updated)
  hasOldValue @5 :Bool;   # whether oldValue is set
  oldValue @6 :Data;      # previous value (updated/removed/expired/evicted; cleared count)
  partitionId @7 :UInt32; # the partition the event happened in
}

struct ListenerOptions {
  includeValues @0 :Bool;  # deliver values with events
  types @1 :List(UInt8);   # EntryEventType codes to deliver; empty = all
  key @2 :Data;            # only events of this key; empty = every key
}

# tessera::map::ReplicaUpdate: one change to a backup's copy of a partition.
struct ReplicaUpdate {
  kind @0 :UInt8;          # 1 set, 2 delete, 3 clear partition, 4 copy complete, 5 copy set, 6 resync begin, 7 resync chunk, 8 handoff, 9 probe
  mapName @1 :Text;        # empty with kind 3: every map
  partitionId @2 :UInt32;
  key @3 :Data;
  value @4 :Data;
  ttlLeftMs @5 :Int64;     # 0 = no TTL deadline
  maxIdleMs @6 :Int64;     # 0 = none
  version @7 :UInt64;      # replica version (see replica.h); 0 = unversioned
  updateAgeMs @8 :Int64;   # set/copy set: how long before sending the entry was last written
  hits @9 :Int64;          # set/copy set: its reads on the owner
  valueKind @10 :UInt8;    # set/copy set: ValueKind of the entry (0 plain)
  entryVersion @11 :UInt32;  # set/copy set: the entry's version on the owner (0: not sent)
  digest @12 :UInt64;      # copy complete: the history digest at version (0: unknown)
}

struct ReplicaUpdates {
  updates @0 :List(ReplicaUpdate);
}

# A backup's acknowledgement of ReplicaUpdates.
struct ReplicaPoint {
  partitionId @0 :UInt32;
  version @1 :UInt64;
  digest @2 :UInt64;
}

struct ReplicaAck {
  stale @0 :List(UInt32);  # partitions whose updates it found it had missed
  points @1 :List(ReplicaPoint);  # answers to probes (kind 9)
}
