#pragma once
// ShardSnapshot<T>: an immutable value that is replaced now and then and read on every request
// (a topic's subscriber registry, a member's view of its peers). A read on one of the
// ShardSet's threads uses that shard's cached copy and refreshes it only when the value was
// replaced since: one atomic load, and no write to memory another core reads, where a
// mutex (or copying a shared_ptr) writes a cache line every shard shares on every read. A read
// on any other thread takes the mutex.
//
//   ShardSnapshot<Registry> registry(shards, std::make_shared<const Registry>());
//   registry.Set(std::make_shared<const Registry>(updated));   // any thread
//   registry.Read([&](const Registry& r) { ... });             // any thread
//
// A reader sees every Set that happened before its Read began (release/acquire on the
// version). A value stays alive while a shard's cache holds it: until that shard's next read
// after a Set (or the snapshot's destruction), so T's destructor must not depend on when.
//
// Thread-safety: Set and Read from any thread. A Read nested inside a Read on the same shard
// uses the outer one's value (it never replaces a value still being read).

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "tessera/runtime/shard_set.h"

namespace tessera::runtime {

template <typename T>
class ShardSnapshot {
 public:
  // `shards` must outlive the snapshot.
  ShardSnapshot(const ShardSet& shards, std::shared_ptr<const T> initial)
      : shards_(shards), value_(std::move(initial)), caches_(shards.size()) {}

  void Set(std::shared_ptr<const T> value) {
    std::lock_guard lock(mu_);
    value_ = std::move(value);
    version_.fetch_add(1, std::memory_order_release);
  }

  // Calls fn(const T&) and returns what it returns.
  template <typename Fn>
  decltype(auto) Read(Fn&& fn) const {
    const auto shard = shards_.CurrentShard();
    if (!shard || *shard >= caches_.size()) return fn(*Load());
    Cache& cache = caches_[*shard];
    if (cache.depth == 0) {
      const std::uint64_t version = version_.load(std::memory_order_acquire);
      if (!cache.value || cache.version != version) {
        std::lock_guard lock(mu_);
        cache.value = value_;
        cache.version = version_.load(std::memory_order_relaxed);
      }
    }
    ++cache.depth;
    struct Leave {
      Cache& cache;
      ~Leave() { --cache.depth; }
    } leave{cache};
    return fn(*cache.value);
  }

  // The current value (takes the mutex).
  std::shared_ptr<const T> Load() const {
    std::lock_guard lock(mu_);
    return value_;
  }

 private:
  struct alignas(64) Cache {  // touched only by its shard's thread
    std::shared_ptr<const T> value;
    std::uint64_t version = 0;
    int depth = 0;
  };

  const ShardSet& shards_;
  mutable std::mutex mu_;
  std::shared_ptr<const T> value_;  // guarded by mu_
  std::atomic<std::uint64_t> version_{1};
  mutable std::vector<Cache> caches_;
};

}  // namespace tessera::runtime
