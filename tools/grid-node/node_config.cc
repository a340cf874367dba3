// Flags and YAML keys share one table of setters, each converting a string to the typed
// MemberOptions field, so both sources validate identically. Boost.Program_options only
// collects the strings; flags have no po defaults, so "given on the command line" is simply
// "present in the variables map".
#include "node_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <charconv>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <vector>

namespace tessera::tools::node {
namespace {

namespace po = boost::program_options;
using base::ErrorCode;
using base::Fail;
using base::Result;

using Setter = std::function<Result<void>(NodeConfig&, const std::string&)>;

struct Setting {
  std::string key;
  std::string help;
  Setter set;
};

Result<std::uint64_t> ParseUnsigned(const std::string& key, const std::string& text,
                                    std::uint64_t max) {
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v > max) {
    return Fail(ErrorCode::kBadRequest, "invalid value '" + text + "' for '" + key +
                                            "': expected an integer from 0 to " +
                                            std::to_string(max));
  }
  return v;
}

Setter PortSetter(std::uint16_t grid::MemberOptions::*field) {
  return [field](NodeConfig& c, const std::string& text) -> Result<void> {
    auto v = ParseUnsigned("port", text, 65535);
    if (!v) return std::unexpected(v.error());
    c.member.*field = static_cast<std::uint16_t>(*v);
    return {};
  };
}

// A std::uint32_t option from 0 to `max`.
Setter UnsignedSetter(std::string key, std::uint64_t max,
                      std::uint32_t grid::MemberOptions::*field) {
  return [key, max, field](NodeConfig& c, const std::string& text) -> Result<void> {
    auto v = ParseUnsigned(key, text, max);
    if (!v) return std::unexpected(v.error());
    c.member.*field = static_cast<std::uint32_t>(*v);
    return {};
  };
}

// A byte count, from `min` to 1 TiB, into the field `target` picks of the configuration.
Setter BytesSetter(std::string key, std::uint64_t min,
                   std::function<std::uint64_t&(NodeConfig&)> target) {
  return [key, min, target](NodeConfig& c, const std::string& text) -> Result<void> {
    auto v = ParseUnsigned(key, text, 1ull << 40);
    if (!v) return std::unexpected(v.error());
    if (*v < min) {
      return Fail(ErrorCode::kBadRequest, key + " must be at least " + std::to_string(min));
    }
    target(c) = *v;
    return {};
  };
}

// A byte count of the member's options.
Setter MemberBytesSetter(std::string key, std::uint64_t min,
                         std::uint64_t grid::MemberOptions::*field) {
  return BytesSetter(std::move(key), min,
                     [field](NodeConfig& c) -> std::uint64_t& { return c.member.*field; });
}

// A byte count of the map service's options.
Setter MapBytesSetter(std::string key, std::uint64_t min,
                      std::uint64_t map::MapServiceOptions::*field) {
  return BytesSetter(std::move(key), min, [field](NodeConfig& c) -> std::uint64_t& {
    return c.member.map_options.*field;
  });
}

Result<void> SetRespPort(NodeConfig& c, const std::string& text) {
  if (text == "off" || text == "false" || text.empty()) {
    c.member.resp_port.reset();
    return {};
  }
  auto v = ParseUnsigned("resp-port", text, 65535);
  if (!v) return std::unexpected(v.error());
  c.member.resp_port = static_cast<std::uint16_t>(*v);
  return {};
}

Result<void> SetHttpPort(NodeConfig& c, const std::string& text) {
  if (text == "off" || text == "false" || text.empty()) {
    c.member.http_port.reset();
    return {};
  }
  auto v = ParseUnsigned("http-port", text, 65535);
  if (!v) return std::unexpected(v.error());
  c.member.http_port = static_cast<std::uint16_t>(*v);
  return {};
}

Result<void> SetThreads(NodeConfig& c, const std::string& text) {
  auto v = ParseUnsigned("threads", text, 1024);
  if (!v) return std::unexpected(v.error());
  c.member.threads = *v;
  return {};
}

Result<void> SetPartitions(NodeConfig& c, const std::string& text) {
  auto v = ParseUnsigned("partitions", text, 65535);
  if (!v) return std::unexpected(v.error());
  if (*v == 0) return Fail(ErrorCode::kBadRequest, "'partitions' must be at least 1");
  c.member.partition_count = static_cast<std::uint32_t>(*v);
  return {};
}

Result<void> SetLogLevel(NodeConfig& c, const std::string& text) {
  static constexpr std::string_view kLevels[] = {"trace", "debug", "info", "warn", "error"};
  if (std::find(std::begin(kLevels), std::end(kLevels), text) == std::end(kLevels)) {
    return Fail(ErrorCode::kBadRequest,
                "invalid log level '" + text + "': use trace, debug, info, warn or error");
  }
  c.log_level = text;
  return {};
}

Result<void> SetJoin(NodeConfig& c, const std::string& text) {
  c.member.join.clear();
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string address = text.substr(start, comma - start);
    start = comma + 1;
    if (address.empty()) continue;
    auto colon = address.rfind(':');
    if (colon == std::string::npos || colon == 0 ||
        !ParseUnsigned("join", address.substr(colon + 1), 65535) ||
        address.substr(colon + 1) == "0") {
      return Fail(ErrorCode::kBadRequest, "invalid join address '" + address +
                                              "': expected host:port, e.g. 127.0.0.1:5701");
    }
    c.member.join.push_back(address);
  }
  return {};
}

