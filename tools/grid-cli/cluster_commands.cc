#include "cluster_commands.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <chrono>

#include "tessera/admin/documents.h"

namespace tessera::tools::cli {
namespace {

using nlohmann::json;

std::string StartTime(base::Millis wall_ms) {
  auto t = std::chrono::system_clock::time_point(std::chrono::milliseconds(wall_ms));
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}Z", std::chrono::floor<std::chrono::seconds>(t));
}

std::string MasterAddress(const membership::ClusterView& view) {
  return view.members.master() ? view.members.master()->address : "";
}

CommandOutput Members(const membership::ClusterView& view) {
  json members = json::array();
  std::string text =
      fmt::format("{} member(s), list version {}, master {}\n", view.members.members.size(),
                  view.members.version, MasterAddress(view));
  for (const auto& m : view.members.members) {
    bool master = view.members.master() == &m;
    members.push_back({{"uuid", m.uuid},
                       {"address", m.address},
                       {"started", StartTime(m.start_wall_ms)},
                       {"master", master}});
    text += fmt::format("  {:<21} {}  started {}{}\n", m.address, m.uuid,
                        StartTime(m.start_wall_ms), master ? "  master" : "");
  }
  return {text,
          {{"list_version", view.members.version},
           {"master", MasterAddress(view)},
           {"members", std::move(members)}}};
}

CommandOutput Partitions(const membership::ClusterView& view) {
  json doc = admin::PartitionsJson(view);  // the same document as the REST API's
  const auto& table = view.partitions;
  std::string text =
      fmt::format("partition table version {}: {} partitions, {} backup(s) configured\n",
                  table.version, table.partition_count(), table.backup_count);
  text += fmt::format("  {:<21} {:>6} {:>8}\n", "MEMBER", "OWNED", "BACKUPS");
  for (const auto& c : doc["summary"]) {
    text += fmt::format("  {:<21} {:>6} {:>8}\n", c["address"].get<std::string>(),
                        c["owned"].get<std::uint32_t>(), c["backups"].get<std::uint32_t>());
  }
  text += fmt::format("  {:>9}  {:<21} {}\n", "PARTITION", "OWNER", "BACKUPS");
  for (const auto& row : doc["partitions"]) {
    std::string backups;
    for (const auto& b : row["backups"]) {
      backups += (backups.empty() ? "" : ",") + b.get<std::string>();
    }
    const auto owner = row["owner"].get<std::string>();
    text += fmt::format("  {:>9}  {:<21} {}\n", row["partition"].get<std::uint32_t>(),
                        owner.empty() ? "-" : owner, backups.empty() ? "-" : backups);
  }
  return {text, std::move(doc)};
}

CommandOutput Health(const membership::ClusterView& view, std::optional<std::int64_t> pending) {
  const bool replicas_assigned = view.AllReplicasPresent();
  const bool safe = replicas_assigned && pending && *pending == 0;
  const std::size_t replicas =
      std::min<std::size_t>(view.partitions.backup_count + 1, view.members.members.size());
  std::string why;
  if (!replicas_assigned) {
    why = "some partition lacks a replica";
  } else if (!pending) {
    why = "a member did not report its migrations";
  } else if (*pending > 0) {
    why = fmt::format("{} replica copies still migrating", *pending);
  } else {
    why = fmt::format("every partition has {} replica(s), all copied", replicas);
  }
  std::string text = fmt::format(
      "members: {}\nmaster: {}\nmember list version: {}\npartition table version: {}\n"
      "migrations in flight: {}\nsafe: {} ({})\n",
      view.members.members.size(), MasterAddress(view), view.members.version,
      view.partitions.version, pending ? std::to_string(*pending) : std::string("unknown"),
      safe ? "yes" : "no", why);
  return {text,
          {{"members", view.members.members.size()},
           {"master", MasterAddress(view)},
           {"list_version", view.members.version},
           {"table_version", view.partitions.version},
           {"migrations_in_flight", pending ? json(*pending) : json(nullptr)},
           {"safe", safe}}};
}

}  // namespace

CommandOutput RenderClusterView(CommandKind kind, const membership::ClusterView& view,
                                std::optional<std::int64_t> migrations_pending) {
  switch (kind) {
    case CommandKind::kMembers:
      return Members(view);
    case CommandKind::kPartitions:
      return Partitions(view);
    default:
      return Health(view, migrations_pending);
  }
}

}  // namespace tessera::tools::cli
