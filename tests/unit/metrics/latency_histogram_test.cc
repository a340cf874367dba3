#include "tessera/metrics/latency_histogram.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <thread>
#include <vector>

namespace tessera::metrics {
namespace {

TEST_CASE("bucket geometry covers every value, in order, with ~3% width") {
  for (std::uint64_t v :
       {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{31}, std::uint64_t{32}, std::uint64_t{33},
        std::uint64_t{63}, std::uint64_t{64}, std::uint64_t{1000}, std::uint64_t{123456789},
        std::uint64_t{1} << 40, std::numeric_limits<std::uint64_t>::max()}) {
    CAPTURE(v);
    std::size_t index = LatencyHistogram::BucketIndex(v);
    REQUIRE(index < LatencyHistogram::kBucketCount);
    CHECK(LatencyHistogram::BucketLow(index) <= v);
    CHECK(v <= LatencyHistogram::BucketHigh(index));
    double width = static_cast<double>(LatencyHistogram::BucketHigh(index) -
                                       LatencyHistogram::BucketLow(index));
    CHECK(width <= static_cast<double>(v) / 32.0);
  }
  CHECK(LatencyHistogram::BucketIndex(std::numeric_limits<std::uint64_t>::max()) ==
        LatencyHistogram::kBucketCount - 1);
  for (std::size_t i = 1; i < LatencyHistogram::kBucketCount; ++i) {
    REQUIRE(LatencyHistogram::BucketLow(i) == LatencyHistogram::BucketHigh(i - 1) + 1);
  }
}

TEST_CASE("an empty histogram reports zeros") {
  LatencyHistogram h;
  LatencySnapshot s = h.Snapshot();
  CHECK(s.count == 0);
  CHECK(s.p99_ns == 0);
  CHECK(s.max_ns == 0);
  CHECK(s.mean_ns == 0);
}

TEST_CASE("percentiles are within bucket precision") {
  LatencyHistogram h;
  // 1..100000 ns uniformly: p50 = 50000, p99 = 99000, p999 = 99900.
  for (std::uint64_t v = 1; v <= 100000; ++v) h.Record(v);
  LatencySnapshot s = h.Snapshot();
  CHECK(s.count == 100000);
  CHECK(s.sum_ns == 100000ull * 100001 / 2);
  CHECK(s.mean_ns == Approx(50000.5));
  CHECK(s.max_ns == 100000);
  CHECK(static_cast<double>(s.p50_ns) == Approx(50000).epsilon(1.0 / 64));
  CHECK(static_cast<double>(s.p99_ns) == Approx(99000).epsilon(1.0 / 64));
  CHECK(static_cast<double>(s.p999_ns) == Approx(99900).epsilon(1.0 / 64));
  CHECK(h.Quantile(0.0) == 1);
  CHECK(h.Quantile(1.0) <= 100000);
  CHECK(static_cast<double>(h.Quantile(0.25)) == Approx(25000).epsilon(1.0 / 64));
}

TEST_CASE("a tail of slow calls shows in p99 and p999 but not p50") {
  LatencyHistogram h;
  for (int i = 0; i < 990; ++i) h.Record(std::chrono::microseconds(100));
  for (int i = 0; i < 10; ++i) h.Record(std::chrono::milliseconds(50));
  LatencySnapshot s = h.Snapshot();
  CHECK(static_cast<double>(s.p50_ns) == Approx(100000).epsilon(1.0 / 64));
  CHECK(static_cast<double>(s.p99_ns) == Approx(100000).epsilon(1.0 / 64));
  CHECK(static_cast<double>(s.p999_ns) == Approx(50000000).epsilon(1.0 / 64));
  CHECK(s.max_ns == 50000000);
  h.Record(std::chrono::nanoseconds(-5));  // clock stepped back: counted as 0
  CHECK(h.Snapshot().count == 1001);
}

TEST_CASE("recording from many threads loses nothing") {
  LatencyHistogram h;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&h, t] {
      for (std::uint64_t i = 0; i < 20000; ++i) h.Record(i + static_cast<std::uint64_t>(t));
    });
  }
  for (std::thread& thread : threads) thread.join();
  LatencySnapshot s = h.Snapshot();
  CHECK(s.count == 80000);
  CHECK(s.max_ns == 19999 + 3);
}

}  // namespace
}  // namespace tessera::metrics
