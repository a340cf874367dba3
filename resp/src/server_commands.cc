// Server family: INFO, COMMAND, CONFIG, TIME. INFO's figures are real: connection and command
// counters from the server, RSS from /proc/self/statm, keys and memory per map from
// MapService kStats.
#include <fmt/format.h>
#include <unistd.h>
#include <fstream>

#include "command_util.h"
#include "tessera/map/family.h"
#include "tessera/topic/glob.h"

namespace tessera::resp {

namespace {

constexpr std::size_t kMaxMapsInInfo = 64;

std::int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  std::int64_t total_pages = 0;
  std::int64_t resident_pages = 0;
  if (!(statm >> total_pages >> resident_pages)) return 0;
  return resident_pages * static_cast<std::int64_t>(::sysconf(_SC_PAGESIZE));
}

// What INFO reports that is known before the map statistics arrive.
struct InfoSnapshot {
  std::vector<std::string> sections;  // lowercase; empty = default set
  std::string default_map;
  std::int64_t uptime_s = 0;
  std::int64_t port = 0;
  std::int64_t connected_clients = 0;
  std::int64_t total_connections = 0;
  std::int64_t total_commands = 0;
  std::int64_t protocol_errors = 0;
  std::int64_t unauthenticated_rejected = 0;
  std::int64_t output_limit_disconnects = 0;
  std::int64_t rss = 0;
  std::int64_t shards = 0;
  topic::TopicStats topics;
};

bool Wanted(const InfoSnapshot& info, std::string_view section) {
  if (info.sections.empty()) return true;
  for (const auto& s : info.sections) {
    if (s == section || s == "all" || s == "everything" || s == "default") return true;
  }
  return false;
}

void AppendLine(std::string& text, std::string_view key, const auto& value) {
  text.append(key).append(":").append(fmt::format("{}", value)).append("\r\n");
}

std::string FormatInfo(const InfoSnapshot& info, const std::vector<std::string>& names,
                       Results& results) {
  std::int64_t memory = 0;
  for (auto& r : results) memory += r ? r->stats.memory_bytes : 0;
  std::string text;
  if (Wanted(info, "server")) {
    text.append("# Server\r\n");
    AppendLine(text, "redis_version", "7.0.0");
    AppendLine(text, "tessera_version", "0.1.0");
    AppendLine(text, "redis_mode", "standalone");
    AppendLine(text, "process_id", ::getpid());
    AppendLine(text, "tcp_port", info.port);
    AppendLine(text, "uptime_in_seconds", info.uptime_s);
    AppendLine(text, "shards", info.shards);
    text.append("\r\n");
  }
  if (Wanted(info, "clients")) {
    text.append("# Clients\r\n");
    AppendLine(text, "connected_clients", info.connected_clients);
    text.append("\r\n");
  }
  if (Wanted(info, "memory")) {
    text.append("# Memory\r\n");
    AppendLine(text, "used_memory", memory);
    AppendLine(text, "used_memory_rss", info.rss);
    text.append("\r\n");
  }
  if (Wanted(info, "stats")) {
    text.append("# Stats\r\n");
    AppendLine(text, "total_connections_received", info.total_connections);
    AppendLine(text, "total_commands_processed", info.total_commands);
    AppendLine(text, "protocol_errors", info.protocol_errors);
    AppendLine(text, "unauthenticated_rejected", info.unauthenticated_rejected);
    AppendLine(text, "output_limit_disconnects", info.output_limit_disconnects);
    AppendLine(text, "pubsub_channels_published", info.topics.published);
    AppendLine(text, "pubsub_messages_dropped", info.topics.dropped);
    text.append("\r\n");
  }
  if (Wanted(info, "keyspace")) {
    text.append("# Keyspace\r\n");
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (!results[i]) continue;
      const auto& s = results[i]->stats;
      const bool db0 = names[i] == info.default_map;
      text.append(db0 ? "db0" : "map_" + names[i]);
      text.append(fmt::format(":keys={},expires=0,avg_ttl=0,memory={},hits={},misses={}\r\n",
                              s.entries, s.memory_bytes, s.hits, s.misses));
    }
  }
  return text;
}

void Info(Connection& conn, Args args) {
  auto& server = conn.server();
  InfoSnapshot info;
  for (std::size_t i = 1; i < args.size(); ++i) info.sections.push_back(Lowercase(args[i]));
  info.default_map = conn.default_map();
  info.uptime_s = (server.clock.WallMs() - server.start_wall_ms) / 1000;
  info.port = server.bound_port.load();
  info.connected_clients = server.connected_clients.load();
  info.total_connections = server.total_connections.load();
  info.total_commands = server.TotalCommands();
  info.protocol_errors = server.protocol_errors.load();
  info.unauthenticated_rejected = server.unauthenticated_rejected.load();
  info.output_limit_disconnects = server.output_limit_disconnects.load();
  info.rss = ResidentBytes();
  info.shards = static_cast<std::int64_t>(server.shards.size());
  info.topics = server.topics.Stats();
  std::vector<std::string> names{conn.default_map()};
  for (auto& name : conn.maps().MapNames()) {
    // A companion map (a large hash's fields, map/family.h) is part of its key, not a map.
    if (name != conn.default_map() && !map::CompanionOf(name) && names.size() < kMaxMapsInInfo) {
      names.push_back(name);
    }
  }
  std::vector<map::MapRequest> requests;
  for (const auto& name : names) {
    map::MapRequest stats;
    stats.op = map::MapOp::kStats;
    stats.map_name = name;
    requests.push_back(std::move(stats));
  }
  CallMapGather(conn, std::move(requests),
                [info = std::move(info), names](RespWriter& writer, Results& results) {
                  writer.Bulk(FormatInfo(info, names, results));
                });
}

