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
// Sweeper: a steady_timer per shard examines up to sweep_budget_per_tick entries per tick,
// resuming at a (map, partition, slot) cursor. When a tick used its whole budget and found
// mostly expired entries (a mass expiry), the next tick runs at once instead of after
// sweep_interval_ms, so reclaiming is bounded by CPU, not by the tick period; each tick is
// still one bounded handler, so requests interleave with it.
//
// Shutdown: every request holds an in-flight token; Stop() refuses new requests, waits for
// the in-flight ones, then cancels the timers on their shards.
#include "tessera/map/map_service.h"

#include <spdlog/spdlog.h>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include "listener_registry.h"
#include "tessera/base/check.h"
#include "tessera/map/map_ops.h"

namespace tessera::map {
namespace {
using base::ErrorCode;
using base::Fail;
constexpr auto kDrainTimeout = std::chrono::seconds(10);

struct MapTable {
  std::string name;
  std::vector<std::unique_ptr<RecordStore>> stores;  // local index = partition / shards
  MapConfig config;
  std::uint64_t config_version = 0;
  ListenerRegistry::Snapshot listeners;
  std::uint64_t listeners_version = 0;
};

struct ShardState {
  std::unordered_map<std::string, std::unique_ptr<MapTable>> maps;
  std::vector<MapTable*> sweep_order;  // creation order; tables are never dropped
  std::size_t sweep_table = 0;
  std::size_t sweep_store = 0;
  std::optional<boost::asio::steady_timer> timer;
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

}  // namespace

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
    local = std::make_unique<std::atomic<bool>[]>(partitioner.partition_count());
    for (std::uint32_t p = 0; p < partitioner.partition_count(); ++p) local[p].store(true);
  }

  // Whether a request may run: the service is not stopping and the request is well-formed.
  base::Result<void> Admit(const MapRequest& request) const {
    if (stopped.load(std::memory_order_acquire)) {
      return Fail(ErrorCode::kShuttingDown,
                  "the map service is shutting down; retry on another member");
    }
    return ValidateRequest(request, &processors);
  }

  // A token held by every fan-out request; leaving happens when the last copy dies.
  std::shared_ptr<RequestToken> EnterRequest() { return std::make_shared<RequestToken>(in_flight); }

  MapTable& TableOn(std::size_t shard, const std::string& name);
  RecordStore& StoreOf(MapTable& table, std::uint32_t partition_id);
  void Refresh(MapTable& table);
  OpContext ContextFor(MapTable& table, std::uint32_t partition_id,
                       std::vector<EntryEvent>* events);
  base::Result<MapResult> RunOnPartition(std::size_t shard, std::uint32_t partition_id,
                                         const MapRequest& request);
  MapConfig ConfigOf(const std::string& name) const;

  void ExecuteKeyed(MapRequest& request, Callback& done);
  void ExecuteFanOut(MapRequest& request, Callback& done);
  base::Result<MapResult> RunPartsOnShard(
      std::size_t shard, const MapRequest& request,
      const std::vector<std::pair<std::uint32_t, MapRequest>>* parts);
  // Per shard: (partition id, the part of the request for that partition).
  using Parts = std::vector<std::vector<std::pair<std::uint32_t, MapRequest>>>;
  Parts SplitByShard(const MapRequest& request) const;

  void ArmSweeper(std::size_t shard, std::chrono::milliseconds delay);
  void SweepTick(std::size_t shard);

  // Cluster routing (see SetOwnership).
  bool IsLocal(std::uint32_t partition) const {
    return local[partition].load(std::memory_order_relaxed);
  }
  struct Routing {
    std::vector<std::string> owners;
    std::string self;
    ClusterRouting* routing = nullptr;
  };
  Routing CurrentRouting() const {
    std::lock_guard lock(ownership_mu);
    return routing;
  }
  void Route(MapRequest request, Callback done, int attempt);
  void ForwardKeyed(std::uint32_t partition, MapRequest request, Callback done, int attempt);
  void RetryLater(MapRequest request, Callback done, int attempt);
  void ExecuteAcrossMembers(MapRequest request, Callback done, int attempt);

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
  bool started = false;
  InFlight in_flight;
  std::unique_ptr<std::atomic<bool>[]> local;  // per partition: owned by this member
  mutable std::mutex ownership_mu;
  Routing routing;  // guarded by ownership_mu; routing.routing null = not clustered
};

