// MapService on a backup: applying the replica updates an owner sends (its writes, partition
// copies, resyncs, handoffs), checked against this member's table and view, and logged when
// the map persists (map_persistence.cc). The owner's side: map_service_cluster.cc.
#include <fmt/ranges.h>

#include <map>
#include <set>

#include "map_service_impl.h"

namespace tessera::map {

MapService::Impl::ReplicaOutcome MapService::Impl::ApplyOnShard(
    std::size_t shard, const std::vector<ReplicaUpdate>& updates, const std::string& sender) {
  const base::Millis now = clock.NowMs();
  // Before the first table every partition counts as local, yet a joiner's copies may arrive
  // before its first table: only a member with a table can be a serving owner.
  const auto current = CurrentRouting();
  const bool has_table = current != nullptr;
  const bool from_outsider = has_table && !sender.empty() && !current->HasMember(sender);
  // Left its cluster, no table since (left_cluster): nothing is applied, see Impl.
  const bool between_clusters = !has_table && left_cluster.load();
  std::set<std::uint32_t> ignoring;      // resyncs of partitions this member serves as owner
  std::vector<std::uint32_t> completed;  // copies that arrived: maybe served here from now on
  std::set<std::uint32_t> stale;
  std::set<std::uint32_t> refused;  // writes of partitions this member serves as owner
  std::map<std::uint32_t, std::uint64_t> write_version;  // of the write being applied
  std::vector<ReplicaPoint> points;                      // answers to kProbe
  std::set<std::uint32_t> refused_catch_ups;  // a catch-up from a point not held here now
  std::set<std::uint32_t> held;               // copies of partitions held here whole already
  std::set<std::uint32_t> resyncs;            // resyncs (of a backup held here) in this batch
  // What was applied, for this shard's log (LogUpdates keeps what persists).
  const bool log_applied = logging.load(std::memory_order_relaxed) && !states[shard]->replaying;
  std::vector<ReplicaUpdate> applied;
  for (const auto& u : updates) {
    if (!refused_catch_ups.empty() && refused_catch_ups.contains(u.partition_id)) continue;
    if (!held.empty() && held.contains(u.partition_id)) continue;
    if (between_clusters && u.kind != ReplicaUpdate::Kind::kHandoff) {
      refused.insert(u.partition_id);
      continue;
    }
    // A write of a partition this member serves as owner comes from a member whose table is
    // older than ours: one that was paused or cut off and still acts as the owner, on its
    // stale copy. Applying it would overwrite what was written here meanwhile; it is refused,
    // so the sender's write fails (the caller retries against the owner of the current table).
    // The same for every write (and a clear from a write, which carries a version) from a
    // sender this member's view does not list (ApplyReplica).
    const bool write = u.kind == ReplicaUpdate::Kind::kSet ||
                       u.kind == ReplicaUpdate::Kind::kDelete ||
                       (u.kind == ReplicaUpdate::Kind::kClearPartition && u.version != 0);
    if (write && has_table && (from_outsider || IsLocal(u.partition_id))) {
      refused.insert(u.partition_id);
      continue;
    }
    if (u.kind == ReplicaUpdate::Kind::kResyncBegin ||
        u.kind == ReplicaUpdate::Kind::kResyncChunk) {
      resyncs.insert(u.partition_id);
      if (has_table && (from_outsider || IsLocal(u.partition_id))) {
        ignoring.insert(u.partition_id);  // its sender's table is older than ours
      }
    }
    // A partition copy (its head: a clear of every map, or a catch-up's kProbe with a point;
    // then its entries and kPartitionComplete) to a member that holds the partition whole
    // (HoldsWhole: listed, waiting for no copy, and with the data: a completed copy, the
    // table before listed it, or it served what it held as a tentative source): its sender
    // counted it as a new holder after the source of its copy died, or took itself for the
    // source with nothing to give (SetPartitionTable), and the partition may have been
    // written here since. Refused whole. The chunks of a copy accepted before go on.
    if (has_table && !resyncs.contains(u.partition_id) &&
        (u.kind == ReplicaUpdate::Kind::kCopySet ||
         u.kind == ReplicaUpdate::Kind::kPartitionComplete ||
         (u.kind == ReplicaUpdate::Kind::kClearPartition && u.version == 0) ||
         (u.kind == ReplicaUpdate::Kind::kProbe && u.digest != 0))) {
      const bool head = (u.kind == ReplicaUpdate::Kind::kClearPartition && u.map_name.empty()) ||
                        u.kind == ReplicaUpdate::Kind::kProbe;
      auto& from = copy_sender[u.partition_id];
      if (HoldsWhole(*current, u.partition_id) && (head || from != sender)) {
        held.insert(u.partition_id);
        continue;
      }
      if (head) from = sender;
    }
    if (ignoring.count(u.partition_id) != 0 && u.kind != ReplicaUpdate::Kind::kSet &&
        u.kind != ReplicaUpdate::Kind::kDelete) {
      continue;
    }
    if (u.version != 0 && u.kind != ReplicaUpdate::Kind::kPartitionComplete) {
      auto [it, first] = write_version.try_emplace(u.partition_id, u.version);
      if (first || it->second != u.version) {  // the first update of a write: check its version
        it->second = u.version;
        auto& f = flags[u.partition_id];
        // A serving owner (whose sender has an older table) keeps its own count.
        if (!(has_table && f.local.load())) {
          const std::uint64_t current = f.version.load();
          if (f.versioned.load() && u.version != current + 1) stale.insert(u.partition_id);
          f.version.store(std::max(current, u.version));
        }
      }
    }
    if (log_applied) applied.push_back(u);
    switch (u.kind) {
      case ReplicaUpdate::Kind::kSet:
      case ReplicaUpdate::Kind::kCopySet: {
        MapTable& table = TableOn(shard, u.map_name);
        if (states[shard]->replaying) table.from_log = true;
        RecordStore& store = StoreOf(table, u.partition_id);
        const auto written = store.Write(u.key, u.value, now);
        Record* record = written.record;
        // An entry with a companion replaced here (this copy may not have expired it yet):
        // its companion goes.
        if (written.previous != u.value_kind) {
          ClearCompanionHere(shard, written.previous, u.map_name, u.partition_id, u.key);
        }
        store.SetTtl(*record, u.ttl_left_ms, now);
        store.SetMaxIdle(*record, u.max_idle_ms);
        record->SetUpdateHistory(u.update_age_ms, u.hits, now);
        record->set_kind(u.value_kind);
        if (u.entry_version != 0) record->set_version(u.entry_version);
        break;
      }
      case ReplicaUpdate::Kind::kDelete: {
        RecordStore& store = StoreOf(TableOn(shard, u.map_name), u.partition_id);
        const Record* r = store.Find(u.key);
        const ValueKind kind = r != nullptr ? r->kind() : ValueKind::kPlain;
        store.Erase(u.key);
        ClearCompanionHere(shard, kind, u.map_name, u.partition_id, u.key);
        DropCompanionIfEmpty(shard, u.map_name);  // a companion's last entry went
        break;
      }
      case ReplicaUpdate::Kind::kClearPartition:
      case ReplicaUpdate::Kind::kResyncBegin:
        for (auto& [name, table] : states[shard]->maps) {
          if (!u.map_name.empty() && name != u.map_name) continue;
          if (RecordStore* slot = table->stores.Find(u.partition_id / shards.size())) {
            slot->Clear();
          }
        }
        break;
      case ReplicaUpdate::Kind::kResyncChunk:
        break;
      case ReplicaUpdate::Kind::kProbe: {
        auto point = ProbeAnswer(u.partition_id);
        if (u.digest == 0) {  // a question
          if (point) points.push_back(*point);
        } else if (!point || point->digest != u.digest) {  // a catch-up's start: still here?
          refused_catch_ups.insert(u.partition_id);
        }
        break;
      }
      case ReplicaUpdate::Kind::kHandoff: {
        std::lock_guard lock(ownership_mu);
        auto& f = flags[u.partition_id];
        if (f.handoff_pending.load()) {
          if (handoff_from[u.partition_id] == u.key && f.handoff_pending.exchange(false)) {
            completed.push_back(u.partition_id);
          }
        } else if (!(routing && routing->Owner(u.partition_id) == routing->self)) {
          f.handoff_arrived.store(true);  // before the table that makes us owner
          handoff_from[u.partition_id] = u.key;
        }
        break;
      }
      case ReplicaUpdate::Kind::kPartitionComplete: {
        // Atomic with SetPartitionTable: the copy may complete before this member installed
        // the table that made it a holder (copies and views travel on different connections).
        OwnershipChange change(*this);
        if (routing == nullptr && left_cluster.load()) {
          // LeaveCluster ran while this copy was being applied: its clear follows on this
          // shard, and the copy must not count for the next table.
          refused.insert(u.partition_id);
          break;
        }
        auto& f = flags[u.partition_id];
        f.version.store(u.version);
        f.versioned.store(true);
        f.copy_arrived.store(true);
        f.tentative_source.store(false);
        if (f.pending.exchange(false)) {
          f.local.store(routing && routing->Owner(u.partition_id) == routing->self);
          completed.push_back(u.partition_id);
        }
        break;
      }
    }
  }
  for (auto p : completed) SendDeferredCopies(shard, p);
  if (!completed.empty()) NotifyOwnership(shard, std::move(completed));
  return {{stale.begin(), stale.end()},
          {refused.begin(), refused.end()},
          from_outsider,
          between_clusters || (!refused.empty() && left_cluster.load()),
          log_applied ? LogUpdates(shard, applied) : base::Result<Logged>(Logged{}),
          std::move(points),
          {refused_catch_ups.begin(), refused_catch_ups.end()},
          {held.begin(), held.end()}};
}

void MapService::ApplyReplica(std::vector<ReplicaUpdate> updates,
                              std::function<void(base::Result<ReplicaAck>)> done,
                              const std::string& sender) {
  // An owner's writes and resyncs from a member this member's view does not list: the sender
  // was cut off or removed and acts on a table of its own (a bridge partition leaves two
  // masters each counting the member in between as theirs). Applying them would let the
  // sender confirm writes its old cluster never sees; they are refused, so it fails them.
  // Checked on each shard as it applies (ApplyOnShard).
  std::vector<std::vector<ReplicaUpdate>> by_shard(shards_.size());
  for (auto& u : updates)
    by_shard[shards_.ShardOfPartition(u.partition_id)].push_back(std::move(u));
  auto parts = std::make_shared<std::vector<std::vector<ReplicaUpdate>>>(std::move(by_shard));
  auto token = impl_->EnterRequest();
  using Outcome = Impl::ReplicaOutcome;
  shards_.MapReduce<Outcome>(
      [impl = impl_.get(), parts, token, sender](std::size_t shard) {
        if ((*parts)[shard].empty()) return Outcome{};
        return impl->ApplyOnShard(shard, (*parts)[shard], sender);
      },
      [impl = impl_.get(), done = std::move(done), token,
       sender](std::vector<Outcome> per_shard) mutable {
        // A backup acknowledges what it applied once its log allows (the map's persistence).
        auto not_logged = [](const base::Error& e) {
          return base::Error(ErrorCode::kStorage,
                             "the backup applied the update in memory but could not log it to "
                             "disk: " +
                                 e.message());
        };
        std::vector<Impl::Logged> logged;
        for (auto& o : per_shard) {
          if (!o.logged) return done(std::unexpected(not_logged(o.logged.error())));
          if (o.logged->wait != Persistence::kNone) logged.push_back(*o.logged);
        }
        if (!logged.empty()) {
          auto inner = std::move(done);
          done = [impl, logged, inner, not_logged](base::Result<ReplicaAck> r) {
            impl->WhenLogged(logged, [inner, not_logged, r = std::move(r)](base::Result<void> ok) {
              if (!ok) return inner(std::unexpected(not_logged(ok.error())));
              inner(r);
            });
          };
        }
        ReplicaAck ack;
        std::vector<std::uint32_t> refused;
        bool from_outsider = false;
        bool between_clusters = false;
        for (auto& o : per_shard) {
          ack.stale.insert(ack.stale.end(), o.stale.begin(), o.stale.end());
          ack.points.insert(ack.points.end(), o.points.begin(), o.points.end());
          refused.insert(refused.end(), o.refused.begin(), o.refused.end());
          from_outsider = from_outsider || (o.from_outsider && !o.refused.empty());
          between_clusters = between_clusters || o.between_clusters;
        }
        std::vector<std::uint32_t> refused_catch_ups;
        std::vector<std::uint32_t> held;
        for (auto& o : per_shard) {
          refused_catch_ups.insert(refused_catch_ups.end(), o.refused_catch_ups.begin(),
                                   o.refused_catch_ups.end());
          held.insert(held.end(), o.held.begin(), o.held.end());
        }
        if (!held.empty()) {
          return done(base::Fail(
              ErrorCode::kConflict,
              fmt::format("this member holds partition(s) {} whole already (listed as their "
                          "holder, with their data, waiting for no copy): a copy would wipe "
                          "what was written here since, and is not applied",
                          fmt::join(held, ", ")),
              base::ErrorReason::kAlreadyHeld));
        }
        if (!refused_catch_ups.empty()) {
          return done(base::Fail(
              ErrorCode::kConflict,
              fmt::format("the catch-up of partition(s) {} goes on from a point this member no "
                          "longer holds (a copy or clear came since it answered); send the "
                          "whole partition",
                          fmt::join(refused_catch_ups, ", "))));
        }
        if (!refused.empty()) {
          std::string list;
          for (auto p : refused) list += (list.empty() ? "" : ", ") + std::to_string(p);
          if (between_clusters) {
            return done(base::Fail(
                ErrorCode::kNotOwner,
                fmt::format("this member left its cluster and waits for its next partition "
                            "table: it applies no replica update of partition(s) {} meanwhile "
                            "(a copy is sent again once the table lists it)",
                            list)));
          }
          if (from_outsider) {
            return done(base::Fail(
                ErrorCode::kNotOwner,
                fmt::format("member {} is not in this member's cluster view: its writes of "
                            "partition(s) {} are refused (it was cut off or removed, and acts "
                            "on a partition table of its own)",
                            sender, list)));
          }
          return done(base::Fail(ErrorCode::kNotOwner,
                                 "this member serves partition(s) " + list +
                                     " as owner under a newer partition table; a write from "
                                     "their former owner is refused (it must retry)"));
        }
        done(std::move(ack));
      });
}

}  // namespace tessera::map
