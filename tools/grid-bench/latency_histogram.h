#pragma once
// LatencyHistogram: HDR-like log-linear histogram of non-negative integer samples (grid-bench
// records nanoseconds). Memory is fixed (a few thousand counters) however many samples are
// recorded. Values below 2^kSubBucketBits are exact; above, each power of two is split into
// 2^kSubBucketBits buckets, so a reported percentile is within 1/128 (< 0.8%) of the true
// sample and never below it. max() and min() are exact.
//
// Thread-safety: thread-compatible (one writer; merge per-thread histograms at the end).

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera::tools::bench {

class LatencyHistogram {
 public:
  static constexpr int kSubBucketBits = 7;

  LatencyHistogram();

  void Record(std::uint64_t value);
  // Adds every sample of `other`.
  void Merge(const LatencyHistogram& other);

  std::uint64_t count() const { return count_; }
  std::uint64_t max() const { return max_; }
  std::uint64_t min() const { return count_ == 0 ? 0 : min_; }
  double Mean() const;
  // The smallest bucket bound v such that at least q*count samples are <= v (clamped to max()).
  // q in [0, 1]; 0 when empty.
  std::uint64_t Percentile(double q) const;

 private:
  static std::size_t BucketOf(std::uint64_t value);
  static std::uint64_t UpperBoundOf(std::size_t bucket);

  std::vector<std::uint64_t> counts_;
  std::uint64_t count_ = 0;
  std::uint64_t max_ = 0;
  std::uint64_t min_ = UINT64_MAX;
  long double sum_ = 0;
};

}  // namespace tessera::tools::bench