MapTable& MapService::Impl::TableOn(std::size_t shard, const std::string& name) {
#ifndef NDEBUG
  TESSERA_CHECK(shards.OnShard(shard), "map table touched off its shard");
#endif
  ShardState& state = *states[shard];
  auto it = state.maps.find(name);
  if (it != state.maps.end()) return *it->second;
  auto table = std::make_unique<MapTable>();
  table->name = name;
  const std::size_t n = shards.size();
  table->stores.resize((partitioner.partition_count() + n - 1) / n);
  MapTable& ref = *table;
  state.sweep_order.push_back(table.get());
  state.maps.emplace(name, std::move(table));
  std::lock_guard lock(names_mu);
  names.insert(name);
  return ref;
}

RecordStore& MapService::Impl::StoreOf(MapTable& table, std::uint32_t partition_id) {
  auto& slot = table.stores[partition_id / shards.size()];
  if (!slot) slot = std::make_unique<RecordStore>();
  return *slot;
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
                                       std::vector<EntryEvent>* events) {
  Refresh(table);
  OpContext ctx;
  ctx.now_ms = clock.NowMs();
  ctx.config = table.config;
  ctx.map_name = table.name;
  ctx.partition_id = partition_id;
  ctx.partition_count = partitioner.partition_count();
  ctx.processors = &processors;
  ctx.events = table.listeners ? events : nullptr;
  ctx.event_values = ListenerRegistry::WantsValues(table.listeners);
  return ctx;
}

base::Result<MapResult> MapService::Impl::RunOnPartition(std::size_t shard,
                                                         std::uint32_t partition_id,
                                                         const MapRequest& request) {
  MapTable& table = TableOn(shard, request.map_name);
  std::vector<EntryEvent> events;
  OpContext ctx = ContextFor(table, partition_id, &events);
  auto result = ExecuteOnStore(StoreOf(table, partition_id), request, ctx);
  for (const auto& event : events) ListenerRegistry::Deliver(table.listeners, event);
  return result;
}

MapConfig MapService::Impl::ConfigOf(const std::string& name) const {
  std::lock_guard lock(config_mu);
  auto it = configs.find(name);
  return it == configs.end() ? options.default_config : it->second;
}

