#include "progress.h"

#include <unistd.h>

#include <cstdio>

namespace tessera::tools::cli {

Progress::Progress(std::string label, std::size_t total)
    : label_(std::move(label)),
      total_(total),
      terminal_(isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      drawn_(start_) {}

Progress::~Progress() {
  if (shown_) std::fprintf(stderr, "\r\033[K");  // clear the line
}

void Progress::Update(std::size_t done) {
  if (!terminal_) return;
  const auto now = std::chrono::steady_clock::now();
  // The first line at once when there is no count (one long call follows), then every 100 ms.
  if ((shown_ || total_ > 0) && now - drawn_ < std::chrono::milliseconds(100)) return;
  drawn_ = now;
  const double seconds = std::chrono::duration<double>(now - start_).count();
  if (total_ > 0) {
    std::fprintf(stderr, "\r\033[K%s: %zu of %zu (%.1f s)", label_.c_str(), done, total_, seconds);
  } else {
    std::fprintf(stderr, "\r\033[K%s (%.1f s)", label_.c_str(), seconds);
  }
  std::fflush(stderr);
  shown_ = true;
}

}  // namespace tessera::tools::cli
