#include "saga_commands.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "stream_commands.h"
#include "tessera/admin/documents.h"
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
  auto doc = admin::OutboxJson(client, view->partitions.partition_count());
  if (!doc) return std::unexpected(doc.error());
  std::string text = fmt::format("{:<20} {:>9} {:>9} {:>14}\n", "service", "partition", "pending",
                                 "oldest age ms");
  for (const auto& service : (*doc)["services"]) {
    for (const auto& p : service["partitions"]) {
      text += fmt::format("{:<20} {:>9} {:>9} {:>14}\n", service["service"].get<std::string>(),
                          p["partition"].get<std::uint32_t>(), p["pending"].get<std::int64_t>(),
                          p["oldest_age_ms"].get<std::int64_t>());
    }
  }
  if ((*doc)["services"].empty()) {
    text += "(nothing pending: every staged event was published)\n";
  }
  if (const auto unreadable = (*doc)["unreadable"].get<std::int64_t>(); unreadable > 0) {
    text += fmt::format("{} entries of {} are not events (written by something else)\n", unreadable,
                        saga::kOutboxMap);
  }
  (*doc)["address"] = client.connected_address();
  return CommandOutput{text, std::move(*doc)};
}

Result<CommandOutput> Consumers(grid::Client& client) {
  auto doc = admin::ConsumersJson(client);
  if (!doc) return std::unexpected(doc.error());
  std::string text =
      fmt::format("{:<20} {:<20} {:>10} {:>16} {:>7} {:>12}  {}\n", "group", "stream", "lag",
                  "oldest uncomm ms", "leases", "dead letters", "consumers");
  for (const auto& g : (*doc)["groups"]) {
    std::string holders;
    for (const auto& [holder, n] : g["consumers"].items()) {
      holders += (holders.empty() ? "" : ", ") + holder + " (" + std::to_string(n.get<int>()) + ")";
    }
    text +=
        fmt::format("{:<20} {:<20} {:>10} {:>16} {:>7} {:>12}  {}\n", g["group"].get<std::string>(),
                    g["stream"].get<std::string>(), g["lag"].get<std::int64_t>(),
                    g["oldest_uncommitted_age_ms"].get<std::int64_t>(), g["leases"].get<int>(),
                    g["dead_letters"].get<std::int64_t>(), holders.empty() ? "-" : holders);
  }
  if ((*doc)["groups"].empty()) text += "(no consumer groups)\n";
  return CommandOutput{text, std::move(*doc)};
}

Result<CommandOutput> SagaList(grid::Client& client, const CliCommand& command) {
  const map::Predicate filter =
      admin::SagaPredicate({command.status, command.event_type, command.older_than_ms});
  saga::SagaStore store(client);
  auto sagas = store.List(filter);
  if (!sagas) return std::unexpected(sagas.error());
  std::string text = fmt::format("{:<28} {:<16} {:<13} {:<14} {:>10}  {}\n", "id", "type", "status",
                                 "step", "age ms", "reason");
  json list = json::array();
  for (const auto& s : *sagas) {
    json j = admin::SagaJson(s, false);
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
  json doc = admin::SagaJson(saga, true);
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
  json doc = admin::SagaStatsJson(*sagas);
  std::string text = fmt::format("{} sagas, {} active (oldest {} ms)\n", sagas->size(),
                                 doc["active"].get<std::int64_t>(),
                                 doc["oldest_active_age_ms"].get<std::int64_t>());
  for (const auto& [status, n] : doc["by_status"].items()) {
    text += fmt::format("  {:<13} {}\n", status, n.get<std::int64_t>());
  }
  for (const auto& [type, n] : doc["by_type"].items()) {
    text += fmt::format("  type {:<8} {}\n", type, n.get<std::int64_t>());
  }
  const auto& d = doc["duration_ms"];
  text += fmt::format("finished in p50 {} ms, p99 {} ms, max {} ms\n", d["p50"].get<std::int64_t>(),
                      d["p99"].get<std::int64_t>(), d["max"].get<std::int64_t>());
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
