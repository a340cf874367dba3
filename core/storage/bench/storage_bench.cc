// storage_bench: figures for the storage module, on the disk of the directory given.
//
//   storage_bench fsync DIR [count]   the disk alone: write 4 KiB at the end of a file and
//                                     fdatasync, `count` times (default 1000); p50, p99 and
//                                     max latency in microseconds.
//   storage_bench log DIR [seconds]   one ShardLog (one shard), 100-byte records. "always":
//                                     rounds of B appends then a wait until the last is durable
//                                     (B callers whose writes arrive together), for B = 1, 16,
//                                     256: records/s, records per fdatasync, and the round's
//                                     latency p50/p99 (what an `always` write waits). "periodic"
//                                     (sync every 1000 ms, nobody waits): records/s appended and
//                                     written.
// With no mode runs both in a temporary directory under /tmp (say where: /tmp may be tmpfs).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "tessera/storage/shard_log.h"

namespace {

using Clock = std::chrono::steady_clock;
using tessera::storage::ShardLog;
using tessera::storage::ShardLogOptions;

double Micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

int Fsync(const std::filesystem::path& dir, int count) {
  const auto file = dir / "fsync-probe";
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::perror("open");
    return 1;
  }
  const std::string block(4096, 'b');
  std::vector<double> latencies;
  for (int i = 0; i < count; ++i) {
    const auto start = Clock::now();
    if (::write(fd, block.data(), block.size()) != static_cast<ssize_t>(block.size()) ||
        ::fdatasync(fd) != 0) {
      std::perror("write/fdatasync");
      return 1;
    }
    latencies.push_back(Micros(Clock::now() - start));
  }
  ::close(fd);
  std::filesystem::remove(file);
  std::printf("fsync  %s: %d x (4 KiB write + fdatasync): p50 %.0f us, p99 %.0f us, max %.0f us\n",
              dir.c_str(), count, Percentile(latencies, 0.5), Percentile(latencies, 0.99),
              Percentile(latencies, 1.0));
  return 0;
}

int Log(const std::filesystem::path& dir, double seconds) {
  const std::string record(100, 'r');
  for (int batch : {1, 16, 256}) {
    const auto folder = dir / ("always-" + std::to_string(batch));
    std::filesystem::remove_all(folder);
    auto log = ShardLog::Open(folder, ShardLogOptions{}, nullptr);
    if (!log) {
      std::fprintf(stderr, "%s\n", log.error().message().c_str());
      return 1;
    }
    std::vector<double> rounds;
    std::uint64_t records = 0;
    const auto start = Clock::now();
    while (Micros(Clock::now() - start) < seconds * 1e6) {
      const auto round_start = Clock::now();
      std::uint64_t last = 0;
      for (int i = 0; i < batch; ++i) last = *(*log)->Append(record);
      auto durable = std::make_shared<std::promise<bool>>();
      auto done = durable->get_future();
      (*log)->WhenDurable(
          last, [durable](tessera::base::Result<void> r) { durable->set_value(r.has_value()); });
      if (!done.get()) {
        std::fprintf(stderr, "the log failed\n");
        return 1;
      }
      rounds.push_back(Micros(Clock::now() - round_start));
      records += static_cast<std::uint64_t>(batch);
    }
    const double elapsed = Micros(Clock::now() - start) / 1e6;
    const auto stats = (*log)->stats();
    std::printf(
        "always   %3d together: %9.0f records/s, %6.1f records per fdatasync, round p50 %.0f us, "
        "p99 %.0f us\n",
        batch, static_cast<double>(records) / elapsed,
        static_cast<double>(records) / static_cast<double>(std::max<std::uint64_t>(1, stats.syncs)),
        Percentile(rounds, 0.5), Percentile(rounds, 0.99));
    log->reset();
    std::filesystem::remove_all(folder);
  }
  const auto folder = dir / "periodic";
  std::filesystem::remove_all(folder);
  {
    auto log = ShardLog::Open(folder, ShardLogOptions{}, nullptr);
    if (!log) return 1;
    std::uint64_t records = 0;
    const auto start = Clock::now();
    while (Micros(Clock::now() - start) < seconds * 1e6) {
      for (int i = 0; i < 1000; ++i) (void)(*log)->Append(record);
      records += 1000;
    }
    const double elapsed = Micros(Clock::now() - start) / 1e6;
    const auto stats = (*log)->stats();
    std::printf("periodic (1000 ms): %9.0f records/s appended, %llu batches, %llu fdatasyncs\n",
                static_cast<double>(records) / elapsed,
                static_cast<unsigned long long>(stats.batches),
                static_cast<unsigned long long>(stats.syncs));
  }
  std::filesystem::remove_all(folder);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "fsync" && argc > 2) return Fsync(argv[2], argc > 3 ? std::atoi(argv[3]) : 1000);
  if (mode == "log" && argc > 2) return Log(argv[2], argc > 3 ? std::atof(argv[3]) : 3.0);
  if (!mode.empty()) {
    std::fprintf(stderr, "usage: storage_bench [fsync DIR [count] | log DIR [seconds]]\n");
    return 2;
  }
  std::string pattern = "/tmp/storage-bench-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) return 1;
  int rc = Fsync(pattern, 1000);
  if (rc == 0) rc = Log(pattern, 3.0);
  std::filesystem::remove_all(pattern);
  return rc;
}
