#pragma once
// MapService: the coordinator of every map on a member. It validates a MapRequest, routes it
// to the shard that owns the key's partition (or fans it out to all shards and merges), runs
// the shard-local operation against the partition's RecordStore, and reports the result.
// Front-ends (native protocol, RESP, the embedded proxy) only build requests and reply.
//
// Shard: each (map, partition) store lives on shard partition % N and is touched only there.
// Thread-safety: every public method is safe to call from any thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/base/clock.h"
#include "tessera/base/error.h"
#include "tessera/base/unique_function.h"
#include "tessera/map/map_request.h"
#include "tessera/map/merge.h"
#include "tessera/map/replica.h"
#include "tessera/partition/partitioner.h"
#include "tessera/runtime/shard_set.h"

namespace spdlog {
class logger;
}

namespace tessera::map {

class EntryProcessorRegistry;

// Whether and how a map's writes go to the member's log (MapService::OpenLog). kNone: memory
// only. kPeriodic: a write is acknowledged once its record was handed to the OS (it survives
// the process being killed) and synced with the rest every MapServiceOptions::log_sync_ms (a
// power cut loses at most that much). kAlways: acknowledged only after its record was synced
// (fdatasync, one for every write that arrived meanwhile: group commit). Without a log, all
// three are kNone.
enum class Persistence : std::uint8_t { kNone = 0, kPeriodic = 1, kAlways = 2 };
std::string_view PersistenceName(Persistence p);  // "none", "periodic", "always"

// Per-map settings. A map without explicit config uses MapServiceOptions::default_config.
struct MapConfig {
  base::Millis default_ttl_ms = 0;       // 0 = entries never expire unless a write says so
  base::Millis default_max_idle_ms = 0;  // 0 = no idle limit
  // Max entries in the map on this member (0 = unbounded). Enforced per partition as
  // ceil(max_entries / partition_count); beyond it the approximately least recently used
  // entry is evicted (sampled LRU, like Redis/Hazelcast).
  std::int64_t max_entries = 0;
  // In a cluster, how this map's writes reach the partition's backups. false (default):
  // synchronously, a call returns only after every backup acknowledged it. true:
  // asynchronously, a call returns once the owner applied it and the backups follow; faster,
  // but a write acknowledged just before its owner dies can be lost. Either way a backup
  // that missed an update is re-copied.
  bool async_backups = false;
  // After a split brain, how the merging side's entries are applied here (merge.h).
  MergePolicy merge_policy = MergePolicy::kPutIfAbsent;
  // Quorum: writes need at least this many members in this member's cluster (0 or 1 = none).
  // The minority side of a network partition then fails writes with kNoQuorum instead of
  // accepting writes that the merge would discard. Reads are always served.
  std::uint32_t min_cluster_size = 0;
  // With a log (MapService::OpenLog): see Persistence. Internal maps ("__": streams, reliable
  // topics, transaction ids, the framework's outbox, inbox, dead letters and sagas) are kAlways
  // whenever there is a log; a companion map (a hash's fields, a stream's entries) is as its
  // owner's map.
  Persistence persistence = Persistence::kNone;
};

struct MapServiceOptions {
  // Maps without a configuration of their own (Configure). Internal maps ("__" names: streams,
  // reliable topics, the framework's outbox, inbox and sagas, ...) take only its
  // min_cluster_size: a member without its quorum writes none of its bookkeeping either.
  MapConfig default_config;
  base::Millis sweep_interval_ms = 20;  // background expiry sweep period per shard
  std::int64_t sweep_budget_per_tick =
      4000;  // entries examined per shard per tick (bounds the pause)
  // A whole-map request that writes nothing (query, size, DBSIZE, KEYS) reads at most about
  // this many entries of a shard per task: a read of a shard's stores up to this size runs in
  // one task, in order with the shard's other work; a larger one goes on in the next task once
  // it has read that many, behind what reached the shard meanwhile, and its remaining
  // partitions may then show writes the shard received after it (a scan of a large map is not
  // atomic, as it never was across members). Migration copies go out in tasks of about as
  // many entries too.
  std::int64_t scan_entries_per_task = 4096;
  // Partition transactions (MapOp::kTransact): the most operations one batch may hold, and how
  // long the owner remembers the id of a committed batch (MapRequest::transaction_id) so that
  // the same batch sent again is not applied twice.
  std::size_t max_transaction_ops = 1000;
  // Each remembered id costs a marker entry (about 500 bytes for a 3-set batch; its encoded
  // result is 408): at R committed batches per second the owners hold R x ttl of them.
  base::Millis transaction_id_ttl_ms = 60'000;
  // The cluster's failure timeout (MemberOptions::failure_timeout_ms): a member cut off from
  // the others applies writes on its own copy for this long before its cluster shrinks, its
  // backups unreachable (the writes fail, "applied on the owner but its backup did not confirm
  // it"). A quorum map leaving its cluster (LeaveCluster) does not take those out.
  base::Millis failure_timeout_ms = 5'000;
  // A member that newly holds a partition serves nothing of it until its migration copy
  // arrived, for at most this long: then it serves and backs up what it has (possibly
  // nothing; logged), for a source that died or a copy lost for good. Migration copies leave
  // a source about scan_entries_per_task entries per shard task.
  base::Millis migration_copy_wait_ms = 10'000;
  // With a log: how long a kPeriodic write may wait for its fdatasync (Persistence).
  base::Millis log_sync_ms = 1000;
  // With a log: a shard's log segments end past this size; compaction deletes whole segments.
  std::uint64_t log_segment_bytes = 64ull << 20;
  // With a log: a shard snapshots its partitions into its log (one partition per slice between
  // requests, no fork, no pause) once it logged more than max(log_compact_bytes, what its last
  // snapshot took) since its last snapshot began, and then deletes the segments the snapshot
  // superseded. Disk use per shard stays within about 2 L + max(L, log_compact_bytes) + what
  // is written while a round runs + two segments, L its live data (docs/operations.md,
  // "Persistence").
  std::uint64_t log_compact_bytes = 64ull << 20;
  // With a log: called when a shard's log fails (a write or fsync error, a full disk), once
  // per shard, on that log's flusher thread. From then on every write to a persisting map
  // fails with kStorage (it is not acknowledged); a member stops (grid::MemberOptions).
  std::function<void(const base::Error&)> on_log_failure;
  // With a log: OpenLog skips damaged records in the middle of a segment (logged, each with its
  // file and offset) instead of failing (storage::ShardLogOptions::skip_damaged).
  bool log_skip_damaged = false;
  // With a log: the free bytes its file system keeps in reserve. Below it, writes to maps that
  // persist are refused before they are applied (kStorage, reason kDiskLow), reads and
  // backups' copies go on, and writes are taken again once space was freed (read every
  // 250 ms). 0: not checked (a full disk then fails the log, see on_log_failure).
  std::uint64_t log_min_free_bytes = 64ull << 20;
  // With a log: the memory kept of each partition's last persisting updates (its backlog,
  // this total over the partition count each), so a member that restarts with its data gets
  // the updates it missed instead of a whole copy while they are still here ("Catch-up" in
  // docs/architecture.md). 0: none kept (every copy is whole).
  std::uint64_t catch_up_backlog_bytes = 64ull << 20;
  // With a log: called after each fdatasync of a shard's log, on its flusher thread, with how
  // long it took (a member's tessera_log_fsync_seconds). May be null.
  std::function<void(std::chrono::nanoseconds)> on_log_sync;
};

// What MapService::OpenLog found and replayed.
struct LogRecovery {
  std::uint64_t records = 0;  // log records replayed (one per write, transaction or copy part)
  std::uint64_t updates = 0;  // entry updates in them
  std::uint64_t bytes = 0;    // their payload bytes
  std::uint64_t entries = 0;  // live entries held afterwards, every map
  base::Millis took_ms = 0;
  // Per partition (indexed by partition id): the replica version the log ends at, and whether
  // the replica here is complete: no partition copy (or leave) cleared it since without its
  // copy completing. A partition the log never mentions counts as a complete, empty replica
  // at version 0. What a full-cluster restart decides by (membership's RecoveryReport).
  std::vector<std::uint64_t> versions;
  std::vector<bool> held;
};

// The map where partition transactions keep the ids of committed batches: key
// "<transaction id>@<partition key>" (so in the batch's partition, replicated and migrated
// with it), value the batch's encoded result, TTL MapServiceOptions::transaction_id_ttl_ms.
inline constexpr std::string_view kTransactionIdMap = "__tessera.transactions";

enum class EntryEventType : std::uint8_t {
  kAdded = 1,
  kUpdated = 2,
  kRemoved = 3,
  kExpired = 4,
  kEvicted = 5,
  kCleared = 6,  // map cleared; key empty, count in old_value as decimal text
};
std::string_view EntryEventTypeName(EntryEventType type);

struct EntryEvent {
  std::string map_name;
  EntryEventType type = EntryEventType::kAdded;
  std::string key;
  std::optional<std::string> value;      // new value (added/updated) if include_values
  std::optional<std::string> old_value;  // previous value (updated/removed/expired/evicted)
  std::uint32_t partition_id = 0;
};

struct ListenerOptions {
  bool include_values = true;
  // Event types to deliver; empty = all.
  std::vector<EntryEventType> types;
  // Only events for this key (empty = every key).
  std::string key;
};

using ListenerId = std::uint64_t;
// Invoked on the shard thread that owns the event's partition, in event order per key
// (events of one partition are delivered in the order they happened). Must not block; hand
// work to another thread if it may.
using EntryListener = std::function<void(const EntryEvent&)>;

// Ring appends counted by the owner that served them (MapService::RingStats).
struct RingCounters {
  std::int64_t published = 0;
  std::int64_t discarded = 0;
};

// One stream group as seen by the owner of its sub-streams (MapService::StreamStats).
struct StreamGroupCounters {
  std::string group;
  std::int64_t delivered = 0;    // events served to the group's reads (counter)
  std::int64_t redelivered = 0;  // of those, events this member had served to the group before
  std::int64_t committed = 0;    // events the group committed (cursor moves, counter)
  // Over the sub-streams this member owns now:
  std::int64_t lag = 0;                    // events after the group's cursor
  std::int64_t oldest_uncommitted_ms = 0;  // wall-clock append time of the oldest (0: none)
  std::int64_t leases_held = 0;            // sub-streams whose lease a consumer holds
};

// One stream as seen by the owner of its sub-streams (counters since this member started;
// gauges over the sub-streams it owns now).
struct StreamCounters {
  std::string stream;
  std::int64_t appended = 0;    // events stored (counter)
  std::int64_t duplicates = 0;  // appends answered from the dedup window (counter)
  std::int64_t events = 0;      // stored now
  std::int64_t bytes = 0;       // stored now
  std::vector<StreamGroupCounters> groups;
};

// How requests reach the partitions other members own (installed by a clustered member).
class ClusterRouting {
 public:
  using Callback = std::function<void(base::Result<MapResult>)>;
  virtual ~ClusterRouting() = default;
  // Runs `request` (local_only is set) on the member `address`; `done` runs once, on any
  // thread. Errors: the remote member's (kNotOwner when it does not own a partition any more),
  // connection errors (kConnectionFailed: not sent; kMemberLeft: may have been applied).
  virtual void Send(const std::string& address, MapRequest request, Callback done) = 0;
  // Applies `updates` on the member `address` (a backup, or a migration target); `done` runs
  // once with its acknowledgement (the partitions it found stale, see replica.h) or the error.
  virtual void SendReplica(const std::string& address, std::vector<ReplicaUpdate> updates,
                           std::function<void(base::Result<ReplicaAck>)> done) = 0;
};

class MapService {
 public:
  using Callback = std::function<void(base::Result<MapResult>)>;

