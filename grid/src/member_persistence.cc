// cluster.state and the recovery report (member_persistence.h).
#include "member_persistence.h"

#include <fmt/format.h>

#include <charconv>
#include <sstream>

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

}  // namespace tessera::grid
