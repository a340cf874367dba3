// RecordStore design notes.
//
// Why not std::unordered_map<std::string, Entry>: a node (~32 B + malloc header), two
// std::string objects (32 B each, with a second allocation for any value over 15 bytes), a
// bucket pointer and the metadata add up to ~300 B per entry for small entries. Here an entry
// is exactly one malloc block (48-byte header + key + value) and one 8-byte slot, with the
// table between 35% and 80% full.
//
// Each store doubles its table at its own load between 70% and 80% (from its address): a
// map's partitions fill at the same pace, and with one threshold all 271 of them doubled
// at nearly the same moment, each rehash stalling the shard (a benchmark's tail latency jumped
// in the run that crossed the threshold).
//
// A table of 1,024 slots or more grows incrementally (Redis's answer to the same stall): the
// doubled table takes inserts at once, and each Write or Erase first moves the entries of at
// least 16 slots of the old table, finishing the probe run it is in. The move starts at an
// empty slot and takes runs whole, so the runs left in the old table are intact and a lookup
// there probes as usual; a key is in exactly one of the two tables. Lookups try first the
// table that holds more of the entries. An idle store's growth finishes through the sweeper.
// (A whole rehash stalled its shard; a step moves only a few entries.)
//
// Slots carry 10 bits of the key hash and the entry's distance from its home slot in the
// pointer's unused top 16 bits (user-space pointers fit in 48 bits on x86-64 and AArch64), so
// a probe compares tags before touching a block (a false match once in 1,024 probes of other
// entries). Deletion shifts later members of the probe run back instead of leaving
// tombstones, so lookups never degrade after churn; whether an entry may move back is decided
// by its distance, so a deletion touches no other block. (It used to hash each later entry's
// key again: a cache miss per entry of the run in a table larger than the cache, which showed
// in the profile of a member serving stream appends, whose reads and trims delete in a large
// table.) A distance of 63 or more is stored as 63 and then computed from the key.
#include "tessera/map/record_store.h"

#include <malloc.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>

#include "tessera/base/check.h"

