#pragma once
// Progress of a long grid-cli command (map list over many maps, map entries of a big map, a
// bulk dead letter replay) on stderr, redrawn in place at most every 100 ms, and only when
// stderr is a terminal: scripts and --json output never see it. The line is cleared when the
// command ends.
//
// Thread-safety: one thread.

#include <chrono>
#include <cstddef>
#include <string>

namespace tessera::tools::cli {

class Progress {
 public:
  // `total` 0: no count known (the line shows the time spent).
  Progress(std::string label, std::size_t total);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // `done` of total are done (or, without a total, one more step).
  void Update(std::size_t done);

 private:
  std::string label_;
  std::size_t total_;
  bool shown_ = false;
  bool terminal_;
  std::chrono::steady_clock::time_point start_, drawn_;
};

}  // namespace tessera::tools::cli
