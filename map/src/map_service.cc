// MapService design notes.
//
// Each shard owns a table map name -> MapTable (created lazily, touched only on that shard);
// a MapTable holds the RecordStores of the partitions the shard owns (partition p at local
// index p / N), a cached copy of the map's config and listener snapshot, refreshed when the
// service-wide version counters move, so the hot path takes no lock.
//
// Keyed ops go to shard PartitionOf(key) % N with DispatchOn (inline when already there).
// Multi-partition ops fan out with MapReduce: key-carrying ops (putAll, getAll,
// executeOnKeys) are grouped by partition on the caller first, the others run on every store
// of the map on each shard; parts merge with MergeResult.
//
// Events an operation produces are delivered after the operation returns (still on the
// shard thread, in order), so a listener may itself call the service.
//
// Sweeper: a steady_timer per shard examines up to sweep_budget_per_tick entries, in at most
// that many stores, per tick, resuming at a (map, store, slot) cursor. A store is read only
// once one of its entries can have expired (RecordStore::SweepExpired keeps the earliest
// deadline), so entries that live for days, or forever, cost the sweeper nothing. When a tick used
// its whole budget and found mostly expired entries (a mass expiry), the next tick runs at once
// instead of after sweep_interval_ms, so reclaiming is bounded by CPU, not by the tick period; each
// tick is still one bounded handler, so requests interleave with it.
//
// Shutdown: every request holds an in-flight token; Stop() refuses new requests, waits for
// the in-flight ones, then cancels the timers on their shards.
#include "tessera/map/map_service.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <future>

#include "map_service_impl.h"
#include "op_support.h"
#include "tessera/base/check.h"
#include "tessera/map/family.h"

