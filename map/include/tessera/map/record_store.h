#pragma once
// RecordStore: the entries of one map in one partition, kept compact.
//
// Layout (see record_store.cc for the reasoning): every entry is ONE heap block, a 48-byte
// Record header followed by the key bytes and the value bytes. The store indexes the blocks
// with an open-addressing hash table (power-of-two capacity, linear probing, load <= 0.8,
// deletion by backward shift so there are no tombstones). A table of 1,024 slots or more grows
// incrementally: the doubled table takes new entries at once and the old one's entries move
// over a few probe runs per write (Redis's incremental rehash), so no single write pays for
// moving them all. Each slot is one 64-bit word: the
// block pointer with 10 hash bits and the entry's distance from its home slot in its unused
// top bits, so most probes that miss never touch the block, and a deletion's backward shift
// reads no block at all. For 1M entries with 16-byte keys and 100-byte values this costs about
// 193 bytes per entry (176-byte malloc chunk + 16.8 bytes of table).
//
// The store knows nothing about TTL rules, events or listeners; it stores, finds, erases,
// samples and sweeps. Map semantics live in map_ops.h.
//
// Shard: a store belongs to the shard that owns its partition; only that thread touches it.
// Thread-compatible (no internal locking).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/base/clock.h"
#include "tessera/map/map_request.h"

namespace tessera::map {

// Durations are stored in 32 bits: exact milliseconds below 2^31 ms (24.8 days), whole
// seconds (top bit set) above. Exposed for tests.
std::uint32_t EncodeDuration(base::Millis ms);
base::Millis DecodeDuration(std::uint32_t code);

// The header of one entry block. The key and value bytes follow it in the same allocation.
// TTL and idle deadlines are exact to the millisecond; creation and last-update times are
// stored as ages (exact up to 24.8 days, then to the second).
class Record {
 public:
  std::string_view key() const { return {Bytes(), key_size_}; }
  std::string_view value() const { return {Bytes() + key_size_, value_size_}; }

  // 0 = no TTL deadline.
  base::Millis expire_at_ms() const { return expire_at_ms_; }
  base::Millis last_access_ms() const { return last_access_ms_; }
  base::Millis last_update_ms() const { return last_access_ms_ - DecodeDuration(update_age_); }
  base::Millis creation_ms() const { return last_update_ms() - DecodeDuration(creation_age_); }
  base::Millis ttl_ms() const { return DecodeDuration(ttl_); }
  base::Millis max_idle_ms() const { return DecodeDuration(max_idle_); }
  std::uint32_t hits() const { return hits_ & kHitsMask; }
  ValueKind kind() const { return static_cast<ValueKind>(hits_ >> kKindShift); }
  void set_kind(ValueKind kind) {
    hits_ = (hits_ & kHitsMask) | (static_cast<std::uint32_t>(kind) << kKindShift);
  }
  // Reads are counted up to here (the top 2 bits of the count hold the kind).
  static constexpr std::uint32_t kMaxHits = (1u << 30) - 1;
  std::uint32_t version() const { return version_; }
  // A replica of an entry written elsewhere takes the owner's version (ReplicaUpdate), so
  // that versions compared across a failover or a migration (RESP WATCH) mean the same write.
  void set_version(std::uint32_t version) { version_ = version; }

  // True once the TTL deadline or the idle deadline has been reached (at `now` exactly an
  // entry with ttl t written at w, w + t == now, is expired).
  bool ExpiredAt(base::Millis now_ms) const;
  bool HasExpiry() const { return expire_at_ms_ != 0 || max_idle_ != 0; }
  // The first moment ExpiredAt is true as things stand (reads and writes only move an idle
  // deadline later); kNoDeadline without TTL and max-idle.
  static constexpr base::Millis kNoDeadline = INT64_MAX;
  base::Millis ExpiryDeadline() const;

  // A read: refreshes the idle clock and counts a hit.
  void RecordRead(base::Millis now_ms);
  // Refreshes the idle clock without counting a hit.
  void RecordAccess(base::Millis now_ms);
  // A replica of an entry written elsewhere: its last update was `update_age_ms` before
  // `now_ms` (also its creation, if that is later) and it was read `hits` times. Call right
  // after Write(.., now_ms).
  void SetUpdateHistory(base::Millis update_age_ms, std::int64_t hits, base::Millis now_ms);

  EntryView View() const;

