// grid-bench: native-client load generator. main() parses the flags, runs the benchmark and
// prints the report (text or --json). Exit codes: 0 ran, 1 could not connect/preload, 2 usage.
#include <fmt/format.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bench_options.h"
#include "bench_runner.h"
#include "resp_bench.h"
#include "stream_bench.h"

namespace tessera::tools::bench {
namespace {

double Micros(std::uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

std::string MixText(const BenchOptions& o) {
  std::string text;
  for (const auto& w : o.mix) {
    text += (text.empty() ? "" : ",") + std::string(OpKindName(w.kind)) + "=" +
            std::to_string(w.weight);
  }
  return text;
}

nlohmann::json ReportJson(const BenchOptions& o, const BenchReport& r) {
  const auto& h = r.latency_ns;
  return {{"address", o.redis.empty() ? o.client.addresses.front() : o.redis},
          {"protocol", o.redis.empty() ? "native" : "resp"},
          {"map", o.redis.empty() ? o.map_name : "default"},  // RESP strings live in "default"
          {"ops_mix", MixText(o)},
          {"connections", o.connections},
          {"pipeline", o.pipeline},
          {"io_threads", o.io_threads},
          {"keys", o.keys},
          {"key_size", o.key_size},
          {"value_size", o.value_size},
          {"seconds", r.seconds},
          {"preload_seconds", r.preload_seconds},
          {"ops", r.ops},
          {"ops_per_sec", static_cast<double>(r.ops) / r.seconds},
          {"client_cpu_us_per_op",
           r.ops > 0 ? r.client_cpu_seconds * 1e6 / static_cast<double>(r.ops) : 0.0},
          {"client_allocs_per_op", r.client_allocations && r.ops > 0
                                       ? nlohmann::json(static_cast<double>(*r.client_allocations) /
                                                        static_cast<double>(r.ops))
                                       : nlohmann::json(nullptr)},
          {"ops_by_kind", r.ops_by_kind},
          {"latency_us",
           {{"p50", Micros(h.Percentile(0.50))},
            {"p99", Micros(h.Percentile(0.99))},
            {"p999", Micros(h.Percentile(0.999))},
            {"max", Micros(h.max())},
            {"min", Micros(h.min())},
            {"mean", h.Mean() / 1000.0}}},
          {"errors", r.errors},
          {"unfinished", r.unfinished},
          {"first_error", r.first_error}};
}

void PrintTopicText(const BenchOptions& o, const BenchReport& r) {
  const auto& h = r.latency_ns;
  fmt::print("{} {}, {} publisher(s), {}-byte messages, {:.1f} s\n",
             o.reliable ? "reliable topic" : "topic", o.topic, o.connections, o.value_size,
             r.seconds);
  fmt::print("published   {:.0f} msgs/s\n", static_cast<double>(r.published) / r.seconds);
  fmt::print("received    {:.0f} msgs/s ({} of {} published in the window)\n",
             static_cast<double>(r.ops) / r.seconds, r.ops, r.published);
  fmt::print("latency us  p50 {:.1f}  p99 {:.1f}  p999 {:.1f}  max {:.1f}  (publish to receive)\n",
             Micros(h.Percentile(0.50)), Micros(h.Percentile(0.99)), Micros(h.Percentile(0.999)),
             Micros(h.max()));
  fmt::print("errors      {}{}\n", r.errors,
             r.first_error.empty() ? "" : " (first: " + r.first_error + ")");
}

void PrintText(const BenchOptions& o, const BenchReport& r) {
  const auto& h = r.latency_ns;
  if (r.preload_seconds > 0)
    fmt::print("preloaded {} keys in {:.2f} s\n", o.keys, r.preload_seconds);
  if (!o.redis.empty()) fmt::print("RESP server {}\n", o.redis);
  fmt::print("ops {} ({}), connections {}, pipeline {}, io threads {}, {:.1f} s\n", r.ops,
             MixText(o), o.connections, o.pipeline, o.io_threads, r.seconds);
  fmt::print("throughput  {:.0f} ops/s\n", static_cast<double>(r.ops) / r.seconds);
  if (r.ops > 0) {
    fmt::print("client cpu  {:.1f} us per op\n",
               r.client_cpu_seconds * 1e6 / static_cast<double>(r.ops));
    if (r.client_allocations) {
      fmt::print("client heap {:.1f} allocations per op\n",
                 static_cast<double>(*r.client_allocations) / static_cast<double>(r.ops));
    }
  }
  fmt::print("latency us  p50 {:.1f}  p99 {:.1f}  p999 {:.1f}  max {:.1f}  (mean {:.1f})\n",
             Micros(h.Percentile(0.50)), Micros(h.Percentile(0.99)), Micros(h.Percentile(0.999)),
             Micros(h.max()), h.Mean() / 1000.0);
  fmt::print("errors      {}{}\n", r.errors,
             r.first_error.empty() ? "" : " (first: " + r.first_error + ")");
  if (r.unfinished > 0) fmt::print("unfinished  {} calls never completed\n", r.unfinished);
}

int StreamMain(const BenchOptions& o) {
  auto r = RunStreamBench(o);
  if (!r) {
    std::fprintf(stderr, "grid-bench: %s\n", r.error().ToString().c_str());
    return 1;
  }
  const auto& h = r->e2e_latency_ns;
  const double append_rate = r->appended / std::max(r->append_seconds, 1e-9);
  const double consume_rate = r->consumed / std::max(r->consume_seconds, 1e-9);
  if (o.json) {
    std::cout << nlohmann::json{{"target", r->target},
                                {"address", o.redis.empty() ? o.client.addresses.front() : o.redis},
                                {"connections", o.connections},
                                {"pipeline", o.pipeline},
                                {"batch", o.batch},
                                {"consumers", o.consumers},
                                {"value_size", o.value_size},
                                {"appended", r->appended},
                                {"append_per_sec", append_rate},
                                {"consumed", r->consumed},
                                {"consume_per_sec", consume_rate},
                                {"e2e_events", r->e2e_events},
                                {"e2e_latency_us",
                                 {{"p50", Micros(h.Percentile(0.50))},
                                  {"p99", Micros(h.Percentile(0.99))},
                                  {"max", Micros(h.max())}}},
                                {"errors", r->errors},
                                {"first_error", r->first_error}}
                     .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << std::endl;
  } else {
    fmt::print(
        "{} stream, {} producer(s) x pipeline {} x batch {}, {} consumer(s), {}-byte "
        "payloads\n",
        r->target, o.connections, o.pipeline, o.batch, o.consumers, o.value_size);
    fmt::print("append      {:.0f} events/s ({} in {:.2f} s)\n", append_rate, r->appended,
               r->append_seconds);
    fmt::print("consume     {:.0f} events/s ({} read and committed)\n", consume_rate, r->consumed);
    fmt::print("end to end  p50 {:.1f} us  p99 {:.1f} us  max {:.1f} us ({} events)\n",
               Micros(h.Percentile(0.50)), Micros(h.Percentile(0.99)), Micros(h.max()),
               r->e2e_events);
    fmt::print("errors      {}{}\n", r->errors,
               r->first_error.empty() ? "" : " (first: " + r->first_error + ")");
  }
  return r->errors == 0 ? 0 : 1;
}

int Main(int argc, const char* const argv[]) {
  auto options = ParseBenchOptions(argc, argv);
  if (!options) {
    std::fprintf(stderr, "grid-bench: %s\n", options.error().message().c_str());
    return 2;
  }
  if (options->help) {
    std::cout << BenchHelpText();
    return 0;
  }
  if (!options->stream.empty()) return StreamMain(*options);
  auto report = !options->redis.empty()  ? RunRespBench(*options)
                : options->topic.empty() ? RunBench(*options)
                                         : RunTopicBench(*options);
  if (!report) {
    std::fprintf(stderr, "grid-bench: %s\n", report.error().ToString().c_str());
    return 1;
  }
  if (options->json && !options->topic.empty()) {
    const auto& h = report->latency_ns;
    std::cout << nlohmann::json{{"topic", options->topic},
                                {"reliable", options->reliable},
                                {"publishers", options->connections},
                                {"message_size", options->value_size},
                                {"seconds", report->seconds},
                                {"published", report->published},
                                {"received", report->ops},
                                {"published_per_sec", report->published / report->seconds},
                                {"received_per_sec", report->ops / report->seconds},
                                {"latency_us",
                                 {{"p50", Micros(h.Percentile(0.50))},
                                  {"p99", Micros(h.Percentile(0.99))},
                                  {"max", Micros(h.max())}}},
                                {"errors", report->errors}}
                     .dump()
              << std::endl;
  } else if (options->json) {
    std::cout << ReportJson(*options, *report)
                     .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << std::endl;
  } else if (!options->topic.empty()) {
    PrintTopicText(*options, *report);
  } else {
    PrintText(*options, *report);
  }
  return 0;
}

}  // namespace
}  // namespace tessera::tools::bench

int main(int argc, char** argv) {
  try {
    return tessera::tools::bench::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "grid-bench: internal error: %s\n", e.what());
    return 1;
  }
}