  // `shards`, `clock`, `processors` must outlive the service.
  MapService(runtime::ShardSet& shards, partition::Partitioner partitioner,
             const base::Clock& clock, const EntryProcessorRegistry& processors,
             std::shared_ptr<spdlog::logger> log, MapServiceOptions options = {});
  ~MapService();
  MapService(const MapService&) = delete;
  MapService& operator=(const MapService&) = delete;

  // Starts the per-shard expiry sweepers. REQUIRES: shards are running.
  void Start();
  // Stops the sweepers. Requests after Stop fail with kShuttingDown.
  void Stop();

  // Sets the configuration of `map_name` (applies to later writes). Thread-safe.
  void Configure(const std::string& map_name, MapConfig config);
  MapConfig ConfigOf(const std::string& map_name) const;

  // Executes `request`; calls `done` exactly once with the result.
  // A transaction (MapOp::kTransact, see map_request.h and docs/architecture.md) runs its
  // operations in order on the partition's shard, each precondition checked just before its
  // operation against the entry as the earlier ones left it; the first failed precondition
  // undoes everything the batch did (entries, TTLs, hits, counters, evictions) and is the
  // result (flag false, conflict); an operation's error (a processor's, say) undoes it too
  // and is the call's error. A committed batch's changes go to each backup as one message,
  // applied there in one step, and its entry events are delivered after it committed. `done` runs
  // inline when the caller is on the owning shard (keyed ops) and nothing is waited for, else on
  // some shard thread (or, for partitions of other members and writes waiting for backups, the
  // routing's thread; for writes waiting for the log, the shard's thread once the log wrote
  // or synced them).
  // Errors: kBadRequest (empty map name, missing key, bad options; a transaction that is
  // empty, longer than max_transaction_ops, or has a key outside its partition, named),
  // kUnknownProcessor,
  // kWrongType (from processors), kBadPredicate, kShuttingDown; in a cluster kNotOwner (a
  // local_only request for a partition owned elsewhere, or ownership that did not settle) and
  // the routing's connection errors.
  void Execute(MapRequest request, Callback done);

