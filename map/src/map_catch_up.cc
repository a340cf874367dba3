// MapService's catch-up: a member that restarted with its data and is given back a partition
// it held gets the updates it missed, not a whole copy, when the partition's source still
// has them.
//
// Every member that logs keeps, per partition, the point of its history of persisting
// updates (replica.h ReplicaPoint: the digest chained over each logged write of a map that
// persists, kept by owners, backups and replay alike and carried by copies and snapshots in
// kPartitionComplete) and a bounded backlog of the last of those updates, each with the point
// it leads to. Before a copy (CopyToNewHolder) the source probes the new holder (a kProbe in
// a replica message, answered in its ReplicaAck) for the point replay left the partition at,
// if nothing replaced it since. When the source's backlog passed that point, the copy is:
//
//   each map that does not persist: a clear of it in the partition, then its entries (those
//   are not in any log, so the restarted member has none of them);
//   the backlog's updates after the point, their TTL left and update age moved on by the
//   time since they were logged;
//   kPartitionComplete with the source's version and point.
//
// No clear of the whole partition comes first: the holder keeps what it replayed. A point
// the backlog does not reach (too old, or of another history: a promoted backup numbered
// its writes on from where a dead owner's unreplicated ones had gone, which the digest tells
// apart) gets the whole copy, which starts with the clear as before.
//
// The digest is over what a write changed (kind, map, key, value, value kind, version), not
// over times: TTL left and update age are relative to when an update was sent or replayed.

#include <xxhash.h>

#include <algorithm>

#include "map_service_impl.h"

