// MapService's half of a split-brain merge (merge.h): taking this member's data out of the
// old partition table when it leaves its cluster to join another.
#include <algorithm>
#include <charconv>
#include <future>
#include <iterator>
#include <map>
#include <optional>
#include <set>

#include "map_service_impl.h"
#include "tessera/base/check.h"
#include "tessera/map/stream_format.h"

namespace tessera::map {

std::vector<MergeBatch> MapService::LeaveCluster(base::Millis silent_ms) {
  TESSERA_CHECK(!shards_.CurrentShard().has_value(), "LeaveCluster called on a shard thread");
  constexpr std::size_t kBatchEntries = 1000;
  constexpr std::size_t kBatchBytes = 1 << 20;
  const std::uint32_t count = partitioner_.partition_count();
  auto owned = std::make_shared<std::vector<bool>>(count, false);
  std::vector<std::vector<std::uint32_t>> changed(shards_.size());
  auto sizes = std::make_shared<std::deque<std::pair<base::Millis, std::size_t>>>();
  // Per partition: nullopt = nothing to send (no replica here), "" = owned here, otherwise the
  // identity of the owner whose backup replica this member held (a standby copy).
  auto send_as = std::make_shared<std::vector<std::optional<std::string>>>(count);
  // Per partition owned here: since when its writes were not all confirmed by its backups.
  auto unconfirmed = std::make_shared<std::vector<base::Millis>>(count, Impl::kNoUnconfirmed);
  {
    Impl::OwnershipChange change(*impl_);
    *sizes = impl_->size_history;
    if (const auto& old = impl_->routing; old != nullptr) {
      for (std::uint32_t p = 0; p < count && p < old->replicas.size(); ++p) {
        const auto& replicas = old->replicas[p];
        if (replicas.size() < 2 || replicas.front() == old->self) continue;
        if (std::find(replicas.begin() + 1, replicas.end(), old->self) == replicas.end()) continue;
        const auto id = old->ids.find(replicas.front());
        if (id != old->ids.end() && !id->second.empty()) (*send_as)[p] = id->second;
      }
    }
    for (std::uint32_t p = 0; p < count; ++p) {
      auto& f = impl_->flags[p];
      (*owned)[p] = f.local.exchange(false);
      if ((*owned)[p]) (*send_as)[p] = std::string();
      (*unconfirmed)[p] = f.unconfirmed_since_ms.exchange(Impl::kNoUnconfirmed);
      if ((*owned)[p] || f.handoff_pending.load())
        changed[shards_.ShardOfPartition(p)].push_back(p);
      f.pending.store(false);
      f.copy_arrived.store(false);
      f.has_backups.store(false);
      f.versioned.store(false);
      f.version.store(0);
      f.handoff_pending.store(false);
      f.handoff_arrived.store(false);
    }
    impl_->routing = nullptr;  // requests wait for the next table (ExpectPartitionTable)
    impl_->left_cluster.store(true);
    impl_->leaves.fetch_add(1);
    impl_->expects_table.store(true);
  }
  for (std::size_t shard = 0; shard < changed.size(); ++shard) {
    impl_->NotifyOwnership(shard, std::move(changed[shard]));  // stops partition work first
  }
  struct ShardPart {
    std::vector<MergeBatch> batches;
  };
  std::promise<std::vector<ShardPart>> promise;
  auto future = promise.get_future();
  shards_.MapReduce<ShardPart>(
      [impl = impl_.get(), send_as, sizes, silent_ms, unconfirmed](std::size_t shard) {
        ShardPart part;
        const base::Millis now = impl->clock.NowMs();
        // A quorum map's entries written since its cluster lost the quorum, or since this
        // member left (a member woken from a pause applies writes on its stale copy until it
        // learns it was removed), or since it went silent (the writes in flight when it was
        // paused, applied here and never sent to its backups), less the failure timeout it
        // takes to notice, were never acknowledged: they stay out. So do those of a partition
        // since its first write the backups did not confirm (`unconfirmed`).
        auto unacknowledged_since = [&](const std::string& map) -> std::optional<base::Millis> {
          const std::size_t quorum = impl->ConfigOf(map).min_cluster_size;
          if (quorum <= 1) return std::nullopt;
          const auto since = Impl::BelowQuorumSince(*sizes, quorum);
          return std::min(since.value_or(now), now - silent_ms) - impl->options.failure_timeout_ms;
        };
        const base::Millis wall = impl->clock.WallMs();
        const std::size_t shard_count = impl->shards.size();
        // Companion maps worth sending back, judged before any store is cleared.
        std::set<std::string> live_fields;
        for (auto& [name, table] : impl->states[shard]->maps) {
          if (!CompanionOf(name)) continue;
          for (std::size_t slot = 0; slot < table->stores.slot_count(); ++slot) {
            const auto p =
                static_cast<std::uint32_t>(table->stores.LocalAt(slot) * shard_count + shard);
            if (impl->IsLiveCompanion(shard, name, p, now)) live_fields.insert(name);
          }
        }
        for (auto& [name, table] : impl->states[shard]->maps) {
          const bool streams = name == kStreamMap;
          const bool rings = name == kRingMap;
          // A companion's entries (family.h): its family's merge command on the
          // owner entry's key (the owner entry itself goes with its own map).
          const auto companion = CompanionOf(name);
          // What is being gathered for one sender: this member ("") or a standby owner.
          struct Gathered {
            std::optional<std::size_t> batch;  // index in part.batches being filled
            std::size_t bytes = 0;
            // Streams and rings: per sub-stream (ring), its events (messages) by offset and
            // its groups (kStreamMerge, kRingMerge).
            std::map<std::string, std::map<std::int64_t, std::string>> events;
            std::map<std::string, std::vector<std::string>> groups;
          };
          std::map<std::string, Gathered> gathered;
          const auto cutoff = unacknowledged_since(name);
          // Quorum maps: how many entries the cutoff leaves out, and how many of those sent were
          // written in the failure timeout before it (the window a late-noticed split leaves).
          std::size_t left_out = 0;
          std::size_t near_cutoff = 0;  // sent, written in the failure timeout before it
          if (cutoff && impl->log) {
            impl->log->info(
                "leaving the cluster: quorum map '{}' keeps out entries written "
                "since {} ms ago",
                name, now - *cutoff);
          }
          for (std::size_t slot = 0; slot < table->stores.slot_count(); ++slot) {
            RecordStore* store = table->stores.At(slot);
            if (store == nullptr) continue;
            const auto p =
                static_cast<std::uint32_t>(table->stores.LocalAt(slot) * shard_count + shard);
            // A companion whose owner entry expired or went (not cleared yet) is not sent back.
            if ((*send_as)[p] && (!companion || live_fields.count(name) != 0)) {
              const std::string& sender = *(*send_as)[p];
              Gathered& g = gathered[sender];
              // The batch to add an entry of `size` bytes to, a new one when it is full.
              auto batch_for = [&](std::size_t size, auto make) -> MergeBatch& {
                if (!g.batch || part.batches[*g.batch].entries.size() >= kBatchEntries ||
                    g.bytes >= kBatchBytes) {
                  part.batches.push_back(make());
                  g.batch = part.batches.size() - 1;
                  g.bytes = 0;
                }
                g.bytes += size;
                return part.batches[*g.batch];
              };
              store->ForEach([&](const Record& r) {
                if (r.ExpiredAt(now) || HasCompanion(r.kind())) return;
                if (cutoff) {
                  const base::Millis limit = std::min(*cutoff, (*unconfirmed)[p]);
                  if (r.last_update_ms() >= limit) {
                    ++left_out;
                    return;
                  }
                  if (r.last_update_ms() >= limit - impl->options.failure_timeout_ms) {
                    ++near_cutoff;
                  }
                }
                if (companion) {
                  batch_for(r.key().size() + r.value().size() + 16, [&] {
                    return MergeBatch{companion->family->op,
                                      companion->map,
                                      companion->key,
                                      {},
                                      {},
                                      std::string(companion->family->merge_command),
                                      sender};
                  }).entries.emplace_back(std::string(r.key()), std::string(r.value()));
                  return;
                }
                if (streams || rings) {
                  const std::string_view key = r.key();
                  const auto at = key.find('@');
                  if (at == std::string_view::npos) return;
                  const std::string_view prefix = key.substr(0, at);
                  const std::string sub(key.substr(at + 1));
                  std::int64_t offset = 0;
                  const auto [end, ec] =
                      std::from_chars(prefix.data(), prefix.data() + prefix.size(), offset);
                  if (ec == std::errc() && end == prefix.data() + prefix.size()) {
                    if (streams) {
                      g.events[sub][offset] = std::string(r.value());
                    } else {  // a ring's message keeps its TTL
                      MergeEntry message;
                      message.value = std::string(r.value());
                      message.ttl_left_ms = r.expire_at_ms() == 0
                                                ? 0
                                                : std::max<base::Millis>(1, r.expire_at_ms() - now);
                      g.events[sub][offset] = EncodeMergeEntry(message);
                    }
                    return;
                  }
                  if (rings) return;  // "ring@R": the owner keeps its own head and tail
                  if (prefix == "meta") {
                    for (const auto& [group, cursor] : ParseStreamMeta(r.value()).groups) {
                      g.groups[sub].push_back(group);
                    }
                    return;
                  }
                  // Dedup markers come back with the events, leases and consumer presence
                  // are renewed by the consumers; the stream's configuration merges as an entry.
                  if (prefix != "stream") return;
                }
                MergeEntry e;
                e.value = std::string(r.value());
                e.update_wall_ms = wall - (now - r.last_update_ms());
                e.hits = r.hits();
                e.kind = r.kind();
                e.ttl_left_ms =
                    r.expire_at_ms() == 0 ? 0 : std::max<base::Millis>(1, r.expire_at_ms() - now);
                e.max_idle_ms = r.max_idle_ms();
                batch_for(r.key().size() + r.value().size() + 40, [&] {
                  return MergeBatch{MapOp::kMergeEntries, name, {}, {}, {}, {}, sender};
                }).entries.emplace_back(std::string(r.key()), EncodeMergeEntry(e));
              });
            }
            store->Clear();
          }
          if ((left_out != 0 || near_cutoff != 0) && impl->log) {
            impl->log->info(
                "leaving the cluster: quorum map '{}' kept out {} entries, and sends {} written "
                "in the failure timeout before the cutoff",
                name, left_out, near_cutoff);
          }
          for (auto& [sender, g] : gathered) {
            for (auto& [sub, by_offset] : g.events) {
              std::optional<std::size_t> stream_batch;
              for (auto& [offset, bytes] : by_offset) {
                if (!stream_batch || part.batches[*stream_batch].entries.size() >= kBatchEntries) {
                  part.batches.push_back(
                      streams
                          ? MergeBatch{MapOp::kStreamMerge,
                                       name,
                                       StreamMetaKey(sub),
                                       {},
                                       g.groups[sub],
                                       {},
                                       sender}
                          : MergeBatch{MapOp::kRingMerge, name, "ring@" + sub, {}, {}, {}, sender});
                  stream_batch = part.batches.size() - 1;
                }
                part.batches[*stream_batch].entries.emplace_back(std::to_string(offset),
                                                                 std::move(bytes));
              }
            }
          }
        }
        impl->LogClearAll(shard);  // every store of the shard was emptied
        return part;
      },
      [&promise](std::vector<ShardPart> parts) { promise.set_value(std::move(parts)); });
  std::vector<MergeBatch> batches;
  for (auto& part : future.get()) {
    std::move(part.batches.begin(), part.batches.end(), std::back_inserter(batches));
  }
  {
    std::lock_guard lock(impl_->stream_mu);
    impl_->stream_state.clear();
  }
  return batches;
}

}  // namespace tessera::map
