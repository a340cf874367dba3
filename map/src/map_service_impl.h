#pragma once
// Private to map/: MapService::Impl and the per-shard state it owns, shared by
// map_service.cc (local execution, sweeper) and map_service_cluster.cc (routing to other
// members, backups, migration).

#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <unordered_map>

#include "listener_registry.h"
#include "tessera/map/family.h"
#include "tessera/map/map_ops.h"
#include "tessera/map/map_service.h"
#include "tessera/map/replica.h"
#include "tessera/storage/shard_log.h"

namespace tessera::map::internal {
using base::ErrorCode;
using base::Fail;
constexpr auto kDrainTimeout = std::chrono::seconds(10);

// The record stores of one map on one shard, by local index (partition / shard count), made
// on first use. Sparse while the map holds few partitions here (a RESP hash is a map, often
// with one field), so a small map costs a few dozen bytes instead of a pointer per partition;
// dense (a vector indexed by local index) from kSparseMax stores on.
class StoreTable {
 public:
  static constexpr std::size_t kSparseMax = 8;

  explicit StoreTable(std::size_t capacity) : capacity_(capacity) {}

  RecordStore* Find(std::size_t local) const {
    if (!dense_.empty()) return dense_[local].get();
    for (const auto& [index, store] : sparse_) {
      if (index == local) return store.get();
    }
    return nullptr;
  }
  RecordStore& GetOrCreate(std::size_t local) {
    if (RecordStore* found = Find(local)) return *found;
    auto store = std::make_unique<RecordStore>();
    RecordStore& ref = *store;
    if (!dense_.empty()) {
      dense_[local] = std::move(store);
    } else if (sparse_.size() < kSparseMax) {
      sparse_.emplace_back(local, std::move(store));
    } else {
      dense_.resize(capacity_);
      for (auto& [index, s] : sparse_) dense_[index] = std::move(s);
      sparse_.clear();
      sparse_.shrink_to_fit();
      dense_[local] = std::move(store);
    }
    return ref;
  }

  // Iteration: slot s in [0, slot_count()) holds At(s) (null: none yet) for local index
  // LocalAt(s). Slots keep their order while stores are added, until the switch to dense.
  std::size_t slot_count() const { return dense_.empty() ? sparse_.size() : dense_.size(); }
  RecordStore* At(std::size_t slot) const {
    return dense_.empty() ? sparse_[slot].second.get() : dense_[slot].get();
  }
  std::size_t LocalAt(std::size_t slot) const {
    return dense_.empty() ? sparse_[slot].first : slot;
  }

 private:
  std::size_t capacity_;  // local indexes are below it
  std::vector<std::pair<std::size_t, std::unique_ptr<RecordStore>>> sparse_;
  std::vector<std::unique_ptr<RecordStore>> dense_;  // empty while sparse
};

struct MapTable {
  explicit MapTable(std::size_t store_capacity) : stores(store_capacity) {}
  std::string name;
  StoreTable stores;
  MapConfig config;
  std::uint64_t config_version = 0;
  ListenerRegistry::Snapshot listeners;
  std::uint64_t listeners_version = 0;
  // Replay put entries here: snapshots keep them even if the map is configured not to persist
  // (compaction never deletes what the log held; see map_persistence.cc).
  bool from_log = false;
};

// Whether `request` is a kStreamRead with wait_ms (a long poll; map_service_waits.cc).
bool StreamReadWaits(const MapRequest& request);
// Whether the stream operation `request` stored events (an append, a merge, a family's
// append: family.h).
bool StreamOpStored(const MapRequest& request, const MapResult& result);

// A parked kStreamRead with wait_ms (map_request.h), answered once.
struct StreamWaiter {
  std::string group, consumer;
  std::function<void(base::Result<MapResult>)> done;
  std::optional<boost::asio::steady_timer> timer;
  bool answered = false;
  // With wait_read: the read that answers it once events are there (else "ready").
  std::optional<MapRequest> read;
  std::uint32_t partition_id = 0;
};

struct ShardState {
  std::unordered_map<std::string, std::unique_ptr<MapTable>> maps;
  std::vector<MapTable*> sweep_order;  // creation order; only companion maps are dropped
                                       // (DropCompanionIfEmpty)
  MapTable* last = nullptr;            // the table TableOn found last (most requests repeat it)
  std::size_t sweep_table = 0;
  std::size_t sweep_store = 0;
  std::optional<boost::asio::steady_timer> timer;
  // kStreamReads with wait_ms parked here, by key (the sub-stream's meta key); the shard's own
  // (map_service_waits.cc).
  std::unordered_map<std::string, std::vector<std::shared_ptr<StreamWaiter>>> waiters;
  // The undo log of the transaction running here, kept so its buffers serve the next one
  // (map_service_tx.cc); one started while it is in use gets a log of its own.
  UndoLog undo;
  bool undo_in_use = false;
  // OpenLog replays this shard's log: what ApplyOnShard applies is not logged again.
  bool replaying = false;
};

// Counts requests in flight so Stop() can wait for them. Enter/Leave are one atomic each on
// the request path; the mutex is taken only once Stop() has begun waiting.
class InFlight {
 public:
  void Enter() { count_.fetch_add(1); }
  void Leave() {
    // seq_cst pairs with WaitDrained: either the waiter sees count 0, or this sees waiting.
    if (count_.fetch_sub(1) == 1 && waiting_.load()) {
      std::lock_guard lock(mu_);
      drained_.notify_all();
    }
  }
  bool WaitDrained(std::chrono::milliseconds timeout) {
    waiting_.store(true);
    std::unique_lock lock(mu_);
    return drained_.wait_for(lock, timeout, [this] { return count_.load() == 0; });
  }

