// map_bench: figures for the map module.
//
//   map_bench memory [entries]   bytes per entry (RSS delta / entries) of RecordStore vs a
//                                naive std::unordered_map<std::string, Entry>, each measured
//                                in a fresh child process; 16-byte keys, 100-byte values, TTL.
//   map_bench sweep [entries] [rounds]
//                                how fast the background sweeper reclaims entries that all
//                                expire at once (1 s TTL, default MapServiceOptions, 2 shards):
//                                time from the TTL deadline until every entry is reclaimed;
//                                median, min and max over the rounds.
//   map_bench churn [entries] [rounds]
//                                first-in first-out churn at the table's highest load (a
//                                stream's pattern): the table is filled to 0.8 of its slots,
//                                then each step erases the oldest key and writes a new one:
//                                ns per step, and per lookup of a present key; median over
//                                the rounds.
//   map_bench compaction [keys] [rounds] [compact_bytes] [segment_bytes]
//                                a log under a steady overwrite load: 2 shards, a periodic
//                                map of `keys` 16-byte keys with 100-byte values overwritten
//                                `rounds` times in batches of 100, compaction at
//                                compact_bytes with segments of segment_bytes (defaults:
//                                MapServiceOptions'): live bytes, bytes
//                                logged, the log's disk use at the end and at its worst (per
//                                live entry and over the live bytes), then the restart's replay
//                                (entries/s, MB/s of log). The log goes under $TMPDIR or /tmp.
// With no arguments runs the first three with the defaults (1M entries, 3 rounds).
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "tessera/map/entry_processor.h"
#include "tessera/map/map_service.h"
#include "tessera/map/record_store.h"

