// ShardLog: the shard thread only encodes into `pending_` under a mutex it shares with its own
// flusher; the flusher takes the whole pending batch at once, writes it, syncs when someone
// waits or the interval is up, and then answers the waiters the sync covered.
#include "tessera/storage/shard_log.h"

#include <spdlog/spdlog.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace tessera::storage {
namespace {

using base::ErrorCode;

std::string SegmentName(std::uint64_t first_seq) {
  char name[32];
  std::snprintf(name, sizeof name, "%020" PRIu64 ".log", first_seq);
  return name;
}

// The first sequence number a segment's name says, if it is a segment's name.
std::optional<std::uint64_t> FirstSeqOf(const std::filesystem::path& file) {
  const std::string name = file.filename().string();
  if (name.size() != 24 || file.extension() != ".log") return std::nullopt;
  std::uint64_t seq = 0;
  for (std::size_t i = 0; i < 20; ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    seq = seq * 10 + static_cast<std::uint64_t>(name[i] - '0');
  }
  return seq;
}

base::Result<std::uint64_t> StatvfsFree(const std::filesystem::path& dir) {
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) != 0) {
    return base::Fail(ErrorCode::kStorage, "cannot read the free space of the file system of " +
                                               dir.string() + ": " + std::strerror(errno));
  }
  return static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
}

constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

base::Result<std::unique_ptr<ShardLog>> ShardLog::Open(const std::filesystem::path& dir,
                                                       ShardLogOptions options,
                                                       std::shared_ptr<spdlog::logger> log) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return base::Fail(ErrorCode::kStorage,
                      "cannot create the log folder " + dir.string() + ": " + ec.message());
  }
  auto shard_log = std::unique_ptr<ShardLog>(new ShardLog(dir, options, std::move(log)));
  if (auto recovered = shard_log->Recover(); !recovered) return std::unexpected(recovered.error());
  shard_log->ReadFreeSpace();
  if (auto started = shard_log->StartSegment(shard_log->appended_seq_ + 1); !started) {
    return std::unexpected(started.error());
  }
  shard_log->flusher_ = std::thread([raw = shard_log.get()] { raw->Flusher(); });
  return shard_log;
}

ShardLog::ShardLog(std::filesystem::path dir, ShardLogOptions options,
                   std::shared_ptr<spdlog::logger> log)
    : dir_(std::move(dir)), options_(options), log_(std::move(log)) {
  nudge_target_->log = this;
}

ShardLog::~ShardLog() {
  {
    std::lock_guard lock(nudge_target_->mu);
    nudge_target_->log = nullptr;
  }
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_one();
  if (flusher_.joinable()) flusher_.join();
}

base::Result<void> ShardLog::Recover() {
  std::vector<std::pair<std::uint64_t, std::filesystem::path>> segments;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    if (auto first = FirstSeqOf(entry.path())) segments.emplace_back(*first, entry.path());
  }
  if (ec) {
    return base::Fail(ErrorCode::kStorage,
                      "cannot list the log folder " + dir_.string() + ": " + ec.message());
  }
  std::sort(segments.begin(), segments.end());
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const auto& [first, file] = segments[i];
    if (i == 0) {
      first_recovered_seq_ = first;
      appended_seq_ = first - 1;
    } else if (first != appended_seq_ + 1) {
      return base::Fail(ErrorCode::kStorage,
                        "log segment " + file.string() + " starts at record " +
                            std::to_string(first) + " but the segments before it end at " +
                            std::to_string(appended_seq_) +
                            ": records are missing; restore the data directory from a backup");
    }
    auto contents = ReadSegment(file, {options_.skip_damaged});
    if (!contents) return std::unexpected(contents.error());
    for (const std::uint64_t at : contents->skipped_at) {
      if (log_) {
        log_->warn(
            "log segment {}: skipped a damaged record at offset {} and what followed up "
            "to the next good record (asked to: what they held is lost)",
            file.string(), at);
      }
    }
    if (contents->torn_at) {
      if (i + 1 != segments.size()) {
        return base::Fail(ErrorCode::kStorage,
                          "log segment " + file.string() + " ends in a torn record at offset " +
                              std::to_string(*contents->torn_at) +
                              " but is not the last segment; restore the data directory from a "
                              "backup");
      }
      if (log_) {
        log_->warn(
            "log segment {}: cut off a torn tail of {} bytes at offset {} (a crash in "
            "the middle of a write; the records before it are kept)",
            file.string(), contents->file_bytes - contents->valid_bytes, *contents->torn_at);
      }
      if (auto cut = TruncateSegment(file, contents->valid_bytes); !cut) return cut;
    }
    appended_seq_ += contents->records.size();
    if (!contents->skipped_at.empty()) {
      // The records skipped are not counted: the next segment's name says where this one
      // ended, and the last one's next record comes after at least one per damaged span.
      appended_seq_ = i + 1 < segments.size() ? std::max(appended_seq_, segments[i + 1].first - 1)
                                              : appended_seq_ + contents->skipped_at.size();
    }
    for (auto& r : contents->records) recovered_.push_back(std::move(r));
    if (i + 1 != segments.size() || !contents->records.empty()) {
      segments_.emplace_back(first, contents->valid_bytes);
    } else {
      // The last segment holds no record (started just before the process ended): the new
      // segment takes its name.
      std::filesystem::remove(file, ec);
      if (ec) {
        return base::Fail(ErrorCode::kStorage, "cannot remove the empty log segment " +
                                                   file.string() + ": " + ec.message());
      }
    }
  }
  written_seq_ = appended_seq_;
  durable_seq_ = appended_seq_;
  return {};
}