Setter MillisSetter(std::string key, std::int64_t grid::MemberOptions::*field) {
  return [key, field](NodeConfig& c, const std::string& text) -> Result<void> {
    auto v = ParseUnsigned(key, text, 3'600'000);
    if (!v) return std::unexpected(v.error());
    if (*v < 10) return Fail(ErrorCode::kBadRequest, "'" + key + "' must be at least 10 ms");
    c.member.*field = static_cast<std::int64_t>(*v);
    return {};
  };
}

Setter NonEmptyString(std::string key, std::string grid::MemberOptions::*field) {
  return [key, field](NodeConfig& c, const std::string& text) -> Result<void> {
    if (text.empty()) return Fail(ErrorCode::kBadRequest, "'" + key + "' must not be empty");
    c.member.*field = text;
    return {};
  };
}

std::vector<Setting> Settings() {
  using grid::MemberOptions;
  return {
      {"host", "address to bind the ports to (default 127.0.0.1)",
       NonEmptyString("host", &MemberOptions::host)},
      {"port", "native protocol port; 0 picks a free one (default 5701)",
       PortSetter(&MemberOptions::port)},
      {"cluster-name", "cluster name clients must present (default dev)",
       NonEmptyString("cluster-name", &MemberOptions::cluster_name)},
      {"secret", "shared secret clients must present (default: none)",
       [](NodeConfig& c, const std::string& text) -> Result<void> {
         c.member.secret = text;
         return {};
       }},
      {"threads", "shard threads; 0 = one per hardware thread less one, at least 1 (default 0)",
       SetThreads},
      {"idle-poll-us",
       "how long a shard out of work polls before it sleeps, while work arrives more often; "
       "0 = sleep at once (default 50)",
       UnsignedSetter("idle-poll-us", 1'000'000, &MemberOptions::idle_poll_us)},
      {"partitions", "partition count (default 271)", SetPartitions},
      {"topic-stats-limit",
       "topic names with statistics of their own besides subscribed ones; others count in the "
       "totals (default 1000)",
       UnsignedSetter("topic-stats-limit", 1'000'000, &MemberOptions::topic_stats_limit)},
      {"resp-port", "RESP (Redis protocol) port; 0 picks a free one (default off)", SetRespPort},
      {"resp-preauth-max-args",
       "with --secret, the most arguments of a RESP command before AUTH (default 10)",
       UnsignedSetter("resp-preauth-max-args", 1'000'000, &MemberOptions::resp_preauth_max_args)},
      {"resp-preauth-max-bulk-bytes",
       "with --secret, the largest RESP argument before AUTH (default 16384)",
       MemberBytesSetter("resp-preauth-max-bulk-bytes", 64,
                         &MemberOptions::resp_preauth_max_bulk_bytes)},
      {"resp-preauth-timeout-ms",
       "with --secret, how long a RESP connection may stay unauthenticated; 0 = no limit "
       "(default 10000)",
       UnsignedSetter("resp-preauth-timeout-ms", 86'400'000,
                      &MemberOptions::resp_preauth_timeout_ms)},
      {"resp-subscriber-output-limit-bytes",
       "a RESP subscriber with this many bytes of messages unread is disconnected (default "
       "33554432)",
       MemberBytesSetter("resp-subscriber-output-limit-bytes", 64 * 1024,
                         &MemberOptions::resp_subscriber_output_limit_bytes)},
      {"client-output-limit-bytes",
       "a native client with this many bytes of replies and events unread is disconnected; 0 = "
       "no limit (default 67108864)",
       MemberBytesSetter("client-output-limit-bytes", 0,
                         &MemberOptions::client_output_limit_bytes)},
      {"http-port",
       "HTTP port for /health/live, /health/ready, /health/safe and /metrics (Prometheus); 0 "
       "picks a free one (default off)",
       SetHttpPort},
      {"resp-default-map", "map that RESP string commands use (default 'default')",
       NonEmptyString("resp-default-map", &MemberOptions::resp_default_map)},
      {"join", "seed members to join, host:port[,host:port...] (default: start a new cluster)",
       SetJoin},
      {"backup-count", "backup replicas per partition, 0..6 (default 1)",
       UnsignedSetter("backup-count", 6, &MemberOptions::backup_count)},
      {"heartbeat-ms", "heartbeat interval between members (default 1000)",
       MillisSetter("heartbeat-ms", &MemberOptions::heartbeat_interval_ms)},
      {"failure-timeout-ms", "silence after which a member is removed (default 5000)",
       MillisSetter("failure-timeout-ms", &MemberOptions::failure_timeout_ms)},
      {"join-timeout-ms", "start a new cluster if no seed answers by then (default 5000)",
       MillisSetter("join-timeout-ms", &MemberOptions::join_timeout_ms)},
      {"merge-interval-ms",
       "split brain: how often the master looks for another cluster of the same name at the "
       "join addresses and at members it lost, and merges the smaller into the larger "
       "(default 2000)",
       MillisSetter("merge-interval-ms", &MemberOptions::merge_interval_ms)},
      {"fault-injection",
       "true: serve the fault-injection op (grid-cli fault block|heal cuts this member off from "
       "named members); for tests and chaos runs only (default false)",
       [](NodeConfig& c, const std::string& text) -> Result<void> {
         if (text != "true" && text != "false") {
           return Fail(ErrorCode::kBadRequest,
                       "'fault-injection' is '" + text + "'; use true or false");
         }
         c.member.fault_injection = text == "true";
         return {};
       }},
      {"max-protocol",
       "highest native protocol version to answer clients with: 2 lets them send map "
       "operations as lean frames, 3 stream appends too, 4 partition transactions too, 1 keeps "
       "every connection on version 1 (default 4)",
       [](NodeConfig& c, const std::string& text) -> Result<void> {
         if (text != "1" && text != "2" && text != "3" && text != "4") {
           return Fail(ErrorCode::kBadRequest,
                       "'max-protocol' is '" + text + "'; use 1, 2, 3 or 4");
         }
         c.member.max_protocol_version = static_cast<std::uint32_t>(text[0] - '0');
         return {};
       }},
      {"max-transaction-ops", "most operations in one partition transaction (default 1000)",
       [](NodeConfig& c, const std::string& text) -> Result<void> {
         auto v = ParseUnsigned("max-transaction-ops", text, 1'000'000);
         if (!v) return std::unexpected(v.error());
         if (*v == 0) {
           return Fail(ErrorCode::kBadRequest, "max-transaction-ops must be at least 1");
         }
         c.member.map_options.max_transaction_ops = *v;
         return {};
       }},
      {"transaction-id-ttl-ms",
       "how long a committed transaction's id is remembered, so the batch sent again is not "
       "applied twice (default 60000)",
       [](NodeConfig& c, const std::string& text) -> Result<void> {
         auto v = ParseUnsigned("transaction-id-ttl-ms", text, 7ull * 24 * 3600 * 1000);
         if (!v) return std::unexpected(v.error());
         if (*v == 0) {
           return Fail(ErrorCode::kBadRequest, "transaction-id-ttl-ms must be at least 1");
         }
         c.member.map_options.transaction_id_ttl_ms = static_cast<base::Millis>(*v);
         return {};
       }},
      {"data-dir",
       "directory for what outlives this process, locked while it runs: the member's "
       "persistent id, its last partition table and the log of the maps that persist "
       "(maps.NAME.persistence) (default: none)",
       NonEmptyString("data-dir", &MemberOptions::data_dir)},
      {"recovery",
       "after a restart of every member on its data directory: full waits for every member of "
       "the last partition table; partial goes on after --recovery-timeout-ms when every "
       "partition has a replica among the members back (default full)",
       [](NodeConfig& c, const std::string& text) -> Result<void> {
         if (text == "full") {
           c.member.recovery_policy = membership::RecoveryPolicy::kFull;
         } else if (text == "partial") {
           c.member.recovery_policy = membership::RecoveryPolicy::kPartial;
         } else {
           return Fail(ErrorCode::kBadRequest, "'recovery' is '" + text + "'; use full or partial");
         }
         return {};
       }},
      {"recovery-timeout-ms",
       "with --recovery partial: how long the restarted cluster waits for the members of its "
       "last partition table before it goes on without them (default 300000)",
       MillisSetter("recovery-timeout-ms", &MemberOptions::recovery_timeout_ms)},
      {"log-sync-ms",
       "with --data-dir: how long a write to a map with persistence periodic may wait for its "
       "fdatasync (default 1000)",
       [](NodeConfig& c, const std::string& text) -> Result<void> {
         auto v = ParseUnsigned("log-sync-ms", text, 3'600'000);
         if (!v) return std::unexpected(v.error());
         c.member.map_options.log_sync_ms = static_cast<base::Millis>(*v);
         return {};
       }},
      {"log-compact-bytes",
       "with --data-dir: a shard snapshots its partitions into its log, and deletes the log "
       "segments before the snapshot, once it logged this many bytes (or its last snapshot's "
       "size, if larger) since its last snapshot began (default 67108864)",
       MapBytesSetter("log-compact-bytes", 4096, &map::MapServiceOptions::log_compact_bytes)},
      {"log-skip-damaged",
       "with --data-dir: true starts the member even though its map log is damaged in the middle "
       "of a file, skipping the damaged records (each logged with its file and offset; what "
       "they held is lost); without it such a start stops with one line naming both "
       "(default false)",
       [](NodeConfig& c, const std::string& text) -> Result<void> {
         if (text != "true" && text != "false") {
           return Fail(ErrorCode::kBadRequest,
                       "'log-skip-damaged' is '" + text + "'; use true or false");
         }
         c.member.map_options.log_skip_damaged = text == "true";
         return {};
       }},
      {"log-segment-bytes",
       "with --data-dir: a log segment file ends past this size; compaction deletes whole "
       "segments (default 67108864)",
       MapBytesSetter("log-segment-bytes", 4096, &map::MapServiceOptions::log_segment_bytes)},
      {"log-min-free-bytes",
       "with --data-dir: the free bytes the data directory's file system keeps in reserve; "
       "below it writes to maps that persist are refused (reads go on) until space is freed; "
       "0 turns the check off (default 67108864)",
       MapBytesSetter("log-min-free-bytes", 0, &map::MapServiceOptions::log_min_free_bytes)},
      {"catch-up-backlog-bytes",
       "with --data-dir: memory kept of the last persisting updates (this over the partition "
       "count per partition), so a member restarted with its data gets only the updates it "
       "missed while they are here; 0 keeps none, every copy is whole (default 67108864)",
       MapBytesSetter("catch-up-backlog-bytes", 0,
                      &map::MapServiceOptions::catch_up_backlog_bytes)},
      {"log-level", "trace|debug|info|warn|error (default info)", SetLogLevel},
  };
}

