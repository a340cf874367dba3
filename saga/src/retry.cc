#include "tessera/saga/retry.h"

#include <algorithm>
#include <cmath>

namespace tessera::saga {

base::Result<void> RetryPolicy::Validate() const {
  auto bad = [](const std::string& what) {
    return base::Fail(base::ErrorCode::kBadRequest, "retry policy: " + what);
  };
  if (max_attempts < 1) return bad("max_attempts must be at least 1 (1 = no retry)");
  if (immediate_retries < 0) return bad("immediate_retries must not be negative");
  if (initial_delay_ms < 0 || max_delay_ms < 0) return bad("delays must not be negative");
  if (multiplier < 1.0) return bad("multiplier must be at least 1 (delays never shrink)");
  return {};
}

bool RetryPolicy::Retryable(const base::Error& error) const {
  return std::find(non_retryable.begin(), non_retryable.end(), error.code()) == non_retryable.end();
}

std::optional<base::Millis> RetryPolicy::DelayBefore(int attempt, std::mt19937_64& random) const {
  if (attempt < 2 || attempt > max_attempts) return std::nullopt;
  const int retry = attempt - 1;  // 1 = the first retry
  if (retry <= immediate_retries) return 0;
  const int delayed = retry - immediate_retries;  // 1 = the first delayed retry
  const double computed =
      static_cast<double>(initial_delay_ms) * std::pow(multiplier, std::min(delayed - 1, 60));
  const auto cap = static_cast<base::Millis>(std::min(computed, static_cast<double>(max_delay_ms)));
  if (!full_jitter || cap == 0) return cap;
  return std::uniform_int_distribution<base::Millis>(0, cap)(random);
}

}  // namespace tessera::saga