namespace tessera::map {
namespace {
constexpr std::uint32_t kSecondsFlag = 0x8000'0000u;
static_assert(kMaxExpiryMs == static_cast<base::Millis>(kSecondsFlag - 1) * 1000,
              "kMaxExpiryMs (map_request.h) is the longest duration a record encodes");
constexpr std::size_t kMinCapacity = 16;
constexpr std::uint64_t kHashSeed = 0x7E55E7A11u;  // decorrelates from the partition hash
constexpr int kDistanceShift = 48;
constexpr int kTagShift = 54;
constexpr std::uint64_t kPointerMask = (std::uint64_t{1} << kDistanceShift) - 1;
constexpr std::size_t kDistanceSaturated = 63;  // 6 bits: this many or more
constexpr std::uint64_t kDistanceMask = std::uint64_t{kDistanceSaturated} << kDistanceShift;

std::uint64_t WithDistance(std::uint64_t slot, std::size_t distance) {
  return (slot & ~kDistanceMask) |
         (std::uint64_t{std::min(distance, kDistanceSaturated)} << kDistanceShift);
}
constexpr std::int64_t kChunkHeader = sizeof(void*);  // glibc malloc's per-chunk size word
}  // namespace

std::uint32_t EncodeDuration(base::Millis ms) {
  if (ms <= 0) return 0;
  if (ms < static_cast<base::Millis>(kSecondsFlag)) return static_cast<std::uint32_t>(ms);
  const base::Millis seconds = std::min<base::Millis>(ms / 1000, kSecondsFlag - 1);
  return kSecondsFlag | static_cast<std::uint32_t>(seconds);
}

base::Millis DecodeDuration(std::uint32_t code) {
  if (code & kSecondsFlag) return static_cast<base::Millis>(code & ~kSecondsFlag) * 1000;
  return code;
}

bool Record::ExpiredAt(base::Millis now_ms) const {
  if (expire_at_ms_ != 0 && now_ms >= expire_at_ms_) return true;
  return max_idle_ != 0 && now_ms >= last_access_ms_ + DecodeDuration(max_idle_);
}

base::Millis Record::ExpiryDeadline() const {
  base::Millis deadline = expire_at_ms_ != 0 ? expire_at_ms_ : kNoDeadline;
  if (max_idle_ != 0) deadline = std::min(deadline, last_access_ms_ + DecodeDuration(max_idle_));
  return deadline;
}

void Record::SetTtl(base::Millis ttl_ms, base::Millis now_ms) {
  ttl_ = EncodeDuration(ttl_ms);
  expire_at_ms_ = ttl_ms > 0 ? now_ms + ttl_ms : 0;
}

void Record::RecordAccess(base::Millis now_ms) {
  if (now_ms <= last_access_ms_) return;
  const base::Millis update = last_update_ms();
  last_access_ms_ = now_ms;
  update_age_ = EncodeDuration(now_ms - update);
}

void Record::SetUpdateHistory(base::Millis update_age_ms, std::int64_t hits, base::Millis now_ms) {
  const base::Millis creation = creation_ms();
  last_access_ms_ = std::max(last_access_ms_, now_ms);
  const base::Millis update = now_ms - std::max<base::Millis>(0, update_age_ms);
  update_age_ = EncodeDuration(std::max<base::Millis>(0, last_access_ms_ - update));
  creation_age_ = EncodeDuration(creation < update ? update - creation : 0);
  hits_ = (hits_ & ~kHitsMask) |
          static_cast<std::uint32_t>(std::clamp<std::int64_t>(hits, 0, kMaxHits));
}

void Record::RecordRead(base::Millis now_ms) {
  RecordAccess(now_ms);
  if ((hits_ & kHitsMask) != kMaxHits) ++hits_;
}

EntryView Record::View() const {
  EntryView view;
  view.creation_ms = creation_ms();
  view.last_update_ms = last_update_ms();
  view.last_access_ms = last_access_ms_;
  view.expire_at_ms = expire_at_ms_;
  view.ttl_ms = ttl_ms();
  view.max_idle_ms = max_idle_ms();
  view.hits = hits();
  view.kind = kind();
  view.version = version_;
  return view;
}

void RecordStore::BlockFree::operator()(Record* r) const {
  std::destroy_at(r);
  std::free(r);  // blocks come from std::malloc in Allocate
}

namespace {
// The load (per mille) at which a store at `address` doubles its table: 700-800.
std::uint16_t GrowLoadPermille(const void* address) {
  std::uint64_t x = reinterpret_cast<std::uintptr_t>(address);  // splitmix64's finaliser
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<std::uint16_t>(700 + x % 101);
}
}  // namespace

RecordStore::RecordStore() : slots_(kMinCapacity, 0), grow_load_permille_(GrowLoadPermille(this)) {}

RecordStore::RecordStore(std::uint16_t grow_load_permille, bool grow_in_steps)
    : slots_(kMinCapacity, 0),
      grow_load_permille_(grow_load_permille),
      grow_in_steps_(grow_in_steps) {
  TESSERA_CHECK(grow_load_permille >= 500 && grow_load_permille <= 800,
                "RecordStore load threshold out of range");
}

RecordStore::~RecordStore() { Clear(); }

std::int64_t RecordStore::memory_bytes() const {
  return block_bytes_ + static_cast<std::int64_t>((slots_.size() + old_.size()) * sizeof(Slot));
}

std::uint64_t RecordStore::Hash(std::string_view key) {
  return XXH3_64bits_withSeed(key.data(), key.size(), kHashSeed);
}

RecordStore::Slot RecordStore::MakeSlot(Record* r, std::uint64_t hash) {
  const auto address = reinterpret_cast<std::uint64_t>(r);
  TESSERA_CHECK((address & ~kPointerMask) == 0, "heap pointer does not fit in 48 bits");
  return address | (hash >> kTagShift << kTagShift);
}

Record* RecordStore::SlotRecord(Slot s) { return reinterpret_cast<Record*>(s & kPointerMask); }

std::unique_ptr<Record, RecordStore::BlockFree> RecordStore::Allocate(std::string_view key,
                                                                      std::string_view value) {
  TESSERA_CHECK(key.size() <= std::numeric_limits<std::uint32_t>::max() &&
                    value.size() <= std::numeric_limits<std::uint32_t>::max(),
                "key or value larger than 4 GiB");
  void* memory = std::malloc(sizeof(Record) + key.size() + value.size());
  TESSERA_CHECK(memory != nullptr, "out of memory allocating a map entry");
  std::unique_ptr<Record, BlockFree> block(std::construct_at(static_cast<Record*>(memory)));
  block->key_size_ = static_cast<std::uint32_t>(key.size());
  block->value_size_ = static_cast<std::uint32_t>(value.size());
  if (!key.empty()) std::memcpy(block->Bytes(), key.data(), key.size());
  if (!value.empty()) std::memcpy(block->Bytes() + key.size(), value.data(), value.size());
  return block;
}

namespace {
std::int64_t BlockCost(const void* block) {
  return static_cast<std::int64_t>(malloc_usable_size(const_cast<void*>(block))) + kChunkHeader;
}
}  // namespace

std::size_t RecordStore::IndexIn(const Table& table, std::string_view key, std::uint64_t hash) {
  const std::size_t mask = table.size() - 1;
  const std::uint64_t tag = hash >> kTagShift;
  for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot s = table[i];
    if (s == 0) return kNpos;
    if ((s >> kTagShift) == tag && SlotRecord(s)->key() == key) return i;
  }
}

