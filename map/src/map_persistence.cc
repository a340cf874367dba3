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
//
// Compaction: once a shard logged more than MapServiceOptions::log_compact_bytes (or its last
// snapshot's size, if larger) since its last round began, it writes a snapshot of each of its
// partitions into its own log, one partition per slice (many small ones together), each slice
// a task of its own between the shard's requests. A partition's snapshot is what a migration
// copy of it would hold (the maps that persist), written in one task as consecutive records:
//
//   payload: format (u8, 2), the writer's wall clock (i64 LE, ms), partition id (u32 LE),
//            flags (u8: 1 first record of the snapshot, 2 last), EncodeReplicaUpdates(...)
//
// A replica the log holds whole ends in kPartitionComplete with its version; one whose copy is
// still arriving (LogRecovery::held false) starts with the copy's clear and has no end marker,
// and its copy's remaining records follow. Replay applies, for each partition, its last
// complete snapshot and the records after it, and skips every record of the partition before
// it (and any incomplete snapshot after it: a crash mid-snapshot). When a round's last record
// is durable, the segments holding only records before the round's first are deleted
// (storage::ShardLog::DropBefore): every partition of the shard has a later snapshot.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <future>

#include "map_service_impl.h"

namespace tessera::map {
namespace {

constexpr std::uint8_t kLogRecordFormat = 1;
constexpr std::uint8_t kSnapshotRecordFormat = 2;
constexpr std::size_t kLogRecordHeader = 9;
constexpr std::size_t kSnapshotRecordHeader = kLogRecordHeader + 5;
constexpr std::uint8_t kFirstOfSnapshot = 1;
constexpr std::uint8_t kLastOfSnapshot = 2;
constexpr std::size_t kSnapshotChunkBytes = 4 << 20;  // a snapshot record's updates, about

void PutU64(std::string& out, std::size_t at, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

std::uint64_t GetU64(std::string_view in, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  }
  return v;
}

std::string EncodeLogRecord(base::Millis wall_ms, const std::vector<ReplicaUpdate>& updates) {
  std::string out(kLogRecordHeader, '\0');
  out[0] = static_cast<char>(kLogRecordFormat);
  PutU64(out, 1, static_cast<std::uint64_t>(wall_ms), 8);
  out += EncodeReplicaUpdates(updates);
  return out;
}

std::string EncodeSnapshotRecord(base::Millis wall_ms, std::uint32_t partition_id,
                                 std::uint8_t flags, const std::vector<ReplicaUpdate>& updates) {
  std::string out(kSnapshotRecordHeader, '\0');
  out[0] = static_cast<char>(kSnapshotRecordFormat);
  PutU64(out, 1, static_cast<std::uint64_t>(wall_ms), 8);
  PutU64(out, 9, partition_id, 4);
  out[13] = static_cast<char>(flags);
  out += EncodeReplicaUpdates(updates);
  return out;
}

// How a logged update changes what the log says of its partition's replica (LogRecovery):
// a copy, a resync or a leave starts it over (nothing held until it completes).
void TrackReplica(const ReplicaUpdate& u, std::uint8_t& held, std::uint64_t& version) {
  const bool start_of_copy =
      (u.kind == ReplicaUpdate::Kind::kClearPartition && u.map_name.empty() && u.version == 0) ||
      u.kind == ReplicaUpdate::Kind::kResyncBegin;
  if (start_of_copy) {
    held = 0;
    version = 0;
  } else if (u.kind == ReplicaUpdate::Kind::kPartitionComplete) {
    held = 1;
    version = u.version;
  } else if (u.version > version) {
    version = u.version;
  }
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

MapService::LogStats MapService::GetLogStats() const {
  LogStats out;
  if (!impl_->logging.load()) return out;
  bool first = true;
  for (const auto& shard_log : impl_->logs) {
    const storage::ShardLogStats s = shard_log->stats();
    out.records += s.records;
    out.bytes += s.bytes;
    out.syncs += s.syncs;
    out.disk_bytes += s.disk_bytes;
    out.segments_dropped += s.segments_dropped;
    out.free_bytes = first ? s.free_bytes : std::min(out.free_bytes, s.free_bytes);
    first = false;
    out.space_low = out.space_low || s.space_low;
  }
  out.compactions = impl_->compactions.load(std::memory_order_relaxed);
  return out;
}

base::Result<std::uint64_t> MapService::BackupLog(const std::string& dest) const {
  if (!impl_->logging.load()) {
    return base::Fail(ErrorCode::kBadRequest, "this member keeps no map log (no data directory)");
  }
  const std::filesystem::path folder = std::filesystem::path(dest) / ShardsFolder(shards_.size());
  std::uint64_t bytes = 0;
  for (std::size_t shard = 0; shard < impl_->logs.size(); ++shard) {
    auto copied = impl_->logs[shard]->Backup(folder / ("shard-" + std::to_string(shard)));
    if (!copied) return std::unexpected(copied.error());
    bytes += *copied;
  }
  if (auto synced = storage::SyncDirectory(folder); !synced) return std::unexpected(synced.error());
  if (auto synced = storage::SyncDirectory(dest); !synced) return std::unexpected(synced.error());
  return bytes;
}

void MapService::Impl::DropUnheldReplicas(std::size_t shard,
                                          const std::vector<std::uint32_t>& partitions) {
  const auto current = CurrentRouting();
  if (!current) return;
  std::vector<ReplicaUpdate> clears;
  std::uint64_t entries = 0;
  for (const std::uint32_t p : partitions) {
    const auto& holders = current->replicas[p];
    if (std::find(holders.begin(), holders.end(), current->self) != holders.end() ||
        flags[p].pending.load() || flags[p].copy_arrived.load() || !flags[p].replayed.load()) {
      continue;  // held again since: its copy replaces what was replayed
    }
    for (auto& [name, table] : states[shard]->maps) {
      if (RecordStore* slot = table->stores.Find(p / shards.size())) {
        entries += slot->size();
        slot->Clear();
      }
    }
    ReplicaUpdate clear;
    clear.kind = ReplicaUpdate::Kind::kClearPartition;
    clear.partition_id = p;
    clears.push_back(std::move(clear));
  }
  if (clears.empty()) return;
  if (auto logged = LogUpdates(shard, clears); !logged && log) {
    log->warn(
        "shard {}: the clear of {} superseded partition(s) was not logged ({}); the next "
        "restart replays them again",
        shard, clears.size(), logged.error().message());
  }
  if (log && entries > 0) {
    log->info(
        "shard {}: cleared {} entries of {} partition(s) replayed from the log whose newer "
        "replica another member holds (the recovery chose it)",
        shard, entries, clears.size());
  }
}

base::Result<bool> MapService::Impl::MayLog(std::size_t shard, const MapRequest& request) {
  if (!logging.load(std::memory_order_relaxed) || !SpecOf(request.op).writes) return false;
  if (request.op != MapOp::kTransact) {
    MapTable& table = TableOn(shard, request.map_name);
    Refresh(table);
    if (table.config.persistence == Persistence::kNone) return false;
  }
  if (auto space = logs[shard]->CheckSpace(); !space) return std::unexpected(space.error());
  return true;
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
    if (u.kind == ReplicaUpdate::Kind::kHandoff || u.kind == ReplicaUpdate::Kind::kResyncChunk ||
        u.kind == ReplicaUpdate::Kind::kProbe) {
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
  const std::vector<ReplicaUpdate>& logging_now = all ? updates : kept;
  const base::Millis wall = clock.WallMs();
  const std::string record = EncodeLogRecord(wall, logging_now);
  auto seq = logs[shard]->Append(record);
  if (!seq) return std::unexpected(seq.error());
  logged.seq = *seq;
  TrackHistory(shard, logging_now, wall);
  for (const auto& u : logging_now) {
    if (u.partition_id < log_held.size()) {
      TrackReplica(u, log_held[u.partition_id], log_version[u.partition_id]);
    }
  }
  MaybeCompact(shard, record.size());
  return logged;
}

void MapService::Impl::MaybeCompact(std::size_t shard, std::uint64_t bytes) {
  LogCompaction& c = compaction[shard];
  c.logged_bytes += bytes;
  if (c.round_first_seq != 0 || stopped.load(std::memory_order_relaxed) ||
      c.logged_bytes < std::max(options.log_compact_bytes, c.snapshot_bytes)) {
    return;
  }
  c.logged_bytes = 0;
  c.round_bytes = 0;
  c.next = 0;
  c.round_first_seq = ~std::uint64_t{0};  // running: the first snapshot record sets it
  CompactInTurn(shard);
}

void MapService::Impl::CompactInTurn(std::size_t shard) {
  shards.InvokeOn(shard, [this, shard] {
    LogCompaction& c = compaction[shard];
    if (stopped.load()) {
      c.round_first_seq = 0;
      return;
    }
    const std::size_t step = shards.size();
    const auto budget =
        static_cast<std::size_t>(std::max<std::int64_t>(options.scan_entries_per_task, 1));
    std::size_t done = 0;
    while (done < budget) {
      const std::size_t p = shard + c.next * step;
      if (p >= partitioner.partition_count()) break;
      done += std::max<std::size_t>(PartitionEntryCount(shard, static_cast<std::uint32_t>(p)), 1);
      auto last = SnapshotPartition(shard, static_cast<std::uint32_t>(p));
      if (!last) {  // the log failed: the member stops (on_log_failure)
        if (log) log->error("shard {}: compaction stopped: {}", shard, last.error().message());
        c.round_first_seq = 0;
        return;
      }
      c.round_last_seq = *last;
      ++c.next;
    }
    if (shard + c.next * step < partitioner.partition_count()) return CompactInTurn(shard);
    // Every partition of the shard has a snapshot from round_first_seq on: once it is durable,
    // the segments before it go.
    const std::uint64_t first = c.round_first_seq;
    c.snapshot_bytes = c.round_bytes;
    c.round_first_seq = 0;
    compactions.fetch_add(1, std::memory_order_relaxed);
    storage::ShardLog* shard_log = logs[shard].get();
    shard_log->WhenDurable(c.round_last_seq, [shard_log, first](base::Result<void> durable) {
      if (durable) shard_log->DropBefore(first);  // else failed (the member stops) or closing
    });
  });
}

base::Result<std::uint64_t> MapService::Impl::SnapshotPartition(std::size_t shard,
                                                                std::uint32_t p) {
  // The maps that persist (as LogUpdates decides), and any map replay filled: a map
  // configured not to persist after its entries were logged keeps them in the log.
  auto exported = ExportPartition(shard, p, [this](MapTable& table) {
    Refresh(table);
    return table.config.persistence != Persistence::kNone || table.from_log;
  });
  const bool held = log_held[p] != 0;
  std::vector<std::vector<ReplicaUpdate>> chunks(1);
  std::size_t bytes = 0;
  // Not held: the copy's clear, then what of it arrived (the version the log says is lost
  // with it, as it is of any replica that is not held).
  if (!held) chunks.back().push_back(std::move(exported.front()));
  for (std::size_t i = 1; i + 1 < exported.size(); ++i) {
    ReplicaUpdate& u = exported[i];
    // Above the encoded size (a Cap'n Proto struct and its texts per update), so a record
    // stays far below storage::kMaxRecordBytes.
    const std::size_t size = u.map_name.size() + u.key.size() + u.value.size() + 128;
    if (bytes + size > kSnapshotChunkBytes && !chunks.back().empty()) {
      chunks.emplace_back();
      bytes = 0;
    }
    bytes += size;
    chunks.back().push_back(std::move(u));
  }
  if (held) {  // complete, at the version the log says
    exported.back().version = log_version[p];
    chunks.back().push_back(std::move(exported.back()));
  }
  const base::Millis wall = clock.WallMs();
  std::uint64_t last = 0;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const std::uint8_t flags =
        (i == 0 ? kFirstOfSnapshot : 0) | (i + 1 == chunks.size() ? kLastOfSnapshot : 0);
    const std::string record = EncodeSnapshotRecord(wall, p, flags, chunks[i]);
    auto seq = logs[shard]->Append(record);
    if (!seq) return std::unexpected(seq.error());
    compaction[shard].round_bytes += record.size();
    if (compaction[shard].round_first_seq == ~std::uint64_t{0}) {
      compaction[shard].round_first_seq = *seq;
    }
    last = *seq;
  }
  return last;
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

std::optional<base::Result<MapResult>> MapService::ExecuteIfLocal(const MapRequest& request,
                                                                  LogTicket& ticket) {
  ticket = {};
  if (!MapOpIsKeyed(request.op) || StreamReadWaits(request)) return std::nullopt;
  if (request.local_only && !impl_->CurrentRouting()) return std::nullopt;
  const std::uint32_t partition_id = impl_->partitioner.PartitionOf(request.key);
  const std::size_t shard = shards_.ShardOfPartition(partition_id);
  if (!shards_.OnShard(shard) || !impl_->LocalWithoutBackups(partition_id)) return std::nullopt;
  if (auto ok = impl_->Admit(request); !ok) return std::unexpected(ok.error());
  auto log_it = impl_->MayLog(shard, request);
  if (!log_it) return std::nullopt;  // a refusal (a full disk) Execute answers
  RequestToken token(impl_->in_flight);
  if (!*log_it) return impl_->RunOnPartition(shard, partition_id, request);
  std::vector<ReplicaUpdate> updates;
  auto result = impl_->RunOnPartition(shard, partition_id, request, &updates);
  if (updates.empty()) return result;
  auto logged = impl_->LogUpdates(shard, updates);
  if (!logged) return std::unexpected(Impl::NotLogged(logged.error()));
  ticket = {logged->shard, logged->seq, logged->wait};
  return result;
}

void MapService::WhenLogged(const LogTicket& ticket,
                            base::UniqueFunction<void(base::Result<void>)> done) {
  auto answer = [done = std::move(done),
                 token = RequestToken(impl_->in_flight)](base::Result<void> logged) mutable {
    if (!logged) return done(std::unexpected(Impl::NotLogged(logged.error())));
    done({});
  };
  storage::ShardLog& log = *impl_->logs[ticket.shard];
  if (ticket.wait == Persistence::kAlways) {
    log.WhenDurable(ticket.seq, std::move(answer));
  } else {
    log.WhenWritten(ticket.seq, std::move(answer));
  }
}

base::Error MapService::Impl::NotLogged(const base::Error& e) {
  return base::Error(ErrorCode::kStorage,
                     "the write was applied in memory but could not be logged to disk (" +
                         e.message() + "); it may be lost if this member restarts");
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
  auto failed = [](const base::Error& e) { return NotLogged(e); };
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
  log_options.segment_bytes = options.log_segment_bytes;
  log_options.on_failure = options.on_log_failure;
  log_options.on_sync = options.on_log_sync;
  log_options.skip_damaged = options.log_skip_damaged;
  log_options.min_free_bytes = options.log_min_free_bytes;
  // The log's nudges and answers run on this shard: two hand-offs per batch, not per write.
  log_options.post = [this, shard](base::UniqueFunction<void()> task) {
    shards.InvokeOn(shard, std::move(task));
  };
  const std::filesystem::path path =
      std::filesystem::path(dir) / ("shard-" + std::to_string(shard));
  auto opened = storage::ShardLog::Open(path, log_options, log);
  if (!opened) return std::unexpected(opened.error());
  LogRecovery out;
  const std::uint64_t first = (*opened)->first_recovered_seq();
  auto records = (*opened)->TakeRecovered();
  const base::Millis now_wall = clock.WallMs();
  const std::uint32_t partitions = partitioner.partition_count();
  out.versions.assign(partitions, 0);
  std::vector<std::uint8_t> held(partitions, 1);
  auto bad = [&](std::size_t i, const std::string& why) {
    states[shard]->replaying = false;
    return base::Fail(ErrorCode::kStorage,
                      fmt::format("{}: record {} is not a map update ({}): the log was written "
                                  "by another release or damaged after its checksum; move the "
                                  "folder aside to start without it",
                                  path.string(), first + i, why));
  };
  // Each partition's last complete snapshot (its first and last record), found first: the
  // partition's records before it are skipped, and so is any snapshot after it.
  constexpr std::size_t kNone = ~std::size_t{0};
  std::vector<std::size_t> snapshot_first(partitions, kNone), snapshot_last(partitions, kNone);
  {
    std::vector<std::size_t> open(partitions, kNone);
    for (std::size_t i = 0; i < records.size(); ++i) {
      const std::string& record = records[i];
      if (record.empty() || static_cast<std::uint8_t>(record[0]) != kSnapshotRecordFormat) {
        continue;
      }
      if (record.size() < kSnapshotRecordHeader) return bad(i, "a short snapshot header");
      const auto p = static_cast<std::uint32_t>(GetU64(record, 9, 4));
      const auto flags = static_cast<std::uint8_t>(record[13]);
      if (p >= partitions) return bad(i, fmt::format("a snapshot of partition {}", p));
      if (flags & kFirstOfSnapshot) open[p] = i;
      if ((flags & kLastOfSnapshot) && open[p] != kNone) {
        snapshot_first[p] = open[p];
        snapshot_last[p] = i;
        open[p] = kNone;
      }
    }
  }
  states[shard]->replaying = true;
  for (std::size_t i = 0; i < records.size(); ++i) {
    std::string& record = records[i];
    const auto format = record.empty() ? 0 : static_cast<std::uint8_t>(record[0]);
    const bool snapshot = format == kSnapshotRecordFormat;
    if ((format != kLogRecordFormat && !snapshot) || record.size() < kLogRecordHeader) {
      return bad(i, "unknown format");
    }
    const std::uint64_t wall = GetU64(record, 1, 8);
    if (snapshot) {
      const auto p = static_cast<std::uint32_t>(GetU64(record, 9, 4));
      if (i < snapshot_first[p] || i > snapshot_last[p] || snapshot_first[p] == kNone) {
        continue;  // superseded, or a snapshot a crash cut short
      }
      if (i == snapshot_first[p]) {  // the partition starts over from here: empty and whole
        held[p] = 1;
        out.versions[p] = 0;
        if (p < history.size()) history[p].digest = 0;  // its kPartitionComplete says it
      }
    }
    auto updates = DecodeReplicaUpdates(
        std::string_view(record).substr(snapshot ? kSnapshotRecordHeader : kLogRecordHeader));
    if (!updates) return bad(i, updates.error().message());
    if (!snapshot) {  // a partition's updates from before its snapshot are superseded
      std::erase_if(*updates, [&](const ReplicaUpdate& u) {
        return u.partition_id < partitions && snapshot_first[u.partition_id] != kNone &&
               i < snapshot_first[u.partition_id];
      });
    }
    // As logged (before the TTLs below move on): the history goes on as it did then.
    TrackHistory(shard, *updates, static_cast<base::Millis>(wall));
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
    out.bytes += record.size();
    record = std::string();  // replayed: its memory goes
    if (updates->empty()) continue;
    out.updates += updates->size();
    ++out.records;
    ApplyOnShard(shard, *updates, "");
    for (const auto& u : *updates) {
      if (u.partition_id < partitions) {
        TrackReplica(u, held[u.partition_id], out.versions[u.partition_id]);
      }
    }
  }
  states[shard]->replaying = false;
  out.held.assign(held.begin(), held.end());
  for (std::uint32_t p = static_cast<std::uint32_t>(shard); p < partitions;
       p += static_cast<std::uint32_t>(shards.size())) {
    log_held[p] = held[p];
    log_version[p] = out.versions[p];
  }
  // What the log holds counts toward the first round: a long history is compacted soon.
  compaction[shard].logged_bytes = out.bytes;
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
      // What replay left: a probe's answer while nothing replaces it (map_catch_up.cc).
      History& h = history[p];
      h.replayed = held[p] != 0 && h.digest != 0;
      h.replayed_at = {p, out.versions[p], h.digest};
      f.replayed.store(held[p] == 0 || out.versions[p] != 0 || h.digest != kEmptyHistory);
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
  impl_->compaction.assign(shards_.size(), {});
  impl_->log_held.assign(partitioner_.partition_count(), 1);
  impl_->log_version.assign(partitioner_.partition_count(), 0);
  impl_->history.assign(partitioner_.partition_count(), {});
  for (auto& h : impl_->history) h.digest = h.base_digest = Impl::kEmptyHistory;
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
    impl_->history.clear();
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