 private:
  friend class RecordStore;
  // Through RecordStore::SetTtl / SetMaxIdle, which keep the store's earliest deadline.
  void SetTtl(base::Millis ttl_ms, base::Millis now_ms);
  void SetMaxIdle(base::Millis max_idle_ms) { max_idle_ = EncodeDuration(max_idle_ms); }
  const char* Bytes() const { return reinterpret_cast<const char*>(this + 1); }
  char* Bytes() { return reinterpret_cast<char*>(this + 1); }

  base::Millis expire_at_ms_ = 0;    // absolute TTL deadline, 0 = none
  base::Millis last_access_ms_ = 0;  // last read or write
  std::uint32_t update_age_ = 0;     // last_access - last_update (duration code)
  std::uint32_t creation_age_ = 0;   // last_update - creation (duration code)
  std::uint32_t ttl_ = 0;            // duration code of the TTL in force
  std::uint32_t max_idle_ = 0;       // duration code of the max-idle in force
  std::uint32_t key_size_ = 0;
  std::uint32_t value_size_ = 0;
  std::uint32_t version_ = 0;  // writes since creation (starts at 1 after the first)
  std::uint32_t hits_ = 0;     // kind (top 2 bits), reads since creation (saturating)
  static constexpr int kKindShift = 30;
  static constexpr std::uint32_t kHitsMask = kMaxHits;
};
static_assert(sizeof(Record) == 48, "Record header must stay 48 bytes");

class RecordStore;

// The undo log of a partition transaction (map_service_tx.cc). While it is attached to stores
// (RecordStore::AttachUndo), each store saves an entry as it was before its first change in
// the transaction (a write, an erase, or handing out a mutable Record from Find, through
// which hits, access times and TTLs change), and its counters before their first change.
// RollBack puts every saved entry and counter back, so the stores end exactly as they were;
// Commit forgets them. Either detaches the log from every store it saw, and leaves the log
// ready for the next transaction with its buffers kept (a shard keeps one log for all of its).
// Shard: used on one shard, with stores of that shard only.
class UndoLog {
 public:
  UndoLog() = default;
  UndoLog(const UndoLog&) = delete;
  UndoLog& operator=(const UndoLog&) = delete;
  ~UndoLog();  // rolls back unless Commit (or RollBack) was called

  void RollBack();
  void Commit();

 private:
  friend class RecordStore;
  struct BlockFree {
    void operator()(Record* r) const;
  };
  struct Saved {
    RecordStore* store;
    std::string key;
    std::unique_ptr<Record, BlockFree> before;  // null: the key was absent
  };
  std::vector<Saved> entries_;
  std::vector<std::pair<RecordStore*, MapStats>> stats_;  // first-touch counters per store
  // entries_ by (store, key), for lookups: indexes into entries_.
  std::vector<std::uint32_t> seen_;
  std::vector<std::pair<RecordStore*, std::size_t>> stores_;  // attached, capacity then
  void Detach();
};

class RecordStore {
 public:
  RecordStore();
  // A store that doubles its table past exactly this load (per mille; tests that need the
  // highest load). REQUIRES: 500 <= grow_load_permille <= 800.
  // `grow_in_steps` false: the table always rehashes at once (the plain path, for tests that
  // compare the two).
  explicit RecordStore(std::uint16_t grow_load_permille, bool grow_in_steps = true);
  ~RecordStore();
  RecordStore(const RecordStore&) = delete;
  RecordStore& operator=(const RecordStore&) = delete;

  std::size_t size() const { return size_; }
  // The table's slots (while it grows: the new table's).
  std::size_t capacity() const { return slots_.size(); }
  // Bytes the entries cost: usable size + malloc chunk header of every block, plus the table
  // (while it grows: both tables).
  std::int64_t memory_bytes() const;

  // Growth. A table of kMoveMinCapacity slots or more that must double does not rehash at
  // once: the doubled table takes inserts from then on, and the entries of the old table move
  // to it: the entries of at least kMoveSlotsPerStep of its slots, and of the rest of the
  // probe run the last of them is in, per Write or Erase, and of about the sweep's budget per
  // SweepExpired call (so an idle store finishes through the sweeper). Lookups consult both
  // tables meanwhile. Smaller tables rehash in one go.
  static constexpr std::size_t kMoveMinCapacity = 1'024;
  static constexpr std::size_t kMoveSlotsPerStep = 16;
  // Whether a growth is under way, and how many entries it has yet to move.
  bool growing() const { return !old_.empty(); }
  std::size_t entries_to_move() const { return old_size_; }