 private:
  std::atomic<std::int64_t> count_{0};
  std::atomic<bool> waiting_{false};
  std::mutex mu_;
  std::condition_variable drained_;
};

// Held by a request until it completed; move-only.
class RequestToken {
 public:
  explicit RequestToken(InFlight& in_flight) : in_flight_(&in_flight) { in_flight_->Enter(); }
  RequestToken(RequestToken&& other) noexcept
      : in_flight_(std::exchange(other.in_flight_, nullptr)) {}
  RequestToken& operator=(RequestToken&&) = delete;
  ~RequestToken() {
    if (in_flight_) in_flight_->Leave();
  }

 private:
  InFlight* in_flight_;
};

}  // namespace tessera::map::internal

namespace tessera::map {

using base::ErrorCode;
using base::Fail;
using internal::InFlight;
using internal::kDrainTimeout;
using internal::MapTable;
using internal::RequestToken;
using internal::ShardState;
using internal::StreamOpStored;
using internal::StreamReadWaits;
using internal::StreamWaiter;

struct MapService::Impl {
  Impl(runtime::ShardSet& shards, partition::Partitioner partitioner, const base::Clock& clock,
       const EntryProcessorRegistry& processors, std::shared_ptr<spdlog::logger> log,
       MapServiceOptions options)
      : shards(shards),
        partitioner(partitioner),
        clock(clock),
        processors(processors),
        log(std::move(log)),
        options(options) {
    for (std::size_t i = 0; i < shards.size(); ++i)
      states.push_back(std::make_unique<ShardState>());
    flags = std::make_unique<PartitionFlags[]>(partitioner.partition_count());
    handoff_from.resize(partitioner.partition_count());
    deferred_copies.resize(partitioner.partition_count());
    lineage.resize(partitioner.partition_count());
    copy_sender.resize(partitioner.partition_count());
  }

  // Whether a request may run: the service is not stopping and the request is well-formed.
  base::Result<void> Admit(const MapRequest& request) const {
    if (stopped.load(std::memory_order_acquire)) {
      return Fail(ErrorCode::kShuttingDown,
                  "the map service is shutting down; retry on another member");
    }
    if (auto ok = ValidateRequest(request, &processors); !ok) return ok;
    if (auto ok = CheckMarkerWrite(request); !ok) return ok;
    if (request.op == MapOp::kTransact) {
      if (auto ok = CheckTransaction(request); !ok) return ok;
    }
    if (any_quorum.load(std::memory_order_relaxed)) return CheckQuorum(request);
    return {};
  }
  // Errors: kBadRequest when `request` (or an operation of its transaction) writes to the
  // transaction id markers' map (kTransactionIdMap): only RunTransaction writes it, below
  // Admit; reads and split-brain merges pass (map_service.cc).
  static base::Result<void> CheckMarkerWrite(const MapRequest& request);
  // Errors: kNoQuorum when `request` writes to a map whose min_cluster_size this member's
  // cluster does not reach (map_service.cc).
  base::Result<void> CheckQuorum(const MapRequest& request) const;
  // A transaction's size and partition (map_service_tx.cc). Errors: kBadRequest.
  base::Result<void> CheckTransaction(const MapRequest& request) const;
  // Runs a transaction on its partition's shard (map_service_tx.cc); as RunOnPartition.
  base::Result<MapResult> RunTransaction(std::size_t shard, std::uint32_t partition_id,
                                         const MapRequest& request,
                                         std::vector<ReplicaUpdate>* replica_out);

  // A token held by every fan-out request; leaving happens when the last copy dies.
  std::shared_ptr<RequestToken> EnterRequest() { return std::make_shared<RequestToken>(in_flight); }

  MapTable& TableOn(std::size_t shard, const std::string& name);
  RecordStore& StoreOf(MapTable& table, std::uint32_t partition_id);
  // MapService::PrefetchKeys on `shard` (the calling thread's): the keys' table slots, then
  // their entries, in stores that exist (none is created). With `partition`, every key is in
  // it and this shard serves it (a transaction's operations); without, the keys of other
  // shards' or members' partitions are skipped. At most kMaxPrefetchKeys.
  void PrefetchKeys(std::size_t shard, std::span<const MapService::KeyRef> keys,
                    std::optional<std::uint32_t> partition) const;
  void Refresh(MapTable& table);
  // `times`: the operation's clock readings when the caller has them (a transaction reads the
  // clock once for all its operations); else read here.
  OpContext ContextFor(MapTable& table, std::uint32_t partition_id, std::vector<EntryEvent>* events,
                       const base::Clock::Times* times = nullptr);
  // Runs `request` on the partition's store. With `replica_out`, also appends the resulting
  // state of every key it changed (for the backups).
  base::Result<MapResult> RunOnPartition(std::size_t shard, std::uint32_t partition_id,
                                         const MapRequest& request,
                                         std::vector<ReplicaUpdate>* replica_out = nullptr);
  MapConfig ConfigOf(const std::string& name) const;

  void ExecuteKeyed(MapRequest& request, Callback& done);
  void ExecuteFanOut(MapRequest& request, Callback& done);
  // A whole-map request that writes nothing (query, size, ...): on each shard, partitions in
  // tasks of at most about options.scan_entries_per_task entries, each task posting the next
  // behind what the shard received meanwhile, so a scan of a large map (a predicate decoding
  // every value) never holds a shard for long: a one-shard member scanning 10,000 sagas
  // under ASan in one task read nothing for seconds, heartbeats included, and its peer removed
  // it. The calling shard's first task runs inline (after the others are posted), as
  // ShardSet::MapReduce does, so a pipeline's read is ordered with the commands around it.
  // Results merge in the order of one pass. A partition is read if this member serves it
  // when its turn comes.
  struct ScanInTurn;
  void ScanAllInTurn(std::shared_ptr<const MapRequest> request, Callback done);
  void ScanShardFrom(std::size_t shard, std::shared_ptr<ScanInTurn> scan, std::size_t slot);
  struct Written;
  // Runs `request` (its `parts` on this shard, or a whole-map op on every partition this shard
  // serves) under one table; what it changed on partitions with backups goes to `written`.
  base::Result<MapResult> RunPartsOnShard(
      std::size_t shard, const MapRequest& request,
      const std::vector<std::pair<std::uint32_t, MapRequest>>* parts, Written& written);
  // Per shard: (partition id, the part of the request for that partition).
  using Parts = std::vector<std::vector<std::pair<std::uint32_t, MapRequest>>>;
  Parts SplitByShard(const MapRequest& request) const;