void WriteFlags(RespWriter& writer, std::uint32_t flags) {
  std::vector<std::string_view> names;
  if (flags & kWrite) names.push_back("write");
  if (flags & kReadOnly) names.push_back("readonly");
  if (flags & kNoAuth) names.push_back("no_auth");
  if (flags & kPubSub) names.push_back("pubsub");
  if (flags & kFast) names.push_back("fast");
  if (flags & kAdmin) names.push_back("admin");
  writer.ArrayHeader(names.size());
  for (auto name : names) writer.SimpleString(name);
}

void WriteCommandInfo(RespWriter& writer, const CommandSpec& spec) {
  writer.ArrayHeader(6);
  writer.Bulk(spec.name);
  writer.Integer(spec.arity);
  WriteFlags(writer, spec.flags);
  writer.Integer(spec.first_key);
  writer.Integer(spec.last_key);
  writer.Integer(spec.key_step);
}

// COMMAND | COMMAND COUNT | COMMAND INFO name... | COMMAND DOCS [name...] | COMMAND LIST
void Command(Connection& conn, Args args) {
  const auto& table = conn.server().table;
  auto writer = conn.Reply();
  const std::string sub = args.size() > 1 ? Lowercase(args[1]) : "";
  if (sub.empty()) {
    writer.ArrayHeader(table.all().size());
    for (const auto& spec : table.all()) WriteCommandInfo(writer, spec);
  } else if (sub == "count" && args.size() == 2) {
    writer.Integer(static_cast<std::int64_t>(table.all().size()));
  } else if (sub == "info") {
    writer.ArrayHeader(args.size() - 2);
    for (std::size_t i = 2; i < args.size(); ++i) {
      const CommandSpec* spec = table.Find(args[i]);
      if (spec == nullptr) {
        writer.NullArray();
      } else {
        WriteCommandInfo(writer, *spec);
      }
    }
  } else if (sub == "docs") {
    writer.MapHeader(0);  // no documentation shipped; clients fall back to plain input
  } else if (sub == "list" && args.size() == 2) {
    writer.ArrayHeader(table.all().size());
    for (const auto& spec : table.all()) writer.Bulk(spec.name);
  } else {
    writer.Error("ERR unknown subcommand or wrong number of arguments for '" +
                 std::string(args[1]) + "'. Try COMMAND HELP.");
  }
}

std::vector<std::pair<std::string, std::string>> ConfigValues(Connection& conn) {
  const auto& options = conn.server().options;
  return {{"save", ""},
          {"appendonly", "no"},
          {"databases", "1"},
          {"maxmemory", "0"},
          {"maxmemory-policy", "noeviction"},
          {"timeout", "0"},
          {"tcp-keepalive", "0"},
          {"maxclients", "10000"},
          {"bind", options.host},
          {"port", std::to_string(conn.server().bound_port.load())},
          {"proto-max-bulk-len", std::to_string(options.max_bulk_bytes)},
          {"io-threads", std::to_string(conn.server().shards.size())}};
}

// CONFIG GET pattern... | CONFIG RESETSTAT; CONFIG SET is refused.
void Config(Connection& conn, Args args) {
  auto writer = conn.Reply();
  const std::string sub = Lowercase(args[1]);
  if (sub == "get" && args.size() >= 3) {
    std::vector<std::pair<std::string, std::string>> found;
    for (auto& [key, value] : ConfigValues(conn)) {
      for (std::size_t i = 2; i < args.size(); ++i) {
        if (topic::GlobMatch(Lowercase(args[i]), key)) {
          found.emplace_back(key, value);
          break;
        }
      }
    }
    writer.MapHeader(found.size());
    for (const auto& [key, value] : found) {
      writer.Bulk(key);
      writer.Bulk(value);
    }
  } else if (sub == "resetstat" && args.size() == 2) {
    writer.SimpleString("OK");
  } else if (sub == "set") {
    writer.Error("ERR CONFIG SET is not supported: configure the member (grid-node) instead");
  } else {
    writer.Error("ERR unknown subcommand or wrong number of arguments for '" +
                 std::string(args[1]) + "'. Try CONFIG HELP.");
  }
}

void Time(Connection& conn, Args) {
  const auto wall_ms = conn.server().clock.WallMs();
  auto writer = conn.Reply();
  writer.ArrayHeader(2);
  writer.Bulk(std::to_string(wall_ms / 1000));
  writer.Bulk(std::to_string((wall_ms % 1000) * 1000));
}

}  // namespace

void RegisterServerCommands(CommandTable& table) {
  table.Add({"info", -1, 0, 0, 0, 0, Info});
  table.Add({"command", -1, 0, 0, 0, 0, Command});
  table.Add({"config", -2, kAdmin, 0, 0, 0, Config});
  table.Add({"time", 1, kFast, 0, 0, 0, Time});
}

}  // namespace tessera::resp
