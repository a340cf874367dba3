#include "tessera/runtime/idle_poll.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

#include "tessera/base/check.h"

namespace tessera::runtime {

RunQueueWait::RunQueueWait() : fd_(open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC)) {}

RunQueueWait::~RunQueueWait() {
  if (fd_ >= 0) close(fd_);
}

// The file holds "run_ns wait_ns timeslices"; pread at offset 0 formats it afresh.
std::optional<std::chrono::nanoseconds> RunQueueWait::Read() const {
  if (fd_ < 0) return std::nullopt;
  char text[128];
  const ssize_t n = pread(fd_, text, sizeof text - 1, 0);
  if (n <= 0) return std::nullopt;
  text[n] = '\0';
  unsigned long long run_ns = 0, wait_ns = 0;
  if (std::sscanf(text, "%llu %llu", &run_ns, &wait_ns) != 2) return std::nullopt;
  return std::chrono::nanoseconds(wait_ns);
}

IdlePoll::IdlePoll(std::chrono::microseconds window, WaitReader read_wait, Clock::time_point now)
    : window_(window),
      read_wait_(std::move(read_wait)),
      sample_start_(now),
      sample_wait_(read_wait_()),
      last_work_(now) {
  TESSERA_CHECK(window.count() > 0, "IdlePoll needs a positive window");
}

bool IdlePoll::KeepPolling(Clock::time_point now) {
  if (now - sample_start_ >= kSamplePeriod) Sample(now);
  return short_sleep_ && !contended_ && now - last_work_ < window_;
}

void IdlePoll::Slept(Clock::time_point start, Clock::time_point end) {
  short_sleep_ = end - start < window_;
  last_work_ = end;
}

void IdlePoll::Sample(Clock::time_point now) {
  const auto wait = read_wait_();
  if (wait && sample_wait_) {
    contended_ = (*wait - *sample_wait_) * 100 > (now - sample_start_) * kContendedWaitPercent;
    if (contended_) ++contended_samples_;
  }
  sample_start_ = now;
  sample_wait_ = wait;
}

}  // namespace tessera::runtime
