#pragma once
// ShardLog: one shard's write-ahead log, in a folder of its own (no lock or file shared with
// another shard). The shard thread appends records and numbers them 1, 2, ... (continuing the
// folder's); a flusher thread of the log writes them to the current segment in batches and
// fdatasyncs: at once when a caller waits for durability (every record appended while the
// previous sync ran goes into the next one: group commit), otherwise every `sync_interval_ms`.
// The shard thread never waits for the disk.
//
// Segments are named by the sequence number of their first record ("%020llu.log"); a segment
// is synced before the next one starts, so only the last can end in a torn tail. Opening a
// folder reads every segment in order (the records are kept for the caller to replay, see
// TakeRecovered), cuts the last one's torn tail (logged), and starts a new segment after them.
//
// Compaction: once the caller has logged, and synced, what supersedes every record before some
// sequence number (a snapshot of each partition, map/src/map_persistence.cc), DropBefore
// deletes the closed segments that hold only such records, oldest first.
//
// A failed write or sync fails the log for good (kStorage, the file and the system's reason,
// "No space left on device" included): every waiter and every later Append gets the error. The
// member must stop acknowledging writes it cannot keep; retrying an fsync after a failure
// would report success for pages the kernel already dropped.
//
// Free space: with a reserve (min_free_bytes), the flusher reads the free space of the file
// system holding the folder (at Open, on each new segment, and every space_check_ms) and
// CheckSpace fails while it is under the reserve: the caller refuses new writes before it
// applies them, and takes them again once space was freed. The log goes on writing what was
// appended (what the caller already applied, backups' copies, snapshots that free space): the
// reserve is what they use. A disk that fills up all the same fails the log as above.
//
// Thread-safety: Append and TakeRecovered from one thread at a time (the shard's: it numbers the
// records); WhenDurable, WhenWritten, durable_seq and stats from any thread. Callbacks run in
// sequence order: on the flusher thread, or, with ShardLogOptions::post, on the appending
// thread, one task per batch (at once on the caller's thread when the log has failed; on the
// flusher thread once the log is being destroyed).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tessera/base/clock.h"
#include "tessera/base/error.h"
#include "tessera/base/unique_function.h"
#include "tessera/storage/log_segment.h"

namespace spdlog {
class logger;
}

namespace tessera::storage {

struct ShardLogOptions {
  std::uint64_t segment_bytes = 64ull * 1024 * 1024;  // a segment ends past this size
  // How long written records may wait for their fdatasync when nobody waits for them; 0 = sync
  // every batch.
  base::Millis sync_interval_ms = 1000;
  // Called once, on the flusher thread, when a write or sync failed and the log failed for
  // good (after its waiters heard it): the owner stops what depends on the log. May be null.
  std::function<void(const base::Error&)> on_failure;
  // Open skips damaged records in the middle of a segment instead of refusing the folder
  // (an operator's explicit choice: what they held is lost), with a warning naming the file
  // and offset of each.
  bool skip_damaged = false;
  // Called on the flusher thread after each fdatasync of a segment, with how long it took.
  // May be null.
  std::function<void(std::chrono::nanoseconds)> on_sync;
  // The free bytes the folder's file system keeps for what was already accepted (0: not
  // checked; CheckSpace always ok).
  std::uint64_t min_free_bytes = 0;
  // How often the flusher reads the free space at most apart.
  base::Millis space_check_ms = 250;
  // Reads the free bytes (for the unprivileged) of the file system holding a folder; null:
  // statvfs. Tests give their own.
  std::function<base::Result<std::uint64_t>(const std::filesystem::path&)> free_bytes;
  // Runs a task later on the thread that appends (the shard's), after the work that thread has
  // queued already (a shard's post). Set, the log costs the appending thread two hand-offs per
  // batch instead of two per write: the first Append after a batch was taken does not wake the
  // flusher but posts a nudge that wakes it once the thread's queued work ran (so a round of
  // requests goes into one batch), and each batch's answers come back to the thread in one
  // task. Null: the first Append of a batch wakes the flusher, and answers run on the flusher.
  // REQUIRES: tasks posted before the log is destroyed run or are dropped unrun (a stopped
  // shard); a nudge run after the destruction does nothing.
  std::function<void(base::UniqueFunction<void()>)> post;
};

struct ShardLogStats {
  std::uint64_t records = 0;           // appended since Open
  std::uint64_t bytes = 0;             // encoded bytes appended since Open
  std::uint64_t batches = 0;           // writes to a segment
  std::uint64_t syncs = 0;             // fdatasyncs
  std::uint64_t segments = 0;          // segments started since Open
  std::uint64_t segments_dropped = 0;  // deleted by DropBefore since Open
  std::uint64_t disk_bytes = 0;        // the folder's segments, as written (not yet synced too)
  std::uint64_t free_bytes = 0;        // its file system's free bytes, as last read (a reserve)
  bool space_low = false;              // free_bytes < min_free_bytes (CheckSpace fails)
};

class ShardLog {
 public:
  // Room inline for a caller's own 64-byte callback and a little more (MapService::WhenLogged).
  using DurableCallback = base::UniqueFunction<void(base::Result<void>), 96>;

