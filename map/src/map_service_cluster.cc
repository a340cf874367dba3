// MapService in a cluster: routing to owners, synchronous backups, migration copies. What a
// new partition table changes on this member: map_service_table.cc.
//
// Ownership is a set of per-partition atomic flags read without a lock on every request, plus
// a Routing snapshot (the table as addresses) replaced whole by SetPartitionTable.
//
// Routing: a keyed request for a partition another member owns goes to it as local_only (the
// receiver runs it or answers kNotOwner); a whole-map request runs on every owner over the
// partitions each owns, and the parts merge as the shards' parts do. kNotOwner (the table moved
// under the request) and kConnectionFailed (never sent) are retried with a growing delay.
//
// Backups: a write on an owned partition with backups records what it changed (its entry
// events, turned into the resulting state of each key) and sends that to every backup; the
// caller's answer waits for all their acks. Backups apply state, not operations, so an entry
// processor runs once, on the owner.
//
// Migration: when the table changes, the previous owner of each partition (or its first
// surviving replica) copies it to every member that newly holds a replica: clear, every live
// entry, complete. The copy is taken on the partition's shard after the flags flipped, so
// every write accepted before the flip is in it, and every later write reaches the new holder
// after it (one connection per peer keeps order). A new owner serves the partition only after
// the copy completed (a backup that becomes owner before its copy arrived waits too); requests
// wait meanwhile, and the member gives up waiting after
// MapServiceOptions::migration_copy_wait_ms. A member that left its cluster applies no copy
// until its next table (the sender sends it again).
//
// Resync: a backup that did not acknowledge an update (timeout, lost connection) is sent the
// whole partition again, every second until it confirms or the table no longer lists it.
#include <algorithm>
#include <iterator>
#include <map>

#include "map_service_impl.h"
#include "tessera/base/check.h"

