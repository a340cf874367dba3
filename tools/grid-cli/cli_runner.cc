// One function per command; each makes exactly one blocking call through the client, so the
// whole run is bounded by the connect timeout plus one call timeout.
#include "cli_runner.h"

#include "dlq_commands.h"
#include "saga_commands.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/null_sink.h>
#include <condition_variable>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>

#include <algorithm>
#include <chrono>

#include "cluster_commands.h"
#include "progress.h"
#include "stream_commands.h"
#include "tessera/admin/documents.h"
#include "tessera/grid/client.h"
#include "value_format.h"

namespace tessera::tools::cli {
std::shared_ptr<spdlog::logger> SilentLogger() {
  // The CLI reports exactly one line per error itself; client logs would add more.
  auto log =
      std::make_shared<spdlog::logger>("grid-cli", std::make_shared<spdlog::sinks::null_sink_mt>());
  log->set_level(spdlog::level::off);
  return log;
}

namespace {

using base::Result;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

json OptionalValueJson(const std::optional<std::string>& value) {
  return value ? ValueToJson(*value) : json(nullptr);
}

std::string OptionalValueText(const std::optional<std::string>& value) {
  return (value ? ValueToText(*value) : std::string("(nil)")) + "\n";
}

grid::WriteOptions WriteOptionsOf(const CliCommand& c) {
  grid::WriteOptions options;
  options.ttl_ms = c.ttl_ms;
  return options;
}

Result<CommandOutput> RunPut(grid::Map& map, const CliCommand& c) {
  auto previous = map.Put(c.key, c.value, WriteOptionsOf(c));
  if (!previous) return std::unexpected(previous.error());
  return CommandOutput{
      OptionalValueText(*previous),
      {{"map", c.map_name}, {"key", c.key}, {"previous", OptionalValueJson(*previous)}}};
}

Result<CommandOutput> RunPutIfAbsent(grid::Map& map, const CliCommand& c) {
  auto existing = map.PutIfAbsent(c.key, c.value, WriteOptionsOf(c));
  if (!existing) return std::unexpected(existing.error());
  bool stored = !existing->has_value();
  std::string text = stored ? "stored\n" : "exists: " + OptionalValueText(*existing);
  return CommandOutput{text,
                       {{"map", c.map_name},
                        {"key", c.key},
                        {"stored", stored},
                        {"existing", OptionalValueJson(*existing)}}};
}

Result<CommandOutput> RunGet(grid::Map& map, const CliCommand& c) {
  auto value = map.Get(c.key);
  if (!value) return std::unexpected(value.error());
  return CommandOutput{OptionalValueText(*value),
                       {{"map", c.map_name}, {"key", c.key}, {"value", OptionalValueJson(*value)}}};
}

Result<CommandOutput> RunRemove(grid::Map& map, const CliCommand& c) {
  auto removed = map.Remove(c.key);
  if (!removed) return std::unexpected(removed.error());
  return CommandOutput{
      OptionalValueText(*removed),
      {{"map", c.map_name}, {"key", c.key}, {"removed", OptionalValueJson(*removed)}}};
}

Result<CommandOutput> RunSize(grid::Map& map, const CliCommand& c) {
  auto size = map.Size();
  if (!size) return std::unexpected(size.error());
  return CommandOutput{std::to_string(*size) + "\n", {{"map", c.map_name}, {"size", *size}}};
}

Result<CommandOutput> RunClear(grid::Map& map, const CliCommand& c) {
  auto cleared = map.Clear();
  if (!cleared) return std::unexpected(cleared.error());
  return CommandOutput{fmt::format("cleared {} entries\n", *cleared),
                       {{"map", c.map_name}, {"cleared", *cleared}}};
}

std::string EntriesTable(const grid::Entries& shown, std::size_t total) {
  std::size_t key_width = 3;
  for (const auto& [key, value] : shown)
    key_width = std::max(key_width, std::min<std::size_t>(key.size(), 40));
  std::string text = fmt::format("{:<{}}  VALUE\n", "KEY", key_width);
  for (const auto& [key, value] : shown) {
    text += fmt::format("{:<{}}  {}\n", key, key_width, ValueToText(value));
  }
  if (shown.size() == total) return text + fmt::format("({} entries)\n", total);
  return text + fmt::format("(showing {} of {} entries)\n", shown.size(), total);
}

Result<CommandOutput> RunEntries(grid::Map& map, const CliCommand& c) {
  // query, and entries --where, have a predicate; plain entries none (it matches everything).
  Progress progress("reading the entries of " + c.map_name, 0);
  progress.Update(0);
  auto entries = map.EntrySet(c.predicate);
  if (!entries) return std::unexpected(entries.error());
  std::sort(entries->begin(), entries->end());
  std::size_t total = entries->size();
  if (c.limit && static_cast<std::size_t>(*c.limit) < total) entries->resize(*c.limit);
  json list = json::array();
  for (const auto& [key, value] : *entries) {
    list.push_back({{"key", key}, {"value", ValueToJson(value)}});
  }
  json doc = {{"map", c.map_name}, {"count", total}, {"entries", std::move(list)}};
  if (c.kind == CommandKind::kQuery || !c.predicate_text.empty()) {
    doc["predicate"] = c.predicate.ToString();
  }
  return CommandOutput{EntriesTable(*entries, total), std::move(doc)};
}

Result<CommandOutput> RunStats(grid::Map& map, const CliCommand& c) {
  auto stats = map.Stats();
  if (!stats) return std::unexpected(stats.error());
  json doc = admin::MapStatsJson(c.map_name, *stats);
  std::string text;
  for (const char* field :
       {"entries", "memory_bytes", "hits", "misses", "gets", "puts", "removes", "expirations",
        "evictions", "get_latency_ns", "put_latency_ns", "remove_latency_ns"}) {
    text += fmt::format("{:<18} {}\n", std::string(field) + ":", doc[field].get<std::int64_t>());
  }
  return CommandOutput{text, std::move(doc)};
}

// `call` on a client of the member at `address` alone (the command's options, with at least
// `call_timeout` per call), shut down after: one member asked directly.
Result<std::string> AskMember(const CliCommand& command, const std::string& address,
                              const std::function<Result<std::string>(grid::Client&)>& call,
                              std::chrono::milliseconds call_timeout = {}) {
  auto options = command.client;
  options.addresses = {address};
  options.call_timeout = std::max(options.call_timeout, call_timeout);
  auto client = grid::Client::Connect(options, SilentLogger());
  if (!client) return std::unexpected(client.error());
  auto answer = call(**client);
  (*client)->Shutdown();
  return answer;
}

Result<std::string> MemberInfo(grid::Client& client) { return client.FetchMemberInfoJson(); }

// Every map of the cluster: the names each member has (asked directly), then each map's
// statistics over the cluster.
Result<CommandOutput> RunMapList(grid::Client& client, const CliCommand& command) {
  auto view = client.FetchClusterView();
  if (!view) return std::unexpected(view.error());
  std::vector<std::string> names;
  for (const auto& member : view->members.members) {
    auto info = AskMember(command, member.address, MemberInfo);
    if (!info) return std::unexpected(info.error());
    auto theirs = admin::MapNamesOfInfo(*info);
    if (!theirs) {
      return base::Fail(base::ErrorCode::kProtocol,
                        "member " + member.address + " sent an unreadable member info");
    }
    names.insert(names.end(), theirs->begin(), theirs->end());
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::erase_if(names,
                [&](const std::string& n) { return admin::IsInternalMap(n) && !command.internal; });
  Progress progress("reading map statistics", names.size());
  json list = json::array();
  std::string text = fmt::format("{:<32} {:>12} {:>14} {:>12} {:>12}\n", "map", "entries",
                                 "memory bytes", "gets", "puts");
  for (std::size_t i = 0; i < names.size(); ++i) {
    progress.Update(i);
    auto stats = client.GetMap(names[i])->Stats();
    if (!stats) return std::unexpected(stats.error());
    text += fmt::format("{:<32} {:>12} {:>14} {:>12} {:>12}\n", names[i], stats->entries,
                        stats->memory_bytes, stats->gets, stats->puts);
    list.push_back(admin::MapStatsJson(names[i], *stats));
  }
  if (names.empty()) text += "(no maps: a map exists once it holds an entry)\n";
  return CommandOutput{text,
                       {{"maps", std::move(list)}, {"members", view->members.members.size()}}};
}

Result<CommandOutput> RunMapCommand(grid::Map& map, const CliCommand& c) {
  switch (c.kind) {
    case CommandKind::kPut:
      return RunPut(map, c);
    case CommandKind::kPutIfAbsent:
      return RunPutIfAbsent(map, c);
    case CommandKind::kGet:
      return RunGet(map, c);
    case CommandKind::kRemove:
      return RunRemove(map, c);
    case CommandKind::kSize:
      return RunSize(map, c);
    case CommandKind::kClear:
      return RunClear(map, c);
    case CommandKind::kEntries:
    case CommandKind::kQuery:
      return RunEntries(map, c);
    case CommandKind::kStats:
      return RunStats(map, c);
    default:
      break;
  }
  return base::Fail(base::ErrorCode::kInternal, "not a map command");
}

double MicrosSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

Result<CommandOutput> RunPing(grid::Client& client, double connect_us) {
  auto start = Clock::now();
  auto probe = client.GetMap("__grid_cli_ping")->ContainsKey("ping");
  if (!probe) return std::unexpected(probe.error());
  double rtt_us = MicrosSince(start);
  std::string address = client.connected_address();
  return CommandOutput{fmt::format("PONG from {}: connect {:.2f} ms, round trip {:.2f} ms\n",
                                   address, connect_us / 1000, rtt_us / 1000),
                       {{"address", address}, {"connect_us", connect_us}, {"rtt_us", rtt_us}}};
}

// Migration copies not yet arrived, summed over every member of `view` (each asked directly);
// nullopt when a member could not be asked.
std::optional<std::int64_t> PendingMigrations(const membership::ClusterView& view,
                                              const CliCommand& command) {
  std::int64_t total = 0;
  for (const auto& member : view.members.members) {
    auto info = AskMember(command, member.address, MemberInfo);
    if (!info) return std::nullopt;
    auto doc = json::parse(*info, nullptr, false);
    if (doc.is_discarded() || !doc.contains("migrations_pending")) return std::nullopt;
    total += doc["migrations_pending"].get<std::int64_t>();
  }
  return total;
}

// Every member's "persistence" info (Member::InfoJson), each asked directly; a member that
// cannot be asked is listed as unreachable.
Result<CommandOutput> RunPersistenceStatus(const membership::ClusterView& view,
                                           const CliCommand& command) {
  json members = json::array();
  std::string text =
      fmt::format("{:<22} {:<10} {:>9} {:>10} {:>9} {:>11} {:>10}  {}\n", "member", "member id",
                  "disk MB", "records", "fsyncs", "compactions", "replayed", "data dir");
  std::string recovery;
  for (const auto& member : view.members.members) {
    auto info = AskMember(command, member.address, MemberInfo);
    auto doc = info ? json::parse(*info, nullptr, false) : json();
    if (!info || doc.is_discarded() || !doc.contains("persistence")) {
      const std::string why = info ? "an unreadable member info" : info.error().message();
      members.push_back({{"address", member.address}, {"unreachable", why}});
      text += fmt::format("{:<22} unreachable: {}\n", member.address, why);
      continue;
    }
    json p = doc["persistence"];
    p["address"] = member.address;
    const bool logging = p.value("logging", false);
    const json& log = p["log"];
    const std::string id = p.value("member_id", std::string());
    text += fmt::format(
        "{:<22} {:<10} {:>9} {:>10} {:>9} {:>11} {:>10}  {}\n", member.address, id.substr(0, 8),
        logging ? fmt::format("{:.1f}", log.value("disk_bytes", 0.0) / 1e6) : "-",
        logging ? std::to_string(log.value("records", std::int64_t{0})) : "-",
        logging ? std::to_string(log.value("fsyncs", std::int64_t{0})) : "-",
        logging ? std::to_string(log.value("compactions", std::int64_t{0})) : "-",
        p["replayed"].is_object() ? std::to_string(p["replayed"].value("entries", std::int64_t{0}))
                                  : "-",
        p.value("data_dir", std::string()).empty() ? "(none: memory only)"
                                                   : p.value("data_dir", std::string()));
    if (logging && log.value("space_low", false)) {
      text += fmt::format(
          "{:<22} writes refused: its data directory has {:.1f} MB free, under its reserve "
          "(--log-min-free-bytes)\n",
          "", log.value("free_bytes", 0.0) / 1e6);
    }
    if (recovery.empty()) recovery = p.value("recovery", std::string());
    members.push_back(std::move(p));
  }
  if (!recovery.empty()) text += recovery + "\n";
  return CommandOutput{text, {{"members", std::move(members)}, {"recovery", recovery}}};
}

// Every member of `view` backs up its data directory into `command.value` (each asked
// directly, one after another); a member that cannot is listed with why, and the command fails
// when any did not.
Result<CommandOutput> RunPersistenceBackup(const membership::ClusterView& view,
                                           const CliCommand& command) {
  json members = json::array();
  std::string text;
  std::string failed;
  for (const auto& member : view.members.members) {
    auto done = AskMember(
        command, member.address, [&](grid::Client& c) { return c.BackupDataDir(command.value); },
        std::chrono::milliseconds(600'000));  // the member copies its whole directory
    auto doc = done ? json::parse(*done, nullptr, false) : json();
    if (!done || doc.is_discarded()) {
      const std::string why = done ? "an unreadable answer" : done.error().ToString();
      members.push_back({{"address", member.address}, {"error", why}});
      text += fmt::format("{:<22} failed: {}\n", member.address, why);
      if (failed.empty()) failed = member.address + ": " + why;
      continue;
    }
    doc["address"] = member.address;
    text += fmt::format("{:<22} {} ({:.1f} MB in {} ms)\n", member.address,
                        doc.value("dir", std::string()), doc.value("bytes", 0.0) / 1e6,
                        doc.value("took_ms", std::int64_t{0}));
    members.push_back(std::move(doc));
  }
  if (!failed.empty()) {
    return base::Fail(base::ErrorCode::kStorage,
                      "the backup is incomplete (" + failed + ")\n" + text);
  }
  return CommandOutput{text, {{"members", std::move(members)}}};
}

// Topic counters summed over every member of `view` (each asked directly).
Result<CommandOutput> RunTopicStats(const membership::ClusterView& view,
                                    const CliCommand& command) {
  std::map<std::string, std::map<std::string, std::int64_t>> totals;
  for (const auto& member : view.members.members) {
    auto stats =
        AskMember(command, member.address, [](grid::Client& c) { return c.FetchTopicStatsJson(); });
    if (!stats) return std::unexpected(stats.error());
    auto doc = json::parse(*stats, nullptr, false);
    if (doc.is_discarded() || !doc.contains("topics")) {
      return base::Fail(base::ErrorCode::kProtocol,
                        "member " + member.address + " sent unreadable topic statistics");
    }
    for (const auto& [topic, counters] : doc["topics"].items()) {
      for (const auto& [name, value] : counters.items()) {
        totals[topic][name] += value.get<std::int64_t>();
      }
    }
  }
  json doc = {{"members", view.members.members.size()}, {"topics", json::object()}};
  std::string text =
      fmt::format("{:<24} {:>10} {:>12} {:>12} {:>10} {:>16}\n", "topic", "listeners", "published",
                  "delivered", "dropped", "listener_errors");
  for (const auto& [topic, c] : totals) {
    auto at = [&c = c](const char* name) {
      auto it = c.find(name);
      return it == c.end() ? std::int64_t{0} : it->second;
    };
    doc["topics"][topic] = {{"published", at("published")},
                            {"delivered", at("delivered")},
                            {"dropped", at("dropped")},
                            {"listener_errors", at("listener_errors")},
                            {"listeners", at("listeners")}};
    text += fmt::format("{:<24} {:>10} {:>12} {:>12} {:>10} {:>16}\n", topic, at("listeners"),
                        at("published"), at("delivered"), at("dropped"), at("listener_errors"));
  }
  text += fmt::format(
      "({} member(s); published counts each message once, on the member it "
      "entered; delivered counts every listener it reached)\n",
      view.members.members.size());
  return CommandOutput{text, std::move(doc)};
}

// `run` over the connected member's view of the cluster.
Result<CommandOutput> OverView(grid::Client& client, const CliCommand& command,
                               Result<CommandOutput> (*run)(const membership::ClusterView&,
                                                            const CliCommand&)) {
  auto view = client.FetchClusterView();
  if (!view) return std::unexpected(view.error());
  return run(*view, command);
}

Result<CommandOutput> RunOn(grid::Client& client, const CliCommand& command, double connect_us) {
  switch (command.kind) {
    case CommandKind::kTopicPublish: {
      if (command.reliable) {
        auto seq = client.GetReliableTopic(command.topic_name)->Publish(command.message);
        if (!seq) return std::unexpected(seq.error());
        return CommandOutput{
            "published to " + command.topic_name + " as sequence " + std::to_string(*seq) + "\n",
            {{"topic", command.topic_name}, {"published", 1}, {"sequence", *seq}}};
      }
      auto r = client.GetTopic(command.topic_name)->Publish(command.message);
      if (!r) return std::unexpected(r.error());
      return CommandOutput{"published to " + command.topic_name + "\n",
                           {{"topic", command.topic_name}, {"published", 1}}};
    }
    case CommandKind::kMetrics: {
      auto text = client.FetchMetricsText();
      if (!text) return std::unexpected(text.error());
      return CommandOutput{*text, {{"address", client.connected_address()}, {"metrics", *text}}};
    }
    case CommandKind::kDlqList:
    case CommandKind::kDlqCount:
    case CommandKind::kDlqShow:
    case CommandKind::kDlqDiscard:
    case CommandKind::kDlqReplay:
      return RunDlqCommand(client, command);
    case CommandKind::kOutboxStatus:
    case CommandKind::kConsumers:
    case CommandKind::kSagaList:
    case CommandKind::kSagaShow:
    case CommandKind::kSagaStats:
      return RunSagaCommand(client, command);
    case CommandKind::kFault: {
      auto now = client.SetBlockedPeers(command.blocked);
      if (!now) return std::unexpected(now.error());
      nlohmann::json list = *now;
      std::string text = now->empty()
                             ? "no traffic blocked on " + client.connected_address()
                             : "traffic from " + client.connected_address() + " blocked to " +
                                   fmt::format("{}", fmt::join(*now, ", "));
      return CommandOutput{text + "\n",
                           {{"address", client.connected_address()}, {"blocked", list}}};
    }
    case CommandKind::kTopicStats:
      return OverView(client, command, RunTopicStats);
    case CommandKind::kRecoveryForce: {
      // The master decides; the connected member may be any of the cluster's.
      auto view = client.FetchClusterView();
      if (!view) return std::unexpected(view.error());
      const membership::MemberInfo* master = view->members.master();
      if (master == nullptr) {
        return base::Fail(base::ErrorCode::kBadRequest,
                          "the connected member knows no master yet; try again shortly");
      }
      auto done =
          AskMember(command, master->address, [](grid::Client& c) { return c.ForceRecovery(); });
      if (!done) return std::unexpected(done.error());
      return CommandOutput{*done + "\n", {{"master", master->address}, {"result", *done}}};
    }
    case CommandKind::kPersistenceStatus:
      return OverView(client, command, RunPersistenceStatus);
    case CommandKind::kPersistenceBackup:
      return OverView(client, command, RunPersistenceBackup);
    case CommandKind::kPing:
      return RunPing(client, connect_us);
    case CommandKind::kMembers:
    case CommandKind::kPartitions:
    case CommandKind::kCluster: {
      auto view = client.FetchClusterView();
      if (!view) return std::unexpected(view.error());
      std::optional<std::int64_t> pending;
      if (command.kind == CommandKind::kCluster) pending = PendingMigrations(*view, command);
      return RenderClusterView(command.kind, *view, pending);
    }
    case CommandKind::kStreamList:
    case CommandKind::kStreamInfo:
    case CommandKind::kStreamGroups:
      return RunStreamCommand(client, command);
    case CommandKind::kMapList:
      return RunMapList(client, command);
    default:
      return RunMapCommand(*client.GetMap(command.map_name), command);
  }
}

}  // namespace

Result<CommandOutput> RunCommand(const CliCommand& command) {
  auto start = Clock::now();
  auto client = grid::Client::Connect(command.client, SilentLogger());
  if (!client) return std::unexpected(client.error());
  double connect_us = MicrosSince(start);
  Result<CommandOutput> output = RunOn(**client, command, connect_us);
  (*client)->Shutdown();
  return output;
}

Result<void> RunSubscribe(const CliCommand& command, std::ostream& out,
                          const std::atomic<bool>& interrupted) {
  auto client = grid::Client::Connect(command.client, SilentLogger());
  if (!client) return std::unexpected(client.error());
  std::mutex mu;
  std::condition_variable cv;
  std::int64_t printed = 0;
  auto print = [&](const grid::TopicMessage& m, std::optional<std::int64_t> sequence) {
    std::lock_guard lock(mu);
    if (command.count && printed >= *command.count) return;
    if (command.json) {
      json line = {{"topic", m.topic},
                   {"payload", m.payload},
                   {"publisher", m.publisher_id},
                   {"publish_time_ms", m.publish_time_ms}};
      if (sequence) line["sequence"] = *sequence;
      out << line.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    } else if (sequence) {
      out << *sequence << " " << m.payload << "\n";
    } else {
      out << m.payload << "\n";
    }
    out.flush();
    ++printed;
    cv.notify_all();
  };
  auto topic = (*client)->GetTopic(command.topic_name);
  auto reliable = (*client)->GetReliableTopic(command.topic_name);
  base::Result<grid::TopicListenerId> id = 0;
  if (command.reliable) {
    grid::ReliableListenerOptions options;
    if (command.from) {
      options.from = *command.from == 0 ? grid::ReliableListenerOptions::From::kOldest
                                        : grid::ReliableListenerOptions::From::kSequence;
      options.sequence = std::max<std::int64_t>(1, *command.from);
    }
    options.on_loss = [&](std::int64_t lost) {
      std::lock_guard lock(mu);
      std::cerr << "grid-cli: lost " << lost
                << " message(s): they were overwritten or expired before this subscriber read "
                   "them\n";
    };
    id = reliable->AddMessageListener(
        [&](const grid::ReliableMessage& m) { print(m.message, m.sequence); }, options);
  } else {
    id = topic->AddMessageListener([&](const grid::TopicMessage& m) { print(m, std::nullopt); });
  }
  if (!id) {
    (*client)->Shutdown();
    return std::unexpected(id.error());
  }
  const auto deadline = command.for_ms ? Clock::now() + std::chrono::milliseconds(*command.for_ms)
                                       : Clock::time_point::max();
  {
    std::unique_lock lock(mu);
    while (!interrupted.load() && Clock::now() < deadline &&
           !(command.count && printed >= *command.count)) {
      cv.wait_for(lock, std::chrono::milliseconds(100));
    }
  }
  if (command.reliable) {
    reliable->RemoveMessageListener(*id);
  } else {
    (void)topic->RemoveMessageListener(*id);
  }
  (*client)->Shutdown();
  return {};
}

std::string HintFor(const base::Error& error, const CliCommand& command) {
  // The member's and client's messages usually say what to do; add only what they may lack.
  const std::string& address = command.client.addresses.front();
  bool names_address = error.message().find(address) != std::string::npos;
  switch (error.code()) {
    case base::ErrorCode::kConnectionFailed:
    case base::ErrorCode::kMemberLeft:
      return names_address ? "" : "check --address (" + address + ") and that grid-node runs there";
    case base::ErrorCode::kTimeout:
      return "the member at " + address + " did not answer in time; check it or raise --timeout";
    case base::ErrorCode::kProtocol:
      return "is " + address + " a grid-node native port (not RESP)?";
    default:
      return "";
  }
}

}  // namespace tessera::tools::cli
