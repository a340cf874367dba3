// Registration: families keyed by name, series keyed by sorted labels. Metrics are boxed
// (unique_ptr) so references handed out survive map rebalancing.
#include "tessera/metrics/metrics_registry.h"

#include <algorithm>
#include <cctype>

#include "tessera/base/check.h"

namespace tessera::metrics {
namespace {

bool IsNameChar(char c, bool first, bool allow_colon) {
  bool alpha = std::isalpha(static_cast<unsigned char>(c)) || c == '_' || (allow_colon && c == ':');
  return alpha || (!first && std::isdigit(static_cast<unsigned char>(c)));
}

bool IsValidName(std::string_view name, bool allow_colon) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (!IsNameChar(name[i], i == 0, allow_colon)) return false;
  }
  return true;
}

Labels Normalize(Labels labels, std::string_view metric) {
  std::sort(labels.begin(), labels.end());
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const std::string& label = labels[i].first;
    TESSERA_CHECK(IsValidName(label, false) && !label.starts_with("__") && label != "quantile",
                  "metric '" + std::string(metric) + "' has an invalid label name '" + label + "'");
    TESSERA_CHECK(i == 0 || labels[i - 1].first != label,
                  "metric '" + std::string(metric) + "' repeats label '" + label + "'");
  }
  return labels;
}

}  // namespace

MetricsRegistry::Series& MetricsRegistry::FindOrAdd(std::string_view name, Labels labels,
                                                    std::string_view help, Type type) {
  TESSERA_CHECK(IsValidName(name, true),
                "invalid metric name '" + std::string(name) + "': use [a-zA-Z_:][a-zA-Z0-9_:]*");
  labels = Normalize(std::move(labels), name);
  auto family = families_.find(name);
  if (family == families_.end()) {
    family = families_.emplace(std::string(name), Family{type, std::string(help), {}}).first;
  }
  TESSERA_CHECK(family->second.type == type,
                "metric '" + std::string(name) + "' is already registered with another type");
  TESSERA_CHECK(
      !family->second.set_whole,
      "metric '" + std::string(name) + "' is set whole with Set*Family; do not register it");
  if (family->second.help.empty()) family->second.help = std::string(help);
  return family->second.series[std::move(labels)];
}

MetricsRegistry::Family& MetricsRegistry::ResetWholeFamily(std::string_view name,
                                                           std::string_view help, Type type) {
  TESSERA_CHECK(IsValidName(name, true),
                "invalid metric name '" + std::string(name) + "': use [a-zA-Z_:][a-zA-Z0-9_:]*");
  auto family = families_.find(name);
  if (family == families_.end()) {
    family = families_.emplace(std::string(name), Family{type, std::string(help), {}, true}).first;
  }
  TESSERA_CHECK(family->second.type == type && family->second.set_whole,
                "metric '" + std::string(name) + "' is already registered another way");
  family->second.series.clear();
  return family->second;
}

void MetricsRegistry::SetCounterFamily(std::string_view name, std::string_view help,
                                       std::vector<std::pair<Labels, std::int64_t>> values) {
  std::lock_guard lock(mutex_);
  Family& family = ResetWholeFamily(name, help, Type::kCounter);
  for (auto& [labels, value] : values) {
    Series& series = family.series[Normalize(std::move(labels), name)];
    series.counter = std::make_unique<Counter>();
    series.counter->Increment(std::max<std::int64_t>(value, 0));
  }
}

void MetricsRegistry::SetFractionalCounterFamily(std::string_view name, std::string_view help,
                                                 std::vector<std::pair<Labels, double>> values) {
  std::lock_guard lock(mutex_);
  Family& family = ResetWholeFamily(name, help, Type::kCounter);
  for (auto& [labels, value] : values) {
    Series& series = family.series[Normalize(std::move(labels), name)];
    series.gauge = std::make_unique<Gauge>();  // rendered as the counter's value
    series.gauge->Set(std::max(value, 0.0));
  }
}

void MetricsRegistry::SetGaugeFamily(std::string_view name, std::string_view help,
                                     std::vector<std::pair<Labels, double>> values) {
  std::lock_guard lock(mutex_);
  Family& family = ResetWholeFamily(name, help, Type::kGauge);
  for (auto& [labels, value] : values) {
    Series& series = family.series[Normalize(std::move(labels), name)];
    series.gauge = std::make_unique<Gauge>();
    series.gauge->Set(value);
  }
}

Counter& MetricsRegistry::RegisterCounter(std::string_view name, Labels labels,
                                          std::string_view help) {
  std::lock_guard lock(mutex_);
  Series& series = FindOrAdd(name, std::move(labels), help, Type::kCounter);
  if (!series.counter) series.counter = std::make_unique<Counter>();
  return *series.counter;
}

Gauge& MetricsRegistry::RegisterGauge(std::string_view name, Labels labels, std::string_view help) {
  std::lock_guard lock(mutex_);
  Series& series = FindOrAdd(name, std::move(labels), help, Type::kGauge);
  if (!series.gauge) series.gauge = std::make_unique<Gauge>();
  return *series.gauge;
}

Gauge& MetricsRegistry::RegisterGaugeCallback(std::string_view name, Labels labels,
                                              std::string_view help,
                                              std::function<double()> callback) {
  Gauge& gauge = RegisterGauge(name, std::move(labels), help);
  gauge.SetCallback(std::move(callback));
  return gauge;
}

LatencyHistogram& MetricsRegistry::RegisterHistogram(std::string_view name, Labels labels,
                                                     std::string_view help) {
  std::lock_guard lock(mutex_);
  Series& series = FindOrAdd(name, std::move(labels), help, Type::kHistogram);
  if (!series.histogram) series.histogram = std::make_shared<LatencyHistogram>();
  return *series.histogram;
}

void MetricsRegistry::AdoptHistogram(std::string_view name, Labels labels, std::string_view help,
                                     std::shared_ptr<LatencyHistogram> histogram) {
  std::lock_guard lock(mutex_);
  FindOrAdd(name, std::move(labels), help, Type::kHistogram).histogram = std::move(histogram);
}

}  // namespace tessera::metrics