  // Fast path for front-ends running on shard threads: when `request` is keyed and the
  // calling thread is the shard owning its partition, runs it now and returns the result
  // (exactly what Execute would pass to `done`); otherwise (another shard, or a partition
  // another member owns) does nothing and returns nullopt (the caller then uses Execute).
  // Validation errors and kShuttingDown are returned too.
  std::optional<base::Result<MapResult>> ExecuteIfLocal(const MapRequest& request);

  // What the reply to a write run by ExecuteIfLocal(request, ticket) waits for: its record in
  // the log of `shard`, and the persistence of its map (kNone: nothing, reply at once).
  struct LogTicket {
    std::size_t shard = 0;
    std::uint64_t seq = 0;
    Persistence wait = Persistence::kNone;
  };
  // As ExecuteIfLocal, for a front-end that holds a write's reply until the log allows it: a
  // write to a map that persists (with no backups to wait for) runs here too, is logged, and
  // `ticket` says what its reply waits for: the caller sends it only from WhenLogged's `done`.
  // A write that could not be logged returns kStorage (applied in memory, not logged).
  std::optional<base::Result<MapResult>> ExecuteIfLocal(const MapRequest& request,
                                                        LogTicket& ticket);
  // Calls `done` once the log allows the write of `ticket` to be acknowledged (ok: written to
  // the OS for kPeriodic, synced for kAlways), or with kStorage when it could not be logged.
  // `done` runs on the ticket's shard, after the log's batch (at once on the caller's thread
  // when the log failed; on the log's flusher while the log closes). Stop waits for it.
  // REQUIRES: ticket.wait != Persistence::kNone.
  void WhenLogged(const LogTicket& ticket, base::UniqueFunction<void(base::Result<void>)> done);