RecordStore::Position RecordStore::Locate(std::string_view key, std::uint64_t hash) {
  if (old_.empty()) {
    const std::size_t i = IndexIn(slots_, key, hash);
    return i == kNpos ? Position{} : Position{&slots_, i};
  }
  // Growing: the table holding more of the entries first.
  Table* first = old_size_ * 2 > size_ ? &old_ : &slots_;
  Table* second = first == &old_ ? &slots_ : &old_;
  if (const std::size_t i = IndexIn(*first, key, hash); i != kNpos) return {first, i};
  if (const std::size_t i = IndexIn(*second, key, hash); i != kNpos) return {second, i};
  return {};
}

Record* RecordStore::Find(std::string_view key) {
  const Position at = Locate(key, Hash(key));
  if (at.table == nullptr) return nullptr;
  Record* r = SlotRecord((*at.table)[at.index]);
  if (undo_ != nullptr) SaveForUndo(key, r);  // the caller may change it through the pointer
  return r;
}

const Record* RecordStore::Find(std::string_view key) const { return FindConst(key); }

const Record* RecordStore::FindConst(std::string_view key) const {
  // Locate changes nothing; the same order of tables.
  const Position at = const_cast<RecordStore*>(this)->Locate(key, Hash(key));
  return at.table == nullptr ? nullptr : SlotRecord((*at.table)[at.index]);
}

std::uint64_t RecordStore::Prefetch(std::string_view key) const {
  const std::uint64_t hash = Hash(key);
  __builtin_prefetch(&slots_[hash & (slots_.size() - 1)]);
  if (!old_.empty()) __builtin_prefetch(&old_[hash & (old_.size() - 1)]);
  return hash;
}

namespace {
// PrefetchRecord in one table: whether a slot with the hash's tag was found (and fetched).
bool PrefetchIn(const std::vector<std::uint64_t>& table, std::uint64_t hash) {
  const std::size_t mask = table.size() - 1;
  const std::uint64_t tag = hash >> kTagShift;
  for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
    const std::uint64_t s = table[i];
    if (s == 0) return false;
    if ((s >> kTagShift) == tag) {
      // The header and the key that follows it may span two lines.
      const char* block = reinterpret_cast<const char*>(s & kPointerMask);
      __builtin_prefetch(block);
      __builtin_prefetch(block + 63);
      return true;
    }
  }
}
}  // namespace

void RecordStore::PrefetchRecord(std::uint64_t hash) const {
  if (!PrefetchIn(slots_, hash) && !old_.empty()) PrefetchIn(old_, hash);
}

void RecordStore::InsertSlot(Slot slot, std::uint64_t hash) {
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = hash & mask;
  std::size_t distance = 0;
  for (; slots_[i] != 0; i = (i + 1) & mask) ++distance;
  slots_[i] = WithDistance(slot, distance);
}

std::size_t RecordStore::DistanceAt(const Table& table, std::size_t index) {
  const Slot s = table[index];
  const std::size_t stored = (s & kDistanceMask) >> kDistanceShift;
  if (stored < kDistanceSaturated) return stored;
  const std::size_t mask = table.size() - 1;
  return (index - (Hash(SlotRecord(s)->key()) & mask)) & mask;
}

