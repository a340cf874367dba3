#pragma once
// CycleClock: a cheap counter of elapsed time, for measurements taken on every operation and
// read rarely (a map's per-operation latency totals). Now() reads the CPU's time-stamp counter
// where it ticks at a constant rate whatever the core's speed or sleep state (x86-64 with an
// invariant TSC): cheaper to read than steady_clock::now(), whose two reads per map operation
// showed in a member's CPU profile. Elsewhere Now() is steady_clock's nanoseconds. ToNanos
// converts a count of ticks (a difference of Now()s, or a sum of them) at read time, with the
// rate measured against steady_clock since the process first used the clock: no calibration
// delay, and nothing to configure. Thread-safe.

#include <cstdint>

namespace tessera::base {

class CycleClock {
 public:
  static std::uint64_t Now();
  // Nanoseconds in `ticks` (which count time since the clock's first use, so the rate, taken
  // over that same time, is precise to a few nanoseconds over it).
  static std::int64_t ToNanos(std::uint64_t ticks);
};

}  // namespace tessera::base