  // A hint before a front-end on a shard thread runs several keyed requests one after the
  // other (the frames one read delivered): starts fetching the table slots, then the
  // entries, of those keys whose partition this thread serves on this member, so that their
  // lookups wait for memory together rather than one by one. Changes nothing; other
  // shards' and members' keys, maps or partitions with no entries here, and keys beyond the
  // first kMaxPrefetchKeys, are skipped.
  struct KeyRef {
    std::string_view map_name;
    std::string_view key;
  };
  static constexpr std::size_t kMaxPrefetchKeys = 32;
  void PrefetchKeys(std::span<const KeyRef> keys) const;

  // Persistence: opens (creating) the log of every shard under `dir` ("shards-N/shard-I",
  // N the shard count) and replays what it holds into the stores, all shards in parallel:
  // every write a member applied to a map that persists (Persistence), as owner or as
  // backup, and the partition copies it received, in the order applied. TTL deadlines are
  // absolute: an entry whose deadline passed while the member was down is not brought back.
  // From here on each shard logs what it applies (MapConfig::persistence). Call once, after
  // Start and before serving requests or joining a cluster. Blocks until replayed.
  // Errors (kStorage naming the file and offset, kConflict): a log damaged in its middle, a
  // log written with another shard count (until snapshots can re-shard it), a folder that
  // cannot be read or written; nothing is served from a partial replay then.
  base::Result<LogRecovery> OpenLog(const std::string& dir);
  // Whether OpenLog succeeded (writes are being logged).
  bool logging() const;
  // The log's figures since OpenLog, every shard together (zero without a log).
  struct LogStats {
    std::uint64_t records = 0;           // appended (writes, copies, snapshots)
    std::uint64_t bytes = 0;             // their encoded bytes
    std::uint64_t syncs = 0;             // fdatasyncs
    std::uint64_t disk_bytes = 0;        // the segments on disk now
    std::uint64_t compactions = 0;       // complete snapshot rounds, over the shards
    std::uint64_t segments_dropped = 0;  // deleted by compaction
    std::uint64_t free_bytes = 0;        // the data directory's file system's free bytes, as
                                         // last read (0 unless log_min_free_bytes is set)
    bool space_low = false;              // under log_min_free_bytes: writes are refused
  };
  LogStats GetLogStats() const;
  // With a log: copies every shard's log into `dest` (created; it must not exist), laid out
  // as OpenLog's folder (`dest` is then a map log folder a member can open): each shard's
  // written records, as ShardLog::Backup. Blocks; not on a shard thread. Returns the bytes
  // copied. Errors: kBadRequest without a log; those of ShardLog::Backup.
  base::Result<std::uint64_t> BackupLog(const std::string& dest) const;

