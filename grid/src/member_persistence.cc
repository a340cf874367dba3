// cluster.state and the recovery report (member_persistence.h).
#include "member_persistence.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <sstream>

#include "tessera/storage/log_segment.h"

namespace tessera::grid {
namespace {

constexpr std::string_view kMagic = "tessera-cluster-state 1";

}  // namespace

base::Result<void> PersistClusterState(const storage::DataDir& dir,
                                       const membership::ClusterView& view,
                                       const std::string& self_uuid) {
  if (view.partitions.version <= 0) return {};
  std::string text = std::string(kMagic) + "\n";
  text += fmt::format("table-version {}\n", view.partitions.version);
  for (const auto& m : view.members.members) {
    if (!m.member_id.empty()) text += "member " + m.member_id + "\n";
  }
  text += "owned ";
  bool first = true;
  for (std::uint32_t p = 0; p < view.partitions.partition_count(); ++p) {
    if (view.partitions.Owner(p) != self_uuid) continue;
    text += (first ? "" : ",") + std::to_string(p);
    first = false;
  }
  text += "\n";
  return dir.WriteChecked(kClusterStateFile, text);
}

base::Result<std::optional<membership::RecoveryReport>> LoadRecoveryReport(
    const storage::DataDir& dir, const map::LogRecovery& replayed, std::uint32_t partition_count) {
  auto text = dir.ReadChecked(kClusterStateFile);
  if (!text) return std::unexpected(text.error());
  if (!*text) return std::optional<membership::RecoveryReport>();
  const auto malformed = [&](const std::string& what) {
    return base::Fail(base::ErrorCode::kStorage,
                      fmt::format("{} is malformed ({}); move it aside to start this member "
                                  "without recovering its cluster's partition table",
                                  (dir.path() / std::string(kClusterStateFile)).string(), what));
  };
  membership::RecoveryReport report;
  report.member_id = dir.member_id();
  report.owned.assign(partition_count, false);
  std::istringstream lines(**text);
  std::string line;
  if (!std::getline(lines, line) || line != kMagic) return malformed("no header line");
  while (std::getline(lines, line)) {
    const auto space = line.find(' ');
    const std::string field = line.substr(0, space);
    const std::string value = space == std::string::npos ? "" : line.substr(space + 1);
    if (field == "table-version") {
      auto [end, ec] =
          std::from_chars(value.data(), value.data() + value.size(), report.table_version);
      if (ec != std::errc() || report.table_version <= 0) return malformed("bad table-version");
    } else if (field == "member") {
      report.table_members.push_back(value);
    } else if (field == "owned") {
      std::istringstream list(value);
      std::string item;
      while (std::getline(list, item, ',')) {
        std::uint32_t p = 0;
        auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), p);
        if (ec != std::errc() || p >= partition_count) return malformed("bad owned partition");
        report.owned[p] = true;
      }
    } else {
      return malformed("unknown line '" + line + "'");
    }
  }
  if (report.table_version == 0) return malformed("no table-version line");
  report.versions = replayed.versions;
  report.held = replayed.held;
  report.versions.resize(partition_count, 0);
  report.held.resize(partition_count, true);
  return std::optional<membership::RecoveryReport>(std::move(report));
}

nlohmann::json PersistenceJson(const std::string& data_dir, const std::string& member_id,
                               const map::MapService& maps,
                               const std::optional<map::LogRecovery>& replayed,
                               const std::string& recovery_status) {
  const map::MapService::LogStats log = maps.GetLogStats();
  nlohmann::json out = {{"data_dir", data_dir},
                        {"member_id", member_id},
                        {"logging", maps.logging()},
                        {"log",
                         {{"records", log.records},
                          {"bytes", log.bytes},
                          {"fsyncs", log.syncs},
                          {"disk_bytes", log.disk_bytes},
                          {"compactions", log.compactions},
                          {"segments_deleted", log.segments_dropped},
                          {"free_bytes", log.free_bytes},
                          {"space_low", log.space_low}}},
                        {"replayed", nullptr},
                        {"recovery", recovery_status}};
  if (replayed) {
    out["replayed"] = {{"records", replayed->records},
                       {"updates", replayed->updates},
                       {"bytes", replayed->bytes},
                       {"entries", replayed->entries},
                       {"took_ms", replayed->took_ms}};
  }
  return out;
}

base::Result<std::string> BackupDataDir(const storage::DataDir& dir, const map::MapService& maps,
                                        const std::string& target) {
  namespace fs = std::filesystem;
  const auto started = std::chrono::steady_clock::now();
  const fs::path root(target);
  if (target.empty() || !root.is_absolute()) {
    return base::Fail(base::ErrorCode::kBadRequest,
                      "the backup folder '" + target +
                          "' is not an absolute path (a folder on the member's machine)");
  }
  std::error_code ec;
  const fs::path data = fs::weakly_canonical(dir.path(), ec);
  const fs::path into = fs::weakly_canonical(root, ec);
  if (std::mismatch(data.begin(), data.end(), into.begin(), into.end()).first == data.end()) {
    return base::Fail(base::ErrorCode::kBadRequest,
                      "the backup folder " + target + " is inside the member's data directory " +
                          dir.path().string() + "; pick a folder outside it");
  }
  const fs::path final_dir = root / dir.member_id();
  const fs::path partial = root / (dir.member_id() + ".partial");
  if (fs::exists(final_dir, ec) || fs::exists(partial, ec)) {
    return base::Fail(base::ErrorCode::kConflict,
                      (fs::exists(final_dir, ec) ? final_dir : partial).string() +
                          " exists already; back up into a new folder");
  }
  fs::create_directories(partial, ec);
  if (ec) {
    return base::Fail(base::ErrorCode::kStorage,
                      "cannot create the backup folder " + partial.string() + ": " + ec.message());
  }
  auto copy = [&]() -> base::Result<std::uint64_t> {
    std::uint64_t bytes = 0;
    for (const std::string_view name : {storage::DataDir::kIdentityFile, kClusterStateFile}) {
      const fs::path from = dir.path() / name;
      std::error_code missing;
      const auto size = fs::file_size(from, missing);
      if (missing) continue;  // cluster.state: no table installed yet
      if (auto copied = storage::CopyFilePrefix(from, partial / name, size); !copied) {
        return std::unexpected(copied.error());
      }
      bytes += size;
    }
    auto log_bytes = maps.BackupLog((partial / "maps").string());
    if (!log_bytes) return std::unexpected(log_bytes.error());
    if (auto synced = storage::SyncDirectory(partial); !synced) {
      return std::unexpected(synced.error());
    }
    std::error_code renamed;
    fs::rename(partial, final_dir, renamed);
    if (renamed) {
      return base::Fail(base::ErrorCode::kStorage, "cannot rename " + partial.string() + " to " +
                                                       final_dir.string() + ": " +
                                                       renamed.message());
    }
    if (auto synced = storage::SyncDirectory(root); !synced) return std::unexpected(synced.error());
    return bytes + *log_bytes;
  };
  auto bytes = copy();
  if (!bytes) {
    fs::remove_all(partial, ec);  // this backup's own unfinished copy
    return std::unexpected(bytes.error());
  }
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  return nlohmann::json{{"member_id", dir.member_id()},
                        {"dir", final_dir.string()},
                        {"bytes", *bytes},
                        {"took_ms", took.count()}}
      .dump();
}

}  // namespace tessera::grid
