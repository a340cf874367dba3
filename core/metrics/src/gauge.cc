#include "tessera/metrics/gauge.h"

#include <utility>

namespace tessera::metrics {

void Gauge::Set(double value) { value_.store(value, std::memory_order_relaxed); }

void Gauge::Add(double delta) {
  double current = value_.load(std::memory_order_relaxed);
  while (!value_.compare_exchange_weak(current, current + delta, std::memory_order_relaxed)) {
  }
}

void Gauge::SetCallback(std::function<double()> callback) {
  std::lock_guard lock(mutex_);
  has_callback_.store(static_cast<bool>(callback), std::memory_order_release);
  callback_ = std::move(callback);
}

double Gauge::value() const {
  if (has_callback_.load(std::memory_order_acquire)) {
    std::function<double()> callback;
    {
      // Copied so the callback runs unlocked and may itself touch this gauge.
      std::lock_guard lock(mutex_);
      callback = callback_;
    }
    if (callback) return callback();
  }
  return value_.load(std::memory_order_relaxed);
}

}  // namespace tessera::metrics
