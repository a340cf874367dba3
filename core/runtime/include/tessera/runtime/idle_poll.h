#pragma once
// IdlePoll: whether a shard thread that has just found no work keeps polling for more or goes
// to sleep (see ShardSet's idle_poll). It polls only while both hold:
// - work arrives often: its last sleep was shorter than the window, and work came less than
//   the window ago (so an idle thread, or one woken less often than that, never polls);
// - its core is not contended: in the last sample period (kSamplePeriod) the thread spent at
//   most kContendedWaitPercent of the time runnable but waiting for a CPU (its run-queue
//   wait). A polling thread takes a core; when other threads want it, polling delays them
//   and itself (with busy processes beside the member, polling cut its throughput and raised
//   its tail latency, and its run-queue wait share was many times what it is with only a load
//   generator beside it). With no run-queue figures (RunQueueWait::Read gives nullopt) the
//   core counts as not contended.
//
// Thread-safety: one IdlePoll per thread; not shared.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>

namespace tessera::runtime {

// The calling thread's run-queue wait so far: time spent runnable but not running, from the
// scheduler's statistics (/proc/thread-self/schedstat). Construct and read on one thread.
class RunQueueWait {
 public:
  RunQueueWait();
  ~RunQueueWait();
  RunQueueWait(const RunQueueWait&) = delete;
  RunQueueWait& operator=(const RunQueueWait&) = delete;

  // nullopt where the kernel keeps no such statistics (or they cannot be read).
  std::optional<std::chrono::nanoseconds> Read() const;

 private:
  int fd_;
};

class IdlePoll {
 public:
  using Clock = std::chrono::steady_clock;
  using WaitReader = std::function<std::optional<std::chrono::nanoseconds>()>;
  static constexpr std::chrono::milliseconds kSamplePeriod{10};
  static constexpr int kContendedWaitPercent = 10;

  // REQUIRES: window > 0. read_wait gives the thread's run-queue wait so far (called at most
  // once per kSamplePeriod).
  IdlePoll(std::chrono::microseconds window, WaitReader read_wait, Clock::time_point now);

  // The thread ran handlers; `now` is after them.
  void Worked(Clock::time_point now) { last_work_ = now; }
  // The thread found no work at `now`: true = poll again, false = sleep (then call Slept).
  bool KeepPolling(Clock::time_point now);
  // The thread slept from `start` to `end` (woken by work or a timer).
  void Slept(Clock::time_point start, Clock::time_point end);

  bool contended() const { return contended_; }
  // Samples so far that found the core contended.
  std::uint64_t contended_samples() const { return contended_samples_; }

 private:
  void Sample(Clock::time_point now);

  std::chrono::microseconds window_;
  WaitReader read_wait_;
  Clock::time_point sample_start_;
  std::optional<std::chrono::nanoseconds> sample_wait_;
  bool contended_ = false;
  std::uint64_t contended_samples_ = 0;
  Clock::time_point last_work_;
  bool short_sleep_ = false;
};

}  // namespace tessera::runtime