std::size_t RecordStore::LongestProbe() const {
  std::size_t longest = 0;
  for (const Table* table : {&slots_, &old_}) {
    for (std::size_t i = 0; i < table->size(); ++i) {
      if ((*table)[i] != 0) longest = std::max(longest, DistanceAt(*table, i));
    }
  }
  return longest;
}

void RecordStore::Rehash(std::size_t new_capacity) {
  FinishMove();
  std::vector<Slot> old(new_capacity, 0);
  old.swap(slots_);
  // Each entry's key is hashed again to place it: its record is fetched a few slots ahead,
  // so the cache misses of a large table overlap instead of coming one after another.
  constexpr std::size_t kAhead = 8;
  for (std::size_t i = 0; i < old.size(); ++i) {
    if (i + kAhead < old.size() && old[i + kAhead] != 0) {
      const Record* ahead = SlotRecord(old[i + kAhead]);
      __builtin_prefetch(ahead);
      __builtin_prefetch(reinterpret_cast<const char*>(ahead) + 64);
    }
    if (const Slot s = old[i]; s != 0) InsertSlot(s, Hash(SlotRecord(s)->key()));
  }
  sweep_cursor_ = 0;  // a pass under way starts again: every entry is still ahead of it
  pass_min_deadline_ = Record::kNoDeadline;
}

void RecordStore::GrowIfNeeded() {
  // Keep the load at or below the store's threshold (<= 0.8) after the coming insert.
  if ((size_ + 1) * 1000 <= slots_.size() * grow_load_permille_) return;
  // (A growth under way moves at least 16 slots per insert and is done long before the new
  // table fills; FinishMove is for safety only.)
  FinishMove();
  if (!grow_in_steps_ || slots_.size() < kMoveMinCapacity) {
    Rehash(slots_.size() * 2);
  } else {
    StartMove(slots_.size() * 2);
  }
}

void RecordStore::StartMove(std::size_t new_capacity) {
  old_ = std::move(slots_);
  slots_.assign(new_capacity, 0);
  old_size_ = size_;
  // Runs are taken whole from an empty slot on (there is one: the load is below 1).
  move_next_ = 0;
  while (old_[move_next_] != 0) ++move_next_;
  move_left_ = old_.size();
  sweep_cursor_ = 0;  // a pass under way starts again once every entry is in the new table
  pass_min_deadline_ = Record::kNoDeadline;
  EndMoveIfEmpty();
}

std::size_t RecordStore::MoveStep(std::size_t min_slots) {
  if (old_.empty()) return 0;
  const std::size_t mask = old_.size() - 1;
  constexpr std::size_t kAhead = 8;  // records fetched ahead, as in Rehash
  std::size_t visited = 0;
  while (move_left_ > 0 && old_size_ > 0) {
    const Slot s = old_[move_next_];
    if (s == 0) {
      if (visited >= min_slots) break;  // between runs
    } else {
      if (const Slot ahead = old_[(move_next_ + kAhead) & mask]; ahead != 0) {
        __builtin_prefetch(SlotRecord(ahead));
        __builtin_prefetch(reinterpret_cast<const char*>(SlotRecord(ahead)) + 64);
      }
      old_[move_next_] = 0;
      InsertSlot(s, Hash(SlotRecord(s)->key()));
      --old_size_;
    }
    move_next_ = (move_next_ + 1) & mask;
    --move_left_;
    ++visited;
  }
  EndMoveIfEmpty();
  return visited;
}

void RecordStore::FinishMove() {
  while (!old_.empty()) MoveStep(old_.size());
}

void RecordStore::EndMoveIfEmpty() {
  if (old_.empty()) return;
  TESSERA_CHECK(old_size_ == 0 || move_left_ > 0,
                "a table growth visited every slot but left entries behind");
  if (old_size_ > 0) return;
  Table().swap(old_);
  move_left_ = 0;
}