namespace {
using namespace tessera;  // NOLINT: a small benchmark program

std::int64_t RssBytes() {
  std::ifstream statm("/proc/self/statm");
  std::int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

std::string Key(std::int64_t i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "key-%012lld", static_cast<long long>(i));
  return std::string(buf, 16);
}

// What a straightforward implementation would store per entry.
struct NaiveEntry {
  std::string value;
  std::int64_t expire_at_ms, last_access_ms, creation_ms, last_update_ms, ttl_ms, max_idle_ms;
  std::int64_t hits, version;
};

double MeasureRecordStore(std::int64_t n, double* estimate) {
  const std::string value(100, 'v');
  const std::int64_t before = RssBytes();
  map::RecordStore store;
  for (std::int64_t i = 0; i < n; ++i) {
    auto written = store.Write(Key(i), value, 1000 + i);
    store.SetTtl(*written.record, 60'000, 1000 + i);
  }
  *estimate = static_cast<double>(store.memory_bytes()) / static_cast<double>(n);
  return static_cast<double>(RssBytes() - before) / static_cast<double>(n);
}

double MeasureNaive(std::int64_t n) {
  const std::string value(100, 'v');
  const std::int64_t before = RssBytes();
  std::unordered_map<std::string, NaiveEntry> table;
  for (std::int64_t i = 0; i < n; ++i) {
    table.emplace(Key(i),
                  NaiveEntry{value, 61'000 + i, 1000 + i, 1000 + i, 1000 + i, 60'000, 0, 0, 1});
  }
  return static_cast<double>(RssBytes() - before) / static_cast<double>(n);
}

// Runs fn in a child process so each figure starts from a clean heap.
template <typename Fn>
void InChild(Fn fn) {
  std::fflush(stdout);  // or the child would print the parent's buffered lines again
  const pid_t pid = fork();
  if (pid == 0) {
    fn();
    std::fflush(stdout);
    std::_Exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
}

void MemoryBench(std::int64_t n) {
  std::printf("memory: %lld entries, 16-byte keys, 100-byte values, TTL set\n",
              static_cast<long long>(n));
  InChild([n] {
    double estimate = 0;
    const double rss = MeasureRecordStore(n, &estimate);
    std::printf("  RecordStore                 %6.1f B/entry RSS delta (%6.1f estimated)\n", rss,
                estimate);
  });
  InChild([n] {
    std::printf("  unordered_map<string,Entry> %6.1f B/entry RSS delta\n", MeasureNaive(n));
  });
}

map::MapResult Run(map::MapService& service, map::MapRequest request) {
  auto result = service.ExecuteSync(std::move(request));
  if (!result) {
    std::fprintf(stderr, "request failed: %s\n", result.error().ToString().c_str());
    std::exit(1);
  }
  return std::move(*result);
}

// Inserts n entries with a 1 s TTL while the clock stands still, moves the clock past the
// deadline, and measures the real time until the sweeper has reclaimed all of them (no reads:
// only the background sweep removes entries). Polls kStats every 20 ms, which itself scans
// the stores, so the figure is slightly pessimistic.
double SweepRound(std::int64_t n) {
  runtime::ShardSet shards(2);
  shards.Start();
  base::ManualClock clock;
  map::EntryProcessorRegistry processors;
  auto log =
      std::make_shared<spdlog::logger>("map", std::make_shared<spdlog::sinks::null_sink_mt>());
  map::MapService service(shards, partition::Partitioner(), clock, processors, log);
  service.Start();
  const std::string value(100, 'v');
  const std::int64_t batch = 10'000;
  for (std::int64_t start = 0; start < n; start += batch) {
    map::MapRequest rq;
    rq.op = map::MapOp::kPutAll;
    rq.map_name = "sweep";
    rq.options.ttl_ms = 1000;
    for (std::int64_t i = start; i < std::min(n, start + batch); ++i) {
      rq.entries.emplace_back(Key(i), value);
    }
    Run(service, std::move(rq));
  }
  map::MapRequest stats_rq;
  stats_rq.op = map::MapOp::kStats;
  stats_rq.map_name = "sweep";
  const auto start = std::chrono::steady_clock::now();
  clock.Advance(1000);  // every entry is now expired
  double seconds = -1;
  for (int poll = 0; poll < 30'000; ++poll) {  // at most ~10 minutes
    if (Run(service, stats_rq).stats.expirations >= n) {
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  service.Stop();
  shards.Stop();
  return seconds;
}

void SweepBench(std::int64_t n, int rounds) {
  const tessera::map::MapServiceOptions defaults;
  std::printf(
      "sweep: %lld entries, 1 s TTL, default options (%lld ms tick, %lld/tick/shard),"
      " 2 shards\n",
      static_cast<long long>(n), static_cast<long long>(defaults.sweep_interval_ms),
      static_cast<long long>(defaults.sweep_budget_per_tick));
  std::vector<double> times;
  for (int r = 0; r < rounds; ++r) {
    times.push_back(SweepRound(n));
    std::printf("  round %d: all reclaimed %.3f s after the deadline (%.0f entries/s)\n", r + 1,
                times.back(), static_cast<double>(n) / std::max(times.back(), 0.001));
  }
  std::sort(times.begin(), times.end());
  std::printf("  median %.3f s, min %.3f s, max %.3f s\n", times[times.size() / 2], times.front(),
              times.back());
}
}  // namespace

void ChurnBench(std::int64_t n, int rounds) {
  // The largest count that keeps a power-of-two table at (just under) 0.8 load.
  std::int64_t slots = 16;
  while (slots * 8 / 10 < n) slots *= 2;
  const std::int64_t live = slots * 8 / 10 - 1;
  const std::int64_t steps = live / 2;
  const std::string value(100, 'v');
  std::vector<double> step_ns, find_ns;
  using SteadyClock = std::chrono::steady_clock;
  auto ns_per = [](SteadyClock::time_point from, std::int64_t count) {
    return std::chrono::duration<double, std::nano>(SteadyClock::now() - from).count() /
           static_cast<double>(count);
  };
  for (int r = 0; r < rounds; ++r) {
    map::RecordStore store;
    for (std::int64_t i = 0; i < live; ++i) store.Write(Key(i), value, 1000);
    std::vector<std::string> keys;
    keys.reserve(steps);
    for (std::int64_t i = 0; i < steps; ++i) keys.push_back(Key(live + i));
    std::vector<std::string> old_keys;
    old_keys.reserve(steps);
    for (std::int64_t i = 0; i < steps; ++i) old_keys.push_back(Key(i));
    auto start = SteadyClock::now();
    for (std::int64_t i = 0; i < steps; ++i) {
      store.Erase(old_keys[i]);
      store.Write(keys[i], value, 1001);
    }
    step_ns.push_back(ns_per(start, steps));
    std::int64_t found = 0;
    start = SteadyClock::now();
    for (const auto& k : keys) found += store.Find(k) != nullptr ? 1 : 0;
    find_ns.push_back(ns_per(start, steps));
    if (found != steps || static_cast<std::int64_t>(store.capacity()) != slots) {
      std::fprintf(stderr, "churn: %lld of %lld keys found, %zu slots: the store is broken\n",
                   static_cast<long long>(found), static_cast<long long>(steps), store.capacity());
      std::exit(1);
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf(
      "churn: %lld entries in %lld slots, %lld steps of erasing the oldest and writing "
      "a new one\n",
      static_cast<long long>(live), static_cast<long long>(slots), static_cast<long long>(steps));
  std::printf(
      "  %.0f ns per step (erase + write), then %.0f ns per find of a new key (median of "
      "%d rounds)\n",
      median(step_ns), median(find_ns), rounds);
}

namespace {

// Two shards and a map service on them, "overwritten" configured as `config`; stopped when it
// goes.
struct LoggedBenchService {
  LoggedBenchService(const map::MapServiceOptions& options, const map::MapConfig& config,
                     std::shared_ptr<spdlog::logger> log)
      : shards(2), service(shards, partition::Partitioner(), clock, processors, log, options) {
    shards.Start();
    service.Start();
    service.Configure("overwritten", config);
  }
  ~LoggedBenchService() {
    service.Stop();
    shards.Stop();
  }
  runtime::ShardSet shards;
  base::SteadyClock clock;
  map::EntryProcessorRegistry processors;
  map::MapService service;
};

void CompactionBench(std::int64_t keys, int rounds, std::uint64_t compact_bytes,
                     std::uint64_t segment_bytes) {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir_template = std::string(tmp ? tmp : "/tmp") + "/map_bench_log.XXXXXX";
  if (mkdtemp(dir_template.data()) == nullptr) {
    std::perror("map_bench compaction: mkdtemp");
    std::exit(1);
  }
  const std::string dir = dir_template;
  map::MapServiceOptions options;
  if (compact_bytes > 0) options.log_compact_bytes = compact_bytes;
  if (segment_bytes > 0) options.log_segment_bytes = segment_bytes;
  map::MapConfig periodic;
  periodic.persistence = map::Persistence::kPeriodic;
  auto log =
      std::make_shared<spdlog::logger>("map", std::make_shared<spdlog::sinks::null_sink_mt>());
  const std::string value(100, 'v');
  const double live = static_cast<double>(keys) * (16 + 100);
  std::uint64_t worst = 0, end = 0, logged = 0, compactions = 0;
  {
    LoggedBenchService bench(options, periodic, log);
    map::MapService& service = bench.service;
    if (auto opened = service.OpenLog(dir); !opened) {
      std::fprintf(stderr, "map_bench compaction: %s\n", opened.error().message().c_str());
      std::exit(1);
    }
    for (int r = 0; r < rounds; ++r) {
      for (std::int64_t start = 0; start < keys; start += 100) {
        map::MapRequest rq;
        rq.op = map::MapOp::kPutAll;
        rq.map_name = "overwritten";
        for (std::int64_t i = start; i < std::min(keys, start + 100); ++i) {
          rq.entries.emplace_back(Key(i), value);
        }
        Run(service, std::move(rq));
        worst = std::max(worst, service.GetLogStats().disk_bytes);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the last round's sync
    const auto stats = service.GetLogStats();
    end = stats.disk_bytes;
    logged = stats.bytes;
    compactions = stats.compactions;
  }
  std::printf(
      "compaction: %lld keys (16 + 100 bytes: %.1f MB live) overwritten %d times, 2 shards, "
      "log_compact_bytes %llu, log_segment_bytes %llu\n",
      static_cast<long long>(keys), live / 1e6, rounds,
      static_cast<unsigned long long>(options.log_compact_bytes),
      static_cast<unsigned long long>(options.log_segment_bytes));
  std::printf("  logged %.1f MB; %llu compaction rounds (over both shards)\n",
              static_cast<double>(logged) / 1e6, static_cast<unsigned long long>(compactions));
  std::printf("  disk at the end %.1f MB: %.0f bytes per live entry, %.2f x live\n",
              static_cast<double>(end) / 1e6, static_cast<double>(end) / static_cast<double>(keys),
              static_cast<double>(end) / live);
  std::printf("  disk at its worst %.1f MB: %.0f bytes per live entry, %.2f x live\n",
              static_cast<double>(worst) / 1e6,
              static_cast<double>(worst) / static_cast<double>(keys),
              static_cast<double>(worst) / live);
  {
    LoggedBenchService bench(options, periodic, log);
    map::MapService& service = bench.service;
    const auto start = std::chrono::steady_clock::now();
    auto replayed = service.OpenLog(dir);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!replayed || replayed->entries != static_cast<std::uint64_t>(keys)) {
      std::fprintf(stderr, "map_bench compaction: the restart found %llu entries of %lld\n",
                   replayed ? static_cast<unsigned long long>(replayed->entries) : 0ull,
                   static_cast<long long>(keys));
      std::exit(1);
    }
    std::printf(
        "  restart: replayed %llu records (%.1f MB) in %.3f s: %.0f entries/s, %.1f MB/s of log\n",
        static_cast<unsigned long long>(replayed->records),
        static_cast<double>(replayed->bytes) / 1e6, seconds,
        static_cast<double>(keys) / std::max(seconds, 1e-6),
        static_cast<double>(replayed->bytes) / 1e6 / std::max(seconds, 1e-6));
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "all";
  const std::int64_t n = argc > 2 ? std::atoll(argv[2]) : 1'000'000;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 3;
  if (mode == "memory" || mode == "all") MemoryBench(n);
  if (mode == "sweep" || mode == "all") SweepBench(n, std::max(rounds, 1));
  if (mode == "churn" || mode == "all") ChurnBench(n, std::max(rounds, 1));
  if (mode == "compaction") {
    CompactionBench(argc > 2 ? n : 100'000, argc > 3 ? std::max(rounds, 1) : 20,
                    argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 0,
                    argc > 5 ? std::strtoull(argv[5], nullptr, 10) : 0);
  }
  return 0;
}
