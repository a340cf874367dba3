#include "cluster_commands.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <chrono>
#include <unordered_map>

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
  std::unordered_map<std::string, std::string> address;
  for (const auto& m : view.members.members) address[m.uuid] = m.address;
  auto name = [&](const std::string& uuid) {
    auto it = address.find(uuid);
    return it == address.end() ? uuid : it->second;
  };
  const auto& table = view.partitions;
  std::string text =
      fmt::format("partition table version {}: {} partitions, {} backup(s) configured\n",
                  table.version, table.partition_count(), table.backup_count);
  text += fmt::format("  {:<21} {:>6} {:>8}\n", "MEMBER", "OWNED", "BACKUPS");
  json summary = json::array();
  for (const auto& c : partition::CountReplicas(table, view.members.Uuids())) {
    text += fmt::format("  {:<21} {:>6} {:>8}\n", name(c.member), c.owned, c.backups);
    summary.push_back({{"address", name(c.member)}, {"owned", c.owned}, {"backups", c.backups}});
  }
  text += fmt::format("  {:>9}  {:<21} {}\n", "PARTITION", "OWNER", "BACKUPS");
  json partitions = json::array();
  for (std::uint32_t p = 0; p < table.partition_count(); ++p) {
    const auto& replicas = table.replicas[p];
    std::string backups;
    json row = {{"partition", p}, {"owner", replicas.empty() ? "" : name(replicas[0])}};
    json backup_list = json::array();
    for (std::size_t i = 1; i < replicas.size(); ++i) {
      backups += (i > 1 ? "," : "") + name(replicas[i]);
      backup_list.push_back(name(replicas[i]));
    }
    row["backups"] = std::move(backup_list);
    partitions.push_back(std::move(row));
    text += fmt::format("  {:>9}  {:<21} {}\n", p, replicas.empty() ? "-" : name(replicas[0]),
                        backups.empty() ? "-" : backups);
  }
  return {text,
          {{"version", table.version},
           {"backup_count", table.backup_count},
           {"summary", std::move(summary)},
           {"partitions", std::move(partitions)}}};
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
