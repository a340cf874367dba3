#include "tessera/base/clock.h"
#include "tessera/base/cycle_clock.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

TEST_CASE("ManualClock moves only when told", "[base]") {
  tessera::base::ManualClock clock(100);
  CHECK(clock.NowMs() == 100);
  clock.Advance(50);
  CHECK(clock.NowMs() == 150);
  clock.Set(10);
  CHECK(clock.NowMs() == 10);
}

TEST_CASE("SteadyClock is monotonic", "[base]") {
  tessera::base::SteadyClock clock;
  auto a = clock.NowMs();
  auto b = clock.NowMs();
  CHECK(b >= a);
  CHECK(clock.WallMs() > 1'600'000'000'000);
}

TEST_CASE("SteadyClock reads both times at once within the clocks' own readings", "[base]") {
  tessera::base::SteadyClock clock;
  // Across more than the offset's refresh period (1 s), every combined reading lies between
  // separate readings taken just before and just after it.
  const auto end = clock.NowMs() + 1'300;
  int checks = 0;
  while (clock.NowMs() < end) {
    const auto now_before = clock.NowMs();
    const auto wall_before = clock.WallMs();
    const auto both = clock.NowAndWallMs();
    const auto wall_after = clock.WallMs();
    const auto now_after = clock.NowMs();
    REQUIRE(both.now_ms >= now_before);
    REQUIRE(both.now_ms <= now_after);
    // The wall time comes from an offset taken up to a second ago: off by the rounding of
    // three millisecond readings (under 2 ms) plus what NTP slewed the wall clock since
    // (at most 0.5 ms per second).
    REQUIRE(both.wall_ms >= wall_before - 2);
    REQUIRE(both.wall_ms <= wall_after + 2);
    ++checks;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(checks > 20);
}

TEST_CASE("ManualClock reads both times as it reads each", "[base]") {
  tessera::base::ManualClock clock(500);
  auto both = clock.NowAndWallMs();
  CHECK(both.now_ms == 500);
  CHECK(both.wall_ms == clock.WallMs());
  clock.Advance(25);
  both = clock.NowAndWallMs();
  CHECK(both.now_ms == 525);
  CHECK(both.wall_ms == clock.WallMs());
}

// The map's per-operation latency totals are kept in CycleClock ticks and converted when read:
// a converted span must be the time that passed (within a scheduler's slack), and sums of
// spans convert like the spans.
TEST_CASE("CycleClock ticks convert to the nanoseconds that passed", "[base][clock]") {
  using tessera::base::CycleClock;
  const auto steady_start = std::chrono::steady_clock::now();
  const std::uint64_t start = CycleClock::Now();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const std::uint64_t end = CycleClock::Now();
  const auto steady_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now() - steady_start)
                             .count();
  REQUIRE(end > start);
  const std::int64_t ns = CycleClock::ToNanos(end - start);
  CHECK(ns >= 29'000'000);             // at least the sleep (a 3% allowance for the rate)
  CHECK(ns <= steady_ns * 103 / 100);  // at most what steady_clock saw around it
  // A sum of spans converts to the sum of their conversions.
  const std::int64_t twice = CycleClock::ToNanos(2 * (end - start));
  CHECK(twice >= 2 * ns - 2'000'000);
  CHECK(twice <= 2 * ns + 2'000'000);
  CHECK(CycleClock::ToNanos(0) == 0);
}
