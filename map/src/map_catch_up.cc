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
#include <cstring>
#include <string_view>

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

// A backlog entry: this header, then the map name, key and value bytes.
struct EntryHeader {
  std::uint64_t version;
  std::int64_t ttl_left_ms, max_idle_ms, update_age_ms, hits;
  std::uint32_t entry_version, name_size, key_size, value_size;
  std::uint8_t kind, value_kind;
};

void EncodeEntry(const ReplicaUpdate& u, std::string& out) {
  const EntryHeader h{u.version,
                      u.ttl_left_ms,
                      u.max_idle_ms,
                      u.update_age_ms,
                      u.hits,
                      u.entry_version,
                      static_cast<std::uint32_t>(u.map_name.size()),
                      static_cast<std::uint32_t>(u.key.size()),
                      static_cast<std::uint32_t>(u.value.size()),
                      static_cast<std::uint8_t>(u.kind),
                      static_cast<std::uint8_t>(u.value_kind)};
  out.append(reinterpret_cast<const char*>(&h), sizeof h);
  out += u.map_name;
  out += u.key;
  out += u.value;
}

ReplicaUpdate DecodeEntry(std::string_view in, std::uint32_t partition_id) {
  EntryHeader h;
  std::memcpy(&h, in.data(), sizeof h);
  in.remove_prefix(sizeof h);
  ReplicaUpdate u;
  u.kind = static_cast<ReplicaUpdate::Kind>(h.kind);
  u.partition_id = partition_id;
  u.map_name = std::string(in.substr(0, h.name_size));
  u.key = std::string(in.substr(h.name_size, h.key_size));
  u.value = std::string(in.substr(h.name_size + h.key_size, h.value_size));
  u.ttl_left_ms = h.ttl_left_ms;
  u.max_idle_ms = h.max_idle_ms;
  u.version = h.version;
  u.update_age_ms = h.update_age_ms;
  u.hits = h.hits;
  u.value_kind = static_cast<ValueKind>(h.value_kind);
  u.entry_version = h.entry_version;
  return u;
}

}  // namespace

void MapService::Impl::TrackHistory(std::size_t shard, const std::vector<ReplicaUpdate>& updates,
                                    base::Millis wall_ms) {
  if (history.empty()) return;
  // Each generation holds up to half the partition's share.
  const std::size_t half = options.catch_up_backlog_bytes /
                           std::max<std::uint32_t>(1, partitioner.partition_count()) / 2;
  const bool replaying = states[shard]->replaying;
  auto forget = [this](std::uint32_t p, History& h) {
    for (auto& g : h.generations) {
      g.bytes.clear();
      g.marks.clear();
    }
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
      if (half == 0) {
        h.base_digest = h.digest;
        continue;
      }
      History::Generation& newer = h.generations[h.newer];
      EncodeEntry(u, newer.bytes);
      newer.marks.push_back({h.digest, wall_ms, newer.bytes.size()});
      if (newer.bytes.size() > half) {  // the older generation goes whole
        History::Generation& older = h.generations[1 - h.newer];
        if (!older.marks.empty()) h.base_digest = older.marks.back().digest;
        older.bytes.clear();
        older.marks.clear();
        h.newer = 1 - h.newer;
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
  // Where the point is: (generation order, mark) after which the catch-up starts.
  const History::Generation* order[2] = {&h.generations[1 - h.newer], &h.generations[h.newer]};
  int from_generation = 0;
  std::size_t from_mark = 0;
  if (h.base_digest != digest) {
    bool found = false;
    for (int g = 0; g < 2 && !found; ++g) {
      const auto& marks = order[g]->marks;
      for (std::size_t m = 0; m < marks.size(); ++m) {
        if (marks[m].digest != digest) continue;
        from_generation = g;
        from_mark = m + 1;
        found = true;
        break;
      }
    }
    if (!found) return std::nullopt;
  }
  std::vector<ReplicaUpdate> out;
  // First (and first in every chunk, SendCopy): the point it goes on from, which the holder
  // checks is still what it holds (a copy or clear from elsewhere since its answer refuses
  // the catch-up, and the whole copy follows).
  ReplicaUpdate from;
  from.kind = ReplicaUpdate::Kind::kProbe;
  from.partition_id = p;
  from.digest = digest;
  out.push_back(from);
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
  for (int g = from_generation; g < 2; ++g) {
    const auto& marks = order[g]->marks;
    for (std::size_t m = g == from_generation ? from_mark : 0; m < marks.size(); ++m) {
      const std::size_t begin = m == 0 ? 0 : marks[m - 1].end;
      ReplicaUpdate u =
          DecodeEntry(std::string_view(order[g]->bytes).substr(begin, marks[m].end - begin), p);
      const base::Millis age = std::max<base::Millis>(0, wall - marks[m].wall_ms);
      if (u.kind == ReplicaUpdate::Kind::kSet) {
        u.update_age_ms += age;
        if (u.ttl_left_ms != 0) u.ttl_left_ms = std::max<base::Millis>(1, u.ttl_left_ms - age);
      }
      out.push_back(std::move(u));
    }
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
  ReplicaUpdate head = updates->front();
  SendCopy(
      target, routing, std::move(*updates),
      [this, shard, p, target, done = std::move(done),
       token = EnterRequest()](base::Result<void> sent) mutable {
        if (sent || sent.error().code() != ErrorCode::kConflict ||
            sent.error().reason() == base::ErrorReason::kAlreadyHeld) {
          return done(sent);
        }
        // Its point went meanwhile: the whole partition, from this shard.
        if (log)
          log->info("partition {}: {} refused its catch-up: {}", p, target, sent.error().message());
        shards.InvokeOn(shard, [this, shard, p, target, done = std::move(done),
                                token = std::move(token)]() mutable {
          auto now = CurrentRouting();
          if (!now || !now->routing) return done(base::Fail(ErrorCode::kNotOwner, "no table"));
          CopyPartition(shard, p, target, now->routing, std::move(done));
        });
      },
      head);
}

}  // namespace tessera::map
