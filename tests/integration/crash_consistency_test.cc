// Crash consistency beyond SIGKILL: a power cut loses what was written but not synced. A
// grid-node runs with sync_trace.c preloaded, which records what each of its fsyncs and
// fdatasyncs covered; after a SIGKILL mid-load the test cuts its map log back to that (each
// file to the size its last sync covered, each folder to the entries its last sync saw) and
// starts it again: `always` must have lost no acknowledged write, and `periodic` shows the cut
// does drop what was only written (the test would see a log that acknowledges too early).
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"

namespace tessera::integration {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// What the trace says each file and folder under the traced folder had when last synced.
struct SyncTrace {
  std::map<std::string, std::uintmax_t> file_size;           // path -> bytes
  std::map<std::string, std::set<std::string>> dir_entries;  // path -> names
};

SyncTrace ReadTrace(const fs::path& file) {
  SyncTrace out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    const auto tab = line.find('\t');
    if (tab == std::string::npos) continue;
    if (line.rfind("file ", 0) == 0) {
      out.file_size[line.substr(tab + 1)] = std::stoull(line.substr(5, tab - 5));
    } else if (line.rfind("dir ", 0) == 0) {
      std::set<std::string> names;
      std::istringstream list(line.substr(tab + 1));
      std::string name;
      while (std::getline(list, name, '/')) {
        if (!name.empty()) names.insert(name);
      }
      out.dir_entries[line.substr(4, tab - 4)] = std::move(names);
    }
  }
  return out;
}

// The power cut, applied to the folder `root`: entries their folder's last sync did not see
// are removed, files are cut to what their last sync covered (0 when never synced). Returns the
// bytes dropped.
std::uintmax_t CutToSynced(const fs::path& root, const SyncTrace& trace) {
  std::uintmax_t dropped = 0;
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  for (const auto& file : files) {
    const auto size = fs::file_size(file);
    const auto dir = trace.dir_entries.find(file.parent_path().string());
    if (dir != trace.dir_entries.end() && !dir->second.contains(file.filename().string())) {
      dropped += size;
      fs::remove(file);
      continue;
    }
    const auto synced = trace.file_size.find(file.string());
    const std::uintmax_t keep = synced == trace.file_size.end() ? 0 : synced->second;
    if (keep < size) {
      dropped += size - keep;
      fs::resize_file(file, keep);
    }
  }
  return dropped;
}

// Sets environment variables for the processes started while it lives.
class ScopedEnv {
 public:
  ScopedEnv(std::vector<std::pair<std::string, std::string>> vars) : vars_(std::move(vars)) {
    for (const auto& [name, value] : vars_) ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : vars_) ::unsetenv(name.c_str());
  }

 private:
  std::vector<std::pair<std::string, std::string>> vars_;
};

struct PowerCutRun {
  std::vector<std::string> acknowledged;
  std::uintmax_t dropped_bytes = 0;
  int lost = 0;  // acknowledged writes missing after the restart
};

// Starts a grid-node on `dir` under the trace, writes to `map` from 4 clients for about
// 1.5 s, SIGKILLs it mid-load, cuts its map log to what was synced, restarts it and counts the
// acknowledged writes that are gone.
PowerCutRun RunPowerCut(const fs::path& dir, const std::string& map,
                        const std::vector<std::string>& flags) {
  const fs::path trace = dir.string() + ".trace";
  PowerCutRun run;
  std::unique_ptr<NodeProcess> node;
  {
    // The preloaded library comes before the sanitizer runtime: tell ASan that is intended.
    const char* asan = ::getenv("ASAN_OPTIONS");
    ScopedEnv env({{"LD_PRELOAD", SYNC_TRACE_PATH},
                   {"ASAN_OPTIONS", std::string(asan ? asan : "") + ":verify_asan_link_order=0"},
                   {"TESSERA_SYNC_TRACE_DIR", dir.string()},
                   {"TESSERA_SYNC_TRACE_FILE", trace.string()}});
    std::vector<std::string> args = {"--data-dir", dir.string()};
    args.insert(args.end(), flags.begin(), flags.end());
    node = NodeProcess::StartOrFail(args);
  }
  std::mutex mu;
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      auto client = grid::Client::Connect(ClientOptionsFor(*node, 2000ms));
      if (!client) return;
      for (int i = 0; i < 100'000 && !stop.load(); ++i) {
        const std::string key = "w" + std::to_string(w) + "-" + std::to_string(i);
        if ((*client)->GetMap(map)->Set(key, "v" + key)) {
          std::lock_guard lock(mu);
          run.acknowledged.push_back(key);
        }
      }
      (*client)->Shutdown();
    });
  }
  std::this_thread::sleep_for(1500ms);
  node->Stop(SIGKILL);  // while the writers still write
  stop = true;
  for (auto& t : writers) t.join();
  REQUIRE(fs::exists(trace));
  run.dropped_bytes = CutToSynced(dir / "maps", ReadTrace(trace));

  std::vector<std::string> args = {"--data-dir", dir.string()};
  args.insert(args.end(), flags.begin(), flags.end());
  auto again = NodeProcess::StartOrFail(args);
  auto client = ConnectOrFail(*again);
  for (const auto& key : run.acknowledged) {
    auto got = client->GetMap(map)->Get(key);
    REQUIRE(got);
    run.lost += *got == std::optional<std::string>("v" + key) ? 0 : 1;
  }
  client->Shutdown();
  CHECK(again->Stop() == 0);
  return run;
}

}  // namespace

TEST_CASE(
    "grid-node --data-dir: a power cut that drops every write not yet synced loses no "
    "acknowledged write of an always map (and does drop a periodic map's unsynced ones)",
    "[tools][node][recovery]") {
  const fs::path base = fs::temp_directory_path() / ("power-cut-" + std::to_string(::getpid()));
  fs::remove_all(base);
  fs::create_directories(base);
  TempFile config(
      "maps:\n"
      "  orders: {persistence: always}\n"
      "  events: {persistence: periodic}\n");

  const auto always = RunPowerCut(base / "always", "orders", {"--config", config.path()});
  WARN("always: " << always.acknowledged.size() << " acknowledged, " << always.dropped_bytes
                  << " unsynced bytes dropped, " << always.lost << " lost");
  REQUIRE(always.acknowledged.size() > 100);
  CHECK(always.lost == 0);

  // periodic with a sync every 10 s: no periodic sync during the run, so every acknowledged
  // write was only written: the cut must take them (else it simulates nothing).
  const auto periodic = RunPowerCut(base / "periodic", "events",
                                    {"--config", config.path(), "--log-sync-ms", "10000"});
  WARN("periodic: " << periodic.acknowledged.size() << " acknowledged, " << periodic.dropped_bytes
                    << " unsynced bytes dropped, " << periodic.lost << " lost");
  REQUIRE(periodic.acknowledged.size() > 100);
  CHECK(periodic.dropped_bytes > 0);
  CHECK(periodic.lost > 0);
  fs::remove_all(base);
}

}  // namespace tessera::integration
