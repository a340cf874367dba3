#include "stream_commands.h"

#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "tessera/grid/client.h"
#include "tessera/map/predicate.h"
#include "tessera/map/stream_format.h"

namespace tessera::tools::cli {
namespace {

using base::Result;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::int64_t Stored(const grid::SubStreamInfo& s) {
  return std::max<std::int64_t>(0, s.tail - s.head + 1);
}

Result<CommandOutput> List(grid::Client& client) {
  auto names = StreamNames(client);
  if (!names) return std::unexpected(names.error());
  json doc = {{"streams", json::array()}};
  std::string text = fmt::format("{:<24} {:>11} {:>12} {:>12} {:>7} {:>12}\n", "stream",
                                 "sub-streams", "appended", "stored", "groups", "max lag");
  for (const auto& name : *names) {
    auto info = client.GetStream(name)->Info();
    if (!info) return std::unexpected(info.error());
    json j = StreamInfoJson(*info);
    std::int64_t max_lag = 0;
    for (const auto& g : info->groups) max_lag = std::max(max_lag, g.lag);
    text += fmt::format("{:<24} {:>11} {:>12} {:>12} {:>7} {:>12}\n", name,
                        info->config.sub_streams, j["appended"].get<std::int64_t>(),
                        j["events"].get<std::int64_t>(), info->groups.size(), max_lag);
    j.erase("sub_streams");
    doc["streams"].push_back(std::move(j));
  }
  if (names->empty()) text += "(no streams)\n";
  return CommandOutput{text, std::move(doc)};
}

Result<CommandOutput> Info(grid::Client& client, const CliCommand& command) {
  auto info = client.GetStream(command.stream_name)->Info();
  if (!info) return std::unexpected(info.error());
  json doc = StreamInfoJson(*info);
  const auto& c = info->config;
  std::string text = fmt::format(
      "stream {}: {} sub-streams, {} events stored ({} bytes), {} appended\n"
      "limits per sub-stream: {} events, {} bytes; max age {} ms; dedup window {} ms\n\n",
      info->name, c.sub_streams, doc["events"].get<std::int64_t>(),
      doc["bytes"].get<std::int64_t>(), doc["appended"].get<std::int64_t>(), c.max_events,
      c.max_bytes, c.max_age_ms, c.dedup_window_ms);
  text += fmt::format("{:>4} {:>10} {:>10} {:>10} {:>12} {:>14}\n", "sub", "head", "tail", "events",
                      "bytes", "oldest age ms");
  for (const auto& s : info->sub_streams) {
    text += fmt::format("{:>4} {:>10} {:>10} {:>10} {:>12} {:>14}\n", s.index, s.head, s.tail,
                        Stored(s), s.bytes, AgeMs(s.oldest_ms));
  }
  text += "\n";
  for (const auto& g : info->groups) {
    text += fmt::format("group {}: lag {} events, oldest uncommitted {} ms ago\n", g.group, g.lag,
                        AgeMs(g.oldest_uncommitted_ms));
  }
  if (info->groups.empty()) text += "(no groups: events are kept up to the limits)\n";
  return CommandOutput{text, std::move(doc)};
}

Result<CommandOutput> Groups(grid::Client& client, const CliCommand& command) {
  auto info = client.GetStream(command.stream_name)->Info();
  if (!info) return std::unexpected(info.error());
  json doc = {{"stream", info->name}, {"groups", json::array()}};
  std::string text = fmt::format("{:<20} {:>10} {:>16} {:>9}  {}\n", "group", "lag",
                                 "oldest uncomm ms", "leases", "consumers");
  for (auto& row : GroupRows(*info)) {
    const auto& g = row.position;
    text += fmt::format("{:<20} {:>10} {:>16} {:>9}  {}\n", g.group, g.lag,
                        AgeMs(g.oldest_uncommitted_ms), row.leases, HoldersText(row));
    json j = GroupJson(g);
    j["leases"] = row.leases;
    j["consumers"] = row.holders;
    j["sub_streams"] = std::move(row.sub_streams);
    doc["groups"].push_back(std::move(j));
  }
  if (info->groups.empty()) text += "(no groups)\n";
  return CommandOutput{text, std::move(doc)};
}

void Print(std::ostream& out, const grid::StreamEvent& e, bool as_json) {
  if (as_json) {
    out << json({{"sub_stream", e.sub_stream},
                 {"offset", e.offset},
                 {"id", e.id},
                 {"key", e.key},
                 {"payload", e.payload},
                 {"time_ms", e.time_ms}})
               .dump(-1, ' ', false, json::error_handler_t::replace)
        << "\n";
  } else {
    out << e.sub_stream << " " << e.offset << " " << e.key << " " << e.payload << "\n";
  }
  out.flush();
}

}  // namespace

std::string HoldersText(const GroupRow& row) {
  std::string text;
  for (const auto& [holder, n] : row.holders) {
    text += (text.empty() ? "" : ", ") + holder + " (" + std::to_string(n) + ")";
  }
  return text.empty() ? "-" : text;
}

Result<CommandOutput> RunStreamCommand(grid::Client& client, const CliCommand& command) {
  switch (command.kind) {
    case CommandKind::kStreamList:
      return List(client);
    case CommandKind::kStreamInfo:
      return Info(client, command);
    default:
      return Groups(client, command);
  }
}

Result<void> RunStreamTail(const CliCommand& command, std::ostream& out,
                           const std::atomic<bool>& interrupted) {
  auto client = grid::Client::Connect(command.client, SilentLogger());
  if (!client) return std::unexpected(client.error());
  auto stream = (*client)->GetStream(command.stream_name);
  const auto deadline = command.for_ms ? Clock::now() + std::chrono::milliseconds(*command.for_ms)
                                       : Clock::time_point::max();
  std::mutex mu;
  std::int64_t printed = 0;
  auto done = [&] {
    std::lock_guard lock(mu);
    return interrupted.load() || Clock::now() >= deadline ||
           (command.count && printed >= *command.count);
  };
  Result<void> result;
  if (!command.group.empty()) {  // consume as a member of the group
    grid::SubscribeOptions options;
    options.start = command.from ? grid::SubscribeOptions::Start::kOldest
                                 : grid::SubscribeOptions::Start::kLatest;
    options.commit_every = 1;  // what was printed is committed, nothing more
    auto id = stream->Subscribe(
        command.group,
        [&](const grid::StreamEvent& e) -> base::Result<void> {
          std::lock_guard lock(mu);
          if (command.count && printed >= *command.count) {
            return base::Fail(base::ErrorCode::kShuttingDown, "grid-cli printed enough");
          }
          Print(out, e, command.json);
          ++printed;
          return {};
        },
        options);
    if (!id) result = std::unexpected(id.error());
    while (id && !done()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (id) stream->Unsubscribe(*id);
  } else {  // read every sub-stream from its tail (or oldest), committing nothing
    auto info = stream->Info();
    if (!info) {
      result = std::unexpected(info.error());
    } else {
      std::vector<std::int64_t> next;
      for (const auto& s : info->sub_streams) next.push_back(command.from ? s.head : s.tail + 1);
      while (!done()) {
        bool any = false;
        for (std::uint32_t sub = 0; sub < next.size() && !done(); ++sub) {
          auto slice = stream->Read(sub, next[sub], 256);
          if (!slice) continue;  // a member moving: try again next round
          for (const auto& e : slice->events) {
            std::lock_guard lock(mu);
            if (command.count && printed >= *command.count) break;
            Print(out, e, command.json);
            ++printed;
            next[sub] = e.offset + 1;
            any = true;
          }
        }
        if (!any) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  }
  (*client)->Shutdown();
  return result;
}

}  // namespace tessera::tools::cli