  // Cluster: this service belongs to a cluster member and serves nothing until its first
  // SetPartitionTable: requests wait (retrying, as for a migrating partition), and requests
  // from other members get kNotOwner. Without it, a member starts serving every partition,
  // as a standalone member does. Call before serving requests. Thread-safe.
  void ExpectPartitionTable();
  // A live member as SetPartitionTable takes it: `address`, where its requests go, and `id`,
  // the identity of its process (membership's uuid). A process restarted at the same address
  // has a new id and none of its old self's data: the table change counts the old process as
  // dead (its partitions stay with the replicas that survive it, which copy them to every new
  // holder, the new process too), never as the holder of what it held.
  struct TableMember {
    std::string address;
    std::string id;
  };
  // Cluster: installs the partition table as member addresses (replicas[p] = owner, then
  // backups; `members` = the live members; `self` = this member's address). Partitions owned
  // here run here; keyed requests for others go to their owner through `routing`, whole-map
  // requests run on every owner and merge. Writes on owned partitions are replicated to their
  // backups before they are answered. Partitions that gain a replica holder are copied to it by
  // their previous owner (or first surviving replica); a new owner serves a partition once its
  // copy arrived (requests wait, retrying, meanwhile). A request that meets a moving partition
  // is retried for up to ~12 s. Until the first call every partition is local (unless
  // ExpectPartitionTable was called), except that requests from other members (local_only)
  // are answered kNotOwner: the sender retries.
  // REQUIRES: replicas.size() == partition count; `routing` outlives the service. Thread-safe.
  // `recovered`: a full-cluster restart's first table (partition::PartitionTable::recovered):
  // this member serves the partitions it owns in it from what it replayed (OpenLog), as if it
  // had held them in a previous table; without it a first table waits for copies.
  void SetPartitionTable(std::vector<std::vector<std::string>> replicas,
                         const std::vector<TableMember>& members, std::string self,
                         ClusterRouting* routing, bool recovered = false);
  // Cluster, before the first table: why this member serves nothing yet (a full-cluster
  // restart waiting for members); requests then fail with kRecovering and this text after
  // about 0.7 s (a lone member's own table follows at once) instead of waiting about 12 s for
  // a table. Empty: they wait (a joiner). Thread-safe.
  void SetRecovering(std::string why);
  // Applies updates the owner of their partitions sent (backup writes, migration copies);
  // `done` runs once they are applied, on some shard thread, with the partitions whose replica
  // version showed missed updates (the owner re-copies them). Error kNotOwner: the batch wrote
  // (set/delete) a partition this member serves as owner, so its sender acts on a stale table
  // (it was paused or cut off); those writes are not applied (the rest of the batch is), and
  // the sender fails the write instead of confirming it. Thread-safe.
  // `sender`: the identity (TableMember::id) of the member that sent them, empty when unknown;
  // a member this member's current table does not list gets kNotOwner for its writes
  // (kSet, kDelete, a write's clear) and its resyncs are ignored: it was cut off or removed
  // and must not confirm writes through this member (copies are still taken).
  void ApplyReplica(std::vector<ReplicaUpdate> updates,
                    std::function<void(base::Result<ReplicaAck>)> done,
                    const std::string& sender = {});
  // Whether the member whose identity (TableMember::id) is `id` is listed in this member's
  // current table; true before the first table and for an empty `id`. A member's requests
  // from one it does not list are refused (kNotOwner): a master restarted at its address may
  // form a cluster of its own, and members that still route by the old table must not have it
  // acknowledge their writes (its one-member cluster owns every partition, empty; the merge
  // discards what it took). Any thread.
  bool ListsMember(const std::string& id) const;
  // Whether a partition table is installed: false before the first SetPartitionTable (when
  // ExpectPartitionTable was called) and after LeaveCluster until the next. Any thread.
  bool HasPartitionTable() const;
  // Whether this member serves `partition` (true for all until SetPartitionTable).
  bool OwnsPartition(std::uint32_t partition) const;
  // Members of the partition table this member serves by (1 before the first): the size
  // writes to a map with a min_cluster_size are admitted against. Any thread.
  std::size_t ClusterSize() const;
  // Partition ownership changes: `hook(partition)` runs on the partition's shard after
  // OwnsPartition(partition) or RunsPartitionWork(partition) may have changed (a new table, a
  // promotion, a migration copy that arrived, a copy given up on); the hook reads OwnsPartition to
  // learn where it stands. When this member stops owning a partition, the hook runs on the shard
  // before the partition's migration copy to its new owner is taken, and the new owner serves it
  // only once that copy arrived: work the hook stops is over before the new owner's can start. Set
  // before the member serves; one hook (a later call replaces it). Thread-safe.
  void SetOwnershipHook(std::function<void(std::uint32_t partition)> hook);
  // Whether partition-owned work for `partition` may run here: this member owns it, and when
  // it took it over from a live member that also held it (a backup promoted as members join
  // or leave, no copy needed) that member has confirmed it stopped its own work (a handoff,
  // sent after its ownership hook ran), or it left the table, or kAwaitLimit (10 s) passed.
  bool RunsPartitionWork(std::uint32_t partition) const;
  // Calls fn(key, value) for every live entry of `map_name` in `partition` on this member,
  // without touching them (no hits, no access time). A map without entries there calls
  // nothing. REQUIRES: on the partition's shard; fn does not modify the map.
  void ScanPartition(const std::string& map_name, std::uint32_t partition,
                     const std::function<void(std::string_view key, std::string_view value)>& fn);
  // Split brain: this member leaves its cluster to join another (membership's rejoin
  // listener). Every partition stops being served here (the ownership hook runs; requests
  // wait for the next SetPartitionTable, as before the first one), the live entries of the
  // partitions it owned are taken out as kMergeEntries batches (merge.h), those of the
  // partitions it held a backup replica of as standby batches (MergeBatch::standby_for, the
  // owner's identity: sent only if the owner's own merge never arrives), and every store is
  // emptied, so the next table's migrations copy the new cluster's data in and nothing of the
  // old table is copied out. A quorum map (min_cluster_size q) leaves out the entries written
  // since failure_timeout_ms before its cluster fell below q, or before now when it has q (a
  // member woken from a pause, removed meanwhile), or before `silent_ms` ago (the member was
  // paused then: writes in flight were applied here and never reached its backups), and in a
  // partition it owned, since the first write its backups did not confirm (a link that failed
  // one way, before the membership noticed) unless a full copy reached them since: none of
  // them was acknowledged (refused with kNoQuorum, or applied here without its backups; q must
  // be a majority), and merged key by key they would break the transactions they were part
  // of. Event
  // streams come out per sub-stream as kStreamMerge batches (events in offset order, groups),
  // reliable topics per ring as kRingMerge batches. Blocks until every shard is done. REQUIRES: not
  // on a shard thread.
  std::vector<MergeBatch> LeaveCluster(base::Millis silent_ms = 0);
  // Replicas on this member (owned or backup) whose migration copy has not arrived yet.
  std::size_t AwaitingPartitionCount() const;
  // How many follow-ups of removed entries this member sent as their owner (family.h `leaving`:
  // the streams family's, when a stream's keyspace entry went by DEL, expiry or a SET over it).
  // The RESP front-end's sets of known stream keys start over when it changes. Any thread.
  std::uint64_t StreamKeyRemovals() const;
  // Keyed requests this member sent on to another member (their partition's owner) since
  // start: clients that send each key to its owner keep this near zero.
  std::uint64_t ForwardedCount() const;
  // Partition copies this member sent since start (migrations and resyncs): the partitions
  // and the bytes of their entries (keys and values), whole copies and catch-ups together;
  // and of them the catch-ups (the updates a restarted holder missed, see CatchUpOrCopy).
  // Any thread.
  struct CopyCounters {
    std::uint64_t partitions = 0;
    std::uint64_t bytes = 0;
    std::uint64_t catch_ups = 0;
    std::uint64_t catch_up_bytes = 0;
  };
  CopyCounters CopiesSent() const;
  // Per ring (a reliable topic), what this member stored as the ring's owner since start:
  // messages stored, and messages the discard-newest policy dropped. Sorted by ring name.
  std::vector<std::pair<std::string, RingCounters>> RingStats() const;
  // Event streams served here as owner (see StreamCounters), by stream name.
  std::vector<StreamCounters> StreamStats() const;