base::Result<void> ShardLog::StartSegment(std::uint64_t first_seq) {
  auto segment = SegmentWriter::Create(dir_ / SegmentName(first_seq));
  if (!segment) return std::unexpected(segment.error());
  std::lock_guard lock(mu_);
  if (segment_ && !segments_.empty()) segments_.back().second = segment_->size();
  segment_ = std::move(*segment);
  ++segments_started_;
  segments_.emplace_back(first_seq, segment_->size());
  check_space_now_ = true;
  return {};
}

void ShardLog::ReadFreeSpace() {
  if (options_.min_free_bytes == 0) return;
  auto free = options_.free_bytes ? options_.free_bytes(dir_) : StatvfsFree(dir_);
  if (!free) {
    if (!free_space_unread_ && log_) {
      log_->warn("{}; the last reading stands", free.error().message());
    }
    free_space_unread_ = true;
    return;
  }
  free_space_unread_ = false;
  free_bytes_ = *free;
  const bool low = *free < options_.min_free_bytes;
  if (low == space_low_.exchange(low) || !log_) return;
  if (low) {
    log_->warn(
        "the file system of {} has {:.1f} MiB free, under the reserve of {:.1f} MiB "
        "(--log-min-free-bytes): writes to maps that persist are refused until space is freed; "
        "reads go on",
        dir_.string(), *free / kMiB, options_.min_free_bytes / kMiB);
  } else {
    log_->info("the file system of {} has {:.1f} MiB free again: writes are taken", dir_.string(),
               *free / kMiB);
  }
}

base::Result<std::uint64_t> ShardLog::Backup(const std::filesystem::path& dest) {
  std::error_code ec;
  if (std::filesystem::exists(dest, ec)) {
    return base::Fail(ErrorCode::kConflict, dest.string() +
                                                " exists already; back up into a "
                                                "new folder");
  }
  std::filesystem::create_directories(dest, ec);
  if (ec) {
    return base::Fail(ErrorCode::kStorage,
                      "cannot create the backup folder " + dest.string() + ": " + ec.message());
  }
  std::vector<std::pair<std::uint64_t, std::uint64_t>> segments;
  {
    std::lock_guard lock(mu_);
    ++backups_;
    segments = segments_;  // the last one's size: as of its last batch, whole records
  }
  base::Result<void> copied;
  std::uint64_t bytes = 0;
  for (const auto& [first, size] : segments) {
    copied = CopyFilePrefix(dir_ / SegmentName(first), dest / SegmentName(first), size);
    if (!copied) break;
    bytes += size;
  }
  if (copied) copied = SyncDirectory(dest);
  {
    std::lock_guard lock(mu_);
    --backups_;
    if (DropPending()) wake_.notify_one();
  }
  if (!copied) return std::unexpected(copied.error());
  return bytes;
}

base::Result<void> ShardLog::CheckSpace() const {
  if (!space_low_.load(std::memory_order_relaxed)) return {};
  return std::unexpected(base::Error(
      ErrorCode::kStorage,
      fmt::format(
          "the file system of this member's map log ({}) has {:.1f} MiB free, under its reserve of "
          "{:.1f} MiB: writes to maps that persist are refused until space is freed "
          "(reads go on); free space there or lower --log-min-free-bytes",
          dir_.parent_path().string(), free_bytes_.load() / kMiB, options_.min_free_bytes / kMiB),
      base::ErrorReason::kDiskLow));
}