RecordStore::WriteResult RecordStore::Write(std::string_view key, std::string_view value,
                                            base::Millis now_ms) {
  if (growing()) MoveStep(kMoveSlotsPerStep);  // (no call on the common path)
  const std::uint64_t hash = Hash(key);
  const Position at = Locate(key, hash);
  if (undo_ != nullptr) {
    SaveForUndo(key, at.table != nullptr ? SlotRecord((*at.table)[at.index]) : nullptr);
  }
  if (at.table == nullptr) {
    GrowIfNeeded();
    auto block = Allocate(key, value);
    block->last_access_ms_ = now_ms;
    block->version_ = 1;
    block_bytes_ += BlockCost(block.get());
    Record* r = block.release();  // owned by the table from here on; freed by EraseAt/Clear
    InsertSlot(MakeSlot(r, hash), hash);
    ++size_;
    return {r, true, ValueKind::kPlain, {}};
  }
  Slot& slot = (*at.table)[at.index];
  Record* r = SlotRecord(slot);
  const base::Millis creation = r->creation_ms();
  std::string previous_value;  // only another kind's: a plain overwrite copies nothing
  if (r->kind() != ValueKind::kPlain) previous_value.assign(r->value());
  if (r->value_size_ != value.size()) {
    auto block = Allocate(key, value);
    Record* fresh = block.get();
    *fresh = *r;  // header only: sizes were set by Allocate and are restored below
    fresh->value_size_ = static_cast<std::uint32_t>(value.size());
    block_bytes_ += BlockCost(fresh) - BlockCost(r);
    std::unique_ptr<Record, BlockFree> old(r);
    // Same key, same slot: the tag and distance stay.
    slot = (slot & ~kPointerMask) | (MakeSlot(block.release(), hash) & kPointerMask);
    r = fresh;
  } else if (!value.empty()) {
    std::memcpy(r->Bytes() + r->key_size_, value.data(), value.size());
  }
  r->last_access_ms_ = std::max(now_ms, r->last_access_ms_);
  r->update_age_ = 0;
  r->creation_age_ = EncodeDuration(r->last_access_ms_ - creation);
  ++r->version_;
  const ValueKind previous = r->kind();
  r->set_kind(ValueKind::kPlain);
  return {r, false, previous, std::move(previous_value)};
}

void RecordStore::SetTtl(Record& r, base::Millis ttl_ms, base::Millis now_ms) {
  r.SetTtl(ttl_ms, now_ms);
  NoteDeadline(r);
}

void RecordStore::SetMaxIdle(Record& r, base::Millis max_idle_ms) {
  r.SetMaxIdle(max_idle_ms);
  NoteDeadline(r);
}

void RecordStore::NoteDeadline(const Record& r) {
  const base::Millis deadline = r.ExpiryDeadline();
  next_sweep_ms_ = std::min(next_sweep_ms_, deadline);
  noted_min_deadline_ = std::min(noted_min_deadline_, deadline);
}

void RecordStore::EraseAt(Table& table, std::size_t index) {
  std::unique_ptr<Record, BlockFree> victim(SlotRecord(table[index]));
  block_bytes_ -= BlockCost(victim.get());
  const std::size_t mask = table.size() - 1;
  // The sweep's cursor is in slots_ (no pass runs while old_ has entries).
  const bool sweeping = sweep_running_ && &table == &slots_;
  std::size_t hole = index;
  for (std::size_t j = (index + 1) & mask; table[j] != 0; j = (j + 1) & mask) {
    // The entry at j may move into the hole unless its home lies cyclically in (hole, j],
    // that is unless it sits fewer slots from home than from the hole. (In old_ the run
    // stays within itself: the move's visited slots are empty and never part of a run.)
    const std::size_t distance = DistanceAt(table, j);
    const std::size_t shift = (j - hole) & mask;
    if (distance < shift) continue;
    // An entry the sweep under way has not reached moves behind its cursor: its deadline
    // counts as seen.
    if (sweeping && hole < sweep_cursor_ && j >= sweep_cursor_) {
      pass_min_deadline_ = std::min(pass_min_deadline_, SlotRecord(table[j])->ExpiryDeadline());
    }
    table[hole] = WithDistance(table[j], distance - shift);
    hole = j;
  }
  table[hole] = 0;
  --size_;
  if (&table == &old_) {
    --old_size_;
    EndMoveIfEmpty();
  }
}

bool RecordStore::Erase(std::string_view key) {
  if (growing()) MoveStep(kMoveSlotsPerStep);  // (no call on the common path)
  const Position at = Locate(key, Hash(key));
  if (undo_ != nullptr) {
    SaveForUndo(key, at.table != nullptr ? SlotRecord((*at.table)[at.index]) : nullptr);
  }
  if (at.table == nullptr) return false;
  EraseAt(*at.table, at.index);
  if (slots_.size() > kMinCapacity && size_ * 10 < slots_.size()) Rehash(slots_.size() / 2);
  return true;
}