  // The entry for `key` (expired or not), or nullptr. The pointer stays valid until the next
  // Write/Erase/Clear of the store (a growth moves slots, never blocks).
  Record* Find(std::string_view key);
  const Record* Find(std::string_view key) const;
  // A hint: starts fetching the table's slots where `key` would be, so that an operation
  // about to look up several keys pays their cache misses together rather than one after
  // another. Changes nothing. Returns the key's hash, for PrefetchRecord.
  std::uint64_t Prefetch(std::string_view key) const;
  // A second hint, after Prefetch (`hash`: what it returned for `key`): starts fetching the
  // entry of `key` itself (found by the slots' hash bits alone), so that the key comparisons
  // of the lookups that follow hit the cache. Changes nothing.
  void PrefetchRecord(std::uint64_t hash) const;
  // The largest distance of an entry from its home slot: how long the table's probe runs
  // get (a diagnostic; linear probing at load <= 0.8 keeps it small but not bounded).
  std::size_t LongestProbe() const;
  // The load (per mille) past which an insert doubles the table: between 700 and 800, fixed
  // per store and different between stores, so that the partitions of a map filling at the
  // same pace do not all rehash at once.
  std::uint16_t grow_load_permille() const { return grow_load_permille_; }

  struct WriteResult {
    Record* record;
    bool inserted;
    ValueKind previous = ValueKind::kPlain;  // the kind the entry held before (update)
    std::string previous_value;              // its value then, if that kind was not plain
  };
  // Sets the value of `key`, inserting a new entry if absent. On insert all times are
  // `now_ms`, version 1, no TTL/idle; on update the version is bumped and last update/access
  // become `now_ms`; TTL fields are kept (callers apply the TTL rule afterwards). The entry's
  // kind becomes kPlain (a caller writing another kind sets it afterwards).
  WriteResult Write(std::string_view key, std::string_view value, base::Millis now_ms);

  // Sets the TTL of `r` (an entry of this store) from `now_ms` (0 = none) / its max-idle (0 =
  // none). Every expiry change goes through the store, which keeps a lower bound of its
  // entries' deadlines for the sweeper (SweepExpired).
  void SetTtl(Record& r, base::Millis ttl_ms, base::Millis now_ms);
  void SetMaxIdle(Record& r, base::Millis max_idle_ms);

  // Removes `key`; returns whether it existed.
  bool Erase(std::string_view key);
  // Removes every entry.
  void Clear();

  // Calls fn(record) for every entry (expired or not). fn must not modify the store.
  void ForEach(const std::function<void(const Record&)>& fn) const;
  // Calls fn(record) for every entry; fn returns true to erase the entry. Finishes a growth
  // under way first.
  void EraseIf(const std::function<bool(const Record&)>& fn);

  // Sampled LRU: among up to `samples` entries picked at random positions, the one with the
  // oldest last access, skipping `exclude` (a key that must survive, e.g. just written).
  // nullptr if the store has no other entry.
  const Record* SampleOldest(int samples, std::string_view exclude);

  struct SweepResult {
    std::size_t examined = 0;  // entries looked at (while growing: slots moved)
    std::size_t expired = 0;   // entries removed
    // No pass is under way after this call (it ended, or none was due); while the table
    // grows, always true (SweepExpired).
    bool wrapped = false;
  };
  // Incremental expiry scan: resumes at the store's cursor, examines up to `budget` entries,
  // erases those expired at `now_ms` after calling on_expired(record) for each.
  //
  // A pass over the table starts only once `now_ms` reaches the earliest expiry deadline the
  // store knows of: the smallest deadline the last pass saw, or one set since through SetTtl /
  // SetMaxIdle, and at the latest kMaxSweepRestMs after the last pass ended. A store whose
  // entries expire in a week (inbox markers) or never is not read again until then. A pass
  // under way goes on to its end.
  //
  // While the table grows, a call moves the entries of at least `budget` slots (and of the
  // rest of the run the last is in) instead, examines nothing and returns wrapped = true, so
  // that a sweeper visiting many stores goes on to the others and comes back; `examined`
  // counts the slots. A pass under way when the growth began starts again afterwards.
  static constexpr base::Millis kMaxSweepRestMs = 60'000;
  SweepResult SweepExpired(base::Millis now_ms, std::size_t budget,
                           const std::function<void(const Record&)>& on_expired);
  // Whether SweepExpired at `now_ms` would do anything (a growth or a pass is under way, or a
  // pass is due).
  bool SweepDue(base::Millis now_ms) const {
    return growing() || sweep_running_ || (size_ > 0 && now_ms >= next_sweep_ms_);
  }

