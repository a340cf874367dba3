// MetricsRegistry::RenderPrometheus: the text exposition format, version 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/). Escaping: HELP text
// escapes '\' and newline; label values also escape '"'. Floats use the shortest form
// that round-trips, with NaN/+Inf/-Inf spelled the Prometheus way.
#include <fmt/format.h>

#include <cmath>
#include <string>

#include "tessera/metrics/metrics_registry.h"

namespace tessera::metrics {
namespace {

std::string Escape(std::string_view text, bool quote) {
  std::string out;
  for (char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (quote && c == '"')
      out += "\\\"";
    else
      out += c;
  }
  return out;
}

std::string Number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", value);
}

// `{a="1",b="2"}`, with `extra` (already formatted, e.g. quantile="0.5") appended.
std::string LabelText(const Labels& labels, std::string_view extra = "") {
  if (labels.empty() && extra.empty()) return "";
  std::string out = "{";
  for (const auto& [name, value] : labels) {
    if (out.size() > 1) out += ',';
    out += name + "=\"" + Escape(value, true) + "\"";
  }
  if (!extra.empty()) {
    if (out.size() > 1) out += ',';
    out += extra;
  }
  return out + "}";
}

void RenderSummary(const std::string& name, const Labels& labels, const LatencyHistogram& histogram,
                   std::string& out) {
  LatencySnapshot s = histogram.Snapshot();
  auto seconds = [](std::uint64_t nanos) { return Number(static_cast<double>(nanos) / 1e9); };
  out += name + LabelText(labels, "quantile=\"0.5\"") + " " + seconds(s.p50_ns) + "\n";
  out += name + LabelText(labels, "quantile=\"0.99\"") + " " + seconds(s.p99_ns) + "\n";
  out += name + LabelText(labels, "quantile=\"0.999\"") + " " + seconds(s.p999_ns) + "\n";
  out += name + "_sum" + LabelText(labels) + " " + seconds(s.sum_ns) + "\n";
  out += name + "_count" + LabelText(labels) + " " + std::to_string(s.count) + "\n";
}

}  // namespace

std::string MetricsRegistry::RenderPrometheus() const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (const auto& [name, family] : families_) {
    if (!family.help.empty()) out += "# HELP " + name + " " + Escape(family.help, false) + "\n";
    const char* type = family.type == Type::kCounter ? "counter"
                       : family.type == Type::kGauge ? "gauge"
                                                     : "summary";
    out += "# TYPE " + name + " " + type + "\n";
    for (const auto& [labels, series] : family.series) {
      if (series.counter) {
        out += name + LabelText(labels) + " " + std::to_string(series.counter->value()) + "\n";
      } else if (series.gauge) {
        out += name + LabelText(labels) + " " + Number(series.gauge->value()) + "\n";
      } else if (series.histogram) {
        RenderSummary(name, labels, *series.histogram, out);
      }
    }
  }
  return out;
}

}  // namespace tessera::metrics
