#include "saga_commands.h"

#include <fmt/format.h>

#include <map>

#include "stream_commands.h"
#include "tessera/grid/client.h"
#include "tessera/partition/partitioner.h"
#include "tessera/saga/dead_letter.h"
#include "tessera/saga/event.h"
#include "tessera/saga/outbox.h"

namespace tessera::tools::cli {
namespace {

using base::Result;
using nlohmann::json;

Result<CommandOutput> OutboxStatus(grid::Client& client) {
  auto view = client.FetchClusterView();
  if (!view) return std::unexpected(view.error());
  const partition::Partitioner partitioner(view->partitions.partition_count());
  auto entries = client.GetMap(saga::kOutboxMap)->EntrySet();
  if (!entries) return std::unexpected(entries.error());
  struct Pending {
    std::int64_t events = 0;
    std::int64_t oldest_ms = 0;  // the oldest event's time
  };
  std::map<std::string, std::map<std::uint32_t, Pending>> by_service;
  std::int64_t unreadable = 0;
  for (const auto& [key, bytes] : *entries) {
    auto event = saga::DecodeEvent(bytes);
    if (!event) {
      ++unreadable;
      continue;
    }
    Pending& p = by_service[event->source][partitioner.PartitionOf(key)];
    ++p.events;
    if (p.oldest_ms == 0 || event->time_ms < p.oldest_ms) p.oldest_ms = event->time_ms;
  }
  std::string text = fmt::format("{:<20} {:>9} {:>9} {:>14}\n", "service", "partition", "pending",
                                 "oldest age ms");
  json services = json::array();
  for (const auto& [service, partitions] : by_service) {
    std::int64_t total = 0, oldest = 0;
    json rows = json::array();
    for (const auto& [partition, p] : partitions) {
      total += p.events;
      if (oldest == 0 || p.oldest_ms < oldest) oldest = p.oldest_ms;
      text += fmt::format("{:<20} {:>9} {:>9} {:>14}\n", service, partition, p.events,
                          AgeMs(p.oldest_ms));
      rows.push_back(
          {{"partition", partition}, {"pending", p.events}, {"oldest_age_ms", AgeMs(p.oldest_ms)}});
    }
    services.push_back({{"service", service},
                        {"pending", total},
                        {"oldest_age_ms", AgeMs(oldest)},
                        {"partitions", std::move(rows)}});
  }
  if (by_service.empty()) text += "(nothing pending: every staged event was published)\n";
  if (unreadable > 0) {
    text += fmt::format("{} entries of {} are not events (written by something else)\n", unreadable,
                        saga::kOutboxMap);
  }
  return CommandOutput{text,
                       {{"address", client.connected_address()},
                        {"pending", static_cast<std::int64_t>(entries->size()) - unreadable},
                        {"unreadable", unreadable},
                        {"services", std::move(services)}}};
}

Result<CommandOutput> Consumers(grid::Client& client) {
  auto names = StreamNames(client);
  if (!names) return std::unexpected(names.error());
  std::string text =
      fmt::format("{:<20} {:<20} {:>10} {:>16} {:>7} {:>12}  {}\n", "group", "stream", "lag",
                  "oldest uncomm ms", "leases", "dead letters", "consumers");
  json groups = json::array();
  std::map<std::string, std::int64_t> dead_letters;  // per group, read once
  for (const auto& name : *names) {
    auto info = client.GetStream(name)->Info();
    if (!info) return std::unexpected(info.error());
    for (auto& row : GroupRows(*info)) {
      const auto& g = row.position;
      auto known = dead_letters.find(g.group);
      if (known == dead_letters.end()) {
        auto size = client.GetMap(saga::DeadLetterQueue::MapName(g.group))->Size();
        if (!size) return std::unexpected(size.error());
        known = dead_letters.emplace(g.group, *size).first;
      }
      text +=
          fmt::format("{:<20} {:<20} {:>10} {:>16} {:>7} {:>12}  {}\n", g.group, name, g.lag,
                      AgeMs(g.oldest_uncommitted_ms), row.leases, known->second, HoldersText(row));
      groups.push_back({{"group", g.group},
                        {"stream", name},
                        {"lag", g.lag},
                        {"oldest_uncommitted_age_ms", AgeMs(g.oldest_uncommitted_ms)},
                        {"leases", row.leases},
                        {"consumers", row.holders},
                        {"dead_letters", known->second}});
    }
  }
  if (groups.empty()) text += "(no consumer groups)\n";
  return CommandOutput{text, {{"groups", std::move(groups)}}};
}

}  // namespace

Result<CommandOutput> RunSagaCommand(grid::Client& client, const CliCommand& command) {
  if (command.kind == CommandKind::kOutboxStatus) return OutboxStatus(client);
  return Consumers(client);
}

}  // namespace tessera::tools::cli