  // Transactions: saves entries in `log` before they change, until the log commits or rolls
  // back (UndoLog). REQUIRES: no other log is attached; only Find, Write, Erase and stats()
  // are used while one is (Clear, EraseIf and SweepExpired are not undoable). A rollback
  // also gives back the table size the store had (finishing a growth the batch began).
  void AttachUndo(UndoLog& log);

  // Counters kept by the operations (map_ops); `entries` and `memory_bytes` are filled by
  // the operations from size()/memory_bytes() when reported.
  MapStats& stats() {
    if (undo_ != nullptr) SaveStatsForUndo();
    return stats_;
  }
  const MapStats& stats() const { return stats_; }

 private:
  struct BlockFree {
    void operator()(Record* r) const;
  };
  // Record* | hash tag (bits 54..63) | distance from the home slot (bits 48..53, 63 = that
  // many or more: then Hash() of the key tells); 0 = empty.
  using Slot = std::uint64_t;

  static std::uint64_t Hash(std::string_view key);
  static Slot MakeSlot(Record* r, std::uint64_t hash);
  static Record* SlotRecord(Slot s);
  static std::unique_ptr<Record, BlockFree> Allocate(std::string_view key, std::string_view value);

  using Table = std::vector<Slot>;
  // Where a key's entry is: its table (slots_ or old_) and index there; table null if absent.
  struct Position {
    Table* table = nullptr;
    std::size_t index = 0;
  };
  static std::size_t IndexIn(const Table& table, std::string_view key,
                             std::uint64_t hash);  // npos if absent
  Position Locate(std::string_view key, std::uint64_t hash);
  const Record* FindConst(std::string_view key) const;
  void InsertSlot(Slot slot, std::uint64_t hash);  // into slots_; hash: Hash() of the slot's key
  static std::size_t DistanceAt(const Table& table, std::size_t index);  // of table[index]'s entry
  void EraseAt(Table& table, std::size_t index);
  void Rehash(std::size_t new_capacity);  // at once (finishing a growth under way first)
  void GrowIfNeeded();
  // Incremental growth (see kMoveMinCapacity): StartMove makes the doubled table; MoveStep
  // moves the entries of at least `min_slots` old slots, stopping at the end of a probe run,
  // and returns the slots visited; FinishMove moves the rest.
  void StartMove(std::size_t new_capacity);
  std::size_t MoveStep(std::size_t min_slots);
  void FinishMove();
  void EndMoveIfEmpty();
  void ShrinkIfSparse();  // after bulk removals: back to a load of at least 40%
  // `current`: the entry under `key` now (nullptr: none), which the caller has located.
  void SaveForUndo(std::string_view key, const Record* current);
  void SaveStatsForUndo();
  // Puts a saved entry back (after erasing whatever is under its key now).
  void RestoreFromUndo(std::string_view key, std::unique_ptr<Record, UndoLog::BlockFree> before);
  friend class UndoLog;
  static constexpr std::size_t kNpos = static_cast<std::size_t>(-1);

  Table slots_;
  // While the table grows: the old table, holding the entries not moved yet in whole probe
  // runs (the move began at an empty slot and visits the slots in order from there, taking
  // each run whole, so the runs left are intact and lookups in old_ stay correct); empty
  // otherwise.
  Table old_;
  std::size_t old_size_ = 0;   // entries still in old_
  std::size_t move_next_ = 0;  // the next slot of old_ to move (the start of a run or empty)
  std::size_t move_left_ = 0;  // slots of old_ not visited yet
  // The load (per mille, 700-800) past which this store doubles its table (record_store.cc).
  std::uint16_t grow_load_permille_;
  bool grow_in_steps_ = true;
  std::size_t size_ = 0;
  std::int64_t block_bytes_ = 0;
  std::size_t sweep_cursor_ = 0;
  // The sweeper's schedule (SweepExpired): a pass starts at next_sweep_ms_; the pass under way
  // keeps the smallest deadline it saw and the smallest one set since it began.
  bool sweep_running_ = false;
  base::Millis next_sweep_ms_ = 0;
  base::Millis pass_min_deadline_ = Record::kNoDeadline;
  base::Millis noted_min_deadline_ = Record::kNoDeadline;
  void NoteDeadline(const Record& r);
  std::uint64_t random_state_ = 0x9E3779B97F4A7C15ull;
  MapStats stats_;
  UndoLog* undo_ = nullptr;  // attached transaction log, or null
};

}  // namespace tessera::map
