#pragma once
// Gauge: a value that goes up and down (queue depth, entries owned, memory in use). Either
// set directly (Set/Add) or computed on demand by a callback, e.g. a map's entry count read
// when metrics are scraped. Owned by MetricsRegistry.
//
// Thread-safety: thread-safe. Set/Add are lock-free; value() takes a mutex only to read the
// callback. A callback runs on the thread that calls value() (the scraping thread), so it
// must itself be safe to call from any thread.

#include <atomic>
#include <functional>
#include <mutex>

namespace tessera::metrics {

class Gauge {
 public:
  Gauge() = default;
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void Set(double value);
  void Add(double delta);

  // Makes value() return callback() from now on (an empty function reverts to the stored
  // value). Replaces any earlier callback.
  void SetCallback(std::function<double()> callback);

  // The callback's result if one is set, else the last Set/Add value (initially 0).
  double value() const;

 private:
  std::atomic<double> value_{0};
  std::atomic<bool> has_callback_{false};
  mutable std::mutex mutex_;  // guards callback_
  std::function<double()> callback_;
};

}  // namespace tessera::metrics
