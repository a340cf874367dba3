// Log-linear bucketing: index = exact value below 32; above, (exponent, top 5 bits below the
// leading one). Percentiles walk the cumulative counts of one pass over the buckets, so a
// snapshot's count and percentiles agree even while writers keep recording.
#include "tessera/metrics/latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

namespace tessera::metrics {

std::size_t LatencyHistogram::BucketIndex(std::uint64_t nanos) {
  if (nanos < kSubBuckets) return static_cast<std::size_t>(nanos);
  int exponent = std::bit_width(nanos) - 1;  // >= kSubBucketBits
  int shift = exponent - kSubBucketBits;
  std::uint64_t sub = (nanos >> shift) - kSubBuckets;
  return static_cast<std::size_t>(kSubBuckets + shift * kSubBuckets + sub);
}

std::uint64_t LatencyHistogram::BucketLow(std::size_t index) {
  if (index < kSubBuckets) return index;
  std::size_t shift = (index - kSubBuckets) / kSubBuckets;
  std::uint64_t sub = (index - kSubBuckets) % kSubBuckets;
  return (kSubBuckets + sub) << shift;
}

std::uint64_t LatencyHistogram::BucketHigh(std::size_t index) {
  if (index < kSubBuckets) return index;
  std::size_t shift = (index - kSubBuckets) / kSubBuckets;
  return BucketLow(index) + ((std::uint64_t{1} << shift) - 1);
}

void LatencyHistogram::Record(std::uint64_t nanos) {
  std::uint64_t current = max_.load(std::memory_order_relaxed);
  while (nanos > current &&
         !max_.compare_exchange_weak(current, nanos, std::memory_order_relaxed)) {
  }
  sum_.fetch_add(nanos, std::memory_order_relaxed);
  // Release after max/sum: a snapshot that sees this count (acquire) also sees them.
  buckets_[BucketIndex(nanos)].fetch_add(1, std::memory_order_release);
}

void LatencyHistogram::Record(std::chrono::nanoseconds duration) {
  Record(static_cast<std::uint64_t>(std::max<std::int64_t>(duration.count(), 0)));
}

namespace {

// The value reported for rank `rank` (1-based) given a copy of the bucket counts.
std::uint64_t ValueAtRank(const std::vector<std::uint64_t>& counts, std::uint64_t rank,
                          std::uint64_t max) {
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    seen += counts[i];
    if (seen >= rank) {
      std::uint64_t low = LatencyHistogram::BucketLow(i);
      std::uint64_t mid = low + (LatencyHistogram::BucketHigh(i) - low) / 2;
      return std::min(mid, max);
    }
  }
  return max;
}

std::uint64_t Rank(double q, std::uint64_t count) {
  q = std::clamp(q, 0.0, 1.0);
  auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(count)));
  return std::clamp<std::uint64_t>(rank, 1, count);
}

}  // namespace

LatencySnapshot LatencyHistogram::Snapshot() const {
  std::vector<std::uint64_t> counts(kBucketCount);
  LatencySnapshot snapshot;
  for (std::size_t i = 0; i < kBucketCount; ++i) {
    counts[i] = buckets_[i].load(std::memory_order_acquire);
    snapshot.count += counts[i];
  }
  if (snapshot.count == 0) return snapshot;
  snapshot.sum_ns = sum_.load(std::memory_order_relaxed);
  snapshot.max_ns = max_.load(std::memory_order_relaxed);
  snapshot.mean_ns = static_cast<double>(snapshot.sum_ns) / static_cast<double>(snapshot.count);
  snapshot.p50_ns = ValueAtRank(counts, Rank(0.5, snapshot.count), snapshot.max_ns);
  snapshot.p99_ns = ValueAtRank(counts, Rank(0.99, snapshot.count), snapshot.max_ns);
  snapshot.p999_ns = ValueAtRank(counts, Rank(0.999, snapshot.count), snapshot.max_ns);
  return snapshot;
}

std::uint64_t LatencyHistogram::Quantile(double q) const {
  std::vector<std::uint64_t> counts(kBucketCount);
  std::uint64_t count = 0;
  for (std::size_t i = 0; i < kBucketCount; ++i) {
    counts[i] = buckets_[i].load(std::memory_order_acquire);
    count += counts[i];
  }
  if (count == 0) return 0;
  return ValueAtRank(counts, Rank(q, count), max_.load(std::memory_order_relaxed));
}

}  // namespace tessera::metrics
