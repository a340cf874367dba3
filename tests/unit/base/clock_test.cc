#include "tessera/base/clock.h"

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
