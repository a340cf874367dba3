// Bucket index: values < 2^S map to themselves; a value with highest bit e >= S keeps its top
// S+1 bits (mantissa in [2^S, 2^(S+1))) and lands in row (e - S + 1), column mantissa - 2^S.
#include "latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace tessera::tools::bench {
namespace {
constexpr std::size_t kSubBuckets = std::size_t{1} << LatencyHistogram::kSubBucketBits;
constexpr std::size_t kRows = 64 - LatencyHistogram::kSubBucketBits + 1;
}  // namespace

LatencyHistogram::LatencyHistogram() : counts_(kRows * kSubBuckets, 0) {}

std::size_t LatencyHistogram::BucketOf(std::uint64_t value) {
  if (value < kSubBuckets) return static_cast<std::size_t>(value);
  int shift = std::bit_width(value) - 1 - kSubBucketBits;
  std::uint64_t mantissa = value >> shift;  // in [kSubBuckets, 2 * kSubBuckets)
  return static_cast<std::size_t>(shift + 1) * kSubBuckets +
         static_cast<std::size_t>(mantissa - kSubBuckets);
}

std::uint64_t LatencyHistogram::UpperBoundOf(std::size_t bucket) {
  if (bucket < kSubBuckets) return bucket;
  std::size_t shift = bucket / kSubBuckets - 1;
  std::uint64_t mantissa = bucket % kSubBuckets + kSubBuckets;
  return ((mantissa + 1) << shift) - 1;
}

void LatencyHistogram::Record(std::uint64_t value) {
  ++counts_[BucketOf(value)];
  ++count_;
  max_ = std::max(max_, value);
  min_ = std::min(min_, value);
  sum_ += value;
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (std::size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  max_ = std::max(max_, other.max_);
  min_ = std::min(min_, other.min_);
  sum_ += other.sum_;
}

double LatencyHistogram::Mean() const {
  return count_ == 0 ? 0.0 : static_cast<double>(sum_ / count_);
}

std::uint64_t LatencyHistogram::Percentile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(count_)));
  rank = std::max<std::uint64_t>(rank, 1);
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) return std::min(UpperBoundOf(i), max_);
  }
  return max_;
}

}  // namespace tessera::tools::bench
