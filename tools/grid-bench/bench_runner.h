#pragma once
// RunBench: the load generator. Each connection is its own grid::Client driven by one thread
// that keeps up to `pipeline` async calls in flight; completions record their latency into
// the connection's histogram when they both start and finish inside the measured window
// (after the warmup, before the end). Bounded in time: the driver stops issuing at the end of
// the window and waits at most one call timeout (plus a second) for stragglers.
//
// Thread-safety: RunBench is a blocking call; safe from any non-client thread.

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_options.h"
#include "latency_histogram.h"
#include "tessera/base/error.h"

namespace tessera::tools::bench {

struct BenchReport {
  double seconds = 0;            // length of the measured window
  double preload_seconds = 0;    // 0 without --preload
  std::uint64_t ops = 0;         // successful ops completed inside the window
  std::uint64_t errors = 0;      // failed ops during the whole run (warmup included)
  std::uint64_t unfinished = 0;  // calls still in flight when the run gave up waiting
  std::string first_error;       // the first failure's message, for the report
  LatencyHistogram latency_ns;   // latency of the counted ops
  std::map<std::string, std::uint64_t> ops_by_kind;
  std::uint64_t published = 0;  // topic mode: messages published inside the window
  // CPU time this process (the client) spent inside the measured window, user + system.
  double client_cpu_seconds = 0;
  // Heap allocations this process made inside the window; nullopt when not counted (an
  // AddressSanitizer build; alloc_counter.h).
  std::optional<std::uint64_t> client_allocations;
};

// Shared by the native and the RESP runs (resp_bench.h).
// Key i of the key space: "k" + i zero-padded to key_size bytes.
std::string BenchKey(std::size_t key_size, std::int64_t i);
// The next op of `mix` (weights summing to total_weight), drawn with `random`.
OpKind PickOp(const std::vector<OpWeight>& mix, int total_weight, std::mt19937_64& random);
// One connection's counts, added to a report.
struct ConnectionCounts {
  LatencyHistogram latency_ns;
  std::uint64_t ops = 0;
  std::uint64_t errors = 0;
  std::string first_error;
  std::array<std::uint64_t, kOpKinds> ops_by_kind{};  // by OpKind
  int in_flight = 0;
  void AddTo(BenchReport& report) const;
};
// Measures this process's CPU time and heap allocations from window_start to window_end on
// a thread of its own; Finish waits for the end and writes both into `report`.
class WindowSampler {
 public:
  WindowSampler(std::chrono::steady_clock::time_point window_start,
                std::chrono::steady_clock::time_point window_end);
  void Finish(BenchReport& report);

 private:
  double cpu_seconds_ = 0;
  std::uint64_t allocations_ = 0;
  std::thread thread_;
};

// Connects every client (errors: the client's, e.g. kConnectionFailed), optionally preloads
// the key space, runs warmup + duration, and reports.
base::Result<BenchReport> RunBench(const BenchOptions& options);
// Topic mode: ops = messages the subscriber received inside the window, latency_ns = their
// publish-to-receive latency, published = messages published inside the window.
base::Result<BenchReport> RunTopicBench(const BenchOptions& options);

}  // namespace tessera::tools::bench
