#pragma once
// RetryPolicy: how often and how soon a failed call is tried again (usable on its own, e.g.
// around an HTTP call). A few immediate retries first, then delays
// growing exponentially up to a cap, each drawn uniformly from [0, delay] ("full jitter", so
// many clients retrying together spread out). Errors of a non-retryable code are never retried.
//
// Value type; thread-compatible. Retry() blocks the calling thread while it waits.

#include <chrono>
#include <functional>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "tessera/base/clock.h"
#include "tessera/base/error.h"

namespace tessera::saga {

struct RetryPolicy {
  int max_attempts = 5;       // attempts in all, the first included; at least 1
  int immediate_retries = 1;  // retries right away before the delays begin
  base::Millis initial_delay_ms = 100;
  double multiplier = 2.0;
  base::Millis max_delay_ms = 10'000;
  bool full_jitter = true;  // false: exactly the computed delay
  // Codes a retry cannot fix: the request itself is wrong.
  std::vector<base::ErrorCode> non_retryable = {
      base::ErrorCode::kBadRequest,       base::ErrorCode::kWrongType,
      base::ErrorCode::kUnknownProcessor, base::ErrorCode::kBadPredicate,
      base::ErrorCode::kAuthFailed,       base::ErrorCode::kUnsupported};

  // Errors: kBadRequest naming the setting that is out of range.
  base::Result<void> Validate() const;
  bool Retryable(const base::Error& error) const;
  // The wait before attempt `attempt` (2 = the first retry), or nullopt when the policy allows
  // no such attempt. The computed delay of the k-th delayed retry is
  // min(max_delay, initial_delay * multiplier^(k-1)); with full jitter the result is uniform
  // in [0, that].
  std::optional<base::Millis> DelayBefore(int attempt, std::mt19937_64& random) const;
};

// Calls fn until it succeeds, fails with a non-retryable error, or the attempts run out, and
// returns its last result. `on_retry(attempt, error, delay)` runs before each wait, if set.
// `give_up()`, if set, runs after each failed attempt: true stops there.
template <typename T>
base::Result<T> Retry(
    const RetryPolicy& policy, const std::function<base::Result<T>()>& fn,
    const std::function<void(int, const base::Error&, base::Millis)>& on_retry = nullptr,
    const std::function<bool()>& give_up = nullptr) {
  // Seeded once per thread: reading std::random_device on every call is slow (RDSEED).
  thread_local std::mt19937_64 random(std::random_device{}());
  for (int attempt = 1;; ++attempt) {
    base::Result<T> result = fn();
    if (result || !policy.Retryable(result.error())) return result;
    if (give_up && give_up()) return result;
    auto delay = policy.DelayBefore(attempt + 1, random);
    if (!delay) return result;
    if (on_retry) on_retry(attempt + 1, result.error(), *delay);
    if (*delay > 0) std::this_thread::sleep_for(std::chrono::milliseconds(*delay));
  }
}

}  // namespace tessera::saga
