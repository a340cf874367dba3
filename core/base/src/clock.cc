#include "tessera/base/clock.h"

namespace tessera::base {

Millis SteadyClock::NowMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Millis SteadyClock::WallMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Clock::Times SteadyClock::NowAndWallMs() const {
  // Per thread: when the offset wall - steady was last taken, and the offset then.
  struct Offset {
    bool taken = false;
    Millis taken_at = 0;
    Millis wall_minus_now = 0;
  };
  static thread_local Offset offset;
  const Millis now = NowMs();
  if (!offset.taken || now - offset.taken_at >= 1000) {
    offset.wall_minus_now = WallMs() - now;
    offset.taken_at = now;
    offset.taken = true;
  }
  return {now, now + offset.wall_minus_now};
}

}  // namespace tessera::base
