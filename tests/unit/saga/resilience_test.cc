// Retry policy and circuit breaker on a manual clock (no sleeping: Retry gets delays of 0).
#include <catch2/catch.hpp>

#include <random>
#include <set>
#include <thread>

#include "tessera/saga/circuit_breaker.h"
#include "tessera/saga/retry.h"

using tessera::base::ErrorCode;
using tessera::base::Fail;
using tessera::base::ManualClock;
using tessera::base::Result;
using namespace tessera::saga;  // NOLINT

TEST_CASE("A retry policy retries at once, then backs off exponentially up to its cap",
          "[saga][retry]") {
  RetryPolicy p;
  p.max_attempts = 6;
  p.immediate_retries = 1;
  p.initial_delay_ms = 100;
  p.multiplier = 2;
  p.max_delay_ms = 350;
  p.full_jitter = false;
  std::mt19937_64 random(7);
  CHECK(!p.DelayBefore(1, random));
  CHECK(p.DelayBefore(2, random) == 0);
  CHECK(p.DelayBefore(3, random) == 100);
  CHECK(p.DelayBefore(4, random) == 200);
  CHECK(p.DelayBefore(5, random) == 350);
  CHECK(p.DelayBefore(6, random) == 350);
  CHECK(!p.DelayBefore(7, random));
  // Full jitter: uniform in [0, computed], so retries of many callers spread out.
  p.full_jitter = true;
  std::set<tessera::base::Millis> seen;
  for (int i = 0; i < 200; ++i) {
    const auto d = *p.DelayBefore(4, random);
    CHECK(d >= 0);
    CHECK(d <= 200);
    seen.insert(d);
  }
  CHECK(seen.size() > 50);
  p.max_attempts = 0;
  CHECK(p.Validate().error().message() ==
        "retry policy: max_attempts must be at least 1 (1 = no retry)");
  p.max_attempts = 3;
  p.multiplier = 0.5;
  CHECK(!p.Validate());
}

TEST_CASE("Retry stops at success, at a non-retryable error, or when attempts run out",
          "[saga][retry]") {
  RetryPolicy p;
  p.max_attempts = 4;
  p.initial_delay_ms = 0;
  int calls = 0;
  auto flaky = [&]() -> Result<int> {
    if (++calls < 3) return Fail(ErrorCode::kTimeout, "slow dependency");
    return 42;
  };
  std::vector<int> retried;
  auto r = Retry<int>(p, flaky, [&](int attempt, const tessera::base::Error& e, auto) {
    retried.push_back(attempt);
    CHECK(e.code() == ErrorCode::kTimeout);
  });
  CHECK(r == 42);
  CHECK(calls == 3);
  CHECK(retried == std::vector<int>{2, 3});

  calls = 0;
  auto bad = Retry<int>(p, [&]() -> Result<int> {
    ++calls;
    return Fail(ErrorCode::kBadRequest, "malformed");
  });
  CHECK(!bad);
  CHECK(calls == 1);  // never retried

  calls = 0;
  auto down = Retry<int>(p, [&]() -> Result<int> {
    ++calls;
    return Fail(ErrorCode::kConnectionFailed, "down #" + std::to_string(calls));
  });
  REQUIRE(!down);
  CHECK(calls == 4);
  CHECK(down.error().message() == "down #4");  // the last error
}

namespace {
BreakerConfig CountWindow() {
  BreakerConfig c;
  c.window = BreakerConfig::Window::kCount;
  c.window_size = 10;
  c.minimum_calls = 5;
  c.failure_rate_threshold = 50;
  c.slow_call_ms = 100;
  c.slow_call_rate_threshold = 100;
  c.open_ms = 1000;
  c.half_open_calls = 2;
  return c;
}
Result<int> Fails() { return Fail(ErrorCode::kConnectionFailed, "refused"); }
Result<int> Works() { return 1; }
}  // namespace