  // Blocking form. REQUIRES: the caller is not a shard thread.
  base::Result<MapResult> ExecuteSync(MapRequest request);

  // Registers a listener on `map_name`; events are delivered as described at EntryListener.
  ListenerId AddEntryListener(const std::string& map_name, ListenerOptions options,
                              EntryListener listener);
  // Returns whether a listener with that id existed. After it returns, no further event is
  // delivered to the listener, except those already running on a shard thread.
  bool RemoveEntryListener(ListenerId id);
  // Entry listeners registered on this member per map, for every map that ever had one (0
  // once all are removed). Sorted by map name.
  std::vector<std::pair<std::string, std::size_t>> EntryListenerCounts() const;

  // Names of maps that hold or held data on this member.
  std::vector<std::string> MapNames() const;
  // Per map, the statistics of the partitions this member owns (backups not counted, so the
  // members' figures add up to the cluster's): entries (expired ones not yet swept included),
  // memory, and the counters of the operations those partitions served here. A partition that
  // migrates away takes its counters along. Runs on every shard and waits for them (5 s at
  // most: nullopt then, and when stopped). REQUIRES: not on a shard thread.
  std::optional<std::vector<std::pair<std::string, MapStats>>> LocalMapStats() const;

  const partition::Partitioner& partitioner() const { return partitioner_; }
  runtime::ShardSet& shards() { return shards_; }

 private:
  struct Impl;
  runtime::ShardSet& shards_;
  partition::Partitioner partitioner_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::map
