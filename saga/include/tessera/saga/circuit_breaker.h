#pragma once
// CircuitBreaker: stops calling a dependency that keeps failing or answering slowly, and lets
// trial calls through after a while to see whether it recovered (Resilience4j's model).
//
//   closed     calls go through; every outcome lands in a sliding window (the last N calls,
//              or the last N seconds). Once the window holds minimum_calls outcomes and the
//              share of failures (or of slow calls) reaches its threshold, the breaker opens.
//   open       calls are refused (TryAcquire false, Call fails with kOverloaded naming the
//              breaker and when it tries again) for open_ms, then it goes half-open.
//   half-open  half_open_calls trial calls are let through; when all of them reported, the
//              rates over them decide: at a threshold it opens again, else it closes (an empty
//              window).
//
// Outcomes may be reported from any thread, whenever the call completes (asynchronous results
// count like synchronous ones). Every state change is logged and counted. A permit carries the
// state it was given in: an outcome reported after the breaker changed state since (a call let
// through while closed that ends after the breaker went half-open) is counted in the stats but
// decides nothing, so only the half-open state's own trial calls decide whether it closes.
//
// Thread-safety: every method is safe from any thread.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/base/clock.h"
#include "tessera/base/error.h"
#include "tessera/metrics/metrics_registry.h"

namespace spdlog {
class logger;
}

namespace tessera::saga {

struct BreakerConfig {
  enum class Window : std::uint8_t { kCount, kTime };
  Window window = Window::kCount;
  int window_size = 100;                  // the last N calls (kCount) or seconds (kTime)
  int minimum_calls = 10;                 // outcomes in the window before rates are judged
  double failure_rate_threshold = 50;     // percent of failed calls that opens the breaker
  double slow_call_rate_threshold = 100;  // percent of slow calls that opens it
  base::Millis slow_call_ms = 60'000;     // a call this long or longer is slow
  base::Millis open_ms = 60'000;          // how long it stays open before trial calls
  int half_open_calls = 10;               // trial calls let through in half-open

  // Errors: kBadRequest naming the setting out of range.
  base::Result<void> Validate() const;
};

enum class BreakerState : std::uint8_t { kClosed = 0, kOpen = 1, kHalfOpen = 2 };

// Leave to make one call, stamped with the breaker's state at the time (see TryAcquire).
struct BreakerPermit {
  std::uint64_t generation = 0;
};
std::string_view BreakerStateName(BreakerState state);  // "closed", "open", "half_open"

class CircuitBreaker {
 public:
  struct Stats {
    std::int64_t successes = 0, failures = 0, slow = 0;
    std::int64_t not_permitted = 0;  // calls refused while open (or half-open and full)
    std::int64_t opened = 0, half_opened = 0, closed = 0;  // transitions
  };

  // REQUIRES: config.Validate() passed; `clock` outlives the breaker.
  CircuitBreaker(std::string name, BreakerConfig config, const base::Clock& clock,
                 std::shared_ptr<spdlog::logger> log);

  // A permit when a call may go now, else nullopt. A permit obliges the caller to report the
  // call's outcome with it (OnSuccess or OnFailure), however much later.
  std::optional<BreakerPermit> TryAcquire();
  void OnSuccess(const BreakerPermit& permit, base::Millis duration_ms);
  void OnFailure(const BreakerPermit& permit, base::Millis duration_ms);
  // The outcome of a call made without a permit (the breaker only watches the dependency):
  // counted in the current state's window while closed; half-open, only the trial calls'
  // permits decide (it is counted in the stats only).
  void OnSuccess(base::Millis duration_ms);
  void OnFailure(base::Millis duration_ms);

  // Runs fn when permitted and reports its outcome (errors count as failures unless
  // `counts_as_failure` says otherwise). Refused: kOverloaded "circuit breaker 'NAME' is
  // open ...".
  template <typename T>
  base::Result<T> Call(const std::function<base::Result<T>()>& fn,
                       const std::function<bool(const base::Error&)>& counts_as_failure = nullptr);

  BreakerState state() const;
  Stats stats() const;
  const std::string& name() const { return name_; }
  const BreakerConfig& config() const { return config_; }

