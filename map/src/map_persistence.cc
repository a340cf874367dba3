// MapService persistence: each shard's log of what it applied (storage::ShardLog), the
// acknowledgement of a write after its record, and the replay at start.
//
// A record is one write as its backups get it: the resulting state of every entry it changed
// (ReplicaUpdate, replica.h), so replay never runs an entry processor again and a partition
// transaction is one record. Backups log what they apply, and a partition copy that arrives is
// logged as it is applied (its clear first), so every replica a member holds is in its log.
//
//   payload: format (u8, 1), the writer's wall clock (i64 LE, ms), EncodeReplicaUpdates(...)
//
// The wall clock makes TTL deadlines absolute: at replay an entry's TTL left is reduced by the
// time since it was logged (gone if none is left), and its age since the last update grows by
// it (merge policies compare update times). Max-idle restarts at the replay.

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <future>

#include "map_service_impl.h"

namespace tessera::map {
namespace {

constexpr std::uint8_t kLogRecordFormat = 1;
constexpr std::size_t kLogRecordHeader = 9;

std::string EncodeLogRecord(base::Millis wall_ms, const std::vector<ReplicaUpdate>& updates) {
  std::string out(kLogRecordHeader, '\0');
  out[0] = static_cast<char>(kLogRecordFormat);
  const auto wall = static_cast<std::uint64_t>(wall_ms);
  for (int i = 0; i < 8; ++i) out[1 + i] = static_cast<char>((wall >> (8 * i)) & 0xff);
  out += EncodeReplicaUpdates(updates);
  return out;
}

std::string ShardsFolder(std::size_t shards) { return "shards-" + std::to_string(shards); }

}  // namespace

std::string_view PersistenceName(Persistence p) {
  switch (p) {
    case Persistence::kNone:
      return "none";
    case Persistence::kPeriodic:
      return "periodic";
    case Persistence::kAlways:
      return "always";
  }
  return "?";
}

bool MapService::logging() const { return impl_->logging.load(); }

bool MapService::Impl::MayLog(std::size_t shard, const MapRequest& request) {
  if (!logging.load(std::memory_order_relaxed) || !SpecOf(request.op).writes) return false;
  if (request.op == MapOp::kTransact) return true;
  MapTable& table = TableOn(shard, request.map_name);
  Refresh(table);
  return table.config.persistence != Persistence::kNone;
}

base::Result<MapService::Impl::Logged> MapService::Impl::LogUpdates(
    std::size_t shard, const std::vector<ReplicaUpdate>& updates) {
  Logged logged{shard, 0, Persistence::kNone};
  if (!logging.load(std::memory_order_relaxed) || states[shard]->replaying || updates.empty()) {
    return logged;
  }
  // Only what a map that persists changed, and partition-wide clears (a copy's start).
  std::vector<ReplicaUpdate> kept;
  bool all = true;
  // The updates of one write are mostly of one map: its table is looked up once.
  const MapTable* table = nullptr;
  for (std::size_t i = 0; i < updates.size(); ++i) {
    const ReplicaUpdate& u = updates[i];
    bool keep = true;
    if (u.kind == ReplicaUpdate::Kind::kHandoff || u.kind == ReplicaUpdate::Kind::kResyncChunk) {
      keep = false;  // no change to the stores (a copy's end is kept: replay counts the
                     // replica complete from there, see LogRecovery)
    } else if (!u.map_name.empty()) {
      if (table == nullptr || table->name != u.map_name) {
        MapTable& found = TableOn(shard, u.map_name);
        Refresh(found);
        table = &found;
      }
      const Persistence p = table->config.persistence;
      keep = p != Persistence::kNone;
      if (p > logged.wait) logged.wait = p;
    }
    if (!keep && all) {
      all = false;
      kept.assign(updates.begin(), updates.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (keep && !all) {
      kept.push_back(u);
    }
  }
  if (!all && kept.empty()) return Logged{shard, 0, Persistence::kNone};
  auto seq = logs[shard]->Append(EncodeLogRecord(clock.WallMs(), all ? updates : kept));
  if (!seq) return std::unexpected(seq.error());
  logged.seq = *seq;
  return logged;
}

void MapService::Impl::LogClearAll(std::size_t shard) {
  if (!logging.load() || states[shard]->replaying) return;
  std::vector<ReplicaUpdate> clears;
  for (std::uint32_t p = static_cast<std::uint32_t>(shard); p < partitioner.partition_count();
       p += static_cast<std::uint32_t>(shards.size())) {
    clears.push_back({ReplicaUpdate::Kind::kClearPartition, "", p, "", "", 0, 0, 0});
  }
  if (auto logged = LogUpdates(shard, clears); !logged && log) {
    log->error("leaving the cluster: the clear of shard {}'s partitions was not logged: {}", shard,
               logged.error().message());
  }
}

void MapService::Impl::WhenLogged(const std::vector<Logged>& logged,
                                  std::function<void(base::Result<void>)> done) {
  struct Countdown {
    explicit Countdown(InFlight& in_flight) : token(in_flight) {}
    std::mutex mu;
    std::size_t left = 0;
    std::optional<base::Error> failure;
    std::function<void(base::Result<void>)> done;
    RequestToken token;  // Stop waits for the answer
  };
  auto countdown = std::make_shared<Countdown>(in_flight);
  countdown->done = std::move(done);
  for (const auto& l : logged) countdown->left += l.wait != Persistence::kNone ? 1 : 0;
  if (countdown->left == 0) return countdown->done({});
  for (const auto& l : logged) {
    if (l.wait == Persistence::kNone) continue;
    auto answer = [countdown](base::Result<void> r) {
      std::unique_lock lock(countdown->mu);
      if (!r && !countdown->failure) countdown->failure = r.error();
      if (--countdown->left != 0) return;
      lock.unlock();
      if (countdown->failure) return countdown->done(std::unexpected(*countdown->failure));
      countdown->done({});
    };
    if (l.wait == Persistence::kAlways) {
      logs[l.shard]->WhenDurable(l.seq, std::move(answer));
    } else {
      logs[l.shard]->WhenWritten(l.seq, std::move(answer));
    }
  }
}

MapService::Callback MapService::Impl::AfterLogged(std::vector<base::Result<Logged>> logged,
                                                   Callback done) {
  std::vector<Logged> waits;
  std::optional<base::Error> failure;
  for (const auto& l : logged) {
    if (!l) {
      if (!failure) failure = l.error();
    } else if (l->wait != Persistence::kNone) {
      waits.push_back(*l);
    }
  }
  if (!failure && waits.empty()) return done;
  auto failed = [](const base::Error& e) {
    return base::Error(ErrorCode::kStorage,
                       "the write was applied in memory but could not be logged to disk (" +
                           e.message() + "); it may be lost if this member restarts");
  };
  return [this, failure, waits, failed, done = std::move(done)](base::Result<MapResult> result) {
    if (failure) return done(std::unexpected(failed(*failure)));
    WhenLogged(waits, [done, failed, result = std::move(result)](base::Result<void> ok) {
      if (!ok) return done(std::unexpected(failed(ok.error())));
      done(result);
    });
  };
}

base::Result<LogRecovery> MapService::Impl::ReplayShard(std::size_t shard, const std::string& dir) {
  const auto started = std::chrono::steady_clock::now();
  storage::ShardLogOptions log_options;
  log_options.sync_interval_ms = options.log_sync_ms;
  log_options.on_failure = options.on_log_failure;
  const std::filesystem::path path =
      std::filesystem::path(dir) / ("shard-" + std::to_string(shard));
  auto opened = storage::ShardLog::Open(path, log_options, log);
  if (!opened) return std::unexpected(opened.error());
  LogRecovery out;
  const std::uint64_t first = (*opened)->first_recovered_seq();
  auto records = (*opened)->TakeRecovered();
  const base::Millis now_wall = clock.WallMs();
  out.versions.assign(partitioner.partition_count(), 0);
  out.held.assign(partitioner.partition_count(), true);
  states[shard]->replaying = true;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const std::string& record = records[i];
    auto bad = [&](const std::string& why) {
      states[shard]->replaying = false;
      return base::Fail(ErrorCode::kStorage,
                        fmt::format("{}: record {} is not a map update ({}): the log was written "
                                    "by another release or damaged after its checksum; move the "
                                    "folder aside to start without it",
                                    path.string(), first + i, why));
    };
    if (record.size() < kLogRecordHeader ||
        static_cast<std::uint8_t>(record[0]) != kLogRecordFormat) {
      return bad("unknown format");
    }
    std::uint64_t wall = 0;
    for (int b = 0; b < 8; ++b) {
      wall |= static_cast<std::uint64_t>(static_cast<unsigned char>(record[1 + b])) << (8 * b);
    }
    auto updates = DecodeReplicaUpdates(std::string_view(record).substr(kLogRecordHeader));
    if (!updates) return bad(updates.error().message());
    const base::Millis age = std::max<base::Millis>(0, now_wall - static_cast<base::Millis>(wall));
    for (auto& u : *updates) {
      if (u.kind != ReplicaUpdate::Kind::kSet && u.kind != ReplicaUpdate::Kind::kCopySet) continue;
      u.update_age_ms += age;
      if (u.ttl_left_ms == 0) continue;
      if (u.ttl_left_ms <= age) {  // its deadline passed while the member was down
        u.kind = ReplicaUpdate::Kind::kDelete;
        u.value.clear();
      } else {
        u.ttl_left_ms -= age;
      }
    }
    out.updates += updates->size();
    out.bytes += record.size();
    ++out.records;
    ApplyOnShard(shard, *updates, "");
    for (const auto& u : *updates) {
      if (u.partition_id >= out.versions.size()) continue;
      auto& version = out.versions[u.partition_id];
      const bool start_of_copy = (u.kind == ReplicaUpdate::Kind::kClearPartition &&
                                  u.map_name.empty() && u.version == 0) ||
                                 u.kind == ReplicaUpdate::Kind::kResyncBegin;
      if (start_of_copy) {  // a copy, a resync or a leave: nothing held until it completes
        out.held[u.partition_id] = false;
        version = 0;
      } else if (u.kind == ReplicaUpdate::Kind::kPartitionComplete) {
        out.held[u.partition_id] = true;
        version = u.version;
      } else if (u.version > version) {
        version = u.version;
      }
    }
  }
  states[shard]->replaying = false;
  // Replay set the flags of the copies it applied; a table decides them from here on. The
  // replica version goes on from the log's (a recovered owner numbers its next write after it).
  {
    OwnershipChange change(*this);
    for (std::uint32_t p = static_cast<std::uint32_t>(shard); p < partitioner.partition_count();
         p += static_cast<std::uint32_t>(shards.size())) {
      auto& f = flags[p];
      f.version.store(out.versions[p]);
      f.versioned.store(false);
      f.copy_arrived.store(false);
      f.pending.store(false);
    }
  }
  for (const auto& [name, table] : states[shard]->maps) {
    for (std::size_t slot = 0; slot < table->stores.slot_count(); ++slot) {
      if (const RecordStore* store = table->stores.At(slot)) out.entries += store->size();
    }
  }
  logs[shard] = std::move(*opened);
  out.took_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - started)
                    .count();
  return out;
}

base::Result<LogRecovery> MapService::OpenLog(const std::string& dir) {
  namespace fs = std::filesystem;
  TESSERA_CHECK(!impl_->logging.load(), "MapService::OpenLog called twice");
  const std::string mine = ShardsFolder(shards_.size());
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return base::Fail(ErrorCode::kStorage,
                      fmt::format("cannot create the map log folder {}: {}", dir, ec.message()));
  }
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("shards-") && name != mine) {
      return base::Fail(
          ErrorCode::kConflict,
          fmt::format("{} holds a map log written by a member with {} shards, and this member "
                      "runs {}: start it with --threads {} (a log cannot be re-sharded yet)",
                      dir, name.substr(7), shards_.size(), name.substr(7)));
    }
  }
  if (ec) {
    return base::Fail(ErrorCode::kStorage,
                      fmt::format("cannot read the map log folder {}: {}", dir, ec.message()));
  }
  impl_->logs.resize(shards_.size());
  const std::string folder = (fs::path(dir) / mine).string();
  std::promise<std::vector<base::Result<LogRecovery>>> promise;
  auto future = promise.get_future();
  shards_.MapReduce<base::Result<LogRecovery>>(
      [impl = impl_.get(), folder](std::size_t shard) { return impl->ReplayShard(shard, folder); },
      [&promise](std::vector<base::Result<LogRecovery>> all) {
        promise.set_value(std::move(all));
      });
  LogRecovery total;
  total.versions.assign(partitioner_.partition_count(), 0);
  total.held.assign(partitioner_.partition_count(), true);
  std::optional<base::Error> failure;
  auto results = future.get();
  for (std::size_t shard = 0; shard < results.size(); ++shard) {
    auto& r = results[shard];
    if (!r) {
      if (!failure) failure = r.error();
      continue;
    }
    for (std::uint32_t p = 0; p < partitioner_.partition_count(); ++p) {
      if (shards_.ShardOfPartition(p) != shard) continue;
      total.versions[p] = r->versions[p];
      total.held[p] = r->held[p];
    }
    total.records += r->records;
    total.updates += r->updates;
    total.bytes += r->bytes;
    total.entries += r->entries;
    total.took_ms = std::max(total.took_ms, r->took_ms);
  }
  if (failure) {
    std::promise<void> closed;
    shards_.MapReduce<int>(
        [impl = impl_.get()](std::size_t shard) {
          impl->logs[shard].reset();
          return 0;
        },
        [&closed](std::vector<int>) { closed.set_value(); });
    closed.get_future().wait();
    return std::unexpected(*failure);
  }
  impl_->logging.store(true);
  impl_->config_version.fetch_add(1, std::memory_order_acq_rel);  // internal maps now persist
  if (impl_->log) {
    impl_->log->info(
        "map log {}: replayed {} records ({} updates, {} bytes) in {} ms; {} entries held", folder,
        total.records, total.updates, total.bytes, total.took_ms, total.entries);
  }
  return total;
}

}  // namespace tessera::map