  void ArmSweeper(std::size_t shard, std::chrono::milliseconds delay);
  void SweepTick(std::size_t shard);

  // --- cluster (map_service_cluster.cc) ---------------------------------------------------
  // Per partition, read on every request without a lock.
  struct PartitionFlags {
    std::atomic<bool> local{true};          // served here: owned, and its data is here
    std::atomic<bool> pending{false};       // a replica here whose migration copy is on its way
    std::atomic<bool> copy_arrived{false};  // a copy completed (maybe before its table did)
    std::atomic<bool> has_backups{false};   // owned, with backups to replicate writes to
    std::atomic<std::int64_t> pending_since_ms{0};
    // Replica version (replica.h): the owner's count of replicated writes, or on a backup the
    // last one applied. Written on the partition's shard only.
    std::atomic<std::uint64_t> version{0};
    // `version` counts from this member's own state: it owned the partition or a copy of it
    // completed here. Only then does a gap mean missed updates.
    std::atomic<bool> versioned{false};
    // Work handoff (RunsPartitionWork): owned here, waiting for the previous owner's
    // kHandoff; and a kHandoff that arrived before the table that makes this member owner.
    std::atomic<bool> handoff_pending{false};
    std::atomic<bool> handoff_arrived{false};
    std::atomic<std::int64_t> handoff_since_ms{0};
    // Owned here: when the oldest write whose backup did not confirm it was applied
    // (kNoUnconfirmed: none since its backups last confirmed a full copy), and how many such
    // failures there were (a resync that began before one does not clear it). LeaveCluster
    // leaves a quorum map's entries written since then out of the merge: they were not
    // acknowledged, and the link can fail one way before the membership notices anything.
    // Meanwhile quorum maps serve nothing in the partition (CheckConfirmed): a retry that read
    // the unconfirmed write would acknowledge what the merge then drops.
    std::atomic<std::int64_t> unconfirmed_since_ms{kNoUnconfirmed};
    std::atomic<std::uint64_t> unconfirmed_count{0};
    // What replay left of the partition is here untouched (History::replayed): a table that
    // does not make this member a holder drops it (DropUnheldReplicas). Written on the
    // partition's shard.
    std::atomic<bool> replayed{false};
    // A holder under the last table that was one under the table before (or this member's
    // first, recovered table): it has the partition whole unless it waits for a copy.
    std::atomic<bool> listed_before{false};
    // Its pending wait is a tentative source's (SetPartitionTable: listed again, and the
    // source for want of a better one): when it ends without a copy, what this member held is
    // the partition's copy, whole (GiveUpStaleCopies sets copy_arrived).
    std::atomic<bool> tentative_source{false};
  };
  static constexpr std::int64_t kNoUnconfirmed = std::numeric_limits<std::int64_t>::max();
  // The partition table as addresses, replaced whole on every change.
  struct Routing {
    std::vector<std::vector<std::string>> replicas;  // [p] = owner, backups...
    std::string self;
    ClusterRouting* routing = nullptr;
    std::string master;  // the cluster's master (members[0]): copies say which cluster sent them
    // Each listed member's identity by address (TableMember::id): a process restarted at the
    // same address has a new one, and SetPartitionTable counts its old self as gone.
    std::unordered_map<std::string, std::string> ids;
    const std::string& Owner(std::uint32_t p) const;
    // Whether `id` is a listed member's identity.
    bool HasMember(const std::string& id) const {
      for (const auto& [address, listed] : ids) {
        if (listed == id) return true;
      }
      return false;
    }
  };
  // Set by ExpectPartitionTable: a cluster member, which serves nothing before its first table.
  std::atomic<bool> expects_table{false};
  // SetRecovering: why the cluster serves nothing yet (a full-cluster restart); cleared by
  // the first table.
  std::mutex recovering_mu;
  std::string recovering;  // guarded by recovering_mu
  // Members in this member's cluster (1 until the first table), for the quorum check; set when
  // any map's config asks for a quorum.
  std::atomic<std::size_t> cluster_size{1};
  std::atomic<bool> any_quorum{false};
  // The sizes of the tables installed (clock time, members), the last 64; guarded by
  // ownership_mu. BelowQuorumSince reads them.
  std::deque<std::pair<base::Millis, std::size_t>> size_history;
  // When the cluster of `history` (size_history) fell below `quorum` members and has stayed
  // below since (its first table when it never had them); nullopt when it has them now.
  static std::optional<base::Millis> BelowQuorumSince(
      const std::deque<std::pair<base::Millis, std::size_t>>& history, std::size_t quorum) {
    if (history.empty() || history.back().second >= quorum) return std::nullopt;
    base::Millis since = history.back().first;
    for (auto it = history.rbegin(); it != history.rend() && it->second < quorum; ++it) {
      since = it->first;
    }
    return since;
  }
  std::atomic<std::uint64_t> forwarded{0};        // keyed requests sent on to their owner
  std::atomic<std::uint64_t> copies_sent{0};      // partition copies (CopiesSent)
  std::atomic<std::uint64_t> copy_bytes_sent{0};  // their entries' keys and values
  std::atomic<std::uint64_t> catch_ups_sent{0};   // copies sent as a catch-up (CopiesSent)
  std::atomic<std::uint64_t> catch_up_bytes_sent{0};
  // Ring appends served here as owner (MapService::RingStats).
  void CountRingAppend(const MapRequest& request, const MapResult& result);
  mutable std::mutex ring_mu;
  std::map<std::string, RingCounters> ring_counters;  // guarded by ring_mu
  // Event streams served here as owner (map_service_streams.cc): what each stream operation
  // changed, kept per sub-stream for MapService::StreamStats. `meta`: the sub-stream's meta
  // record as the operation left it (OpContext::stream_meta), else it is read from the store.
  void TrackStream(MapTable& table, std::uint32_t partition_id, const MapRequest& request,
                   const MapResult& result, base::Millis wall_ms,
                   const std::optional<StreamMeta>& meta);
  struct StreamGroupState {
    std::int64_t cursor = 0;
    std::int64_t oldest_ms = 0;        // append time of the event after the cursor (0: none)
    std::int64_t served = 0;           // the highest offset served to the group's reads
    std::int64_t lease_expiry_ms = 0;  // wall clock; 0 = no lease
    std::int64_t delivered = 0, redelivered = 0, committed = 0;
    bool known = false;  // its cursor was read here before
  };
  struct SubStreamState {
    std::string stream;
    std::uint32_t partition = 0;
    std::int64_t head = 1, tail = 0, bytes = 0;
    std::int64_t appended = 0, duplicates = 0;
    std::map<std::string, StreamGroupState> groups;
  };
  mutable std::mutex stream_mu;
  // By sub-stream; guarded by stream_mu.
  std::map<std::string, SubStreamState, std::less<>> stream_state;
  bool IsLocal(std::uint32_t partition) const {
    return flags[partition].local.load(std::memory_order_relaxed);
  }
  std::shared_ptr<const Routing> CurrentRouting() const {
    std::lock_guard lock(ownership_mu);
    return routing;
  }
  // Whether this member serves a partition, with the table it serves it under, read together
  // (both change under ownership_mu). A write goes to the backups of the table it ran under,
  // never of a later one: when the partition moves, its new holders' copy comes from a holder
  // of that table (which has the write, or refuses it as the partition's new owner or from a
  // member that left), while a later table's new backup is about to be reset by that copy.
  struct Ownership {
    bool local = false;
    std::shared_ptr<const Routing> table;  // null: not clustered
    bool HasBackups(std::uint32_t partition) const {
      return local && table && table->routing && table->replicas[partition].size() > 1;
    }
  };
  Ownership OwnershipOf(std::uint32_t partition) const {
    std::lock_guard lock(ownership_mu);
    return {flags[partition].local.load(std::memory_order_relaxed), routing};
  }
  // Ownership of every partition in `partitions` under one table (RunPartsOnShard).
  std::shared_ptr<const Routing> OwnershipOf(const std::vector<std::uint32_t>& partitions,
                                             std::vector<bool>& local) const {
    std::lock_guard lock(ownership_mu);
    local.resize(partitions.size());
    for (std::size_t i = 0; i < partitions.size(); ++i) local[i] = IsLocal(partitions[i]);
    return routing;
  }
  // Served here with no backups, as one moment without the lock (MapService::ExecuteIfLocal):
  // `local` and `has_backups` read between two equal even values of ownership_seq.
  bool LocalWithoutBackups(std::uint32_t partition) const {
    const std::uint64_t before = ownership_seq.load(std::memory_order_acquire);
    if (before % 2 != 0) return false;
    const bool yes = flags[partition].local.load(std::memory_order_relaxed) &&
                     !flags[partition].has_backups.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    return yes && ownership_seq.load(std::memory_order_relaxed) == before;
  }
  // Held while `local` or `has_backups` of any partition change: ownership_mu, with
  // ownership_seq odd.
  class OwnershipChange {
   public:
    explicit OwnershipChange(const Impl& impl)
        : lock_(impl.ownership_mu), seq_(impl.ownership_seq) {
      seq_.store(seq_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_release);
    }
    ~OwnershipChange() {
      seq_.store(seq_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    }
    OwnershipChange(const OwnershipChange&) = delete;
    OwnershipChange& operator=(const OwnershipChange&) = delete;

   private:
    std::lock_guard<std::mutex> lock_;
    std::atomic<std::uint64_t>& seq_;
  };
  void Route(MapRequest request, Callback done, int attempt);
  void ForwardKeyed(std::uint32_t partition, MapRequest request, Callback done, int attempt);
  void RetryLater(MapRequest request, Callback done, int attempt);
  void ExecuteAcrossMembers(MapRequest request, Callback done, int attempt);
  // A kStreamRead with wait_ms on its owner's shard (map_service_waits.cc): answers "ready"
  // (with wait_read: the read of up to wait_read events from `from`) when an event at `from`
  // is stored, else parks it until WakeStreamReaders, its wait_ms or Stop
  // (DropStreamReaders). The wait is on this member: the partition moving away meanwhile
  // ends it no sooner (the reader reads after the answer, from the new owner).
  void WaitForStream(std::size_t shard, std::uint32_t partition_id, const MapRequest& request,
                     Callback& done);
  // Answers `w` "ready", or with its read (routed like any read if the partition moved).
  void AnswerReady(std::size_t shard, const std::shared_ptr<StreamWaiter>& w);
  // Answers every read parked on `key` as ready (an append stored events there), after the
  // running handler. On the shard.
  void WakeStreamReaders(std::size_t shard, const std::string& key);
  // Answers every parked read kShuttingDown. On the shard.
  void DropStreamReaders(std::size_t shard);
  // Keyed request on its shard: runs it, replicates what it changed to the backups (waiting
  // for their acks), then calls done.
  void RunKeyedOnShard(std::size_t shard, std::uint32_t partition_id, MapRequest& request,
                       Callback& done);
  // Persistence (map_persistence.cc): where a write's acknowledgement waits for its log
  // record: seq in its shard's log, and the strictest persistence of the maps it wrote (kNone:
  // nothing logged or nothing to wait for).
  struct Logged {
    std::size_t shard = 0;
    std::uint64_t seq = 0;
    Persistence wait = Persistence::kNone;
  };
  // Sends `updates` to the backups of their partitions in `table` (the one they were written
  // under, see Ownership), then calls done(result), or done with an error naming the backup
  // that did not confirm.
  struct Written {
    std::shared_ptr<const Routing> table;
    std::vector<ReplicaUpdate> updates;
    // The clock read before the writes ran (only while a quorum map exists; 0 otherwise): no
    // later than any written record's last update, so an unconfirmed mark set from it covers
    // every record of the write (a mark read after the write missed the write's own records
    // whenever the write crossed a millisecond).
    base::Millis started_ms = 0;
  };
  void ReplicateThen(std::vector<Written> written, base::Result<MapResult> result, Callback done);
  // A full copy of partition `p` reached `target` (a resync or a migration copy), begun when
  // `failures` backup writes had failed: clears p's unconfirmed mark when that is still so and
  // `target` is p's only backup under the current table.
  void ConfirmedByCopy(std::uint32_t p, const std::string& target, std::uint64_t failures);
  // Errors: kNoQuorum when `request` (or an operation of its transaction) uses a quorum map
  // and partition_id has unconfirmed writes (PartitionFlags::unconfirmed_since_ms): its
  // entries may be lost with this copy, so nothing may be read or decided from them. Checked
  // for keyed requests (RunKeyedOnShard) and for each partition a multi-partition or
  // whole-map request runs on (RunPartsOnShard).
  base::Result<void> CheckConfirmed(const MapRequest& request, std::uint32_t partition_id) const;
  // Sends `updates` (a copy of a partition, or its catch-up) to `target` in chunks bounded by
  // bytes; done runs once, after every chunk was acknowledged or with the first error. Every
  // chunk after the first starts with `chunk_head` when given (a resync's kResyncChunk, a
  // catch-up's point).
  void SendCopy(const std::string& target, ClusterRouting* routing,
                std::vector<ReplicaUpdate> updates, std::function<void(base::Result<void>)> done,
                const std::optional<ReplicaUpdate>& chunk_head);
  // On partition p's shard: exports it and sends it to `target` in bounded chunks; done runs
  // once, after every chunk was acknowledged or with the first error.
  void CopyPartition(std::size_t shard, std::uint32_t partition_id, const std::string& target,
                     ClusterRouting* routing, std::function<void(base::Result<void>)> done,
                     bool resync = false);
  // Re-copies a partition to a backup that missed an update (see map_service_cluster.cc).
  void ResyncBackup(std::uint32_t partition_id, std::string backup, int attempt);
  // On p's shard: a migration copy of p to `target`, a new holder waiting for it. One never
  // sent (kConnectionFailed: the target unreachable for a moment, as when a partition heals one
  // member at a time) goes again every kCopyRetryMs while the current table still has `target` hold
  // p, until kCopyRetryLimitMs after `first_ms` (its first try): well within the target's wait for
  // it, after which the target serves what it has, which a late copy must not replace. So
  // does one the target refused (kNotOwner: it left its cluster and has no table yet; nothing
  // of it was applied).
  // Without `probed` and with a log, the target is probed first (ProbeTargets).
  struct Probed {
    std::optional<ReplicaPoint> point;  // the target's answer: the point of p it holds
  };
  void CopyToNewHolder(std::size_t shard, std::uint32_t p, std::string target,
                       base::Millis first_ms, const Probed* probed = nullptr);
  // For a source that only had p when a lost copy was ordered (PlanCopies' `tentative`): the
  // copies to `to` leave after kTentativeCopyDelayMs. A holder counted lost may have had its
  // copy after all, and then copies p on itself, fresher than this member (which a table
  // dropped before): its copies land first, and this member's are refused (AlreadyHeld).
  void CopyLater(std::size_t shard, std::uint32_t p, std::vector<std::string> to);
  static constexpr base::Millis kTentativeCopyDelayMs = 1000;
  // Targets' answers to probes, by (partition, target).
  using ProbeAnswers = std::map<std::pair<std::uint32_t, std::string>, ReplicaPoint>;
  // On `shard`: asks each target of `copies` (partition, target) for the point its replay left
  // the partition at (one kProbe message per target), then calls `then` on the shard once all
  // answered (or failed: no answer) with what they said.
  void ProbeTargets(std::size_t shard,
                    const std::vector<std::pair<std::uint32_t, std::string>>& copies,
                    std::function<void(std::shared_ptr<const ProbeAnswers>)> then);
  // Migration copies a new table asks of this member on one shard, sent in turn.
  struct CopyQueue {
    std::vector<std::pair<std::uint32_t, std::vector<std::string>>> copies;  // partition, to
    std::size_t next = 0;
    // With a log: its target's answers (the queue is split by target first, CopyInTurn),
    // asked once before its first turn (a turn per probe round trip held large partitions'
    // catch-ups past the targets' wait for them).
    std::shared_ptr<const ProbeAnswers> answers;
  };
  // Posts the next copies of `queue` to `shard`: one task sends partitions (CopyToNewHolder to
  // each of their targets) until about options.scan_entries_per_task entries left, then posts
  // the rest behind whatever the shard received meanwhile: a shard copying many partitions
  // still reads its connections between two tasks (a member's heartbeats among them), and
  // many small partitions do not each wait a turn. Each task holds a request token, so Stop
  // waits for the whole chain: a leaving member's copies are its handover. With a log, the
  // queue is split by target and each target probed first, once (CopyQueue::answers).
  void CopyInTurn(std::size_t shard, std::shared_ptr<CopyQueue> queue);
  // On p's shard, after `target` answered CopyToNewHolder's probe with the point its replay
  // left p at (null: none): sends the catch-up (map_catch_up.cc) when p's history here passed
  // that point and still holds what followed it, else the whole partition (CopyPartition).
  void CatchUpOrCopy(std::size_t shard, std::uint32_t p, const std::string& target,
                     ClusterRouting* routing, const std::optional<ReplicaPoint>& at,
                     std::function<void(base::Result<void>)> done);
  // On partition p's shard: appends the entries of `table`'s store of p that are live at `now`
  // to `out` as kCopySets (a copy's content).
  void ExportStore(MapTable& table, std::uint32_t partition_id, base::Millis now,
                   std::vector<ReplicaUpdate>& out);
  // On partition p's shard: how many entries its stores hold (all maps).
  std::size_t PartitionEntryCount(std::size_t shard, std::uint32_t partition_id) const;
  // On partition p's shard: clear + every live entry of every map (of the maps `keep` accepts,
  // when given), then kPartitionComplete: a migration copy, or a snapshot.
  std::vector<ReplicaUpdate> ExportPartition(std::size_t shard, std::uint32_t partition_id,
                                             const std::function<bool(MapTable&)>& keep = nullptr);
  // What a backup found applying one batch: partitions whose replica version showed missed
  // updates, and partitions it refused a write of because it serves them as owner or because
  // the sender is not in its view (`from_outsider`).
  struct ReplicaOutcome {
    std::vector<std::uint32_t> stale;
    std::vector<std::uint32_t> refused;
    bool from_outsider = false;
    bool between_clusters = false;  // refused: this member left its cluster, no table since
    base::Result<Logged> logged = Logged{};        // what was logged of it (LogUpdates)
    std::vector<ReplicaPoint> points;              // answers to kProbe
    std::vector<std::uint32_t> refused_catch_ups;  // kProbe with a point not held here
    std::vector<std::uint32_t> held;               // copies of partitions held here whole already
  };
  // Whether `table` lists this member as a holder of partition p, p waits for no copy, and it
  // has p's data: a copy of it completed here, or the table before listed it too. (A holder
  // listed when none of the previous table is, as when the one holding it leaves and hands it
  // over, waits for no copy, yet takes that handover.)
  bool HoldsWhole(const Routing& table, std::uint32_t p) const {
    const auto& r = table.replicas[p];
    const auto& f = flags[p];
    return !f.pending.load() && (f.copy_arrived.load() || f.listed_before.load()) &&
           std::find(r.begin(), r.end(), table.self) != r.end();
  }
  // `sender`: the sending member's identity (empty: unknown; MapService::ApplyReplica). Its
  // listing is checked here, on the shard, in the same task as the apply: a table installed
  // later posts its copies to this shard after this batch, so they include what it applied.
  ReplicaOutcome ApplyOnShard(std::size_t shard, const std::vector<ReplicaUpdate>& updates,
                              const std::string& sender);
  // Stops waiting for migration copies of this shard's partitions pending longer than
  // options.migration_copy_wait_ms (their source died or never knew), and for work handoffs
  // pending longer than 10 s: logs, and serves what the member has (map_service_table.cc).
  void GiveUpStaleCopies(std::size_t shard);
  // Turns the events of one operation into the resulting state of each key it touched, as
  // replica version `version` (0: the partition's next one).
  void AppendUpdates(MapTable& table, std::uint32_t partition_id, base::Millis now_ms,
                     const std::vector<EntryEvent>& events, std::vector<ReplicaUpdate>& out,
                     std::uint64_t version = 0);

