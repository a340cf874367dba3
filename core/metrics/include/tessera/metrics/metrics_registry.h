#pragma once
// MetricsRegistry: the named counters, gauges and latency histograms of one process (or
// one member in tests), rendered in the Prometheus text format for scraping. Not a
// singleton: main() creates it and passes it (or the metrics it hands out) to the modules.
//
// A metric is identified by a name plus a small label set, e.g.
//   registry.RegisterCounter("tessera_map_puts_total", {{"map", "orders"}}, "Puts served")
// renders as `tessera_map_puts_total{map="orders"} 42`. Registering the same name and labels
// again returns the same object, so code may register at the point of use. All metrics of
// one name share a type and the help text given first.
//
// Naming rules (Prometheus): names match [a-zA-Z_:][a-zA-Z0-9_:]*, label names
// [a-zA-Z_][a-zA-Z0-9_]* and must not start with "__" or be "quantile"; label values are
// free text. Breaking a rule, or registering one name with two types, is a bug
// (TESSERA_CHECK). Histograms record nanoseconds and render as a summary in seconds, so
// their names should end in `_seconds`.
//
// Thread-safety: thread-safe. Registration and rendering take an internal mutex; updating a
// returned metric never does. Returned references stay valid until the registry is
// destroyed.

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/metrics/counter.h"
#include "tessera/metrics/gauge.h"
#include "tessera/metrics/latency_histogram.h"

namespace tessera::metrics {

// Label name/value pairs. Order does not matter: {{"a","1"},{"b","2"}} and
// {{"b","2"},{"a","1"}} name the same metric. Label names must be distinct.
using Labels = std::vector<std::pair<std::string, std::string>>;

class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  Counter& RegisterCounter(std::string_view name, Labels labels = {}, std::string_view help = "");
  Gauge& RegisterGauge(std::string_view name, Labels labels = {}, std::string_view help = "");
  // A gauge whose value is `callback()` at render time (see Gauge::SetCallback). Registering
  // again replaces the callback of the existing gauge. The callback runs inside
  // RenderPrometheus with the registry locked: it must not call into this registry.
  Gauge& RegisterGaugeCallback(std::string_view name, Labels labels, std::string_view help,
                               std::function<double()> callback);
  LatencyHistogram& RegisterHistogram(std::string_view name, Labels labels = {},
                                      std::string_view help = "");
  // Renders `histogram` as RegisterHistogram's would be, shared with its other holders (a
  // callback on another thread that may outlive the registry records into it). Adopting
  // again under the same name and labels replaces it.
  void AdoptHistogram(std::string_view name, Labels labels, std::string_view help,
                      std::shared_ptr<LatencyHistogram> histogram);

  // Families whose values live elsewhere and are copied in before rendering: each call
  // replaces every series of the family with `values`, so a label set no longer listed is
  // gone (a family keyed by names that come and go stays bounded, and a count that restarted
  // shows as a counter reset). References to such a family's series are not handed out;
  // registering one of its names with Register* as well is a bug.
  void SetCounterFamily(std::string_view name, std::string_view help,
                        std::vector<std::pair<Labels, std::int64_t>> values);
  // A counter family with fractional values: a total in base units, e.g. seconds spent.
  void SetFractionalCounterFamily(std::string_view name, std::string_view help,
                                  std::vector<std::pair<Labels, double>> values);
  void SetGaugeFamily(std::string_view name, std::string_view help,
                      std::vector<std::pair<Labels, double>> values);

  // Prometheus text exposition format (version 0.0.4): per name a `# HELP` line (when help
  // was given) and a `# TYPE` line, then one line per label set. Counters and gauges render
  // their value; histograms render as a summary: quantile="0.5"/"0.99"/"0.999" lines plus
  // _sum and _count, in seconds. Names and label sets appear in sorted order.
  std::string RenderPrometheus() const;

 private:
  enum class Type : std::uint8_t { kCounter, kGauge, kHistogram };
  struct Series {
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::shared_ptr<LatencyHistogram> histogram;
  };
  struct Family {
    Type type;
    std::string help;
    std::map<Labels, Series> series;  // labels sorted by name
    bool set_whole = false;           // by Set*Family
  };

  // Finds or creates the series; REQUIRES: mutex_ held.
  Series& FindOrAdd(std::string_view name, Labels labels, std::string_view help, Type type);
  // Finds or creates a family set whole, emptied; REQUIRES: mutex_ held.
  Family& ResetWholeFamily(std::string_view name, std::string_view help, Type type);

  mutable std::mutex mutex_;
  std::map<std::string, Family, std::less<>> families_;
};

}  // namespace tessera::metrics
