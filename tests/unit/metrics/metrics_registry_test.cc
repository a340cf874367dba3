#include "tessera/metrics/metrics_registry.h"

#include <catch2/catch.hpp>

#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace tessera::metrics {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST_CASE("counters from many threads add up") {
  MetricsRegistry registry;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&registry] {
      // Registering at the point of use returns the shared counter.
      for (int i = 0; i < 10000; ++i) {
        registry.RegisterCounter("tessera_test_total", {{"map", "orders"}}).Increment();
      }
      registry.RegisterCounter("tessera_test_total", {{"map", "orders"}}).Increment(5);
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(registry.RegisterCounter("tessera_test_total", {{"map", "orders"}}).value() == 40020);
  CHECK(registry.RegisterCounter("tessera_test_total", {{"map", "users"}}).value() == 0);
}

TEST_CASE("same name and labels, in any order, give the same metric") {
  MetricsRegistry registry;
  Counter& a = registry.RegisterCounter("c_total", {{"a", "1"}, {"b", "2"}});
  Counter& b = registry.RegisterCounter("c_total", {{"b", "2"}, {"a", "1"}});
  Counter& other = registry.RegisterCounter("c_total", {{"a", "1"}});
  CHECK(&a == &b);
  CHECK(&a != &other);
  CHECK(&registry.RegisterGauge("g") == &registry.RegisterGauge("g"));
  CHECK(&registry.RegisterHistogram("h_seconds") == &registry.RegisterHistogram("h_seconds"));
}

TEST_CASE("misuse is reported as a bug") {
  MetricsRegistry registry;
  registry.RegisterCounter("x_total");
  CHECK_THROWS_AS(registry.RegisterGauge("x_total"), std::logic_error);
  CHECK_THROWS_AS(registry.RegisterCounter("bad name"), std::logic_error);
  CHECK_THROWS_AS(registry.RegisterCounter("ok_total", {{"1bad", "v"}}), std::logic_error);
  CHECK_THROWS_AS(registry.RegisterCounter("ok_total", {{"a", "1"}, {"a", "2"}}), std::logic_error);
  CHECK_THROWS_AS(registry.RegisterHistogram("h_seconds", {{"quantile", "1"}}), std::logic_error);
  CHECK_THROWS_AS(registry.RegisterCounter("x_total").Increment(-1), std::logic_error);
}

TEST_CASE("a family set whole shows exactly the label sets of its last setting") {
  MetricsRegistry registry;
  registry.SetCounterFamily("topic_total", "per topic",
                            {{{{"topic", "a"}}, 3}, {{{"topic", "b"}}, 5}});
  registry.SetGaugeFamily("listeners", "per map", {{{{"map", "m"}}, 2.0}});
  std::string text = registry.RenderPrometheus();
  CHECK(text.find("topic_total{topic=\"a\"} 3\n") != std::string::npos);
  CHECK(text.find("topic_total{topic=\"b\"} 5\n") != std::string::npos);
  CHECK(text.find("listeners{map=\"m\"} 2\n") != std::string::npos);
  // "a" is gone; "b" restarted from 1 (a counter reset, as the source reports it).
  registry.SetCounterFamily("topic_total", "per topic", {{{{"topic", "b"}}, 1}});
  registry.SetGaugeFamily("listeners", "per map", {});
  text = registry.RenderPrometheus();
  CHECK(text.find("topic=\"a\"") == std::string::npos);
  CHECK(text.find("topic_total{topic=\"b\"} 1\n") != std::string::npos);
  CHECK(text.find("listeners{") == std::string::npos);
  // A name is either set whole or registered, never both.
  CHECK_THROWS_AS(registry.RegisterCounter("topic_total"), std::logic_error);
  registry.RegisterCounter("plain_total");
  CHECK_THROWS_AS(registry.SetCounterFamily("plain_total", "", {}), std::logic_error);
  CHECK_THROWS_AS(registry.SetGaugeFamily("topic_total", "", {}), std::logic_error);
}

TEST_CASE("a fractional counter family renders as a counter with its fractional values") {
  MetricsRegistry registry;
  registry.SetFractionalCounterFamily("poll_seconds_total", "time polling",
                                      {{{{"shard", "0"}}, 0.25}, {{{"shard", "1"}}, -1.0}});
  const std::string text = registry.RenderPrometheus();
  CHECK(text.find("# TYPE poll_seconds_total counter\n") != std::string::npos);
  CHECK(text.find("poll_seconds_total{shard=\"0\"} 0.25\n") != std::string::npos);
  CHECK(text.find("poll_seconds_total{shard=\"1\"} 0\n") != std::string::npos);  // never < 0
}