  // Opens (creating) the folder `dir`, reads its segments and starts a new one. Errors
  // (kStorage, naming the file): a segment damaged in the middle or a torn tail in a segment
  // that is not the last; a gap in the sequence numbers between segments; the folder cannot be
  // read or written.
  static base::Result<std::unique_ptr<ShardLog>> Open(const std::filesystem::path& dir,
                                                      ShardLogOptions options,
                                                      std::shared_ptr<spdlog::logger> log);
  // Writes and syncs what was appended, then stops the flusher; waiters still pending get
  // their result first.
  ~ShardLog();
  ShardLog(const ShardLog&) = delete;
  ShardLog& operator=(const ShardLog&) = delete;

  // Appends a record and returns its sequence number. Errors: kStorage once the log failed.
  // REQUIRES: 1 <= payload.size() <= kMaxRecordBytes.
  base::Result<std::uint64_t> Append(std::string_view payload);
  // Calls `done` once every record up to `seq` is durable (ok), or with the log's error
  // (kShuttingDown when the log closes first: `seq` was never appended).
  void WhenDurable(std::uint64_t seq, DurableCallback done);
  // Calls `done` once every record up to `seq` was handed to the OS (write(2)): it survives
  // the process being killed, not a power cut before the next sync. Errors as WhenDurable.
  // Does not make the flusher sync sooner.
  void WhenWritten(std::uint64_t seq, DurableCallback done);
  // The records the folder held when opened, in sequence order (the first one's number is
  // first_recovered_seq()); moved out by the first call.
  std::vector<std::string> TakeRecovered();
  std::uint64_t first_recovered_seq() const { return first_recovered_seq_; }

  // Has the flusher delete the segments whose records all come before `seq`, oldest first,
  // one per turn between its batches (an unlink and a sync of the folder each: a crash leaves
  // the newest ones, never a gap, and no acknowledgement waits for more than one); never the
  // segment being written. A deletion that fails is logged and left to a later call; the log
  // goes on. REQUIRES: what supersedes the records before `seq` is durable (WhenDurable
  // answered). Any thread.
  void DropBefore(std::uint64_t seq);

  // Copies the log into the folder `dest` (created; it must not exist): every record written
  // to a segment so far (every acknowledged write: `periodic` and `always` acknowledge only
  // written records), as whole records: the closed segments whole, the one being written up to
  // its last complete batch. Each file and the folder are fsynced. Segments are not deleted
  // while it copies (DropBefore waits). Blocks for the copy; any thread but the flusher.
  // Returns the bytes copied. Errors: kStorage naming the file; kConflict when `dest` exists.
  base::Result<std::uint64_t> Backup(const std::filesystem::path& dest);

  // ok, or kStorage (reason kDiskLow: the folder, its free bytes and the reserve) while the
  // free space last read is under min_free_bytes. Any thread; does not read the disk.
  base::Result<void> CheckSpace() const;