void ShardLog::DropBefore(std::uint64_t seq) {
  std::lock_guard lock(mu_);
  drop_before_ = std::max(drop_before_, seq);
  if (DropPending()) wake_.notify_one();
}

void ShardLog::DropOldest(std::unique_lock<std::mutex>& lock) {
  const std::filesystem::path file = dir_ / SegmentName(segments_[0].first);
  lock.unlock();
  std::error_code ec;
  std::filesystem::remove(file, ec);
  base::Result<void> synced;
  if (!ec || ec == std::errc::no_such_file_or_directory) synced = SyncDirectory(dir_);
  lock.lock();
  if ((ec && ec != std::errc::no_such_file_or_directory) || !synced) {
    if (log_) {
      log_->warn("cannot delete the compacted log segment {}: {}; the next compaction tries again",
                 file.string(), ec ? ec.message() : synced.error().message());
    }
    drop_before_ = 0;
    return;
  }
  segments_.erase(segments_.begin());
  ++stats_.segments_dropped;
}

base::Result<std::uint64_t> ShardLog::Append(std::string_view payload) {
  std::unique_lock lock(mu_);
  if (failed_) return std::unexpected(*failed_);
  const bool was_empty = pending_.empty();
  EncodeRecord(pending_, payload);
  ++stats_.records;
  stats_.bytes += kRecordHeaderBytes + payload.size();
  const std::uint64_t seq = ++appended_seq_;
  if (!was_empty) return seq;
  if (!options_.post) {
    wake_.notify_one();
  } else if (!nudge_posted_) {
    nudge_posted_ = true;
    lock.unlock();
    options_.post([target = nudge_target_] {
      std::lock_guard target_lock(target->mu);
      if (target->log) target->log->Nudge();
    });
  }
  return seq;
}

void ShardLog::Nudge() {
  std::lock_guard lock(mu_);
  nudge_posted_ = false;
  if (!pending_.empty()) wake_.notify_one();
}

void ShardLog::WhenDurable(std::uint64_t seq, DurableCallback done) {
  // Even when already durable: the flusher answers every waiter, so answers come in order.
  // Always woken: a waiter makes it sync now rather than at the interval.
  AddWaiter(waiters_, seq, std::move(done), /*wake_always=*/true);
}

void ShardLog::WhenWritten(std::uint64_t seq, DurableCallback done) {
  // Woken only when the record is written already: otherwise it is pending (the append woke
  // the flusher) or being written, and the flusher answers after that write. A wake per write
  // cost a fifth of a shard's time under a periodic write load.
  AddWaiter(written_waiters_, seq, std::move(done), /*wake_always=*/false);
}

void ShardLog::AddWaiter(Waiters& waiters, std::uint64_t seq, DurableCallback done,
                         bool wake_always) {
  std::unique_lock lock(mu_);
  if (failed_) {
    const base::Error error = *failed_;
    lock.unlock();
    done(std::unexpected(error));
    return;
  }
  if (waiters.empty() || waiters.back().first <= seq) {
    waiters.emplace_back(seq, std::move(done));
  } else {  // after the waiters of the same number: answered in the order they came
    auto at = std::upper_bound(waiters.begin(), waiters.end(), seq,
                               [](std::uint64_t s, const auto& w) { return s < w.first; });
    waiters.emplace(at, seq, std::move(done));
  }
  if (wake_always || seq <= written_seq_) wake_.notify_one();
}

std::vector<std::string> ShardLog::TakeRecovered() { return std::move(recovered_); }

ShardLogStats ShardLog::stats() const {
  std::lock_guard lock(mu_);
  ShardLogStats out = stats_;
  out.segments = segments_started_.load();
  for (const auto& [first, bytes] : segments_) out.disk_bytes += bytes;
  out.free_bytes = free_bytes_.load();
  out.space_low = space_low_.load();
  return out;
}

