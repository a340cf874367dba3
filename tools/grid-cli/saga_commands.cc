#include "saga_commands.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "stream_commands.h"
#include "tessera/base/clock.h"
#include "tessera/grid/client.h"
#include "tessera/partition/partitioner.h"
#include "tessera/saga/dead_letter.h"
#include "tessera/saga/event.h"
#include "tessera/saga/outbox.h"
#include "tessera/saga/saga_store.h"
#include "value_format.h"

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

json SagaJson(const saga::SagaRecord& s, bool with_steps) {
  json j = {{"id", s.id},
            {"type", s.type},
            {"status", std::string(saga::SagaStatusName(s.status))},
            {"current_step", s.current_step},
            {"step", s.steps.empty() ? "" : s.steps[static_cast<std::size_t>(s.current_step)].name},
            {"age_ms", AgeMs(s.created_ms)},
            {"updated_age_ms", AgeMs(s.updated_ms)},
            {"deadline_ms", s.deadline_ms},
            {"failure_reason", s.failure_reason},
            {"version", s.version}};
  if (with_steps) {
    json steps = json::array();
    for (const auto& st : s.steps) {
      steps.push_back({{"name", st.name},
                       {"status", std::string(saga::StepStatusName(st.status))},
                       {"started_ms", st.started_ms},
                       {"finished_ms", st.finished_ms},
                       {"compensated_ms", st.compensated_ms},
                       {"result", st.result}});
    }
    j["steps"] = std::move(steps);
    j["data"] = ValueToJson(s.data.Encode());
  }
  return j;
}

Result<CommandOutput> SagaList(grid::Client& client, const CliCommand& command) {
  std::vector<map::Predicate> all;
  if (!command.status.empty()) {
    all.push_back(map::Predicate::Equal("status", record::Value(command.status)));
  }
  if (!command.event_type.empty()) {
    all.push_back(map::Predicate::Equal("type", record::Value(command.event_type)));
  }
  if (command.older_than_ms) {
    const std::int64_t now = base::SteadyClock().WallMs();
    all.push_back(
        map::Predicate::LessEqual("created_ms", record::Value(now - *command.older_than_ms)));
  }
  const map::Predicate filter = all.empty()       ? map::Predicate()
                                : all.size() == 1 ? all.front()
                                                  : map::Predicate::And(std::move(all));
  saga::SagaStore store(client);
  auto sagas = store.List(filter);
  if (!sagas) return std::unexpected(sagas.error());
  std::string text = fmt::format("{:<28} {:<16} {:<13} {:<14} {:>10}  {}\n", "id", "type", "status",
                                 "step", "age ms", "reason");
  json list = json::array();
  for (const auto& s : *sagas) {
    json j = SagaJson(s, false);
    text += fmt::format("{:<28} {:<16} {:<13} {:<14} {:>10}  {}\n", s.id, s.type,
                        j["status"].get<std::string>(), j["step"].get<std::string>(),
                        j["age_ms"].get<std::int64_t>(), s.failure_reason);
    list.push_back(std::move(j));
  }
  if (sagas->empty()) text += "(no sagas)\n";
  return CommandOutput{text, {{"sagas", std::move(list)}}};
}

Result<CommandOutput> SagaShow(grid::Client& client, const CliCommand& command) {
  saga::SagaStore store(client);
  auto s = store.Get(command.key);
  if (!s) return std::unexpected(s.error());
  if (!s->has_value()) {
    return base::Fail(base::ErrorCode::kNotFound, "no saga '" + command.key +
                                                      "' (run 'saga list' on the orchestrating "
                                                      "service's member)");
  }
  const auto& saga = **s;
  json doc = SagaJson(saga, true);
  std::string text =
      fmt::format("saga {} ({}): {}, version {}, started {} ms ago{}\n", saga.id, saga.type,
                  doc["status"].get<std::string>(), saga.version, AgeMs(saga.created_ms),
                  saga.failure_reason.empty() ? "" : "; " + saga.failure_reason);
  text += fmt::format("{:>4} {:<16} {:<20} {}\n", "step", "name", "status", "result");
  for (std::size_t i = 0; i < saga.steps.size(); ++i) {
    const auto& st = saga.steps[i];
    text += fmt::format("{:>4} {:<16} {:<20} {}\n", i, st.name, saga::StepStatusName(st.status),
                        st.result);
  }
  text += "data: " + ValueToText(saga.data.Encode()) + "\n";
  return CommandOutput{text, std::move(doc)};
}

Result<CommandOutput> SagaStats(grid::Client& client) {
  saga::SagaStore store(client);
  auto sagas = store.List();
  if (!sagas) return std::unexpected(sagas.error());
  std::map<std::string, std::int64_t> by_status, by_type;
  std::vector<std::int64_t> durations;  // finished sagas: last change - start
  std::int64_t active = 0, oldest_active = 0;
  for (const auto& s : *sagas) {
    ++by_status[std::string(saga::SagaStatusName(s.status))];
    ++by_type[s.type];
    if (saga::IsTerminal(s.status)) {
      durations.push_back(s.updated_ms - s.created_ms);
    } else {
      ++active;
      if (oldest_active == 0 || s.created_ms < oldest_active) oldest_active = s.created_ms;
    }
  }
  std::sort(durations.begin(), durations.end());
  auto pct = [&](double q) -> std::int64_t {
    if (durations.empty()) return 0;
    return durations[static_cast<std::size_t>(q * static_cast<double>(durations.size() - 1))];
  };
  json doc = {
      {"sagas", sagas->size()},
      {"active", active},
      {"oldest_active_age_ms", AgeMs(oldest_active)},
      {"by_status", by_status},
      {"by_type", by_type},
      {"duration_ms",
       {{"p50", pct(0.5)}, {"p99", pct(0.99)}, {"max", durations.empty() ? 0 : durations.back()}}}};
  std::string text = fmt::format("{} sagas, {} active (oldest {} ms)\n", sagas->size(), active,
                                 AgeMs(oldest_active));
  for (const auto& [status, n] : by_status) text += fmt::format("  {:<13} {}\n", status, n);
  for (const auto& [type, n] : by_type) text += fmt::format("  type {:<8} {}\n", type, n);
  text += fmt::format("finished in p50 {} ms, p99 {} ms, max {} ms\n", pct(0.5), pct(0.99),
                      durations.empty() ? 0 : durations.back());
  return CommandOutput{text, std::move(doc)};
}

}  // namespace

Result<CommandOutput> RunSagaCommand(grid::Client& client, const CliCommand& command) {
  switch (command.kind) {
    case CommandKind::kOutboxStatus:
      return OutboxStatus(client);
    case CommandKind::kSagaList:
      return SagaList(client, command);
    case CommandKind::kSagaShow:
      return SagaShow(client, command);
    case CommandKind::kSagaStats:
      return SagaStats(client);
    default:
      return Consumers(client);
  }
}

}  // namespace tessera::tools::cli