void RecordStore::Clear() {
  for (Table* table : {&slots_, &old_}) {
    for (Slot& s : *table) {
      if (s != 0) std::unique_ptr<Record, BlockFree> victim(SlotRecord(s));
      s = 0;
    }
  }
  Table().swap(old_);
  old_size_ = 0;
  move_left_ = 0;
  if (slots_.size() > kMinCapacity) std::vector<Slot>(kMinCapacity, 0).swap(slots_);
  size_ = 0;
  block_bytes_ = 0;
  sweep_cursor_ = 0;
}

void RecordStore::ForEach(const std::function<void(const Record&)>& fn) const {
  for (const Table* table : {&old_, &slots_}) {
    for (Slot s : *table) {
      if (s != 0) fn(*SlotRecord(s));
    }
  }
}

void RecordStore::EraseIf(const std::function<bool(const Record&)>& fn) {
  FinishMove();
  // Backward shift can move an unvisited entry into the current slot, so re-check it; an
  // entry that wraps from the front to the back is examined again, which is harmless.
  for (std::size_t i = 0; i < slots_.size();) {
    if (slots_[i] != 0 && fn(*SlotRecord(slots_[i]))) {
      EraseAt(slots_, i);
    } else {
      ++i;
    }
  }
  ShrinkIfSparse();
}

void RecordStore::ShrinkIfSparse() {
  if (slots_.size() <= kMinCapacity || size_ * 10 >= slots_.size()) return;
  std::size_t capacity = kMinCapacity;
  while (capacity * grow_load_permille_ < (size_ + 1) * 1000) capacity *= 2;
  Rehash(capacity);
}

const Record* RecordStore::SampleOldest(int samples, std::string_view exclude) {
  const Record* oldest = nullptr;
  auto next_random = [this] {
    random_state_ ^= random_state_ << 13;  // xorshift64: cheap and good enough for sampling
    random_state_ ^= random_state_ >> 7;
    random_state_ ^= random_state_ << 17;
    return random_state_;
  };
  constexpr int kDraws = 8;
  for (int n = 0; n < samples && size_ > 0; ++n) {
    // While growing, each table in proportion to the entries it holds, and in the old table
    // a position among the slots not moved yet. A sample draws random slots until one holds
    // an entry (scanning on from an empty slot instead would pick the first entry after a
    // stretch of empty ones far more often than the others: a growing table has such
    // stretches), and scans only after kDraws misses.
    const bool in_old = old_size_ > 0 && (next_random() >> 32) % size_ < old_size_;
    const Table& table = in_old ? old_ : slots_;
    const std::size_t mask = table.size() - 1;
    const std::size_t span = in_old ? move_left_ : table.size();
    const std::size_t base = in_old ? move_next_ : 0;
    auto usable = [&](std::size_t at) {
      const Slot s = table[(base + at) & mask];
      return s != 0 && SlotRecord(s)->key() != exclude ? SlotRecord(s) : nullptr;
    };
    const Record* r = nullptr;
    std::size_t at = 0;
    for (int draw = 0; draw < kDraws && r == nullptr; ++draw) {
      at = next_random() % span;
      r = usable(at);
    }
    for (std::size_t probe = 1; r == nullptr && probe < span; ++probe) {
      at = at + 1 == span ? 0 : at + 1;
      r = usable(at);
    }
    if (r != nullptr && (oldest == nullptr || r->last_access_ms() < oldest->last_access_ms())) {
      oldest = r;
    }
  }
  return oldest;
}