const Setting* FindSetting(const std::vector<Setting>& settings, std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  for (const auto& s : settings) {
    if (s.key == key) return &s;
  }
  return nullptr;
}

po::options_description Describe(const std::vector<Setting>& settings) {
  po::options_description desc("Options");
  desc.add_options()("help", "print this help and exit");
  desc.add_options()("config", po::value<std::string>()->value_name("FILE"),
                     "YAML file with the same keys plus per-map config; flags override it");
  for (const auto& s : settings) {
    desc.add_options()(s.key.c_str(), po::value<std::string>()->value_name("VALUE"),
                       s.help.c_str());
  }
  return desc;
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Fail(ErrorCode::kBadRequest,
                "cannot read config file '" + path + "': check the path and its permissions");
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Result<base::Millis> MapNumber(const std::string& map_name, const YAML::Node& node,
                               const std::string& key) {
  auto text = node.as<std::string>();
  auto v =
      ParseUnsigned("maps." + map_name + "." + key, text, std::numeric_limits<std::int64_t>::max());
  if (!v) return std::unexpected(v.error());
  return static_cast<base::Millis>(*v);
}

Result<void> ApplyMapConfig(const std::string& name, const YAML::Node& node, NodeConfig& config) {
  if (!node.IsMap()) {
    return Fail(ErrorCode::kBadRequest, "'maps." + name +
                                            "' must be a mapping of default_ttl_ms, "
                                            "max_idle_ms, max_entries, async_backups, "
                                            "merge_policy, min_cluster_size, persistence");
  }
  map::MapConfig map_config;
  for (const auto& item : node) {
    auto key = item.first.as<std::string>();
    if (key == "async_backups") {
      auto text = item.second.as<std::string>();
      if (text != "true" && text != "false") {
        return Fail(ErrorCode::kBadRequest,
                    "'maps." + name + ".async_backups' is '" + text + "'; use true or false");
      }
      map_config.async_backups = text == "true";
      continue;
    }
    if (key == "persistence") {
      const auto text = item.second.as<std::string>();
      if (text == "none") {
        map_config.persistence = map::Persistence::kNone;
      } else if (text == "periodic") {
        map_config.persistence = map::Persistence::kPeriodic;
      } else if (text == "always") {
        map_config.persistence = map::Persistence::kAlways;
      } else {
        return Fail(ErrorCode::kBadRequest, "'maps." + name + ".persistence' is '" + text +
                                                "'; use none, periodic or always (with "
                                                "--data-dir)");
      }
      continue;
    }
    if (key == "merge_policy") {
      auto policy = map::ParseMergePolicy(item.second.as<std::string>());
      if (!policy) {
        return Fail(ErrorCode::kBadRequest,
                    "'maps." + name + ".merge_policy': " + policy.error().message());
      }
      map_config.merge_policy = *policy;
      continue;
    }
    auto v = MapNumber(name, item.second, key);
    if (!v) return std::unexpected(v.error());
    if (key == "default_ttl_ms") {
      map_config.default_ttl_ms = *v;
    } else if (key == "max_idle_ms" || key == "default_max_idle_ms") {
      map_config.default_max_idle_ms = *v;
    } else if (key == "max_entries") {
      map_config.max_entries = *v;
    } else if (key == "min_cluster_size") {
      map_config.min_cluster_size = static_cast<std::uint32_t>(std::min<base::Millis>(*v, 1000));
    } else {
      return Fail(ErrorCode::kBadRequest, "unknown key 'maps." + name + "." + key +
                                              "': use default_ttl_ms, max_idle_ms, max_entries, "
                                              "async_backups, merge_policy, min_cluster_size, "
                                              "persistence");
    }
  }
  config.member.maps[name] = map_config;
  return {};
}

Result<void> ApplyMaps(const YAML::Node& maps, NodeConfig& config) {
  if (maps.IsNull()) return {};
  if (!maps.IsMap()) return Fail(ErrorCode::kBadRequest, "'maps' must be a mapping of map names");
  for (const auto& item : maps) {
    auto r = ApplyMapConfig(item.first.as<std::string>(), item.second, config);
    if (!r) return r;
  }
  return {};
}

Result<void> ApplyTopics(const YAML::Node& topics, NodeConfig& config) {
  if (topics.IsNull()) return {};
  if (!topics.IsMap()) {
    return Fail(ErrorCode::kBadRequest, "'topics' must be a mapping of topic names");
  }
  for (const auto& item : topics) {
    const auto name = item.first.as<std::string>();
    if (!item.second.IsMap()) {
      return Fail(ErrorCode::kBadRequest,
                  "'topics." + name + "' must be a mapping of global_ordering");
    }
    topic::TopicConfig topic_config;
    for (const auto& setting : item.second) {
      const auto key = setting.first.as<std::string>();
      const auto text = setting.second.as<std::string>();
      if (key != "global_ordering") {
        return Fail(ErrorCode::kBadRequest,
                    "unknown key 'topics." + name + "." + key + "': use global_ordering");
      }
      if (text != "true" && text != "false") {
        return Fail(ErrorCode::kBadRequest,
                    "'topics." + name + ".global_ordering' is '" + text + "'; use true or false");
      }
      topic_config.global_ordering = text == "true";
    }
    config.member.topics[name] = topic_config;
  }
  return {};
}

Result<void> ApplyYamlNode(const YAML::Node& root, NodeConfig& config) {
  if (root.IsNull()) return {};  // an empty file changes nothing
  if (!root.IsMap()) return Fail(ErrorCode::kBadRequest, "the document must be a mapping");
  auto settings = Settings();
  for (const auto& item : root) {
    auto key = item.first.as<std::string>();
    if (key == "maps") {
      auto r = ApplyMaps(item.second, config);
      if (!r) return r;
      continue;
    }
    if (key == "topics") {
      auto r = ApplyTopics(item.second, config);
      if (!r) return r;
      continue;
    }
    const Setting* setting = FindSetting(settings, key);
    if (setting == nullptr) return Fail(ErrorCode::kBadRequest, "unknown key '" + key + "'");
    if (!item.second.IsScalar() && !item.second.IsNull()) {
      return Fail(ErrorCode::kBadRequest, "'" + key + "' must be a single value");
    }
    auto r = setting->set(config, item.second.IsNull() ? "" : item.second.as<std::string>());
    if (!r) return r;
  }
  return {};
}

Result<po::variables_map> ParseFlags(int argc, const char* const argv[],
                                     const po::options_description& desc) {
  po::options_description all(desc);
  all.add_options()("positional", po::value<std::vector<std::string>>());
  po::positional_options_description positional;
  positional.add("positional", -1);
  po::variables_map vm;
  try {
    auto style = po::command_line_style::unix_style ^ po::command_line_style::allow_guessing;
    po::store(
        po::command_line_parser(argc, argv).options(all).positional(positional).style(style).run(),
        vm);
  } catch (const po::error& e) {
    return Fail(ErrorCode::kBadRequest, std::string(e.what()) + "; see grid-node --help");
  }
  if (vm.count("positional") != 0) {
    return Fail(ErrorCode::kBadRequest,
                "unexpected argument '" + vm["positional"].as<std::vector<std::string>>()[0] +
                    "': grid-node takes only --flags; see grid-node --help");
  }
  return vm;
}

Result<void> LoadConfigFile(const std::string& path, NodeConfig& config) {
  auto text = ReadFile(path);
  if (!text) return std::unexpected(text.error());
  return ApplyYaml(*text, path, config);
}

}  // namespace

