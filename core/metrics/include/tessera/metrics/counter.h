#pragma once
// Counter: a monotonically increasing int64 (requests served, bytes sent, errors).
// Obtained from MetricsRegistry::RegisterCounter, which owns it; references stay valid for
// the registry's lifetime.
//
// Thread-safety: thread-safe; Increment is one relaxed atomic add, cheap enough for hot
// paths.

#include <atomic>
#include <cstdint>

#include "tessera/base/check.h"

namespace tessera::metrics {

class Counter {
 public:
  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  // Adds `n`. REQUIRES: n >= 0 (counters never go down; use a Gauge for that).
  void Increment(std::int64_t n = 1) {
    TESSERA_CHECK(n >= 0, "Counter::Increment needs n >= 0; use a Gauge for values that fall");
    value_.fetch_add(n, std::memory_order_relaxed);
  }

  std::int64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> value_{0};
};

}  // namespace tessera::metrics