  runtime::ShardSet& shards;
  partition::Partitioner partitioner;
  const base::Clock& clock;
  const EntryProcessorRegistry& processors;
  std::shared_ptr<spdlog::logger> log;
  MapServiceOptions options;

  std::vector<std::unique_ptr<ShardState>> states;  // states[i] touched only on shard i
  ListenerRegistry listeners;
  mutable std::mutex config_mu;
  std::map<std::string, MapConfig, std::less<>> configs;  // guarded by config_mu
  std::atomic<std::uint64_t> config_version{1};
  mutable std::mutex names_mu;
  std::set<std::string> names;  // guarded by names_mu
  std::atomic<bool> stopped{false};
  std::atomic<bool> started{false};  // read on the shards (WaitForStream)
  InFlight in_flight;
  std::unique_ptr<PartitionFlags[]> flags;  // per partition
  mutable std::mutex ownership_mu;
  mutable std::atomic<std::uint64_t> ownership_seq{0};  // see OwnershipChange
  std::shared_ptr<const Routing> routing;  // guarded by ownership_mu; null = not clustered
  // Per partition, the member whose kHandoff a pending handoff waits for; guarded by
  // ownership_mu.
  std::vector<std::string> handoff_from;
  // Per partition, the new holders this member is to copy it to once its own copy arrived: a
  // table made it the source while it still waited for the partition (its owner, or the
  // member it was taking the partition from, died or restarted mid-migration); copying the
  // empty replica would have been the new holders' whole copy. Guarded by ownership_mu.
  std::vector<std::vector<std::string>> deferred_copies;
  // Per partition, the copies the last table ordered (PlanCopies, "Copy sources" in
  // docs/architecture.md). Guarded by ownership_mu.
  struct Incoming {
    std::string member;                   // a new holder
    std::string source;                   // the member copying it there
    std::vector<std::string> alternates;  // the other members that had the data then
  };
  struct Lineage {
    std::vector<Incoming> incoming;
  };
  std::vector<Lineage> lineage;
  // What PlanCopies decided for one partition of a table.
  struct CopyPlan {
    std::string source;             // the member that copies it (empty: none can)
    std::vector<std::string> to;    // the listed holders it copies it to
    std::vector<std::string> lost;  // holders whose copy's source is gone
    bool tentative = false;         // `source` is no holder of the previous table (CopyLostFirst)
  };
  // The step of `l` for a table listing `after` over the `alive` members (listed, not
  // replaced), `before` being the previous list without replaced processes. A copy the
  // previous table ordered arrived if its source is alive now; if not (it was listed but dead,
  // or died since), its holder lost it and is a new holder again, unless it is this member
  // and `self_whole` (it waits for no copy: it knows its copy arrived). The source is the
  // first alive member of `before` that did not lose its copy (the previous owner first: its
  // copy has every write it applied); when none is left, one of the members that had the
  // data when a lost copy was ordered, else the first alive member of `before` (its lost copy
  // may have arrived).
  static CopyPlan PlanCopies(Lineage& l, const std::vector<std::string>& before,
                             const std::vector<std::string>& after,
                             const std::function<bool(const std::string&)>& alive,
                             const std::string& self, bool self_whole);
  // Per partition, the sender whose copy of it this member accepted last (ApplyOnShard): its
  // later chunks are applied even once the partition waits for no copy any more. Written on
  // the partition's shard.
  std::vector<std::string> copy_sender;
  // On `shard`, after a table that does not list this member as a holder of `partitions`
  // (SetPartitionTable: its first, or the one after a recovered first table): clears what
  // this member replayed of them, which the cluster holds in other members' replicas (newer
  // or equal), and logs the clear, so neither memory nor the next replay keeps a superseded
  // copy; skips a partition a later table made this member hold again (its copy replaces it)
  // and one no longer as replayed (PartitionFlags::replayed).
  void DropUnheldReplicas(std::size_t shard, const std::vector<std::uint32_t>& partitions);
  // The first table was a recovered one: the next drops what this member replayed and does
  // not hold (SetPartitionTable). Guarded by ownership_mu.
  bool replayed_drop_deferred = false;
  // Sends `p`'s deferred copies, if any (on p's shard, after its copy arrived or was given up).
  void SendDeferredCopies(std::size_t shard, std::uint32_t p);
  // LeaveCluster ran and no table came since. Meanwhile this member applies no replica update
  // (ApplyOnShard refuses them, and a copy's sender sends it again): a copy exported before
  // the member left would otherwise count as the next table's, and a write would be confirmed
  // by a member that keeps none of it. Written under ownership_mu.
  std::atomic<bool> left_cluster{false};
  // How many times LeaveCluster ran: a write's backup failure that arrives after its member
  // left the cluster it was written in marks nothing (LeaveCluster already left that cluster's
  // unconfirmed writes out of the merge; the next table's partitions are fresh copies).
  std::atomic<std::uint64_t> leaves{0};
  // --- persistence (map_persistence.cc) ----------------------------------------------------
  // Per shard: its log, once OpenLog succeeded (then `logging` is set, for good).
  std::vector<std::unique_ptr<storage::ShardLog>> logs;
  std::atomic<bool> logging{false};
  // On `shard`, whether a write of `request` may have something to log: the shard logs, and
  // the request's map persists (or it is a transaction, which may write several maps).
  // Errors: kStorage (kDiskLow) when it may and the shard's log is short of free space
  // (ShardLog::CheckSpace): the write is refused before it is applied.
  base::Result<bool> MayLog(std::size_t shard, const MapRequest& request);
  // On `shard`: appends what `updates` changed in maps that persist, and partition-wide
  // clears, as one record (a write, a transaction's partition, or one applied batch of
  // replica updates). Errors: kStorage once the log failed (the write was applied in memory
  // only; the caller reports it failed).
  base::Result<Logged> LogUpdates(std::size_t shard, const std::vector<ReplicaUpdate>& updates);
  // On `shard`: logs a clear of every partition of the shard (LeaveCluster emptied them).
  void LogClearAll(std::size_t shard);
  // `done`, called once the log allows `logged` to be acknowledged (WhenDurable / WhenWritten;
  // at once for kNone), with the log's error instead of the result when it failed.
  Callback AfterLogged(std::vector<base::Result<Logged>> logged, Callback done);
  // The error a write's caller gets when the write was applied but its log failed.
  static base::Error NotLogged(const base::Error& log_error);
  // Calls done() once every record of `logged` may be acknowledged, or with the first error.
  void WhenLogged(const std::vector<Logged>& logged, std::function<void(base::Result<void>)> done);
  // On `shard` (OpenLog): opens its log under `dir` and replays it. Errors as OpenLog.
  base::Result<LogRecovery> ReplayShard(std::size_t shard, const std::string& dir);
  // Compaction, per shard and on its thread (map_persistence.cc, "Compaction").
  struct LogCompaction {
    std::uint64_t logged_bytes = 0;     // appended since the last round began (replay: held)
    std::uint64_t snapshot_bytes = 0;   // what the last complete round wrote: about the live data
    std::uint64_t round_first_seq = 0;  // the running round's first record; 0: none runs
    std::uint64_t round_last_seq = 0;   // its last record so far
    std::uint64_t round_bytes = 0;      // what it wrote so far
    std::size_t next = 0;               // its next partition: shard + next * shard count
  };
  std::vector<LogCompaction> compaction;
  std::atomic<std::uint64_t> compactions{0};  // complete rounds, every shard
  // Per partition (written on its shard only): LogRecovery::held and ::versions as the log
  // says them now; a snapshot says the same.
  std::vector<std::uint8_t> log_held;
  std::vector<std::uint64_t> log_version;
  // --- catch-up (map_catch_up.cc) ---------------------------------------------------------
  // Per partition, on its shard, while the member logs: the point (replica.h ReplicaPoint)
  // of its history of persisting updates as this member's log holds it, and the last
  // updates of that history with the point each leads to (the backlog), so a member whose
  // replica ends at an earlier point of it gets only what followed (CatchUpOrCopy).
  struct History {
    std::uint64_t digest = 0;       // now; 0: unknown (a copy is arriving, or came unlogged)
    std::uint64_t base_digest = 0;  // the point the backlog starts after; 0: none
    // The backlog: the updates after base_digest, encoded one after another (EncodeEntry in
    // map_catch_up.cc) in two generations; once the newer one passes half the cap the older
    // one goes whole and the emptied one becomes the newer: no allocation per write once the
    // buffers have grown, and no walk over old entries to free them.
    struct Mark {
      std::uint64_t digest = 0;  // the history's digest after the update
      base::Millis wall_ms = 0;  // when it was logged (its TTL left counts from there)
      std::size_t end = 0;       // where its encoding ends in its generation's buffer
    };
    struct Generation {
      std::string bytes;
      std::vector<Mark> marks;
    };
    Generation generations[2];
    int newer = 0;
    // Replay's last point, while nothing but a new holder's writes came since (no copy, clear
    // or write as owner): what a kProbe is answered with (PartitionFlags::replayed).
    bool replayed = false;
    ReplicaPoint replayed_at;
  };
  std::vector<History> history;  // per partition; empty without a log
  // The digest of an empty partition's history (of a member's first start).
  static constexpr std::uint64_t kEmptyHistory = 0x7e55e7a5eed0f00dull;
  // On `shard`: what `updates` (a record, as logged) do to their partitions' histories;
  // `wall_ms`: when it was logged. A copy's start makes the history unknown and its
  // kPartitionComplete sets it to the copy's point; a persisting write extends it.
  void TrackHistory(std::size_t shard, const std::vector<ReplicaUpdate>& updates,
                    base::Millis wall_ms);
  // On p's shard: the answer to a kProbe of p (History::replayed), if any.
  std::optional<ReplicaPoint> ProbeAnswer(std::uint32_t p) const;
  // On p's shard: the catch-up from point `digest` on (the non-persisting maps whole, the
  // persisting ones' updates after it, kPartitionComplete with the current point), or
  // nullopt when the backlog does not reach back to it.
  std::optional<std::vector<ReplicaUpdate>> CatchUpFrom(std::size_t shard, std::uint32_t p,
                                                        std::uint64_t digest);
  // On `shard`, after it appended `bytes`: starts a round once it logged more than
  // max(options.log_compact_bytes, the last round's snapshot bytes) since the last one began.
  void MaybeCompact(std::size_t shard, std::uint64_t bytes);
  // On `shard`: snapshots the round's next partitions (about options.scan_entries_per_task
  // entries), posting the rest behind what the shard received meanwhile; after the last one,
  // once the round is durable, drops the segments before it (storage::ShardLog::DropBefore).
  void CompactInTurn(std::size_t shard);
  // On `shard`: appends partition p's snapshot as one or more consecutive records and returns
  // the last one's number. Errors: the log's.
  base::Result<std::uint64_t> SnapshotPartition(std::size_t shard, std::uint32_t p);

