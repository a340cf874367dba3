#pragma once
// Clock: the injectable source of time. Production uses SteadyClock; tests use ManualClock
// so TTL and max-idle behaviour is checked deterministically.

#include <atomic>
#include <chrono>
#include <cstdint>

namespace tessera::base {

// Milliseconds on a monotonic timeline (not wall-clock). Used for TTL and idle deadlines.
using Millis = std::int64_t;

// Thread-safety: implementations are safe to call from any thread.
class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic milliseconds; never decreases.
  virtual Millis NowMs() const = 0;
  // Wall-clock milliseconds since the Unix epoch (for timestamps shown to people/clients).
  virtual Millis WallMs() const = 0;
  // Both at once, for a caller that wants both per operation. An implementation may derive
  // the wall time from the monotonic one with an offset it refreshes at least every second
  // (SteadyClock: one clock read instead of two; a step of the wall clock shows within a
  // second).
  struct Times {
    Millis now_ms;
    Millis wall_ms;
  };
  virtual Times NowAndWallMs() const { return {NowMs(), WallMs()}; }
};

// std::chrono::steady_clock / system_clock.
class SteadyClock final : public Clock {
 public:
  Millis NowMs() const override;
  Millis WallMs() const override;
  Times NowAndWallMs() const override;
};

// A clock that moves only when told. Starts at `start_ms` (wall clock = 1.7e12 + now).
class ManualClock final : public Clock {
 public:
  explicit ManualClock(Millis start_ms = 1'000'000) : now_(start_ms) {}
  Millis NowMs() const override { return now_.load(std::memory_order_relaxed); }
  Millis WallMs() const override { return 1'700'000'000'000 + NowMs(); }
  void Advance(Millis ms) { now_.fetch_add(ms, std::memory_order_relaxed); }
  void Set(Millis ms) { now_.store(ms, std::memory_order_relaxed); }

 private:
  std::atomic<Millis> now_;
};

}  // namespace tessera::base