  std::uint64_t durable_seq() const { return durable_seq_.load(); }
  ShardLogStats stats() const;

 private:
  ShardLog(std::filesystem::path dir, ShardLogOptions options, std::shared_ptr<spdlog::logger> log);
  base::Result<void> Recover();
  // Adds `done` to `waiters` (guarded by mu_), or answers it at once when the log failed.
  // Wakes the flusher when `wake_always` or when `seq` is written already.
  // Waiters in sequence order (mostly appended at the back: callers wait for what they just
  // appended; an older number is inserted in its place).
  using Waiters = std::deque<std::pair<std::uint64_t, DurableCallback>>;
  void AddWaiter(Waiters& waiters, std::uint64_t seq, DurableCallback done, bool wake_always);
  base::Result<void> StartSegment(std::uint64_t first_seq);
  void Flusher();
  // One batch: write what is pending (and sync when `sync`); returns the write's outcome.
  base::Result<void> FlushBatch(std::string batch, std::uint64_t last_seq, bool sync);
  base::Result<void> TimedSync();  // segment_->Sync(), timed for options_.on_sync
  // Runs the callbacks with `outcome`: posted as one task when `post_them` (options_.post set,
  // the log not being destroyed), else here.
  void Finish(std::vector<DurableCallback> callbacks, const base::Result<void>& outcome,
              bool post_them = false);
  // Wakes the flusher for what was appended (a nudge posted by Append).
  void Nudge();
  // Reads the free space (no lock held) and logs when it crosses the reserve.
  void ReadFreeSpace();

  const std::filesystem::path dir_;
  const ShardLogOptions options_;
  const std::shared_ptr<spdlog::logger> log_;
  std::vector<std::string> recovered_;
  std::uint64_t first_recovered_seq_ = 1;
  std::unique_ptr<SegmentWriter> segment_;  // the flusher's (and Open's)
  // The segments on disk, oldest first: each one's first sequence number and size in bytes
  // (the last one's as of its last batch). Guarded by mu_.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> segments_;
  std::uint64_t drop_before_ = 0;  // DropBefore's bound, guarded by mu_
  // Whether a segment waits for deletion (mu_ held).
  bool DropPending() const {
    return backups_ == 0 && segments_.size() >= 2 && segments_[1].first <= drop_before_;
  }
  int backups_ = 0;  // Backup calls copying now (mu_): no segment is deleted meanwhile
  // The flusher: deletes the oldest segment (DropPending; mu_ held by `lock`, released meanwhile).
  void DropOldest(std::unique_lock<std::mutex>& lock);

  mutable std::mutex mu_;  // this shard and its flusher only
  std::condition_variable wake_;
  std::string pending_;             // encoded records not yet handed to the flusher
  std::uint64_t appended_seq_ = 0;  // the last sequence number given out
  std::uint64_t written_seq_ = 0;   // the last one written to a segment
  Waiters waiters_;                 // WhenDurable
  Waiters written_waiters_;         // WhenWritten
  std::optional<base::Error> failed_;
  bool stop_ = false;
  ShardLogStats stats_;
  std::atomic<std::uint64_t> durable_seq_{0};
  std::atomic<std::uint64_t> segments_started_{0};
  std::atomic<std::uint64_t> free_bytes_{0};
  std::atomic<bool> space_low_{false};
  bool free_space_unread_ = false;  // the last read failed (logged once); the flusher's
  bool check_space_now_ = false;    // a new segment started: read before the next wait (mu_)
  bool nudge_posted_ = false;       // a nudge waits to run (options_.post; mu_)
  // What a posted nudge reaches: this log, or null once it is being destroyed.
  struct NudgeTarget {
    std::mutex mu;
    ShardLog* log = nullptr;
  };
  std::shared_ptr<NudgeTarget> nudge_target_ = std::make_shared<NudgeTarget>();
  std::thread flusher_;
};

}  // namespace tessera::storage
