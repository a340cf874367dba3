#include "tessera/base/clock.h"

#include <catch2/catch.hpp>

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