namespace tessera::map {
namespace {

std::uint64_t Chain(std::uint64_t digest, const ReplicaUpdate& u) {
  std::uint64_t h = digest ^ (u.version * 0x9e3779b97f4a7c15ull) ^
                    (static_cast<std::uint64_t>(u.kind) << 56) ^
                    (static_cast<std::uint64_t>(u.value_kind) << 48);
  h = XXH3_64bits_withSeed(u.map_name.data(), u.map_name.size(), h);
  h = XXH3_64bits_withSeed(u.key.data(), u.key.size(), h);
  h = XXH3_64bits_withSeed(u.value.data(), u.value.size(), h);
  return h == 0 ? 1 : h;
}

std::size_t BacklogBytes(const ReplicaUpdate& u) {
  return u.map_name.size() + u.key.size() + u.value.size() + sizeof(ReplicaUpdate) + 16;
}

}  // namespace

void MapService::Impl::TrackHistory(std::size_t shard, const std::vector<ReplicaUpdate>& updates,
                                    base::Millis wall_ms) {
  if (history.empty()) return;
  const std::size_t cap =
      options.catch_up_backlog_bytes / std::max<std::uint32_t>(1, partitioner.partition_count());
  const bool replaying = states[shard]->replaying;
  auto forget = [this](std::uint32_t p, History& h) {
    h.backlog.clear();
    h.backlog_bytes = 0;
    h.base_digest = 0;
    h.replayed = false;
    flags[p].replayed.store(false, std::memory_order_relaxed);
  };
  for (const ReplicaUpdate& u : updates) {
    if (u.partition_id >= history.size()) continue;
    History& h = history[u.partition_id];
    using Kind = ReplicaUpdate::Kind;
    const bool versioned_write =
        u.version != 0 &&
        (u.kind == Kind::kSet || u.kind == Kind::kDelete || u.kind == Kind::kClearPartition);
    if (u.kind == Kind::kPartitionComplete) {
      forget(u.partition_id, h);
      h.digest = u.digest;
      h.base_digest = u.digest;
    } else if (versioned_write) {
      if (h.digest == 0) continue;  // unknown until a copy's end says it
      // This member's own write as owner: what replay left is not the point any more.
      if (!replaying && h.replayed && IsLocal(u.partition_id)) {
        h.replayed = false;
        flags[u.partition_id].replayed.store(false, std::memory_order_relaxed);
      }
      h.digest = Chain(h.digest, u);
      if (cap == 0) {
        h.base_digest = h.digest;
        continue;
      }
      h.backlog.push_back({u, h.digest, wall_ms});
      h.backlog_bytes += BacklogBytes(u);
      while (h.backlog_bytes > cap && !h.backlog.empty()) {
        h.backlog_bytes -= BacklogBytes(h.backlog.front().update);
        h.base_digest = h.backlog.front().digest;
        h.backlog.pop_front();
      }
    } else if (u.kind != Kind::kHandoff && u.kind != Kind::kResyncChunk && u.kind != Kind::kProbe) {
      // A copy's start (or its entries, a per-map clear, an unversioned change): not a step
      // of the history; it is unknown until the copy's end.
      forget(u.partition_id, h);
      h.digest = 0;
    }
  }
}

std::optional<ReplicaPoint> MapService::Impl::ProbeAnswer(std::uint32_t p) const {
  if (p >= history.size() || !history[p].replayed) return std::nullopt;
  return history[p].replayed_at;
}

std::optional<std::vector<ReplicaUpdate>> MapService::Impl::CatchUpFrom(std::size_t shard,
                                                                        std::uint32_t p,
                                                                        std::uint64_t digest) {
  if (p >= history.size() || digest == 0) return std::nullopt;
  const History& h = history[p];
  if (h.digest == 0) return std::nullopt;
  std::size_t from = 0;
  if (h.base_digest != digest) {
    auto it = std::find_if(h.backlog.begin(), h.backlog.end(),
                           [digest](const History::Entry& e) { return e.digest == digest; });
    if (it == h.backlog.end()) return std::nullopt;
    from = static_cast<std::size_t>(it - h.backlog.begin()) + 1;
  }
  std::vector<ReplicaUpdate> out;
  const base::Millis now = clock.NowMs();
  // The maps no log holds: whole (the restarted member has none of them).
  for (auto& [name, table] : states[shard]->maps) {
    RecordStore* slot = table->stores.Find(p / shards.size());
    if (slot == nullptr) continue;
    Refresh(*table);
    if (table->config.persistence != Persistence::kNone) continue;
    if (CompanionOf(name) && !IsLiveCompanion(shard, name, p, now)) continue;
    out.push_back({ReplicaUpdate::Kind::kClearPartition, name, p, "", "", 0, 0, 0});
    ExportStore(*table, p, now, out);
  }
  const base::Millis wall = clock.WallMs();
  for (std::size_t i = from; i < h.backlog.size(); ++i) {
    ReplicaUpdate u = h.backlog[i].update;
    const base::Millis age = std::max<base::Millis>(0, wall - h.backlog[i].wall_ms);
    if (u.kind == ReplicaUpdate::Kind::kSet) {
      u.update_age_ms += age;
      if (u.ttl_left_ms != 0) u.ttl_left_ms = std::max<base::Millis>(1, u.ttl_left_ms - age);
    }
    out.push_back(std::move(u));
  }
  auto current = CurrentRouting();
  ReplicaUpdate complete{ReplicaUpdate::Kind::kPartitionComplete,
                         "",
                         p,
                         current ? current->master : std::string(),
                         "",
                         0,
                         0,
                         flags[p].version.load()};
  complete.digest = h.digest;
  out.push_back(std::move(complete));
  return out;
}

void MapService::Impl::CatchUpOrCopy(std::size_t shard, std::uint32_t p, const std::string& target,
                                     ClusterRouting* routing, const std::optional<ReplicaPoint>& at,
                                     std::function<void(base::Result<void>)> done) {
  auto updates = at ? CatchUpFrom(shard, p, at->digest) : std::nullopt;
  if (!updates) return CopyPartition(shard, p, target, routing, std::move(done));
  std::uint64_t bytes = 0;
  for (const auto& u : *updates) bytes += u.key.size() + u.value.size();
  copies_sent.fetch_add(1, std::memory_order_relaxed);
  copy_bytes_sent.fetch_add(bytes, std::memory_order_relaxed);
  catch_ups_sent.fetch_add(1, std::memory_order_relaxed);
  catch_up_bytes_sent.fetch_add(bytes, std::memory_order_relaxed);
  if (log) {
    log->debug("partition {}: {} holds it up to version {}: sending the {} update(s) since", p,
               target, at->version, updates->size() - 1);
  }
  SendCopy(p, target, routing, std::move(*updates), std::move(done), /*resync=*/false);
}

}  // namespace tessera::map