void ShardLog::Flusher() {
  using Clock = std::chrono::steady_clock;
  const auto interval = std::chrono::milliseconds(options_.sync_interval_ms);
  auto next_sync = Clock::now() + interval;
  const bool watch_space = options_.min_free_bytes != 0;
  const auto check_interval =
      std::chrono::milliseconds(std::max<base::Millis>(options_.space_check_ms, 1));
  auto next_check = Clock::now() + check_interval;
  std::unique_lock lock(mu_);
  while (true) {
    if (watch_space && (check_space_now_ || Clock::now() >= next_check)) {
      check_space_now_ = false;
      lock.unlock();
      ReadFreeSpace();
      lock.lock();
      next_check = Clock::now() + check_interval;
    }
    wake_.wait_until(lock, watch_space ? std::min(next_sync, next_check) : next_sync, [this] {
      const bool answerable = !waiters_.empty() && (waiters_.front().first <= durable_seq_ ||
                                                    durable_seq_ < appended_seq_);
      const bool written =
          !written_waiters_.empty() && written_waiters_.front().first <= written_seq_;
      return stop_ || !pending_.empty() || answerable || written || DropPending();
    });
    if (failed_) break;
    const bool unsynced = durable_seq_ < appended_seq_;
    const bool due = Clock::now() >= next_sync;
    if (!pending_.empty() || (unsynced && (stop_ || !waiters_.empty() || due))) {
      const bool sync = stop_ || !waiters_.empty() || options_.sync_interval_ms == 0 || due;
      std::string batch = std::move(pending_);
      pending_.clear();
      const std::uint64_t last = appended_seq_;
      lock.unlock();
      auto outcome = FlushBatch(std::move(batch), last, sync);
      lock.lock();
      ++stats_.batches;
      if (!outcome) {
        failed_ = outcome.error();
        if (log_) {
          log_->error("{}: this member's writes can no longer be logged",
                      outcome.error().message());
        }
        break;
      }
      written_seq_ = last;
      if (!segments_.empty()) segments_.back().second = segment_->size();
      if (sync) {
        ++stats_.syncs;
        durable_seq_ = last;
        next_sync = Clock::now() + interval;
      }
    } else if (due) {
      next_sync = Clock::now() + interval;
    }
    std::vector<DurableCallback> ready;
    while (!written_waiters_.empty() && written_waiters_.front().first <= written_seq_) {
      ready.push_back(std::move(written_waiters_.front().second));
      written_waiters_.pop_front();
    }
    while (!waiters_.empty() && waiters_.front().first <= durable_seq_) {
      ready.push_back(std::move(waiters_.front().second));
      waiters_.pop_front();
    }
    if (!ready.empty()) {
      const bool post_them = options_.post && !stop_;
      lock.unlock();
      Finish(std::move(ready), base::Result<void>{}, post_them);
      lock.lock();
    }
    // Stopped with everything synced: waiters left wait for records never appended.
    if (stop_ && pending_.empty() && durable_seq_ == appended_seq_) break;
    if (DropPending()) DropOldest(lock);  // one per turn, after the batch and its answers
  }
  // Failed or stopped: whoever still waits hears it.
  std::vector<DurableCallback> rest;
  for (auto& [seq, done] : written_waiters_) rest.push_back(std::move(done));
  for (auto& [seq, done] : waiters_) rest.push_back(std::move(done));
  written_waiters_.clear();
  waiters_.clear();
  const base::Result<void> result =
      failed_ ? base::Result<void>(std::unexpected(*failed_))
              : base::Result<void>(std::unexpected(base::Error(
                    ErrorCode::kShuttingDown, "the log of " + dir_.string() + " was closed")));
  lock.unlock();
  Finish(std::move(rest), result);
  if (!result && result.error().code() == ErrorCode::kStorage && options_.on_failure) {
    options_.on_failure(result.error());
  }
}

base::Result<void> ShardLog::FlushBatch(std::string batch, std::uint64_t last_seq, bool sync) {
  segment_->AppendEncoded(batch);
  auto outcome = sync ? TimedSync() : segment_->Write();
  if (!outcome) return outcome;
  if (segment_->size() >= options_.segment_bytes) {
    if (!sync) {
      if (auto synced = TimedSync(); !synced) return synced;
    }
    return StartSegment(last_seq + 1);
  }
  return {};
}

base::Result<void> ShardLog::TimedSync() {
  const auto started = std::chrono::steady_clock::now();
  auto synced = segment_->Sync();
  if (synced && options_.on_sync) options_.on_sync(std::chrono::steady_clock::now() - started);
  return synced;
}

void ShardLog::Finish(std::vector<DurableCallback> callbacks, const base::Result<void>& outcome,
                      bool post_them) {
  if (post_them) {
    options_.post([callbacks = std::move(callbacks), outcome]() mutable {
      for (auto& done : callbacks) done(outcome);
    });
    return;
  }
  for (auto& done : callbacks) done(outcome);
}

}  // namespace tessera::storage