  // SetOwnershipHook's hook; guarded by ownership_mu, copied out before it is called.
  std::shared_ptr<const std::function<void(std::uint32_t)>> ownership_hook;
  // Runs the ownership hook for `partitions` (all on `shard`): inline when on that shard, else
  // posted there.
  void NotifyOwnership(std::size_t shard, std::vector<std::uint32_t> partitions);
  // The companion map (family.h) of entry `key` of kind `kind` of map `map_name` on this
  // shard: cleared here without replication (a backup whose copy of the entry was replaced or
  // removed; nothing for a kind without one), and dropped whole once empty (a table per large
  // hash that ever spilled would otherwise stay forever).
  void ClearCompanionHere(std::size_t shard, ValueKind kind, const std::string& map_name,
                          std::uint32_t partition_id, std::string_view key);
  void DropCompanionIfEmpty(std::size_t shard, const std::string& name);
  // Sends OpContext::follow_ups on (each to its partition's owner; a stream deletion in steps
  // until done), answering no one: failures are logged.
  void RunFollowUps(std::vector<MapRequest> requests);
  std::atomic<std::uint64_t> stream_key_removals{0};  // follow-ups that remove a stream
  void RunFollowUp(MapRequest request, int round);
  void SendFollowUp(MapRequest request, int round);
  // Whether map `name` is the companion of an entry that is here, live and of a kind that has
  // one; false for any other map too. Copies and merges send no other companion (one of an
  // entry that expired or went may not be cleared yet).
  bool IsLiveCompanion(std::size_t shard, const std::string& name, std::uint32_t partition_id,
                       base::Millis now) const;
  class ShardPartitionMaps;
};

// OpContext::maps over one shard's tables (map_service.cc), for RunOnPartition, RunTransaction
// and the sweeper. With `replicate`, what operations change through it is collected as events
// for AppendSideUpdates; with `undo`, each store it hands out joins that transaction.
class MapService::Impl::ShardPartitionMaps final : public PartitionMaps {
 public:
  ShardPartitionMaps(Impl& impl, std::size_t shard, std::uint32_t partition_id, base::Millis now_ms,
                     bool replicate, UndoLog* undo = nullptr)
      : impl_(impl),
        shard_(shard),
        partition_id_(partition_id),
        now_ms_(now_ms),
        replicate_(replicate),
        undo_(undo) {}
  RecordStore* Find(const std::string& name, bool create) override;
  OpContext ContextFor(const std::string& name) override;
  bool undoable() const override { return undo_ != nullptr; }
  // Whether an operation changed anything through it (there are updates to send).
  bool changed() const;
  // The resulting state of what was changed through it, as replica version `version`.
  void AppendSideUpdates(std::vector<ReplicaUpdate>& out, std::uint64_t version);
  // Drops the field maps it touched that are empty now. Last: the tables may go.
  void DropEmpty();

 private:
  struct Side {
    MapTable* table;
    std::vector<EntryEvent> events;
  };
  Impl& impl_;
  std::size_t shard_;
  std::uint32_t partition_id_;
  base::Millis now_ms_;
  bool replicate_;
  UndoLog* undo_;
  // Boxed: contexts point at their events. A vector, not a deque: most operations touch no
  // other map, and an empty deque allocates (two allocations on every map operation).
  std::vector<std::unique_ptr<Side>> sides_;
  Side& SideOf(MapTable& table);
};

}  // namespace tessera::map
