#include "tessera/base/cycle_clock.h"

#include <chrono>

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

namespace tessera::base {
namespace {

using Steady = std::chrono::steady_clock;

bool InvariantTsc() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0x80000000u, &eax, &ebx, &ecx, &edx) == 0 || eax < 0x80000007u) return false;
  if (__get_cpuid(0x80000007u, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (edx & (1u << 8)) != 0;  // "invariant TSC" (Linux's nonstop_tsc)
#else
  return false;
#endif
}

std::uint64_t ReadCounter(bool tsc) {
#if defined(__x86_64__)
  if (tsc) return __rdtsc();
#endif
  (void)tsc;
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Steady::now().time_since_epoch())
          .count());
}

struct Origin {
  bool tsc;
  std::uint64_t ticks;
  Steady::time_point time;
};

const Origin& TheOrigin() {
  static const Origin origin = [] {
    const bool tsc = InvariantTsc();
    return Origin{tsc, ReadCounter(tsc), Steady::now()};
  }();
  return origin;
}

}  // namespace

std::uint64_t CycleClock::Now() {
  static const bool tsc = TheOrigin().tsc;
  return ReadCounter(tsc);
}

std::int64_t CycleClock::ToNanos(std::uint64_t ticks) {
  const Origin& origin = TheOrigin();
  if (!origin.tsc) return static_cast<std::int64_t>(ticks);
  const std::uint64_t now_ticks = ReadCounter(true);
  const double ns = std::chrono::duration<double, std::nano>(Steady::now() - origin.time).count();
  const double elapsed = static_cast<double>(now_ticks - origin.ticks);
  if (elapsed <= 0 || ns <= 0) return 0;
  return static_cast<std::int64_t>(static_cast<double>(ticks) * (ns / elapsed));
}

}  // namespace tessera::base