void MapService::Impl::ExecuteKeyed(MapRequest& request, Callback& done) {
  const std::uint32_t partition_id = partitioner.PartitionOf(request.key);
  const std::size_t shard = shards.ShardOfPartition(partition_id);
  if (shards.OnShard(shard)) {
    RequestToken token(in_flight);
    done(RunOnPartition(shard, partition_id, request));
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
    pending->done(RunOnPartition(shard, partition_id, pending->request));
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
    const std::vector<std::pair<std::uint32_t, MapRequest>>* parts) {
  MapResult merged;
  auto run = [this, shard, &merged, &request](std::uint32_t p,
                                              const MapRequest& rq) -> base::Result<void> {
    auto part = RunOnPartition(shard, p, rq);
    if (!part) return std::unexpected(part.error());
    MergeResult(request.op, merged, std::move(*part));
    return {};
  };
  if (parts != nullptr) {
    for (const auto& [p, part] : *parts) {
      auto ok = run(p, part);
      if (!ok) return std::unexpected(ok.error());
    }
    return merged;
  }
  // Whole-map ops on a map this shard never held find nothing; don't create it.
  auto existing = states[shard]->maps.find(request.map_name);
  if (existing == states[shard]->maps.end()) return merged;
  MapTable& table = *existing->second;
  for (std::size_t i = 0; i < table.stores.size(); ++i) {
    const auto partition_id = static_cast<std::uint32_t>(i * shards.size() + shard);
    if (!table.stores[i] || !IsLocal(partition_id)) continue;  // another member's partition
    auto ok = run(partition_id, request);
    if (!ok) return std::unexpected(ok.error());
  }
  return merged;
}

void MapService::Impl::ExecuteFanOut(MapRequest& request, Callback& done) {
  const bool has_keys = request.op == MapOp::kPutAll || request.op == MapOp::kGetAll ||
                        request.op == MapOp::kExecuteOnKeys;
  auto parts = std::make_shared<Parts>();
  if (has_keys) *parts = SplitByShard(request);
  auto shared_request = std::make_shared<const MapRequest>(std::move(request));
  auto token = EnterRequest();
  shards.MapReduce<base::Result<MapResult>>(
      [this, parts, shared_request, has_keys, token](std::size_t shard) {
        return RunPartsOnShard(shard, *shared_request, has_keys ? &(*parts)[shard] : nullptr);
      },
      [shared_request, done = std::move(done), token](std::vector<base::Result<MapResult>> all) {
        MapResult merged;
        for (auto& part : all) {
          if (!part) return done(std::unexpected(part.error()));
          MergeResult(shared_request->op, merged, std::move(*part));
        }
        done(std::move(merged));
      });
}

// --- cluster routing -------------------------------------------------------------------------
// A keyed request for another member's partition is sent to the owner as a local_only request;
// a whole-map request runs here over the owned partitions and on every other owner, merged.
// kNotOwner (the table moved under the request) and kConnectionFailed (never sent) are retried
// with a growing delay while the ownership settles.

namespace {
constexpr int kMaxRouteAttempts = 15;  // 20 ms, 40 ms, ... : about 2.4 s in all

bool RetryableRouteError(ErrorCode code) {
  return code == ErrorCode::kNotOwner || code == ErrorCode::kConnectionFailed;
}
}  // namespace

void MapService::Impl::Route(MapRequest request, Callback done, int attempt) {
  if (MapOpIsKeyed(request.op)) {
    const std::uint32_t partition_id = partitioner.PartitionOf(request.key);
    if (IsLocal(partition_id)) return ExecuteKeyed(request, done);
    return ForwardKeyed(partition_id, std::move(request), std::move(done), attempt);
  }
  if (request.local_only) {
    // Keys another member sent here must be ours; if the table moved, the sender retries.
    auto foreign = [this](const std::string& key) { return !IsLocal(partitioner.PartitionOf(key)); };
    bool any_foreign = std::any_of(request.keys.begin(), request.keys.end(), foreign) ||
                       std::any_of(request.entries.begin(), request.entries.end(),
                                   [&](const auto& e) { return foreign(e.first); });
    if (any_foreign) {
      return done(Fail(ErrorCode::kNotOwner,
                       "some keys of this " + std::string(MapOpName(request.op)) +
                           " belong to partitions this member does not own; the sender retries"));
    }
    return ExecuteFanOut(request, done);
  }
  if (CurrentRouting().routing == nullptr) return ExecuteFanOut(request, done);
  ExecuteAcrossMembers(std::move(request), std::move(done), attempt);
}

void MapService::Impl::ForwardKeyed(std::uint32_t partition_id, MapRequest request, Callback done,
                                    int attempt) {
  Routing current = CurrentRouting();
  if (request.local_only) {
    return done(Fail(ErrorCode::kNotOwner,
                     fmt::format("partition {} is not owned by member {}; the sender retries with "
                                 "the current partition table",
                                 partition_id, current.self)));
  }
  const std::string& owner = current.owners.empty() ? current.self : current.owners[partition_id];
  if (current.routing == nullptr || owner.empty()) return RetryLater(std::move(request), std::move(done), attempt);
  MapRequest remote = request;
  remote.local_only = true;
  current.routing->Send(owner, std::move(remote),
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
      shards.Context(0), std::chrono::milliseconds(20 * (attempt + 1)));
  timer->async_wait([this, timer, request = std::move(request), done = std::move(done), attempt,
                     token = EnterRequest()](const boost::system::error_code&) mutable {
    if (stopped.load()) {
      return done(Fail(ErrorCode::kShuttingDown, "the map service is shutting down"));
    }
    Route(std::move(request), std::move(done), attempt + 1);
  });
}

void MapService::Impl::ExecuteAcrossMembers(MapRequest request, Callback done, int attempt) {
  Routing current = CurrentRouting();
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
  const bool has_keys = request.op == MapOp::kPutAll || request.op == MapOp::kGetAll ||
                        request.op == MapOp::kExecuteOnKeys;
  bool unowned = false;
  if (has_keys) {
    for (const auto& entry : request.entries) {
      const auto& owner = current.owners[partitioner.PartitionOf(entry.first)];
      unowned |= owner.empty();
      part_for(owner).entries.push_back(entry);
    }
    for (const auto& key : request.keys) {
      const auto& owner = current.owners[partitioner.PartitionOf(key)];
      unowned |= owner.empty();
      part_for(owner).keys.push_back(key);
    }
  } else {
    for (const auto& owner : current.owners) {
      if (owner.empty()) continue;
      part_for(owner);
    }
  }
  if (unowned) return RetryLater(std::move(request), std::move(done), attempt);
  struct Gather {
    std::mutex mu;
    std::vector<base::Result<MapResult>> parts;
    std::size_t remaining;
    MapRequest request;
    Callback done;
    int attempt;
  };
  auto gather = std::make_shared<Gather>();
  gather->remaining = by_member.size();
  gather->request = std::move(request);
  gather->done = std::move(done);
  gather->attempt = attempt;
  if (by_member.empty()) return gather->done(MapResult{});
  auto collect = [this, gather](base::Result<MapResult> part) {
    std::unique_lock lock(gather->mu);
    gather->parts.push_back(std::move(part));
    if (--gather->remaining != 0) return;
    lock.unlock();
    MapResult merged;
    for (auto& p : gather->parts) {
      if (!p) {
        if (RetryableRouteError(p.error().code())) {
          return RetryLater(std::move(gather->request), std::move(gather->done), gather->attempt);
        }
        return gather->done(std::unexpected(p.error()));
      }
      MergeResult(gather->request.op, merged, std::move(*p));
    }
    gather->done(std::move(merged));
  };
  for (auto& [member, part] : by_member) {
    if (member == current.self) {
      Callback local = collect;
      ExecuteFanOut(part, local);
    } else {
      current.routing->Send(member, std::move(part), collect);
    }
  }
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
  ShardState& state = *states[shard];
  const auto budget =
      static_cast<std::size_t>(std::max<std::int64_t>(options.sweep_budget_per_tick, 1));
  std::size_t examined = 0, expired = 0;
  // Visit each store at most once per tick, resuming where the last tick stopped.
  std::size_t total_stores = 0;
  for (MapTable* t : state.sweep_order) total_stores += t->stores.size();
  for (std::size_t step = 0; step < total_stores && examined < budget; ++step) {
    if (state.sweep_table >= state.sweep_order.size()) state.sweep_table = 0;
    MapTable& table = *state.sweep_order[state.sweep_table];
    auto& store = table.stores[state.sweep_store];
    bool done_with_store = true;
    if (store && store->size() > 0) {
      std::vector<EntryEvent> events;
      const auto p = static_cast<std::uint32_t>(state.sweep_store * shards.size() + shard);
      OpContext ctx = ContextFor(table, p, &events);
      const auto r = SweepStore(*store, ctx, budget - examined);
      examined += r.examined;
      expired += r.expired;
      done_with_store = r.wrapped;
      for (const auto& event : events) ListenerRegistry::Deliver(table.listeners, event);
    }
    if (!done_with_store) break;
    if (++state.sweep_store >= table.stores.size()) {
      state.sweep_store = 0;
      ++state.sweep_table;
    }
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
      impl_(std::make_unique<Impl>(shards, partitioner, clock, processors, std::move(log),
                                   options)) {}

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
  if (!impl_->in_flight.WaitDrained(kDrainTimeout) && impl_->log) {
    impl_->log->warn("map service stopped with requests still in flight");
  }
  if (!impl_->started) return;
  Impl* impl = impl_.get();
  auto cancelled = std::make_shared<std::promise<void>>();
  auto remaining = std::make_shared<std::atomic<std::size_t>>(shards_.size());
  shards_.InvokeOnAll([impl, cancelled, remaining](std::size_t shard) {
    impl->states[shard]->timer.reset();  // cancels the pending wait
    if (remaining->fetch_sub(1) == 1) cancelled->set_value();
  });
  if (cancelled->get_future().wait_for(kDrainTimeout) != std::future_status::ready && impl_->log) {
    impl_->log->warn("map service sweepers did not stop (shards not running?)");
  }
}

void MapService::Configure(const std::string& map_name, MapConfig config) {
  std::lock_guard lock(impl_->config_mu);
  impl_->configs[map_name] = config;
  impl_->config_version.fetch_add(1, std::memory_order_acq_rel);
}

MapConfig MapService::ConfigOf(const std::string& map_name) const {
  return impl_->ConfigOf(map_name);
}

void MapService::Execute(MapRequest request, Callback done) {
  if (auto ok = impl_->Admit(request); !ok) return done(std::unexpected(ok.error()));
  impl_->Route(std::move(request), std::move(done), 0);
}

void MapService::SetOwnership(std::vector<std::string> owners, std::string self,
                              ClusterRouting* routing) {
  TESSERA_CHECK(owners.size() == partitioner_.partition_count(),
                "ownership must name an owner for every partition");
  std::lock_guard lock(impl_->ownership_mu);
  for (std::uint32_t p = 0; p < owners.size(); ++p) impl_->local[p].store(owners[p] == self);
  impl_->routing = {std::move(owners), std::move(self), routing};
}

bool MapService::OwnsPartition(std::uint32_t partition) const {
  return partition < partitioner_.partition_count() && impl_->IsLocal(partition);
}

std::optional<base::Result<MapResult>> MapService::ExecuteIfLocal(const MapRequest& request) {
  if (!MapOpIsKeyed(request.op)) return std::nullopt;
  const std::uint32_t partition_id = impl_->partitioner.PartitionOf(request.key);
  const std::size_t shard = shards_.ShardOfPartition(partition_id);
  if (!shards_.OnShard(shard) || !impl_->IsLocal(partition_id)) return std::nullopt;
  if (auto ok = impl_->Admit(request); !ok) return std::unexpected(ok.error());
  RequestToken token(impl_->in_flight);
  return impl_->RunOnPartition(shard, partition_id, request);
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

std::vector<std::string> MapService::MapNames() const {
  std::lock_guard lock(impl_->names_mu);
  return {impl_->names.begin(), impl_->names.end()};
}

}  // namespace tessera::map
