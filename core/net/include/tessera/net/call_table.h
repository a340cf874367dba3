#pragma once
// CallTable<T>: values by call id, for ids handed out in sequence (ClientConnection's pending
// calls). A slot array is indexed by the id's low bits, so the calls in flight land in
// distinct slots and an insert, lookup or removal touches one slot, with no allocation; an id
// whose slot is taken (a call still pending while a table's worth of later ones came and
// went) goes to an overflow map. The array doubles when it is half full or when the overflow
// holds more than a sixteenth of its size, and halves when it is less than an eighth full and
// nothing overflowed (never below kMinSlots). A std::unordered_map with recycled nodes did the same
// job at a cost that showed in the native client's CPU profile under pipelined calls.
//
// Ids are non-zero (0 marks an empty slot). Not thread-safe: the connection's io thread owns
// it.

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tessera/base/check.h"

namespace tessera::net {

template <typename T>
class CallTable {
 public:
  static constexpr std::size_t kMinSlots = 16;

  CallTable() : slots_(kMinSlots) {}

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // How many slots the array has (for tests of the sizing policy).
  std::size_t slot_count() const { return slots_.size(); }
  // How many values live in the overflow map (for tests).
  std::size_t overflow_count() const { return overflow_.size(); }

  // The value of `id`, or null.
  T* Find(std::uint64_t id) {
    Slot& slot = slots_[id & (slots_.size() - 1)];
    if (slot.id == id) return &slot.value;
    if (overflow_.empty()) return nullptr;
    auto it = overflow_.find(id);
    return it == overflow_.end() ? nullptr : &it->second;
  }

  // REQUIRES: id != 0 and not present.
  void Insert(std::uint64_t id, T&& value) {
    TESSERA_CHECK(id != 0, "call id 0 is not a call");
    Slot& slot = slots_[id & (slots_.size() - 1)];
    if (slot.id == 0) {
      slot.id = id;
      slot.value = std::move(value);
    } else {
      TESSERA_CHECK(slot.id != id, "call id inserted twice");
      overflow_.emplace(id, std::move(value));
    }
    ++size_;
    if (size_ * 2 > slots_.size() || overflow_.size() * 16 > slots_.size()) {
      Resize(slots_.size() * 2);
    }
  }

  // Moves the value of `id` into `out` and removes it; false (out untouched) when absent.
  bool Take(std::uint64_t id, T& out) {
    Slot& slot = slots_[id & (slots_.size() - 1)];
    if (slot.id == id && id != 0) {
      out = std::move(slot.value);
      slot.value = T();
      slot.id = 0;
    } else {
      auto it = overflow_.find(id);
      if (it == overflow_.end()) return false;
      out = std::move(it->second);
      overflow_.erase(it);
    }
    --size_;
    if (overflow_.empty() && slots_.size() > kMinSlots && size_ * 8 < slots_.size()) {
      Resize(slots_.size() / 2);
    }
    return true;
  }

  // Removes every value for which pred(const T&) holds, appending them to `out` (in no
  // particular order).
  template <typename Pred>
  void TakeIf(Pred&& pred, std::vector<T>& out) {
    for (Slot& slot : slots_) {
      if (slot.id == 0 || !pred(static_cast<const T&>(slot.value))) continue;
      out.push_back(std::move(slot.value));
      slot.value = T();
      slot.id = 0;
      --size_;
    }
    for (auto it = overflow_.begin(); it != overflow_.end();) {
      if (pred(static_cast<const T&>(it->second))) {
        out.push_back(std::move(it->second));
        it = overflow_.erase(it);
        --size_;
      } else {
        ++it;
      }
    }
  }

  // Removes every value, appending them to `out`; the array shrinks back to kMinSlots.
  void TakeAll(std::vector<T>& out) {
    TakeIf([](const T&) { return true; }, out);
    slots_ = std::vector<Slot>(kMinSlots);
  }

 private:
  struct Slot {
    std::uint64_t id = 0;
    T value{};
  };

  void Resize(std::size_t count) {
    std::vector<Slot> old = std::exchange(slots_, std::vector<Slot>(count));
    std::unordered_map<std::uint64_t, T> spilled = std::move(overflow_);
    overflow_.clear();
    const std::size_t mask = count - 1;
    auto place = [&](std::uint64_t id, T&& value) {
      Slot& slot = slots_[id & mask];
      if (slot.id == 0) {
        slot.id = id;
        slot.value = std::move(value);
      } else {
        overflow_.emplace(id, std::move(value));
      }
    };
    for (Slot& s : old) {
      if (s.id != 0) place(s.id, std::move(s.value));
    }
    for (auto& [id, value] : spilled) place(id, std::move(value));
  }

  std::vector<Slot> slots_;
  std::unordered_map<std::uint64_t, T> overflow_;
  std::size_t size_ = 0;
};

}  // namespace tessera::net
