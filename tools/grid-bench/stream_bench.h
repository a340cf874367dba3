#pragma once
// Stream mode (grid-bench --stream NAME): the same three measurements against a Tessera stream
// or, with --redis HOST:PORT, a Redis stream, with the same load generator:
//   1. append: `connections` producers append --events events (value_size-byte payloads,
//      keys over --keys) keeping `pipeline` appends in flight each (Stream::AppendAsync with
//      an event id / pipelined XADD); events/s.
//   2. consume: `consumers` consumers of a new group read and commit all of them from the
//      oldest (Subscribe, commit per batch / XREADGROUP COUNT 256 + XACK); events/s from the
//      first delivery to the last.
//   3. end to end: a new group starting at the tail; the producers append unpipelined for
//      --duration seconds with the send time in the payload; append-to-handler latency.
//
// Thread-safety: RunStreamBench is a blocking call; safe from any non-client thread.

#include <cstdint>
#include <string>

#include "bench_options.h"
#include "latency_histogram.h"
#include "tessera/base/error.h"

namespace tessera::tools::bench {

struct StreamBenchReport {
  std::string target;  // "tessera" or "redis"
  std::uint64_t appended = 0;
  double append_seconds = 0;
  std::uint64_t consumed = 0;
  double consume_seconds = 0;
  std::uint64_t e2e_events = 0;
  double e2e_seconds = 0;
  LatencyHistogram e2e_latency_ns;
  std::uint64_t errors = 0;
  std::string first_error;
};

base::Result<StreamBenchReport> RunStreamBench(const BenchOptions& options);

}  // namespace tessera::tools::bench