namespace tessera::map {

std::string_view EntryEventTypeName(EntryEventType type) {
  switch (type) {
    case EntryEventType::kAdded:
      return "added";
    case EntryEventType::kUpdated:
      return "updated";
    case EntryEventType::kRemoved:
      return "removed";
    case EntryEventType::kExpired:
      return "expired";
    case EntryEventType::kEvicted:
      return "evicted";
    case EntryEventType::kCleared:
      return "cleared";
  }
  return "unknown";
}

MapTable& MapService::Impl::TableOn(std::size_t shard, const std::string& name) {
#ifndef NDEBUG
  TESSERA_CHECK(shards.OnShard(shard), "map table touched off its shard");
#endif
  ShardState& state = *states[shard];
  if (state.last != nullptr && state.last->name == name) return *state.last;
  auto it = state.maps.find(name);
  if (it != state.maps.end()) {
    state.last = it->second.get();
    return *it->second;
  }
  const std::size_t n = shards.size();
  auto table = std::make_unique<MapTable>((partitioner.partition_count() + n - 1) / n);
  table->name = name;
  MapTable& ref = *table;
  state.sweep_order.push_back(table.get());
  state.maps.emplace(name, std::move(table));
  std::lock_guard lock(names_mu);
  names.insert(name);
  return ref;
}

RecordStore& MapService::Impl::StoreOf(MapTable& table, std::uint32_t partition_id) {
  return table.stores.GetOrCreate(partition_id / shards.size());
}

void MapService::Impl::Refresh(MapTable& table) {
  const std::uint64_t cv = config_version.load(std::memory_order_acquire);
  if (table.config_version != cv) {
    table.config = ConfigOf(table.name);
    table.config_version = cv;
  }
  const std::uint64_t lv = listeners.version();
  if (table.listeners_version != lv) {
    table.listeners = listeners.SnapshotOf(table.name);
    table.listeners_version = lv;
  }
}

OpContext MapService::Impl::ContextFor(MapTable& table, std::uint32_t partition_id,
                                       std::vector<EntryEvent>* events,
                                       const base::Clock::Times* given) {
  Refresh(table);
  OpContext ctx;
  const auto times = given != nullptr ? *given : clock.NowAndWallMs();
  ctx.now_ms = times.now_ms;
  ctx.wall_ms = times.wall_ms;
  ctx.config = table.config;
  ctx.map_name = table.name;
  ctx.partition_id = partition_id;
  ctx.partition_count = partitioner.partition_count();
  ctx.processors = &processors;
  ctx.events = table.listeners ? events : nullptr;
  ctx.event_values = ListenerRegistry::WantsValues(table.listeners);
  return ctx;
}

RecordStore* MapService::Impl::ShardPartitionMaps::Find(const std::string& name, bool create) {
  RecordStore* store = nullptr;
  MapTable* table = nullptr;
  if (create) {
    table = &impl_.TableOn(shard_, name);
    store = &impl_.StoreOf(*table, partition_id_);
  } else {
    auto& maps = impl_.states[shard_]->maps;
    auto it = maps.find(name);
    if (it == maps.end()) return nullptr;
    table = it->second.get();
    store = table->stores.Find(partition_id_ / impl_.shards.size());
  }
  SideOf(*table);
  if (store != nullptr && undo_ != nullptr) store->AttachUndo(*undo_);
  return store;
}

MapService::Impl::ShardPartitionMaps::Side& MapService::Impl::ShardPartitionMaps::SideOf(
    MapTable& table) {
  for (auto& side : sides_) {
    if (side->table == &table) return *side;
  }
  sides_.push_back(std::make_unique<Side>(Side{&table, {}}));
  return *sides_.back();
}

OpContext MapService::Impl::ShardPartitionMaps::ContextFor(const std::string& name) {
  MapTable& table = impl_.TableOn(shard_, name);
  Side& side = SideOf(table);
  OpContext ctx = impl_.ContextFor(table, partition_id_, nullptr);
  ctx.now_ms = now_ms_;
  ctx.events = replicate_ ? &side.events : nullptr;
  ctx.event_values = false;
  ctx.maps = this;
  return ctx;
}

void MapService::Impl::ShardPartitionMaps::DropEmpty() {
  for (const auto& side : sides_) impl_.DropCompanionIfEmpty(shard_, side->table->name);
  sides_.clear();
}

void MapService::Impl::ClearCompanionHere(std::size_t shard, ValueKind kind,
                                          const std::string& map_name, std::uint32_t partition_id,
                                          std::string_view key) {
  if (!HasCompanion(kind)) return;
  const std::string name = FamilyOfKind(kind)->companion_map(map_name, key);
  auto& maps = states[shard]->maps;
  auto it = maps.find(name);
  if (it == maps.end()) return;
  if (RecordStore* store = it->second->stores.Find(partition_id / shards.size())) store->Clear();
  DropCompanionIfEmpty(shard, name);
}

bool MapService::Impl::IsLiveCompanion(std::size_t shard, const std::string& name,
                                       std::uint32_t partition_id, base::Millis now) const {
  const auto owner = CompanionOf(name);
  if (!owner) return false;
  const auto& maps = states[shard]->maps;
  auto it = maps.find(owner->map);
  if (it == maps.end()) return false;
  const RecordStore* store = it->second->stores.Find(partition_id / shards.size());
  const Record* r = store == nullptr ? nullptr : store->Find(owner->key);
  return r != nullptr && !r->ExpiredAt(now) && HasCompanion(r->kind()) &&
         FamilyOfKind(r->kind()) == owner->family;
}

void MapService::Impl::DropCompanionIfEmpty(std::size_t shard, const std::string& name_in) {
  if (!CompanionOf(name_in)) return;
  const std::string name = name_in;  // name_in may be the table's own name, which goes
  ShardState& state = *states[shard];
  auto it = state.maps.find(name);
  if (it == state.maps.end()) return;
  MapTable* table = it->second.get();
  for (std::size_t slot = 0; slot < table->stores.slot_count(); ++slot) {
    if (const RecordStore* store = table->stores.At(slot); store && store->size() > 0) return;
  }
  auto at = std::find(state.sweep_order.begin(), state.sweep_order.end(), table);
  if (at != state.sweep_order.end()) {
    const auto index = static_cast<std::size_t>(at - state.sweep_order.begin());
    state.sweep_order.erase(at);
    if (state.sweep_table > index) {
      --state.sweep_table;
    } else if (state.sweep_table == index) {
      state.sweep_store = 0;  // the sweeper goes on with the next table
    }
  }
  if (state.last == table) state.last = nullptr;
  state.maps.erase(it);
  std::lock_guard lock(names_mu);  // a hash's field map is in one partition: on one shard
  names.erase(name);
}

bool MapService::Impl::ShardPartitionMaps::changed() const {
  return std::any_of(sides_.begin(), sides_.end(),
                     [](const auto& s) { return !s->events.empty(); });
}

void MapService::Impl::ShardPartitionMaps::AppendSideUpdates(std::vector<ReplicaUpdate>& out,
                                                             std::uint64_t version) {
  for (const auto& side : sides_) {
    impl_.AppendUpdates(*side->table, partition_id_, now_ms_, side->events, out, version);
  }
}

base::Result<MapResult> MapService::Impl::RunOnPartition(std::size_t shard,
                                                         std::uint32_t partition_id,
                                                         const MapRequest& request,
                                                         std::vector<ReplicaUpdate>* replica_out) {
  if (request.op == MapOp::kTransact) {
    return RunTransaction(shard, partition_id, request, replica_out);
  }
  MapTable& table = TableOn(shard, request.map_name);
  std::vector<EntryEvent> events;
  OpContext ctx = ContextFor(table, partition_id, &events);
  if (replica_out != nullptr) ctx.events = &events;  // backups need to know what changed
  ShardPartitionMaps sides(*this, shard, partition_id, ctx.now_ms, replica_out != nullptr);
  ctx.maps = &sides;
  std::vector<MapRequest> follow_ups;
  ctx.follow_ups = &follow_ups;
  std::optional<StreamMeta> stream_meta;
  if (SpecOf(request.op).stream) ctx.stream_meta = &stream_meta;
  auto result = ExecuteOnStore(StoreOf(table, partition_id), request, ctx);
  if (request.op == MapOp::kRingAppend && result) CountRingAppend(request, *result);
  if (result && SpecOf(request.op).stream) {
    TrackStream(table, partition_id, request, *result, ctx.wall_ms, stream_meta);
    if (!states[shard]->waiters.empty() && StreamOpStored(request, *result)) {
      WakeStreamReaders(shard, request.key);
    }
  }
  if (replica_out != nullptr) {
    if (sides.changed()) {  // one write across maps: one replica version for all of it
      const std::uint64_t version = flags[partition_id].version.fetch_add(1) + 1;
      AppendUpdates(table, partition_id, ctx.now_ms, events, *replica_out, version);
      sides.AppendSideUpdates(*replica_out, version);
    } else {
      AppendUpdates(table, partition_id, ctx.now_ms, events, *replica_out);
    }
  }
  if (table.listeners) {
    for (const auto& event : events) ListenerRegistry::Deliver(table.listeners, event);
  }
  sides.DropEmpty();
  if (!follow_ups.empty()) RunFollowUps(std::move(follow_ups));
  return result;
}

void MapService::Impl::RunFollowUps(std::vector<MapRequest> requests) {
  for (auto& request : requests) {
    stream_key_removals.fetch_add(1);  // families' follow-ups: a stream whose key went
    RunFollowUp(std::move(request), 0);
  }
}

std::uint64_t MapService::StreamKeyRemovals() const { return impl_->stream_key_removals.load(); }

void MapService::Impl::RunFollowUp(MapRequest request, int round) {
  // Posted, never run inline: the operation that called for it is replicated first (its
  // replica version comes before the follow-up's, when both are in one partition), and a long
  // stream's steps take turns with other work on the shard.
  const std::size_t here =
      shards.CurrentShard().value_or(shards.ShardOfPartition(partitioner.PartitionOf(request.key)));
  shards.InvokeOn(here, [this, token = EnterRequest(), request = std::move(request),
                         round]() mutable { SendFollowUp(std::move(request), round); });
}

void MapService::Impl::SendFollowUp(MapRequest request, int round) {
  if (stopped.load(std::memory_order_acquire)) return;
  constexpr int kMaxRounds = 10'000;  // 500 M entries in steps of 50,000
  if (auto ok = Admit(request); !ok) {
    if (log)
      log->warn("{} on '{}' not sent: {}", MapOpName(request.op), request.key,
                ok.error().ToString());
    return;
  }
  auto again = std::make_shared<MapRequest>(request);
  Route(
      std::move(request),
      [this, again, round](base::Result<MapResult> result) {
        if (!result) {
          if (log) {
            log->warn("removing the records behind keyspace entry '{}' failed: {}", again->key,
                      result.error().ToString());
          }
          return;
        }
        if (result->flag && round < kMaxRounds) {
          RunFollowUp(std::move(*again), round + 1);  // more to do (a long stream): next step
        }
      },
      0);
}

void MapService::Impl::CountRingAppend(const MapRequest& request, const MapResult& result) {
  // result: count = first sequence stored (-1: none), value = "HEAD TAIL",
  // entries = [("discarded", N)] (see map_request.h).
  std::int64_t tail = 0, discarded = 0;
  if (result.value) {
    auto space = result.value->find(' ');
    if (space != std::string::npos) tail = std::atoll(result.value->c_str() + space + 1);
  }
  if (!result.entries.empty()) discarded = std::atoll(result.entries.front().second.c_str());
  const std::int64_t stored = result.count < 0 ? 0 : tail - result.count + 1;
  const auto at = request.key.find('@');
  const std::string ring = at == std::string::npos ? request.key : request.key.substr(at + 1);
  std::lock_guard lock(ring_mu);
  auto& c = ring_counters[ring];
  c.published += stored;
  c.discarded += discarded;
}

MapConfig MapService::Impl::ConfigOf(const std::string& name) const {
  if (auto owner = CompanionOf(name)) {         // a companion map: as its owner's map, but
    MapConfig keyspace = ConfigOf(owner->map);  // no expiry or eviction of its own
    MapConfig config;
    config.async_backups = keyspace.async_backups;
    config.merge_policy = keyspace.merge_policy;
    config.min_cluster_size = keyspace.min_cluster_size;
    config.persistence = keyspace.persistence;
    return config;
  }
  std::lock_guard lock(config_mu);
  auto it = configs.find(name);
  if (it != configs.end()) return it->second;
  // Internal maps ("__streams", "__reliable_topics", ...) hold bookkeeping that eviction, a
  // default TTL or asynchronous backups would corrupt: the member's defaults do not apply,
  // except its quorum (a member cut off from the majority writes none of it).
  if (!name.starts_with("__")) return options.default_config;
  MapConfig internal;
  internal.min_cluster_size = options.default_config.min_cluster_size;
  if (logging.load()) internal.persistence = Persistence::kAlways;
  return internal;
}

void MapService::Impl::ExecuteKeyed(MapRequest& request, Callback& done) {
  const std::uint32_t partition_id = partitioner.PartitionOf(request.key);
  const std::size_t shard = shards.ShardOfPartition(partition_id);
  if (shards.OnShard(shard)) {
    RequestToken token(in_flight);
    RunKeyedOnShard(shard, partition_id, request, done);
    return;
  }
  // The request moves once, into a box; the posted handler carries pointers only.
  struct Pending {
    MapRequest request;
    Callback done;
    RequestToken token;
  };
  auto pending = std::make_unique<Pending>(
      Pending{std::move(request), std::move(done), RequestToken(in_flight)});
  shards.InvokeOn(shard, [this, shard, partition_id, pending = std::move(pending)] {
    RunKeyedOnShard(shard, partition_id, pending->request, pending->done);
  });
}

MapService::Impl::Parts MapService::Impl::SplitByShard(const MapRequest& request) const {
  // One part per partition that has keys, grouped by the shard owning the partition.
  std::map<std::uint32_t, MapRequest> by_partition;
  auto part_of = [&by_partition, &request](std::uint32_t p) -> MapRequest& {
    auto [it, fresh] = by_partition.try_emplace(p);
    if (fresh) {
      it->second.op = request.op;
      it->second.map_name = request.map_name;
      it->second.options = request.options;
      it->second.processor = request.processor;
      it->second.argument = request.argument;
    }
    return it->second;
  };
  for (const auto& entry : request.entries) {
    part_of(partitioner.PartitionOf(entry.first)).entries.push_back(entry);
  }
  for (const auto& key : request.keys) part_of(partitioner.PartitionOf(key)).keys.push_back(key);
  Parts parts(shards.size());
  for (auto& [p, part] : by_partition) {
    parts[shards.ShardOfPartition(p)].emplace_back(p, std::move(part));
  }
  return parts;
}

base::Result<MapResult> MapService::Impl::RunPartsOnShard(
    std::size_t shard, const MapRequest& request,
    const std::vector<std::pair<std::uint32_t, MapRequest>>* parts, Written& written) {
  if (any_quorum.load(std::memory_order_relaxed)) written.started_ms = clock.NowMs();
  MapResult merged;
  // Whole-map ops on a map this shard never held find nothing; don't create it.
  MapTable* table = nullptr;
  if (parts == nullptr) {
    auto existing = states[shard]->maps.find(request.map_name);
    if (existing == states[shard]->maps.end()) return merged;
    table = existing->second.get();
  }
  std::vector<std::uint32_t> partitions;
  if (parts != nullptr) {
    for (const auto& part : *parts) partitions.push_back(part.first);
  } else {
    for (std::size_t slot = 0; slot < table->stores.slot_count(); ++slot) {
      if (table->stores.At(slot)) {
        partitions.push_back(
            static_cast<std::uint32_t>(table->stores.LocalAt(slot) * shards.size() + shard));
      }
    }
  }
  std::vector<bool> local;
  written.table = OwnershipOf(partitions, local);
  Ownership owned{true, written.table};
  // A quorum map reads and writes nothing of a partition with unconfirmed writes (as keyed
  // requests, RunKeyedOnShard): a getAll retried after a failed write would find them.
  if (any_quorum.load(std::memory_order_relaxed)) {
    for (std::size_t i = 0; i < partitions.size(); ++i) {
      if (!local[i] || flags[partitions[i]].unconfirmed_since_ms.load() == kNoUnconfirmed) continue;
      if (auto ok = CheckConfirmed(request, partitions[i]); !ok) return std::unexpected(ok.error());
    }
  }
  const auto may_log = MayLog(shard, request);
  if (!may_log) return std::unexpected(may_log.error());
  const bool log_it = *may_log;
  auto run = [this, shard, &merged, &request, &written, &owned, log_it](
                 std::uint32_t p, const MapRequest& rq) -> base::Result<void> {
    auto part =
        RunOnPartition(shard, p, rq, log_it || owned.HasBackups(p) ? &written.updates : nullptr);
    if (!part) return std::unexpected(part.error());
    MergeResult(request.op, merged, std::move(*part));
    return {};
  };
  if (parts != nullptr) {
    for (std::size_t i = 0; i < parts->size(); ++i) {  // all or none of this shard's parts
      if (!local[i]) {
        // The table moved (or the partition's copy has not arrived) since the keys were split
        // by owner: writing now would go to a store the copy is about to replace.
        return Fail(ErrorCode::kNotOwner,
                    fmt::format("partition {} is not served by this member now; the {} is "
                                "retried with the current partition table",
                                partitions[i], MapOpName(request.op)));
      }
    }
    for (const auto& [p, part] : *parts) {
      auto ok = run(p, part);
      if (!ok) return std::unexpected(ok.error());
    }
    return merged;
  }
  for (std::size_t i = 0; i < partitions.size(); ++i) {
    if (!local[i]) continue;  // another member's
    auto ok = run(partitions[i], request);
    if (!ok) return std::unexpected(ok.error());
  }
  return merged;
}

void MapService::Impl::ExecuteFanOut(MapRequest& request, Callback& done) {
  const bool has_keys = SpecOf(request.op).scope == OpScope::kListedKeys;
  auto parts = std::make_shared<Parts>();
  if (has_keys) {
    *parts = SplitByShard(request);
    // All or nothing, before any shard applies its parts (each shard checks again).
    for (const auto& shard_parts : *parts) {
      for (const auto& [p, part] : shard_parts) {
        if (!IsLocal(p)) {
          return done(Fail(ErrorCode::kNotOwner,
                           fmt::format("partition {} is not served by this member now; the {} "
                                       "is retried with the current partition table",
                                       p, MapOpName(request.op))));
        }
      }
    }
  }
  auto shared_request = std::make_shared<const MapRequest>(std::move(request));
  if (!has_keys && !SpecOf(shared_request->op).writes) {
    return ScanAllInTurn(std::move(shared_request), std::move(done));
  }
  auto token = EnterRequest();
  // What the parts changed on partitions with backups; slot i is written only by shard i.
  auto updates = std::make_shared<std::vector<Written>>(shards.size());
  // What each shard logged of its parts (persistence), acknowledged once the log allows.
  auto logged = std::make_shared<std::vector<base::Result<Logged>>>(shards.size(), Logged{});
  shards.MapReduce<base::Result<MapResult>>(
      [this, parts, shared_request, has_keys, token, updates, logged](std::size_t shard) {
        auto result = RunPartsOnShard(shard, *shared_request, has_keys ? &(*parts)[shard] : nullptr,
                                      (*updates)[shard]);
        (*logged)[shard] = LogUpdates(shard, (*updates)[shard].updates);
        return result;
      },
      [this, shared_request, done = std::move(done), token, updates,
       logged](std::vector<base::Result<MapResult>> all) mutable {
        done = AfterLogged(std::move(*logged), std::move(done));
        MapResult merged;
        std::vector<Written> changed;
        for (auto& shard_updates : *updates) {
          if (!shard_updates.updates.empty()) changed.push_back(std::move(shard_updates));
        }
        for (auto& part : all) {
          if (!part) {
            if (!changed.empty())
              ReplicateThen(std::move(changed), std::unexpected(part.error()), done);
            else
              done(std::unexpected(part.error()));
            return;
          }
          MergeResult(shared_request->op, merged, std::move(*part));
        }
        if (changed.empty()) return done(std::move(merged));
        ReplicateThen(std::move(changed), std::move(merged), done);
      });
}

struct MapService::Impl::ScanInTurn {
  std::shared_ptr<const MapRequest> request;
  Callback done;
  std::shared_ptr<RequestToken> token;
  std::vector<MapResult> by_shard;  // slot i: shard i's partitions, merged in slot order
  std::mutex mu;
  std::size_t shards_left = 0;
  std::optional<base::Error> failure;
};

void MapService::Impl::ScanAllInTurn(std::shared_ptr<const MapRequest> request, Callback done) {
  auto scan = std::make_shared<ScanInTurn>();
  scan->request = std::move(request);
  scan->done = std::move(done);
  scan->token = EnterRequest();
  scan->by_shard.resize(shards.size());
  scan->shards_left = shards.size();
  const auto here = shards.CurrentShard();
  for (std::size_t shard = 0; shard < shards.size(); ++shard) {
    if (shard == here) continue;
    shards.InvokeOn(shard, [this, shard, scan] { ScanShardFrom(shard, scan, 0); });
  }
  if (here) ScanShardFrom(*here, std::move(scan), 0);
}

void MapService::Impl::ScanShardFrom(std::size_t shard, std::shared_ptr<ScanInTurn> scan,
                                     std::size_t slot) {
  const MapRequest& request = *scan->request;
  auto finish = [&](std::optional<base::Error> error) {
    std::unique_lock lock(scan->mu);
    if (error && !scan->failure) scan->failure = std::move(error);
    if (--scan->shards_left != 0) return;
    lock.unlock();
    if (scan->failure) return scan->done(std::unexpected(*scan->failure));
    MapResult merged;
    for (auto& part : scan->by_shard) MergeResult(request.op, merged, std::move(part));
    scan->done(std::move(merged));
  };
  {
    std::lock_guard lock(scan->mu);
    if (scan->failure) return finish(std::nullopt);  // another shard failed: stop here
  }
  // Whole-map ops on a map this shard never held find nothing; don't create it.
  auto existing = states[shard]->maps.find(request.map_name);
  if (existing == states[shard]->maps.end()) return finish(std::nullopt);
  const MapTable& table = *existing->second;
  const auto budget =
      static_cast<std::size_t>(std::max<std::int64_t>(options.scan_entries_per_task, 1));
  std::size_t read = 0;
  for (; slot < table.stores.slot_count(); ++slot) {
    const RecordStore* store = table.stores.At(slot);
    if (store == nullptr) continue;
    if (read >= budget) {  // the rest after whatever reached the shard meanwhile
      shards.InvokeOn(shard, [this, shard, scan, slot] { ScanShardFrom(shard, scan, slot); });
      return;
    }
    const auto p = static_cast<std::uint32_t>(table.stores.LocalAt(slot) * shards.size() + shard);
    if (!IsLocal(p)) continue;  // another member's
    // A quorum map reads nothing of a partition with unconfirmed writes (RunPartsOnShard).
    if (any_quorum.load(std::memory_order_relaxed) &&
        flags[p].unconfirmed_since_ms.load() != kNoUnconfirmed) {
      if (auto ok = CheckConfirmed(request, p); !ok) return finish(ok.error());
    }
    read += store->size();
    auto part = RunOnPartition(shard, p, request, nullptr);
    if (!part) return finish(part.error());
    MergeResult(request.op, scan->by_shard[shard], std::move(*part));
  }
  finish(std::nullopt);
}

void MapService::Impl::ArmSweeper(std::size_t shard, std::chrono::milliseconds delay) {
  ShardState& state = *states[shard];
  if (!state.timer) return;
  state.timer->expires_after(delay);
  state.timer->async_wait([this, shard](const boost::system::error_code& ec) {
    if (ec || stopped.load(std::memory_order_acquire)) return;
    SweepTick(shard);
  });
}

void MapService::Impl::SweepTick(std::size_t shard) {
  GiveUpStaleCopies(shard);
  ShardState& state = *states[shard];
  const auto budget =
      static_cast<std::size_t>(std::max<std::int64_t>(options.sweep_budget_per_tick, 1));
  std::size_t examined = 0, expired = 0;
  // Resumes where the last tick stopped and visits each store at most once, at most `budget`
  // of them: a tick costs the same however many maps the shard holds (it used to count every
  // map's stores first).
  if (state.sweep_table >= state.sweep_order.size()) {
    state.sweep_table = 0;
    state.sweep_store = 0;
  }
  const std::size_t start_table = state.sweep_table;
  const std::size_t start_store = state.sweep_store;
  const base::Millis now_ms = clock.NowMs();
  for (std::size_t visits = 0; visits < budget && examined < budget; ++visits) {
    if (state.sweep_order.empty()) break;
    MapTable& table = *state.sweep_order[state.sweep_table];
    bool done_with_store = true;
    RecordStore* store = state.sweep_store < table.stores.slot_count()
                             ? table.stores.At(state.sweep_store)
                             : nullptr;
    if (store && store->SweepDue(now_ms)) {  // (a store with nothing due is not read)
      std::vector<EntryEvent> events;
      const auto p = static_cast<std::uint32_t>(
          table.stores.LocalAt(state.sweep_store) * shards.size() + shard);
      OpContext ctx = ContextFor(table, p, &events);
      ShardPartitionMaps sides(*this, shard, p, ctx.now_ms, false);  // backups sweep their own
      ctx.maps = &sides;
      std::vector<MapRequest> follow_ups;  // the owner's, not a backup's: its owner sends them
      if (IsLocal(p)) ctx.follow_ups = &follow_ups;
      const auto r = SweepStore(*store, ctx, budget - examined);
      sides.DropEmpty();  // (never the table swept: field maps are swept only as stores)
      if (!follow_ups.empty()) RunFollowUps(std::move(follow_ups));
      examined += r.examined;
      expired += r.expired;
      done_with_store = r.wrapped;
      for (const auto& event : events) ListenerRegistry::Deliver(table.listeners, event);
    }
    if (!done_with_store) break;
    if (++state.sweep_store >= table.stores.slot_count()) {
      state.sweep_store = 0;
      if (++state.sweep_table >= state.sweep_order.size()) state.sweep_table = 0;
    }
    if (state.sweep_table == start_table && state.sweep_store == start_store) break;  // a round
  }
  const bool mass_expiry = examined >= budget && expired * 4 > examined;
  ArmSweeper(shard, mass_expiry ? std::chrono::milliseconds(0)
                                : std::chrono::milliseconds(options.sweep_interval_ms));
}

MapService::MapService(runtime::ShardSet& shards, partition::Partitioner partitioner,
                       const base::Clock& clock, const EntryProcessorRegistry& processors,
                       std::shared_ptr<spdlog::logger> log, MapServiceOptions options)
    : shards_(shards),
      partitioner_(partitioner),
      impl_(
          std::make_unique<Impl>(shards, partitioner, clock, processors, std::move(log), options)) {
  if (options.default_config.min_cluster_size > 1) impl_->any_quorum.store(true);
}

MapService::~MapService() { Stop(); }

void MapService::Start() {
  if (impl_->started || impl_->stopped) return;
  impl_->started = true;
  Impl* impl = impl_.get();
  shards_.InvokeOnAll([impl](std::size_t shard) {
    impl->states[shard]->timer.emplace(impl->shards.Context(shard));
    impl->ArmSweeper(shard, std::chrono::milliseconds(impl->options.sweep_interval_ms));
  });
}

void MapService::Stop() {
  if (impl_->stopped.exchange(true)) return;
  TESSERA_CHECK(!shards_.CurrentShard().has_value(), "MapService::Stop called on a shard");
  Impl* impl = impl_.get();
  // Parked stream waits first (only a started service parks any): a wait this member
  // forwarded is a request in flight until the other member answers it, which may be stopping
  // too. Waited for, so no posted drop outlives the service.
  if (impl_->started) {
    auto dropped = std::make_shared<std::promise<void>>();
    auto left = std::make_shared<std::atomic<std::size_t>>(shards_.size());
    shards_.InvokeOnAll([impl, dropped, left](std::size_t shard) {
      impl->DropStreamReaders(shard);
      if (left->fetch_sub(1) == 1) dropped->set_value();
    });
    if (dropped->get_future().wait_for(kDrainTimeout) != std::future_status::ready && impl_->log) {
      impl_->log->warn("map service could not answer parked stream waits (shards not running?)");
    }
  }
  if (!impl_->in_flight.WaitDrained(kDrainTimeout) && impl_->log) {
    impl_->log->warn("map service stopped with requests still in flight");
  }
  if (!impl_->started) return;
  auto cancelled = std::make_shared<std::promise<void>>();
  auto remaining = std::make_shared<std::atomic<std::size_t>>(shards_.size());
  shards_.InvokeOnAll([impl, cancelled, remaining](std::size_t shard) {
    impl->states[shard]->timer.reset();  // cancels the pending wait
    impl->DropStreamReaders(shard);      // any parked after the first drop
    if (remaining->fetch_sub(1) == 1) cancelled->set_value();
  });
  if (cancelled->get_future().wait_for(kDrainTimeout) != std::future_status::ready && impl_->log) {
    impl_->log->warn("map service sweepers did not stop (shards not running?)");
  }
}

base::Result<void> MapService::Impl::CheckMarkerWrite(const MapRequest& request) {
  if (request.op == MapOp::kTransact) {
    for (const auto& op : request.transaction) {
      if (auto ok = CheckMarkerWrite(op.request); !ok) return ok;
    }
    return {};
  }
  if (request.map_name != kTransactionIdMap || !SpecOf(request.op).writes) return {};
  return Fail(ErrorCode::kBadRequest,
              fmt::format("map '{}' holds the markers of committed transactions and only their "
                          "transactions write it ({} refused: a marker set or removed by hand "
                          "would answer another batch, or let one apply twice); read it, or "
                          "send the transaction again with its id",
                          kTransactionIdMap, MapOpName(request.op)));
}

base::Result<void> MapService::Impl::CheckQuorum(const MapRequest& request) const {
  if (request.op == MapOp::kTransact) {
    for (const auto& op : request.transaction) {
      if (auto ok = CheckQuorum(op.request); !ok) return ok;
    }
    return {};
  }
  if (!SpecOf(request.op).writes) return {};
  // A family's reads and merges are served without a quorum, as get is (FamilySpec::writes).
  if (const FamilySpec* family = FamilyOfOp(request.op);
      family != nullptr && !family->writes(request)) {
    return {};
  }
  // Joining (or rejoining) without a table yet: no cluster size to judge by. The request waits
  // for the table, or is answered kNotOwner when a member sent it, and is admitted again when
  // retried (Route): a member just admitted must not refuse the writes its cluster sends it.
  if (expects_table.load() && CurrentRouting() == nullptr) return {};
  const std::size_t need = ConfigOf(request.map_name).min_cluster_size;
  const std::size_t have = cluster_size.load(std::memory_order_relaxed);
  if (need <= 1 || have >= need) return {};
  return Fail(ErrorCode::kNoQuorum,
              fmt::format("map '{}' needs {} cluster members for writes and this member's "
                          "cluster has {} (members are down or cut off by a network "
                          "partition); the {} was not applied: retry once the cluster is whole, "
                          "or lower the map's min_cluster_size",
                          request.map_name, need, have, MapOpName(request.op)));
}

void MapService::Configure(const std::string& map_name, MapConfig config) {
  if (config.min_cluster_size > 1) impl_->any_quorum.store(true);
  std::lock_guard lock(impl_->config_mu);
  impl_->configs[map_name] = config;
  impl_->config_version.fetch_add(1, std::memory_order_acq_rel);
}

std::size_t MapService::ClusterSize() const {
  return impl_->cluster_size.load(std::memory_order_relaxed);
}

MapConfig MapService::ConfigOf(const std::string& map_name) const {
  return impl_->ConfigOf(map_name);
}

void MapService::Execute(MapRequest request, Callback done) {
  if (auto ok = impl_->Admit(request); !ok) return done(std::unexpected(ok.error()));
  impl_->Route(std::move(request), std::move(done), 0);
}

std::optional<base::Result<MapResult>> MapService::ExecuteIfLocal(const MapRequest& request) {
  if (!MapOpIsKeyed(request.op) || StreamReadWaits(request)) return std::nullopt;
  // A member's request before the first partition table: Execute answers kNotOwner.
  if (request.local_only && !impl_->CurrentRouting()) return std::nullopt;
  const std::uint32_t partition_id = impl_->partitioner.PartitionOf(request.key);
  const std::size_t shard = shards_.ShardOfPartition(partition_id);
  if (!shards_.OnShard(shard) || !impl_->LocalWithoutBackups(partition_id)) {
    return std::nullopt;  // another shard or member, or backups to wait for: use Execute
  }
  if (auto ok = impl_->Admit(request); !ok) return std::unexpected(ok.error());
  // Its log record to wait for, or a refusal Execute answers.
  if (auto log_it = impl_->MayLog(shard, request); !log_it || *log_it) return std::nullopt;
  RequestToken token(impl_->in_flight);
  return impl_->RunOnPartition(shard, partition_id, request);
}

void MapService::PrefetchKeys(std::span<const KeyRef> keys) const {
  const auto shard = shards_.CurrentShard();
  if (!shard || keys.size() < 2) return;
  impl_->PrefetchKeys(*shard, keys, std::nullopt);
}

void MapService::Impl::PrefetchKeys(std::size_t shard, std::span<const MapService::KeyRef> keys,
                                    std::optional<std::uint32_t> partition) const {
  const ShardState& state = *states[shard];
  std::array<const RecordStore*, kMaxPrefetchKeys> stores;
  std::array<std::uint64_t, kMaxPrefetchKeys> hashes;
  std::size_t n = 0;
  const MapTable* table = nullptr;
  for (const KeyRef& ref : keys.first(std::min(keys.size(), kMaxPrefetchKeys))) {
    const std::uint32_t partition_id = partition ? *partition : partitioner.PartitionOf(ref.key);
    if (!partition && (shards.ShardOfPartition(partition_id) != shard || !IsLocal(partition_id))) {
      continue;
    }
    if (table == nullptr || table->name != ref.map_name) {
      if (state.last != nullptr && state.last->name == ref.map_name) {
        table = state.last;
      } else {
        auto it = state.maps.find(std::string(ref.map_name));
        table = it == state.maps.end() ? nullptr : it->second.get();
      }
      if (table == nullptr) continue;
    }
    const RecordStore* store = table->stores.Find(partition_id / shards.size());
    if (store == nullptr) continue;
    hashes[n] = store->Prefetch(ref.key);
    stores[n++] = store;
  }
  // The slots are on their way: find each key's entry among them and fetch it too.
  for (std::size_t i = 0; i < n; ++i) stores[i]->PrefetchRecord(hashes[i]);
}

base::Result<MapResult> MapService::ExecuteSync(MapRequest request) {
  TESSERA_CHECK(!shards_.CurrentShard().has_value(),
                "ExecuteSync called on a shard thread; use Execute with a callback");
  auto promise = std::make_shared<std::promise<base::Result<MapResult>>>();
  auto future = promise->get_future();
  Execute(std::move(request),
          [promise](base::Result<MapResult> result) { promise->set_value(std::move(result)); });
  return future.get();
}

ListenerId MapService::AddEntryListener(const std::string& map_name, ListenerOptions options,
                                        EntryListener listener) {
  return impl_->listeners.Add(map_name, std::move(options), std::move(listener));
}

bool MapService::RemoveEntryListener(ListenerId id) { return impl_->listeners.Remove(id); }

std::vector<std::pair<std::string, std::size_t>> MapService::EntryListenerCounts() const {
  return impl_->listeners.Counts();
}

std::optional<std::vector<std::pair<std::string, MapStats>>> MapService::LocalMapStats() const {
  using PerShard = std::map<std::string, MapStats>;
  if (impl_->stopped.load(std::memory_order_acquire)) return std::nullopt;
  // Shared with the shards: a shard stopping meanwhile never answers, and the wait gives up.
  auto all = std::make_shared<std::promise<std::vector<PerShard>>>();
  auto done = all->get_future();
  Impl* impl = impl_.get();
  shards_.MapReduce<PerShard>(
      [impl](std::size_t shard) {
        PerShard out;
        for (const auto& [name, table] : impl->states[shard]->maps) {
          MapStats& sum = out[name];
          for (std::size_t i = 0; i < table->stores.slot_count(); ++i) {
            const RecordStore* store = table->stores.At(i);
            const auto p =
                static_cast<std::uint32_t>(table->stores.LocalAt(i) * impl->shards.size() + shard);
            if (store == nullptr || !impl->IsLocal(p)) continue;
            MapStats part = ReportedStats(*store);
            part.entries = static_cast<std::int64_t>(store->size());
            part.memory_bytes = static_cast<std::int64_t>(store->memory_bytes());
            AddStats(sum, part);
          }
        }
        return out;
      },
      [all](std::vector<PerShard> results) { all->set_value(std::move(results)); });
  if (done.wait_for(std::chrono::seconds(5)) != std::future_status::ready) return std::nullopt;
  PerShard merged;
  for (const auto& shard : done.get()) {
    for (const auto& [name, stats] : shard) AddStats(merged[name], stats);
  }
  return std::vector<std::pair<std::string, MapStats>>(merged.begin(), merged.end());
}

std::vector<std::string> MapService::MapNames() const {
  std::lock_guard lock(impl_->names_mu);
  return {impl_->names.begin(), impl_->names.end()};
}

}  // namespace tessera::map