TEST_CASE("A circuit breaker goes closed -> open -> half-open -> closed, and half-open -> open",
          "[saga][breaker]") {
  ManualClock clock;
  CircuitBreaker b("payments", CountWindow(), clock, nullptr);
  for (int i = 0; i < 3; ++i) CHECK(!b.Call<int>(Fails));
  CHECK(b.Call<int>(Works));
  CHECK(b.state() == BreakerState::kClosed);  // 3 of 4: below the minimum of 5 calls
  CHECK(b.Call<int>(Works));                  // 3 of 5 = 60% >= 50%
  CHECK(b.state() == BreakerState::kOpen);
  int called = 0;
  auto refused = b.Call<int>([&]() -> Result<int> { return ++called; });
  REQUIRE(!refused);
  CHECK(called == 0);
  CHECK(refused.error().code() == ErrorCode::kOverloaded);
  CHECK(refused.error().message() ==
        "circuit breaker 'payments' is open (its dependency kept failing); it lets trial calls "
        "through in 1000 ms");

  clock.Advance(1000);
  CHECK(b.state() == BreakerState::kHalfOpen);
  auto first = b.TryAcquire();
  auto second = b.TryAcquire();
  REQUIRE(first);
  REQUIRE(second);
  CHECK(!b.TryAcquire());  // only 2 trial calls
  b.OnSuccess(*first, 5);
  b.OnSuccess(*second, 5);
  CHECK(b.state() == BreakerState::kClosed);

  for (int i = 0; i < 5; ++i) CHECK(!b.Call<int>(Fails));
  CHECK(b.state() == BreakerState::kOpen);
  clock.Advance(1000);
  CHECK(!b.Call<int>(Fails));  // a trial call fails
  CHECK(b.Call<int>(Works));
  CHECK(b.state() == BreakerState::kOpen);  // 1 of 2 trial calls failed: 50% >= 50%
  const auto s = b.stats();
  CHECK(s.opened == 3);
  CHECK(s.half_opened == 2);
  CHECK(s.closed == 1);
  CHECK(s.not_permitted == 2);
}

TEST_CASE("Slow calls open a breaker, and a time window forgets old outcomes", "[saga][breaker]") {
  ManualClock clock;
  BreakerConfig slow = CountWindow();
  slow.slow_call_rate_threshold = 60;
  CircuitBreaker b("search", slow, clock, nullptr);
  for (int i = 0; i < 3; ++i) b.OnSuccess(100);  // slow but fine
  b.OnSuccess(99);
  b.OnSuccess(99);
  CHECK(b.state() == BreakerState::kOpen);  // 3 of 5 slow = 60%

  BreakerConfig timed = CountWindow();
  timed.window = BreakerConfig::Window::kTime;
  timed.window_size = 2;  // seconds
  CircuitBreaker t("inventory", timed, clock, nullptr);
  for (int i = 0; i < 4; ++i) t.OnFailure(1);
  clock.Advance(2000);  // those four fall out of the window
  for (int i = 0; i < 4; ++i) t.OnSuccess(1);
  t.OnFailure(1);
  CHECK(t.state() == BreakerState::kClosed);  // 1 of 5 in the last 2 s
  for (int i = 0; i < 5; ++i) t.OnFailure(1);
  CHECK(t.state() == BreakerState::kOpen);  // half of the last 2 s failed
}

TEST_CASE("Failures reported asynchronously, from other threads, open the breaker",
          "[saga][breaker]") {
  ManualClock clock;
  CircuitBreaker b("async", CountWindow(), clock, nullptr);
  std::vector<BreakerPermit> permits;
  for (int i = 0; i < 6; ++i) {  // six calls under way
    auto permit = b.TryAcquire();
    REQUIRE(permit);
    permits.push_back(*permit);
  }
  std::vector<std::thread> callbacks;  // their futures complete later, on other threads
  for (const auto& permit : permits) {
    callbacks.emplace_back([&b, permit] { b.OnFailure(permit, 3); });
  }
  for (auto& t : callbacks) t.join();
  CHECK(b.state() == BreakerState::kOpen);
  CHECK(b.stats().failures == 6);
}