 private:
  struct Outcome {
    bool failure = false;
    bool slow = false;
  };
  struct Bucket {  // kTime: one second's outcomes
    std::int64_t second = -1;
    int calls = 0, failures = 0, slow = 0;
  };
  base::Result<void> Refused() const;  // the kOverloaded error of a refused call
  // `generation`: the permit's, or nullopt for the current state.
  void Report(bool failure, base::Millis duration_ms, std::optional<std::uint64_t> generation);
  void Record(const Outcome& outcome);                     // REQUIRES: mu_ held
  void Rates(int& calls, int& failures, int& slow);        // the closed window's; mu_ held
  void ResetWindow();                                      // mu_ held
  void MoveTo(BreakerState next, const std::string& why);  // mu_ held
  void RefreshLocked();                                    // open -> half-open when due; mu_ held

  const std::string name_;
  const BreakerConfig config_;
  const base::Clock& clock_;
  std::shared_ptr<spdlog::logger> log_;
  mutable std::mutex mu_;
  BreakerState state_ = BreakerState::kClosed;  // guarded by mu_
  std::uint64_t generation_ = 0;                // state changes so far
  base::Millis opened_at_ms_ = 0;
  std::vector<Outcome> ring_;  // kCount window
  std::size_t ring_next_ = 0;
  std::size_t ring_filled_ = 0;
  std::vector<Bucket> buckets_;                                // kTime window
  int trial_permits_ = 0;                                      // half-open: permits handed out
  int trial_calls_ = 0, trial_failures_ = 0, trial_slow_ = 0;  // half-open outcomes
  Stats stats_;
};

template <typename T>
base::Result<T> CircuitBreaker::Call(
    const std::function<base::Result<T>()>& fn,
    const std::function<bool(const base::Error&)>& counts_as_failure) {
  const auto permit = TryAcquire();
  if (!permit) {
    auto refused = Refused();
    return std::unexpected(refused.error());
  }
  const base::Millis start = clock_.NowMs();
  base::Result<T> result = [&]() -> base::Result<T> {
    try {
      return fn();
    } catch (...) {
      Report(true, clock_.NowMs() - start, permit->generation);  // reported; the throw goes on
      throw;
    }
  }();
  const base::Millis took = clock_.NowMs() - start;
  const bool failed = !result && (!counts_as_failure || counts_as_failure(result.error()));
  Report(failed, took, permit->generation);
  return result;
}

// Circuit breakers by name, each with the configuration given for its name (else the
// default). Thread-safe.
class BreakerRegistry {
 public:
  BreakerRegistry(const base::Clock& clock, std::shared_ptr<spdlog::logger> log,
                  BreakerConfig default_config = {});
  // Configuration from the service's YAML, under the key `breakers` (other keys are ignored):
  //   breakers:
  //     default:  {failure_rate_threshold: 50, open_ms: 30000}
  //     payments: {window: time, window_size: 10, minimum_calls: 5, slow_call_ms: 2000,
  //                slow_call_rate_threshold: 80, half_open_calls: 3}
  // Keys: window (count|time), window_size, minimum_calls, failure_rate_threshold,
  // slow_call_rate_threshold, slow_call_ms, open_ms, half_open_calls; a name's keys override
  // `default`'s. Errors: kBadRequest naming the breaker, the key and the value (unknown keys
  // too). Call before Get; a breaker made earlier keeps its configuration.
  base::Result<void> Configure(const std::string& yaml_text);
  // The breaker of that name, made on first use.
  std::shared_ptr<CircuitBreaker> Get(const std::string& name);
  std::vector<std::shared_ptr<CircuitBreaker>> All() const;
  // Copies every breaker's state and counts into `registry`: tessera_breaker_state{breaker}
  // (0 closed, 1 open, 2 half-open), tessera_breaker_calls_total{breaker,outcome} (success,
  // failure), tessera_breaker_slow_calls_total, tessera_breaker_not_permitted_total,
  // tessera_breaker_transitions_total{breaker,to}.
  void ExportMetrics(metrics::MetricsRegistry& registry) const;

 private:
  const base::Clock& clock_;
  std::shared_ptr<spdlog::logger> log_;
  mutable std::mutex mu_;
  BreakerConfig default_;                                        // guarded by mu_
  std::map<std::string, BreakerConfig> configs_;                 // guarded by mu_
  std::map<std::string, std::shared_ptr<CircuitBreaker>> made_;  // guarded by mu_
};

}  // namespace tessera::saga