TEST_CASE("gauges hold a value or call back") {
  MetricsRegistry registry;
  Gauge& gauge = registry.RegisterGauge("queue_depth");
  gauge.Set(5);
  gauge.Add(-2);
  CHECK(gauge.value() == 3);
  int entries = 7;
  Gauge& computed = registry.RegisterGaugeCallback(
      "entries", {}, "", [&entries] { return static_cast<double>(entries); });
  entries = 9;
  CHECK(computed.value() == 9);
  computed.SetCallback(nullptr);
  CHECK(computed.value() == 0);
}

TEST_CASE("RenderPrometheus writes the text exposition format") {
  MetricsRegistry registry;
  registry.RegisterCounter("tessera_map_puts_total", {{"map", "orders"}}, "Puts served.")
      .Increment(42);
  registry.RegisterCounter("tessera_map_puts_total", {{"map", "a\"b\\c\nd"}}).Increment(1);
  registry.RegisterGauge("tessera_entries", {}, "Entries\nowned").Set(2.5);
  LatencyHistogram& latency =
      registry.RegisterHistogram("tessera_get_seconds", {{"map", "orders"}}, "Get latency.");
  for (int i = 0; i < 100; ++i) latency.Record(std::chrono::milliseconds(2));

  std::vector<std::string> expected = {
      "# HELP tessera_entries Entries\\nowned",
      "# TYPE tessera_entries gauge",
      "tessera_entries 2.5",
      "# HELP tessera_get_seconds Get latency.",
      "# TYPE tessera_get_seconds summary",
      // 2 ms sits in a bucket [1998848, 2031615] ns; the midpoint is capped at the max.
      "tessera_get_seconds{map=\"orders\",quantile=\"0.5\"} 0.002",
      "tessera_get_seconds{map=\"orders\",quantile=\"0.99\"} 0.002",
      "tessera_get_seconds{map=\"orders\",quantile=\"0.999\"} 0.002",
      "tessera_get_seconds_sum{map=\"orders\"} 0.2",
      "tessera_get_seconds_count{map=\"orders\"} 100",
      "# HELP tessera_map_puts_total Puts served.",
      "# TYPE tessera_map_puts_total counter",
      "tessera_map_puts_total{map=\"a\\\"b\\\\c\\nd\"} 1",
      "tessera_map_puts_total{map=\"orders\"} 42",
  };
  CHECK(Lines(registry.RenderPrometheus()) == expected);
}

TEST_CASE("RenderPrometheus omits HELP without help text and renders special floats") {
  MetricsRegistry registry;
  registry.RegisterGauge("up").Set(1);
  registry.RegisterGaugeCallback("ratio", {{"kind", "nan"}}, "", [] { return std::nan(""); });
  registry.RegisterGaugeCallback("ratio", {{"kind", "inf"}}, "",
                                 [] { return -std::numeric_limits<double>::infinity(); });
  std::vector<std::string> expected = {
      "# TYPE ratio gauge",
      "ratio{kind=\"inf\"} -Inf",
      "ratio{kind=\"nan\"} NaN",
      "# TYPE up gauge",
      "up 1",
  };
  CHECK(Lines(registry.RenderPrometheus()) == expected);
  CHECK(MetricsRegistry().RenderPrometheus().empty());
}

}  // namespace

TEST_CASE("An adopted histogram renders as a registered one and outlives its registry") {
  auto shared = std::make_shared<LatencyHistogram>();
  {
    MetricsRegistry registry;
    registry.AdoptHistogram("tessera_log_fsync_seconds", {}, "Fsync time.", shared);
    for (int i = 0; i < 10; ++i) shared->Record(std::chrono::milliseconds(2));
    const std::string text = registry.RenderPrometheus();
    CHECK(text.find("# TYPE tessera_log_fsync_seconds summary") != std::string::npos);
    CHECK(text.find("tessera_log_fsync_seconds_count 10") != std::string::npos);
  }
  shared->Record(std::chrono::milliseconds(1));  // a holder on another thread, after it
  CHECK(shared->Snapshot().count == 11);
}

}  // namespace tessera::metrics