TEST_CASE("A late outcome of a call let through while closed does not decide a half-open trial",
          "[saga][breaker]") {
  ManualClock clock;
  CircuitBreaker b("late", CountWindow(), clock, nullptr);  // 2 trial calls, 50% threshold
  auto slow_call = b.TryAcquire();                          // made while closed, ends late
  REQUIRE(slow_call);
  for (int i = 0; i < 5; ++i) CHECK(!b.Call<int>(Fails));
  CHECK(b.state() == BreakerState::kOpen);
  clock.Advance(1000);
  CHECK(b.state() == BreakerState::kHalfOpen);
  auto trial_a = b.TryAcquire();
  auto trial_b = b.TryAcquire();
  REQUIRE(trial_a);
  REQUIRE(trial_b);
  b.OnFailure(*slow_call, 5);  // not a trial: without the stamp, 1 failure of 2 would reopen it
  CHECK(b.state() == BreakerState::kHalfOpen);
  b.OnSuccess(*trial_a, 5);
  CHECK(b.state() == BreakerState::kHalfOpen);  // one trial of two reported
  b.OnSuccess(*trial_b, 5);
  CHECK(b.state() == BreakerState::kClosed);
  CHECK(b.stats().failures == 6);  // the late failure is still counted
}

TEST_CASE("Breakers take their settings by name from the service's YAML", "[saga][breaker]") {
  ManualClock clock;
  BreakerRegistry registry(clock, nullptr);
  REQUIRE(registry.Configure(R"(
service: orders
breakers:
  default: {minimum_calls: 2, failure_rate_threshold: 100, open_ms: 500}
  payments: {failure_rate_threshold: 50, half_open_calls: 1}
)"));
  auto payments = registry.Get("payments");
  auto shipping = registry.Get("shipping");      // default's settings
  CHECK(payments->config().minimum_calls == 2);  // inherited from default
  CHECK(payments->config().half_open_calls == 1);
  CHECK(shipping->config().failure_rate_threshold == 100);
  CHECK(registry.Get("payments") == payments);
  for (auto& b : {payments, shipping}) {
    b->OnFailure(1);
    b->OnSuccess(1);
  }
  CHECK(payments->state() == BreakerState::kOpen);    // 1 of 2 >= 50%
  CHECK(shipping->state() == BreakerState::kClosed);  // 1 of 2 < 100%
  CHECK(registry.All().size() == 2);
  tessera::metrics::MetricsRegistry metrics;
  registry.ExportMetrics(metrics);
  const std::string text = metrics.RenderPrometheus();
  CHECK(text.find("tessera_breaker_state{breaker=\"payments\"} 1\n") != std::string::npos);
  CHECK(text.find("tessera_breaker_state{breaker=\"shipping\"} 0\n") != std::string::npos);
  CHECK(text.find("tessera_breaker_transitions_total{breaker=\"payments\",to=\"open\"} 1\n") !=
        std::string::npos);
  CHECK(text.find("tessera_breaker_calls_total{breaker=\"shipping\",outcome=\"failure\"} 1\n") !=
        std::string::npos);

  auto unknown = registry.Configure("breakers:\n  payments: {treshold: 5}\n");
  REQUIRE(!unknown);
  CHECK(unknown.error().message().find("unknown key breakers.payments.treshold") !=
        std::string::npos);
  auto bad = registry.Configure("breakers:\n  payments: {open_ms: soon}\n");
  REQUIRE(!bad);
  CHECK(bad.error().message() == "breakers.payments.open_ms is 'soon': expected a number");
  auto range = registry.Configure("breakers:\n  payments: {failure_rate_threshold: 150}\n");
  REQUIRE(!range);
  CHECK(range.error().message().find("failure_rate_threshold is a percentage") !=
        std::string::npos);
  CHECK(!registry.Configure("breakers: [1, 2]"));
  CHECK(!registry.Configure("breakers: {a: 1"));
}