RecordStore::SweepResult RecordStore::SweepExpired(
    base::Millis now_ms, std::size_t budget, const std::function<void(const Record&)>& on_expired) {
  SweepResult result;
  if (growing()) {
    result.examined = MoveStep(budget);
    result.wrapped = true;  // the sweeper may go on to other stores (see the header)
    return result;
  }
  if (!sweep_running_) {
    if (!SweepDue(now_ms)) {
      result.wrapped = true;
      return result;
    }
    sweep_running_ = true;
    sweep_cursor_ = 0;
    pass_min_deadline_ = Record::kNoDeadline;
    noted_min_deadline_ = Record::kNoDeadline;
  }
  while (result.examined < budget) {
    if (sweep_cursor_ >= slots_.size()) {
      sweep_cursor_ = 0;
      result.wrapped = true;
      sweep_running_ = false;
      next_sweep_ms_ =
          std::min({pass_min_deadline_, noted_min_deadline_, now_ms + kMaxSweepRestMs});
      ShrinkIfSparse();
      break;
    }
    const Slot s = slots_[sweep_cursor_];
    if (s == 0) {
      ++sweep_cursor_;
      continue;
    }
    ++result.examined;
    const Record* r = SlotRecord(s);
    if (r->ExpiredAt(now_ms)) {
      on_expired(*r);
      EraseAt(slots_, sweep_cursor_);  // a later entry may shift into this slot: look again
      ++result.expired;
    } else {
      pass_min_deadline_ = std::min(pass_min_deadline_, r->ExpiryDeadline());
      ++sweep_cursor_;
    }
  }
  return result;
}

}  // namespace tessera::map

namespace tessera::map {

// --- transactions: the undo log ------------------------------------------------------------

void UndoLog::BlockFree::operator()(Record* r) const { RecordStore::BlockFree()(r); }

UndoLog::~UndoLog() { RollBack(); }  // a no-op after Commit or RollBack

void UndoLog::Detach() {
  for (auto& [store, capacity] : stores_) store->undo_ = nullptr;
}

void UndoLog::Commit() {
  Detach();
  stores_.clear();
  entries_.clear();
  stats_.clear();
  seen_.clear();
}

void UndoLog::RollBack() {
  Detach();
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    it->store->RestoreFromUndo(it->key, std::move(it->before));
  }
  for (auto& [store, stats] : stats_) store->stats_ = stats;
  // Back to the table size each store had (the batch's inserts may have grown it).
  for (auto& [store, capacity] : stores_) {
    if (store->slots_.size() > capacity) store->Rehash(capacity);  // (finishes a growth first)
  }
  stores_.clear();
  entries_.clear();
  stats_.clear();
  seen_.clear();
}

void RecordStore::AttachUndo(UndoLog& log) {
  if (undo_ == &log) return;
  TESSERA_CHECK(undo_ == nullptr, "a record store joined two transactions at once");
  undo_ = &log;
  log.stores_.emplace_back(this, slots_.size());
}

void RecordStore::SaveForUndo(std::string_view key, const Record* current) {
  UndoLog& log = *undo_;
  const auto& entries = log.entries_;
  auto at = std::lower_bound(log.seen_.begin(), log.seen_.end(), key,
                             [this, &entries](std::uint32_t i, std::string_view k) {
                               const UndoLog::Saved& e = entries[i];
                               return std::less<const RecordStore*>()(e.store, this) ||
                                      (e.store == this && e.key < k);
                             });
  if (at != log.seen_.end() && entries[*at].store == this && entries[*at].key == key) return;
  std::unique_ptr<Record, UndoLog::BlockFree> before;
  if (current != nullptr) {
    auto copy = Allocate(current->key(), current->value());
    *copy = *current;  // the whole header: times, TTL, version, hits
    before.reset(copy.release());
  }
  log.entries_.push_back({this, std::string(key), std::move(before)});
  // Indexed once saved (`at` is still the place: seen_ did not change), so an allocation
  // that throws above leaves no index to an entry that is not there.
  log.seen_.insert(at, static_cast<std::uint32_t>(log.entries_.size() - 1));
}

void RecordStore::SaveStatsForUndo() {
  UndoLog& log = *undo_;
  for (const auto& [store, stats] : log.stats_) {
    if (store == this) return;
  }
  log.stats_.emplace_back(this, stats_);
}

void RecordStore::RestoreFromUndo(std::string_view key,
                                  std::unique_ptr<Record, UndoLog::BlockFree> before) {
  if (const Position at = Locate(key, Hash(key)); at.table != nullptr) EraseAt(*at.table, at.index);
  if (!before) return;
  GrowIfNeeded();
  Record* r = before.release();
  block_bytes_ += BlockCost(r);
  const std::uint64_t hash = Hash(r->key());
  InsertSlot(MakeSlot(r, hash), hash);
  NoteDeadline(*r);  // an earlier deadline than the store's may come back
  ++size_;
}

}  // namespace tessera::map