Result<void> ApplyYaml(const std::string& text, const std::string& source, NodeConfig& config) {
  try {
    auto r = ApplyYamlNode(YAML::Load(text), config);
    if (!r) {
      return Fail(ErrorCode::kBadRequest, "config file '" + source + "': " + r.error().message());
    }
    return {};
  } catch (const YAML::Exception& e) {
    // e.what() carries "yaml-cpp: error at line L, column C: ..."
    return Fail(ErrorCode::kBadRequest,
                "config file '" + source + "' is not valid YAML: " + std::string(e.what()));
  }
}

Result<NodeConfig> ParseNodeConfig(int argc, const char* const argv[]) {
  auto settings = Settings();
  auto desc = Describe(settings);
  auto vm = ParseFlags(argc, argv, desc);
  if (!vm) return std::unexpected(vm.error());
  NodeConfig config;
  if (vm->count("help") != 0) {
    config.help = true;
    return config;
  }
  if (vm->count("config") != 0) {
    auto r = LoadConfigFile((*vm)["config"].as<std::string>(), config);
    if (!r) return std::unexpected(r.error());
  }
  for (const auto& s : settings) {
    if (vm->count(s.key) == 0) continue;
    auto r = s.set(config, (*vm)[s.key].as<std::string>());
    if (!r)
      return r.error().message().find(s.key) == std::string::npos
                 ? Fail(ErrorCode::kBadRequest, "--" + s.key + ": " + r.error().message())
                 : std::unexpected(r.error());
  }
  return config;
}

std::string HelpText() {
  std::ostringstream out;
  out << "Usage: grid-node [options]\n"
         "Starts a Tessera member and serves it until SIGINT or SIGTERM.\n"
         "Prints 'grid-node ready: native HOST:PORT resp HOST:PORT|off http HOST:PORT|off cluster "
         "'NAME' member "
         "UUID' when serving.\n\n"
      << Describe(Settings())
      << "\nConfig file example (YAML):\n"
         "  port: 5701\n"
         "  cluster-name: prod\n"
         "  maps:\n"
         "    orders: {default_ttl_ms: 60000, max_idle_ms: 0, max_entries: 100000}\n"
         "    events: {async_backups: true}   # writes do not wait for backups\n"
         "    carts: {merge_policy: latest_update, min_cluster_size: 2}  # split brain\n"
         "    ledger: {persistence: always}  # with --data-dir: acknowledged after fsync\n"
         "  topics:\n"
         "    ledger: {global_ordering: true}  # every listener sees one order\n"
         "\nExit codes: 0 clean shutdown, 1 start failed (e.g. port in use), 2 bad flags or "
         "config.\n";
  return out.str();
}

}  // namespace tessera::tools::node