namespace tessera::map {
namespace {

// Retries of a request whose partition is migrating or whose owner is unreachable: 20 ms,
// 40 ms, ... up to 200 ms apart, about 12 s in all, which outlasts a new owner's default wait
// for a copy that stopped coming and a failure timeout's worth of a dead owner.
constexpr int kMaxRouteAttempts = 65;
constexpr int kMaxRouteDelayMs = 200;
// Retries (about 0.7 s) before a request to a recovering cluster fails with kRecovering.
constexpr int kRecoveringAttempts = 8;
constexpr std::size_t kCopyChunkBytes = 4 << 20;  // one replica message of a partition copy
constexpr int kResyncRetryMs = 1000;  // between attempts to re-copy a partition to a backup
constexpr int kResyncAttempts = 30;
constexpr int kCopyRetryMs = 250;  // between attempts of a migration copy (CopyToNewHolder)
// Well within a new holder's default wait for its copy (migration_copy_wait_ms, 10 s).
constexpr base::Millis kCopyRetryLimitMs = 6'000;

bool RetryableRouteError(ErrorCode code) {
  return code == ErrorCode::kNotOwner || code == ErrorCode::kConnectionFailed;
}

base::Millis SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

const std::string& MapService::Impl::Routing::Owner(std::uint32_t p) const {
  static const std::string kNone;
  return p < replicas.size() && !replicas[p].empty() ? replicas[p][0] : kNone;
}

void MapService::Impl::Route(MapRequest request, Callback done, int attempt) {
  // A retried write is admitted again: the cluster may have lost its quorum while the request
  // waited (for a moving partition, or an owner that stopped answering), and the table that
  // ends the wait may make it local with no backups. Admitted once, it was applied there and
  // confirmed, and the merge discarded it.
  if (attempt > 0 && any_quorum.load(std::memory_order_relaxed)) {
    if (auto ok = CheckQuorum(request); !ok) return done(std::unexpected(ok.error()));
  }
  if (request.local_only && CurrentRouting() == nullptr) {
    // Another member sent this, so we are in a cluster, but our first table has not arrived
    // (see ExpectPartitionTable): our stores may still be empty.
    return done(Fail(ErrorCode::kNotOwner,
                     "this member has not received the partition table yet; the sender retries"));
  }
  if (expects_table.load(std::memory_order_relaxed) && CurrentRouting() == nullptr) {
    // A full-cluster restart: its table usually follows at once (every member of the last
    // one is back), so the request waits a little; a cluster that waits for members says so
    // rather than after ~12 s of retries.
    std::unique_lock lock(recovering_mu);
    if (!recovering.empty() && attempt >= kRecoveringAttempts) {
      std::string why = recovering;
      lock.unlock();
      return done(Fail(ErrorCode::kRecovering, why + "; retry shortly"));
    }
  }
  if (MapOpIsKeyed(request.op)) {
    const std::uint32_t partition_id = partitioner.PartitionOf(request.key);
    if (IsLocal(partition_id)) return ExecuteKeyed(request, done);
    return ForwardKeyed(partition_id, std::move(request), std::move(done), attempt);
  }
  if (request.local_only) {
    // Keys another member sent here must be ours; if the table moved, the sender retries.
    auto foreign = [this](const std::string& key) {
      return !IsLocal(partitioner.PartitionOf(key));
    };
    bool any_foreign = std::any_of(request.keys.begin(), request.keys.end(), foreign) ||
                       std::any_of(request.entries.begin(), request.entries.end(),
                                   [&](const auto& e) { return foreign(e.first); });
    if (any_foreign) {
      return done(Fail(ErrorCode::kNotOwner,
                       "some keys of this " + std::string(MapOpName(request.op)) +
                           " belong to partitions this member does not serve; the sender retries"));
    }
    return ExecuteFanOut(request, done);
  }
  if (auto current = CurrentRouting(); !current || current->routing == nullptr) {
    if (!current && expects_table.load()) {  // joining: wait for the first table
      return RetryLater(std::move(request), std::move(done), attempt);
    }
    return ExecuteFanOut(request, done);  // not clustered
  }
  ExecuteAcrossMembers(std::move(request), std::move(done), attempt);
}

void MapService::Impl::ForwardKeyed(std::uint32_t partition_id, MapRequest request, Callback done,
                                    int attempt) {
  auto current = CurrentRouting();
  const std::string owner = current ? current->Owner(partition_id) : std::string();
  if (current && owner == current->self) {  // ours, but its copy has not arrived yet
    if (request.local_only) {
      return done(Fail(
          ErrorCode::kNotOwner,
          fmt::format("partition {} is migrating to this member; retry shortly", partition_id)));
    }
    return RetryLater(std::move(request), std::move(done), attempt);
  }
  if (request.local_only) {
    return done(Fail(ErrorCode::kNotOwner,
                     fmt::format("partition {} is not owned by this member ({}); the sender "
                                 "retries with the current partition table",
                                 partition_id, current ? current->self : "")));
  }
  if (!current || current->routing == nullptr || owner.empty()) {
    return RetryLater(std::move(request), std::move(done), attempt);
  }
  forwarded.fetch_add(1, std::memory_order_relaxed);
  MapRequest remote = request;
  remote.local_only = true;
  current->routing->Send(owner, std::move(remote),
                         [this, request = std::move(request), done = std::move(done), attempt,
                          token = EnterRequest()](base::Result<MapResult> result) mutable {
                           if (!result && RetryableRouteError(result.error().code())) {
                             return RetryLater(std::move(request), std::move(done), attempt);
                           }
                           done(std::move(result));
                         });
}

void MapService::Impl::RetryLater(MapRequest request, Callback done, int attempt) {
  if (attempt + 1 >= kMaxRouteAttempts) {
    return done(Fail(ErrorCode::kNotOwner,
                     fmt::format("no member took {} on map '{}' after {} attempts (the partition "
                                 "table is changing or the owner is unreachable); retry later",
                                 MapOpName(request.op), request.map_name, kMaxRouteAttempts)));
  }
  auto timer = std::make_shared<boost::asio::steady_timer>(
      shards.Context(0), std::chrono::milliseconds(std::min(20 * (attempt + 1), kMaxRouteDelayMs)));
  timer->async_wait([this, timer, request = std::move(request), done = std::move(done), attempt,
                     token = EnterRequest()](const boost::system::error_code&) mutable {
    if (stopped.load()) {
      return done(Fail(ErrorCode::kShuttingDown, "the map service is shutting down"));
    }
    Route(std::move(request), std::move(done), attempt + 1);
  });
}

void MapService::Impl::ExecuteAcrossMembers(MapRequest request, Callback done, int attempt) {
  auto current = CurrentRouting();
  // One sub-request per member: the keys (or entries) it owns, or the whole request.
  std::map<std::string, MapRequest> by_member;
  auto part_for = [&](const std::string& member) -> MapRequest& {
    auto [it, fresh] = by_member.try_emplace(member);
    if (fresh) {
      it->second = request;
      it->second.entries.clear();
      it->second.keys.clear();
      it->second.local_only = true;
    }
    return it->second;
  };
  const bool has_keys = SpecOf(request.op).scope == OpScope::kListedKeys;
  bool unowned = false;
  if (has_keys) {
    for (const auto& entry : request.entries) {
      const auto& owner = current->Owner(partitioner.PartitionOf(entry.first));
      unowned |= owner.empty();
      part_for(owner).entries.push_back(entry);
    }
    for (const auto& key : request.keys) {
      const auto& owner = current->Owner(partitioner.PartitionOf(key));
      unowned |= owner.empty();
      part_for(owner).keys.push_back(key);
    }
  } else {
    for (std::uint32_t p = 0; p < current->replicas.size(); ++p) {
      if (!current->Owner(p).empty()) part_for(current->Owner(p));
    }
  }
  if (unowned) return RetryLater(std::move(request), std::move(done), attempt);
  if (by_member.empty()) return done(MapResult{});
  // Keyed parts that fail retryably (the table moved under them) are retried alone: the parts
  // other members applied are not sent again (a merge or putAll applied twice could overwrite
  // a write made in between). Whole-map requests are retried whole.
  struct Gather {
    std::mutex mu;
    std::vector<std::pair<MapRequest, base::Result<MapResult>>> parts;
    std::size_t remaining = 0;
    MapRequest request;
    Callback done;
    int attempt = 0;
  };
  auto gather = std::make_shared<Gather>();
  gather->remaining = by_member.size();
  gather->request = std::move(request);
  gather->done = std::move(done);
  gather->attempt = attempt;
  auto collect_for = [this, gather, has_keys](MapRequest sent) -> Callback {
    return [this, gather, has_keys, sent = has_keys ? std::move(sent) : MapRequest{}](
               base::Result<MapResult> part) mutable {
      std::unique_lock lock(gather->mu);
      gather->parts.emplace_back(std::move(sent), std::move(part));
      if (--gather->remaining != 0) return;
      lock.unlock();
      MapResult merged;
      MapRequest retry;
      bool retry_any = false;
      for (auto& [sent_part, p] : gather->parts) {
        if (p) {
          MergeResult(gather->request.op, merged, std::move(*p));
          continue;
        }
        if (!RetryableRouteError(p.error().code())) return gather->done(std::unexpected(p.error()));
        if (!has_keys) {
          return RetryLater(std::move(gather->request), std::move(gather->done), gather->attempt);
        }
        if (!retry_any) {
          retry = gather->request;
          retry.entries.clear();
          retry.keys.clear();
          retry_any = true;
        }
        std::move(sent_part.entries.begin(), sent_part.entries.end(),
                  std::back_inserter(retry.entries));
        std::move(sent_part.keys.begin(), sent_part.keys.end(), std::back_inserter(retry.keys));
      }
      if (!retry_any) return gather->done(std::move(merged));
      retry.local_only = false;
      RetryLater(
          std::move(retry),
          [this, op = gather->request.op, merged = std::move(merged),
           done = std::move(gather->done)](base::Result<MapResult> rest) mutable {
            if (!rest) return done(std::move(rest));
            MergeResult(op, merged, std::move(*rest));
            done(std::move(merged));
          },
          gather->attempt);
    };
  };
  for (auto& [member, part] : by_member) {
    Callback collect = collect_for(part);
    if (member == current->self) {
      ExecuteFanOut(part, collect);
    } else {
      current->routing->Send(member, std::move(part), std::move(collect));
    }
  }
}

void MapService::Impl::RunKeyedOnShard(std::size_t shard, std::uint32_t partition_id,
                                       MapRequest& request, Callback& done) {
  auto owned = OwnershipOf(partition_id);
  if (!owned.local) {  // the table moved while the request was on its way here
    return Route(std::move(request), std::move(done), 1);
  }
  if (any_quorum.load(std::memory_order_relaxed) &&
      flags[partition_id].unconfirmed_since_ms.load() != kNoUnconfirmed) {
    if (auto ok = CheckConfirmed(request, partition_id); !ok) {
      return done(std::unexpected(ok.error()));
    }
  }
  if (StreamReadWaits(request)) return WaitForStream(shard, partition_id, request, done);
  const auto may_log = MayLog(shard, request);
  if (!may_log) return done(std::unexpected(may_log.error()));
  const bool log_it = *may_log;
  if (!owned.HasBackups(partition_id) && !log_it) {
    return done(RunOnPartition(shard, partition_id, request));
  }
  std::vector<Written> written(1);
  if (any_quorum.load(std::memory_order_relaxed)) written[0].started_ms = clock.NowMs();
  auto result = RunOnPartition(shard, partition_id, request, &written[0].updates);
  if (written[0].updates.empty()) return done(std::move(result));
  // Logged before it is replicated; acknowledged once both allow (AfterLogged).
  Callback answer = log_it ? AfterLogged({LogUpdates(shard, written[0].updates)}, std::move(done))
                           : std::move(done);
  if (!owned.HasBackups(partition_id)) return answer(std::move(result));
  written[0].table = std::move(owned.table);
  ReplicateThen(std::move(written), std::move(result), std::move(answer));
}

void MapService::Impl::AppendUpdates(MapTable& table, std::uint32_t partition_id,
                                     base::Millis now_ms, const std::vector<EntryEvent>& events,
                                     std::vector<ReplicaUpdate>& out, std::uint64_t version) {
  RecordStore& store = StoreOf(table, partition_id);
  if (events.empty()) return;
  if (version == 0) version = flags[partition_id].version.fetch_add(1) + 1;
  for (const auto& e : events) {
    ReplicaUpdate u;
    u.map_name = table.name;
    u.partition_id = partition_id;
    u.version = version;
    switch (e.type) {
      case EntryEventType::kAdded:
      case EntryEventType::kUpdated: {
        const Record* r = store.Find(e.key);
        u.key = e.key;
        if (r == nullptr || r->ExpiredAt(now_ms)) {
          u.kind = ReplicaUpdate::Kind::kDelete;
          break;
        }
        u.kind = ReplicaUpdate::Kind::kSet;
        u.value = std::string(r->value());
        u.ttl_left_ms =
            r->expire_at_ms() == 0 ? 0 : std::max<base::Millis>(1, r->expire_at_ms() - now_ms);
        u.max_idle_ms = r->max_idle_ms();
        u.update_age_ms = std::max<base::Millis>(0, now_ms - r->last_update_ms());
        u.hits = r->hits();
        u.value_kind = r->kind();
        u.entry_version = r->version();
        break;
      }
      case EntryEventType::kRemoved:
      case EntryEventType::kExpired:
      case EntryEventType::kEvicted:
        u.kind = ReplicaUpdate::Kind::kDelete;
        u.key = e.key;
        break;
      case EntryEventType::kCleared:
        u.kind = ReplicaUpdate::Kind::kClearPartition;
        break;
    }
    out.push_back(std::move(u));
  }
}

void MapService::Impl::ReplicateThen(std::vector<Written> written, base::Result<MapResult> result,
                                     Callback done) {
  std::map<std::string, std::vector<ReplicaUpdate>> by_backup;
  ClusterRouting* routing = nullptr;
  // Unconfirmed writes matter to quorum maps only: no clock read per write without them.
  const bool track_unconfirmed = any_quorum.load(std::memory_order_relaxed);
  const std::uint64_t leaves_at_write = leaves.load();
  // Since when the partitions written hold unconfirmed writes if a backup fails: the earliest
  // start of the writes (a write begun before the first quorum map was configured has none).
  base::Millis applied_ms = 0;
  if (track_unconfirmed) {
    for (const auto& w : written) {
      if (w.started_ms > 0 && (applied_ms == 0 || w.started_ms < applied_ms)) {
        applied_ms = w.started_ms;
      }
    }
    if (applied_ms == 0) applied_ms = clock.NowMs();  // no start recorded: now is the latest
  }
  // The caller skips waiting for the backups only when every map written is asynchronous (a
  // transaction may write several).
  bool all_async = true;
  for (const auto& [table, updates, started_ms] : written) {
    if (!table || !table->routing) continue;
    routing = table->routing;
    for (const auto& u : updates) {
      const auto& replicas = table->replicas[u.partition_id];
      for (std::size_t i = 1; i < replicas.size(); ++i) by_backup[replicas[i]].push_back(u);
      if (all_async && replicas.size() > 1) all_async = ConfigOf(u.map_name).async_backups;
    }
  }
  if (by_backup.empty()) return done(std::move(result));
  if (all_async) {
    done(std::move(result));
    done = [](base::Result<MapResult>) {};
    result = MapResult{};
  }
  struct Gather {
    Gather(std::size_t n, base::Result<MapResult> r, Callback d, InFlight& in_flight)
        : remaining(n), result(std::move(r)), done(std::move(d)), token(in_flight) {}
    std::mutex mu;
    std::size_t remaining;
    std::optional<base::Error> failure;
    base::Result<MapResult> result;
    Callback done;
    RequestToken token;
  };
  auto gather =
      std::make_shared<Gather>(by_backup.size(), std::move(result), std::move(done), in_flight);
  for (auto& [backup, list] : by_backup) {
    std::set<std::uint32_t> partitions;
    for (const auto& u : list) partitions.insert(u.partition_id);
    routing->SendReplica(
        backup, std::move(list),
        [this, gather, backup = backup, partitions, track_unconfirmed, applied_ms,
         leaves_at_write](base::Result<ReplicaAck> ack) {
          // A backup that missed an update gets the whole partition again (until it confirms
          // or stops being the backup), so a later promotion does not serve stale data. One
          // that applied this write but found it had missed an earlier one confirms the write.
          if (!ack) {
            std::vector<std::uint32_t> resync;
            {
              // Under ownership_mu, as LeaveCluster resets the marks and counts the leave: a
              // failure that came while it ran set a mark after its reset and before its count,
              // and the partition of the next cluster refused quorum reads for good (anomaly
              // 22). Now it comes before (the reset clears it) or after (it marks nothing).
              std::lock_guard lock(ownership_mu);
              if (leaves.load() == leaves_at_write) {  // else written in a cluster since left
                for (auto p : partitions) {
                  resync.push_back(p);
                  if (!track_unconfirmed) continue;
                  auto& since = flags[p].unconfirmed_since_ms;
                  flags[p].unconfirmed_count.fetch_add(1);
                  auto seen = since.load();
                  while (applied_ms < seen && !since.compare_exchange_weak(seen, applied_ms)) {
                  }
                  if (seen == kNoUnconfirmed && log) {
                    log->info(
                        "partition {}: a write {} ms ago was not confirmed by backup {} ({}); "
                        "quorum maps refuse it until the backup has a full copy",
                        p, clock.NowMs() - applied_ms, backup, ack.error().ToString());
                  }
                }
              }
            }
            for (auto p : resync) ResyncBackup(p, backup, 0);
          } else {
            for (auto p : ack->stale) ResyncBackup(p, backup, 0);
          }
          std::unique_lock lock(gather->mu);
          if (!ack && !gather->failure) {
            const auto code = ack.error().code() == ErrorCode::kTimeout ? ErrorCode::kTimeout
                                                                        : ErrorCode::kMemberLeft;
            gather->failure =
                base::Error(code, "the write was applied on the owner but its backup at " + backup +
                                      " did not confirm it (" + ack.error().ToString() +
                                      "); the partition is not safe until it is re-replicated");
          }
          if (--gather->remaining != 0) return;
          lock.unlock();
          if (gather->failure) return gather->done(std::unexpected(*gather->failure));
          gather->done(std::move(gather->result));
        });
  }
}

void MapService::Impl::CopyPartition(std::size_t shard, std::uint32_t partition_id,
                                     const std::string& target, ClusterRouting* routing,
                                     std::function<void(base::Result<void>)> done, bool resync) {
  auto updates = ExportPartition(shard, partition_id);
  if (resync) updates.front().kind = ReplicaUpdate::Kind::kResyncBegin;
  copies_sent.fetch_add(1, std::memory_order_relaxed);
  std::uint64_t bytes = 0;
  for (const auto& u : updates) bytes += u.key.size() + u.value.size();
  copy_bytes_sent.fetch_add(bytes, std::memory_order_relaxed);
  std::optional<ReplicaUpdate> chunk_head;
  if (resync) {
    chunk_head =
        ReplicaUpdate{ReplicaUpdate::Kind::kResyncChunk, "", partition_id, "", "", 0, 0, 0};
  }
  SendCopy(target, routing, std::move(updates), std::move(done), chunk_head);
}

void MapService::Impl::SendCopy(const std::string& target, ClusterRouting* routing,
                                std::vector<ReplicaUpdate> updates,
                                std::function<void(base::Result<void>)> done,
                                const std::optional<ReplicaUpdate>& chunk_head) {
  // Chunks bounded by bytes; the last carries kPartitionComplete.
  std::vector<std::vector<ReplicaUpdate>> chunks(1);
  std::size_t bytes = 0;
  for (auto& u : updates) {
    bytes += u.key.size() + u.value.size() + 32;
    if (bytes > kCopyChunkBytes && !chunks.back().empty()) {
      chunks.emplace_back();
      bytes = 0;
      if (chunk_head) chunks.back().push_back(*chunk_head);
    }
    chunks.back().push_back(std::move(u));
  }
  struct Acks {
    Acks(std::size_t n, std::function<void(base::Result<void>)> d, InFlight& in_flight)
        : remaining(n), done(std::move(d)), token(in_flight) {}
    std::mutex mu;
    std::size_t remaining;
    std::optional<base::Error> failure;
    std::function<void(base::Result<void>)> done;
    RequestToken token;  // Stop() waits for the acks (a leaving member hands over first)
  };
  auto acks = std::make_shared<Acks>(chunks.size(), std::move(done), in_flight);
  for (auto& chunk : chunks) {
    routing->SendReplica(target, std::move(chunk), [acks](base::Result<ReplicaAck> ack) {
      std::unique_lock lock(acks->mu);
      if (!ack && !acks->failure) acks->failure = ack.error();
      if (--acks->remaining != 0) return;
      lock.unlock();
      if (acks->failure) return acks->done(std::unexpected(*acks->failure));
      acks->done({});
    });
  }
}

void MapService::Impl::ConfirmedByCopy(std::uint32_t p, const std::string& target,
                                       std::uint64_t failures) {
  // Every write before the copy is on `target` now: when it is the partition's only backup
  // (and no write failed since the copy began) or its new owner, none is unconfirmed.
  auto current = CurrentRouting();
  if (!current || flags[p].unconfirmed_count.load() != failures) return;
  const auto& replicas = current->replicas[p];
  if ((replicas.size() == 2 && replicas[0] == current->self && replicas[1] == target) ||
      (!replicas.empty() && replicas[0] == target)) {
    if (flags[p].unconfirmed_since_ms.exchange(kNoUnconfirmed) != kNoUnconfirmed && log) {
      log->info("partition {}: its unconfirmed writes are confirmed by a copy to {}", p, target);
    }
  }
}

base::Result<void> MapService::Impl::CheckConfirmed(const MapRequest& request,
                                                    std::uint32_t partition_id) const {
  const std::string* quorum_map = nullptr;
  if (request.op == MapOp::kTransact) {
    for (const auto& op : request.transaction) {
      if (ConfigOf(op.request.map_name).min_cluster_size > 1) quorum_map = &op.request.map_name;
    }
  } else if (ConfigOf(request.map_name).min_cluster_size > 1) {
    quorum_map = &request.map_name;
  }
  if (quorum_map == nullptr) return {};
  return Fail(ErrorCode::kNoQuorum,
              fmt::format("partition {} holds writes its backup did not confirm (the backup is "
                          "down or cut off), so quorum map '{}' serves neither reads nor writes "
                          "there until the backup has a full copy or the cluster replaced it "
                          "(about a failure timeout); the {} was not run: retry",
                          partition_id, *quorum_map, MapOpName(request.op)));
}

void MapService::Impl::CopyToNewHolder(std::size_t shard, std::uint32_t p, std::string target,
                                       base::Millis first_ms, const Probed* probed) {
  auto current = CurrentRouting();
  // Sent even while Stop drains (a leaving member's handover); only retries end at Stop.
  if (!current || !current->routing) return;
  const auto& replicas = current->replicas[p];
  if (std::find(replicas.begin(), replicas.end(), target) == replicas.end()) return;
  const std::uint64_t failures = flags[p].unconfirmed_count.load();
  std::function<void(base::Result<void>)> finish = [this, shard, p, target, first_ms,
                                                    failures](base::Result<void> ack) {
    if (ack) {
      ConfirmedByCopy(p, target, failures);
      return;
    }
    // Only a copy never sent, or refused whole (kNotOwner: the target left its
    // cluster and has no table yet), goes again: one that timed out or lost its
    // connection may have been applied, and the target may serve the partition
    // since, with writes a second copy (clear, then this member's entries) would
    // wipe.
    const auto code = ack.error().code();
    if (ack.error().reason() == base::ErrorReason::kAlreadyHeld) {
      // Its first copy arrived after all (this member counted it lost with its source).
      if (log) log->info("partition {}: {} holds it whole already; no copy sent", p, target);
      return;
    }
    const bool again = (code == ErrorCode::kConnectionFailed || code == ErrorCode::kNotOwner) &&
                       SteadyMs() - first_ms < kCopyRetryLimitMs && !stopped.load();
    if (log) {
      log->warn("copy of partition {} to {} failed: {}{}", p, target, ack.error().ToString(),
                again ? "; sending it again" : "");
    }
    if (!again) return;
    auto timer = std::make_shared<boost::asio::steady_timer>(
        shards.Context(shard), std::chrono::milliseconds(kCopyRetryMs));
    timer->async_wait([this, timer, shard, p, target, first_ms,
                       token = EnterRequest()](const boost::system::error_code& e) {
      if (!e) CopyToNewHolder(shard, p, target, first_ms);
    });
  };
  if (probed != nullptr) {
    return CatchUpOrCopy(shard, p, target, current->routing, probed->point, std::move(finish));
  }
  if (history.empty()) return CopyPartition(shard, p, target, current->routing, std::move(finish));
  // A member that logs may hold what it replayed of p: asked first (ProbeTargets).
  ProbeTargets(shard, {{p, target}},
               [this, shard, p, target, first_ms](std::shared_ptr<const ProbeAnswers> answers) {
                 Probed probed;
                 auto it = answers->find({p, target});
                 if (it != answers->end()) probed.point = it->second;
                 CopyToNewHolder(shard, p, target, first_ms, &probed);
               });
}

void MapService::Impl::ProbeTargets(
    std::size_t shard, const std::vector<std::pair<std::uint32_t, std::string>>& copies,
    std::function<void(std::shared_ptr<const ProbeAnswers>)> then) {
  auto current = CurrentRouting();
  if (!current || !current->routing || copies.empty()) {
    return then(std::make_shared<const ProbeAnswers>());
  }
  // One message of probes per target. A probe that fails says nothing: the whole copy that
  // follows fails or goes again as any copy.
  std::map<std::string, std::vector<ReplicaUpdate>> probes;
  for (const auto& [p, target] : copies) {
    ReplicaUpdate probe;
    probe.kind = ReplicaUpdate::Kind::kProbe;
    probe.partition_id = p;
    probes[target].push_back(std::move(probe));
  }
  struct Gather {
    std::mutex mu;
    std::size_t left = 0;
    std::shared_ptr<ProbeAnswers> answers = std::make_shared<ProbeAnswers>();
    std::function<void(std::shared_ptr<const ProbeAnswers>)> then;
    std::shared_ptr<RequestToken> token;  // Stop waits for the copies that follow
  };
  auto gather = std::make_shared<Gather>();
  gather->left = probes.size();
  gather->then = std::move(then);
  gather->token = EnterRequest();
  for (auto& [target, list] : probes) {
    current->routing->SendReplica(
        target, std::move(list),
        [this, shard, gather, target = target](base::Result<ReplicaAck> ack) {
          std::unique_lock lock(gather->mu);
          if (ack) {
            for (const auto& point : ack->points) {
              (*gather->answers)[{point.partition_id, target}] = point;
            }
          }
          if (--gather->left != 0) return;
          lock.unlock();
          shards.InvokeOn(shard, [gather] { gather->then(gather->answers); });
        });
  }
}

void MapService::Impl::ResyncBackup(std::uint32_t partition_id, std::string backup, int attempt) {
  const std::size_t shard = shards.ShardOfPartition(partition_id);
  auto timer = std::make_shared<boost::asio::steady_timer>(
      shards.Context(shard), std::chrono::milliseconds(attempt == 0 ? 0 : kResyncRetryMs));
  timer->async_wait([this, timer, shard, partition_id, backup = std::move(backup), attempt,
                     token = EnterRequest()](const boost::system::error_code&) {
    auto current = CurrentRouting();
    if (stopped.load() || !current || !current->routing) return;
    const auto& replicas = current->replicas[partition_id];
    const bool owner = !replicas.empty() && replicas[0] == current->self;
    const bool still_ours =
        owner && std::find(replicas.begin() + 1, replicas.end(), backup) != replicas.end();
    if (!still_ours) {
      // A new table re-replicated the partition. But a failure of the former backup counted
      // after that table's copy began (a write's timeout arriving late) keeps the partition's
      // unconfirmed mark, which only a copy that began after the last failure clears: send
      // the partition's only backup such a copy, or quorum maps would serve nothing here until
      // the next table.
      if (owner && replicas.size() == 2 &&
          flags[partition_id].unconfirmed_since_ms.load() != kNoUnconfirmed) {
        ResyncBackup(partition_id, replicas[1], attempt);
      }
      return;
    }
    const std::uint64_t failures = flags[partition_id].unconfirmed_count.load();
    CopyPartition(
        shard, partition_id, backup, current->routing,
        [this, partition_id, backup, attempt, failures](base::Result<void> ack) {
          if (ack) {
            ConfirmedByCopy(partition_id, backup, failures);
            if (log) {
              log->info("partition {}: backup {} resynchronized after a missed update",
                        partition_id, backup);
            }
            return;
          }
          if (attempt + 1 < kResyncAttempts) {
            return ResyncBackup(partition_id, backup, attempt + 1);
          }
          if (log) {
            log->warn(
                "partition {}: backup {} still not resynchronized after {} "
                "attempts ({}); it is stale until the table changes",
                partition_id, backup, kResyncAttempts, ack.error().ToString());
          }
        },
        /*resync=*/true);
  });
}

std::size_t MapService::Impl::PartitionEntryCount(std::size_t shard,
                                                  std::uint32_t partition_id) const {
  std::size_t n = 0;
  for (const auto& [name, table] : states[shard]->maps) {
    if (const RecordStore* slot = table->stores.Find(partition_id / shards.size())) {
      n += slot->size();
    }
  }
  return n;
}

void MapService::Impl::ExportStore(MapTable& table, std::uint32_t partition_id, base::Millis now,
                                   std::vector<ReplicaUpdate>& out) {
  RecordStore* slot = table.stores.Find(partition_id / shards.size());
  if (slot == nullptr) return;
  slot->ForEach([&](const Record& r) {
    if (r.ExpiredAt(now)) return;
    out.push_back({ReplicaUpdate::Kind::kCopySet, table.name, partition_id, std::string(r.key()),
                   std::string(r.value()),
                   r.expire_at_ms() == 0 ? 0 : std::max<base::Millis>(1, r.expire_at_ms() - now),
                   r.max_idle_ms(), 0, std::max<base::Millis>(0, now - r.last_update_ms()),
                   r.hits(), r.kind(), r.version()});
  });
}

std::vector<ReplicaUpdate> MapService::Impl::ExportPartition(
    std::size_t shard, std::uint32_t partition_id, const std::function<bool(MapTable&)>& keep) {
  std::vector<ReplicaUpdate> out;
  out.push_back({ReplicaUpdate::Kind::kClearPartition, "", partition_id, "", "", 0, 0, 0});
  const base::Millis now = clock.NowMs();
  for (auto& [name, table] : states[shard]->maps) {
    if (keep && !keep(*table)) continue;
    if (CompanionOf(name) && !IsLiveCompanion(shard, name, partition_id, now)) continue;
    ExportStore(*table, partition_id, now, out);
  }
  auto current = CurrentRouting();
  ReplicaUpdate complete{ReplicaUpdate::Kind::kPartitionComplete,
                         "",
                         partition_id,
                         current ? current->master : std::string(),
                         "",
                         0,
                         0,
                         flags[partition_id].version.load()};
  // The point of this member's history (0 without a log): the holder's history goes on from it.
  if (partition_id < history.size()) complete.digest = history[partition_id].digest;
  out.push_back(std::move(complete));
  return out;
}

std::vector<std::pair<std::string, RingCounters>> MapService::RingStats() const {
  std::lock_guard lock(impl_->ring_mu);
  return {impl_->ring_counters.begin(), impl_->ring_counters.end()};
}

std::uint64_t MapService::ForwardedCount() const {
  return impl_->forwarded.load(std::memory_order_relaxed);
}

bool MapService::ListsMember(const std::string& id) const {
  if (id.empty()) return true;
  auto current = impl_->CurrentRouting();
  return current == nullptr || current->HasMember(id);
}

bool MapService::HasPartitionTable() const { return impl_->CurrentRouting() != nullptr; }

MapService::CopyCounters MapService::CopiesSent() const {
  return {impl_->copies_sent.load(std::memory_order_relaxed),
          impl_->copy_bytes_sent.load(std::memory_order_relaxed),
          impl_->catch_ups_sent.load(std::memory_order_relaxed),
          impl_->catch_up_bytes_sent.load(std::memory_order_relaxed)};
}

void MapService::Impl::NotifyOwnership(std::size_t shard, std::vector<std::uint32_t> partitions) {
  std::shared_ptr<const std::function<void(std::uint32_t)>> hook;
  {
    std::lock_guard lock(ownership_mu);
    hook = ownership_hook;
  }
  if (!hook || partitions.empty()) return;
  shards.DispatchOn(shard, [hook, partitions = std::move(partitions)] {
    for (auto p : partitions) (*hook)(p);
  });
}

void MapService::SetOwnershipHook(std::function<void(std::uint32_t partition)> hook) {
  std::lock_guard lock(impl_->ownership_mu);
  impl_->ownership_hook =
      hook ? std::make_shared<const std::function<void(std::uint32_t)>>(std::move(hook)) : nullptr;
}

void MapService::ScanPartition(
    const std::string& map_name, std::uint32_t partition,
    const std::function<void(std::string_view key, std::string_view value)>& fn) {
  const std::size_t shard = shards_.ShardOfPartition(partition);
  TESSERA_CHECK(shards_.OnShard(shard), "ScanPartition called off the partition's shard");
  const auto& maps = impl_->states[shard]->maps;
  auto it = maps.find(map_name);
  if (it == maps.end()) return;
  const RecordStore* store = it->second->stores.Find(partition / shards_.size());
  if (store == nullptr) return;
  const base::Millis now = impl_->clock.NowMs();
  store->ForEach([&](const Record& r) {
    if (!r.ExpiredAt(now) && r.kind() == ValueKind::kPlain) fn(r.key(), r.value());
  });
}

bool MapService::RunsPartitionWork(std::uint32_t partition) const {
  return OwnsPartition(partition) &&
         !impl_->flags[partition].handoff_pending.load(std::memory_order_acquire);
}

bool MapService::OwnsPartition(std::uint32_t partition) const {
  return partition < partitioner_.partition_count() && impl_->IsLocal(partition);
}

std::size_t MapService::AwaitingPartitionCount() const {
  std::size_t n = 0;
  for (std::uint32_t p = 0; p < partitioner_.partition_count(); ++p) {
    n += impl_->flags[p].pending.load(std::memory_order_relaxed);
  }
  return n;
}

}  // namespace tessera::map
