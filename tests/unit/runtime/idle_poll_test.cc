#include "tessera/runtime/idle_poll.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <thread>

using tessera::runtime::IdlePoll;
using tessera::runtime::RunQueueWait;
using namespace std::chrono_literals;

namespace {

// A thread's run-queue wait as the test sets it.
struct FakeWait {
  std::optional<std::chrono::nanoseconds> value = 0ns;
  IdlePoll::WaitReader Reader() {
    return [this] { return value; };
  }
};

const IdlePoll::Clock::time_point kStart{};

}  // namespace

TEST_CASE("IdlePoll polls only after a short sleep, and only for its window", "[runtime]") {
  FakeWait wait;
  IdlePoll poll(50us, wait.Reader(), kStart);
  // Nothing is known about how often work comes: sleep.
  CHECK_FALSE(poll.KeepPolling(kStart + 1us));
  // Woken after 20 us (shorter than the window): poll, until 50 us pass without work.
  poll.Slept(kStart + 1us, kStart + 21us);
  CHECK(poll.KeepPolling(kStart + 30us));
  CHECK(poll.KeepPolling(kStart + 70us));
  CHECK_FALSE(poll.KeepPolling(kStart + 71us));
  // Work found while polling restarts the window.
  poll.Worked(kStart + 60us);
  CHECK(poll.KeepPolling(kStart + 100us));
  CHECK_FALSE(poll.KeepPolling(kStart + 111us));
  // Woken after a long sleep (work comes rarely): sleep again at once.
  poll.Slept(kStart + 111us, kStart + 5ms);
  CHECK_FALSE(poll.KeepPolling(kStart + 5ms + 1us));
}

TEST_CASE("IdlePoll stops polling while the thread waits for a CPU, and resumes after",
          "[runtime]") {
  FakeWait wait;
  IdlePoll poll(50us, wait.Reader(), kStart);
  auto now = kStart;
  poll.Slept(now, now + 10us);
  now += 10us;
  CHECK(poll.KeepPolling(now));
  // A sample period in which the thread waited 20% of the time: contended, so it sleeps.
  wait.value = 2ms;
  now = kStart + IdlePoll::kSamplePeriod;
  poll.Worked(now - 1us);
  CHECK_FALSE(poll.KeepPolling(now));
  CHECK(poll.contended());
  // Still contended within the period, even after short sleeps.
  poll.Slept(now, now + 10us);
  CHECK_FALSE(poll.KeepPolling(now + 20us));
  // The next period's wait is 5%: no longer contended, so it polls again.
  wait.value = 2ms + 500us;
  now += IdlePoll::kSamplePeriod;
  poll.Slept(now - 10us, now);
  CHECK(poll.KeepPolling(now));
  CHECK_FALSE(poll.contended());
}

TEST_CASE("IdlePoll without run-queue figures treats the core as not contended", "[runtime]") {
  FakeWait wait;
  wait.value = std::nullopt;
  IdlePoll poll(50us, wait.Reader(), kStart);
  const auto later = kStart + 3 * IdlePoll::kSamplePeriod;
  poll.Slept(later - 10us, later);
  CHECK(poll.KeepPolling(later + 1us));
  CHECK_FALSE(poll.contended());
}

TEST_CASE("RunQueueWait reads this thread's run-queue wait from the scheduler's statistics",
          "[runtime]") {
  // The second field of /proc/thread-self/schedstat ("run_ns wait_ns slices"), read directly.
  const auto wait_field = [] {
    std::ifstream in("/proc/thread-self/schedstat");
    long long run_ns = -1, wait_ns = -1;
    in >> run_ns >> wait_ns;
    return std::chrono::nanoseconds(wait_ns);
  };
  RunQueueWait wait;
  // Keep the thread busy a little so that run time and wait time differ.
  volatile std::uint64_t sink = 0;
  for (std::uint64_t i = 0; i < 20'000'000; ++i) sink = sink + i;
  const auto before = wait_field();
  const auto read = wait.Read();
  const auto after = wait_field();
  REQUIRE(read.has_value());  // Linux with schedstat, as on every machine this runs on
  CHECK(before.count() >= 0);
  // The wait field, not the run field (which is far larger after the busy loop).
  CHECK(*read >= before);
  CHECK(*read <= after);
}
