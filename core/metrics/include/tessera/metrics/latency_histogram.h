#pragma once
// LatencyHistogram: records durations in nanoseconds into fixed log-linear buckets (like
// HdrHistogram with 5 significant bits): values below 32 ns are exact, above that each power
// of two is split into 32 equal buckets, so a reported percentile is within 1/64 (~1.6%) of
// a recorded value. Fixed memory (~15 KiB), no allocation after construction. Owned by
// MetricsRegistry, or a member of whatever measures.
//
// Thread-safety: thread-safe. Record is lock-free (three relaxed atomic adds and a max);
// Snapshot reads the buckets without stopping writers, so a snapshot taken during recording
// may miss the newest values but its count and percentiles are self-consistent.

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace tessera::metrics {

struct LatencySnapshot {
  std::uint64_t count = 0;
  std::uint64_t sum_ns = 0;
  double mean_ns = 0;  // 0 when count == 0
  // Percentiles: the midpoint of the bucket holding that rank, capped at max_ns. 0 when
  // count == 0.
  std::uint64_t p50_ns = 0;
  std::uint64_t p99_ns = 0;
  std::uint64_t p999_ns = 0;
  std::uint64_t max_ns = 0;
};

class LatencyHistogram {
 public:
  static constexpr int kSubBucketBits = 5;
  static constexpr std::uint64_t kSubBuckets = 1u << kSubBucketBits;
  static constexpr std::size_t kBucketCount = kSubBuckets + (64 - kSubBucketBits) * kSubBuckets;

  LatencyHistogram() = default;
  LatencyHistogram(const LatencyHistogram&) = delete;
  LatencyHistogram& operator=(const LatencyHistogram&) = delete;

  void Record(std::uint64_t nanos);
  // Negative durations (a clock stepping back) record as 0.
  void Record(std::chrono::nanoseconds duration);

  LatencySnapshot Snapshot() const;

  // The value at quantile q in [0, 1] (same rule as the snapshot's percentiles).
  std::uint64_t Quantile(double q) const;

  // Bucket geometry, exposed for tests and exporters: the index holding `nanos`, and the
  // smallest and largest value an index holds.
  static std::size_t BucketIndex(std::uint64_t nanos);
  static std::uint64_t BucketLow(std::size_t index);
  static std::uint64_t BucketHigh(std::size_t index);

 private:
  std::array<std::atomic<std::uint64_t>, kBucketCount> buckets_{};
  std::atomic<std::uint64_t> sum_{0};
  std::atomic<std::uint64_t> max_{0};
};

}  // namespace tessera::metrics
