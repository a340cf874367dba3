// Parsing is table driven: each `map` subcommand declares its positional arguments and which
// options it accepts, so arity and option checks (and the help text) come from one place.
#include "cli_command.h"

#include <boost/program_options.hpp>
#include <charconv>
#include <sstream>
#include <vector>

#include "value_format.h"

namespace tessera::tools::cli {
namespace {

namespace po = boost::program_options;
using base::ErrorCode;
using base::Fail;
using base::Result;

struct MapCommandSpec {
  std::string_view name;
  CommandKind kind;
  std::vector<std::string_view> args;
  bool writes = false;  // accepts --ttl and --record
  bool lists = false;   // accepts --limit
  std::string_view summary;
};

std::vector<MapCommandSpec> MapCommands() {
  using K = CommandKind;
  return {
      {"put",
       K::kPut,
       {"NAME", "KEY", "VALUE"},
       true,
       false,
       "store VALUE under KEY; prints the previous value or (nil)"},
      {"get", K::kGet, {"NAME", "KEY"}, false, false, "print the value of KEY or (nil)"},
      {"remove",
       K::kRemove,
       {"NAME", "KEY"},
       false,
       false,
       "remove KEY; prints the removed value or (nil)"},
      {"size", K::kSize, {"NAME"}, false, false, "print the number of entries"},
      {"list",
       K::kMapList,
       {},
       false,
       false,
       "every map of the cluster with its entries and memory (asks every member; --internal: "
       "the framework's __ maps too)"},
      {"entries",
       K::kEntries,
       {"NAME"},
       false,
       true,
       "print the entries, sorted by key (--where PREDICATE: only those matching it)"},
      {"query",
       K::kQuery,
       {"NAME", "PREDICATE"},
       false,
       true,
       "print the entries matching PREDICATE, e.g. \"age > 30 AND city = 'Oslo'\""},
      {"put-if-absent",
       K::kPutIfAbsent,
       {"NAME", "KEY", "VALUE"},
       true,
       false,
       "store VALUE only if KEY is absent; prints 'stored' or the existing value"},
      {"clear", K::kClear, {"NAME"}, false, false, "remove every entry; prints how many"},
      {"stats", K::kStats, {"NAME"}, false, false, "print the map's statistics"},
  };
}

po::options_description Describe() {
  po::options_description desc("Options");
  desc.add_options()                                                            //
      ("help", "print help (also after a command group: grid-cli map --help)")  //
      ("address", po::value<std::string>()->value_name("HOST:PORT"),
       "member to connect to (default 127.0.0.1:5701)")                              //
      ("cluster-name", po::value<std::string>()->value_name("NAME"), "default dev")  //
      ("secret", po::value<std::string>()->value_name("S"), "cluster secret")        //
      ("timeout", po::value<std::string>()->value_name("MS"),
       "connect and call timeout in milliseconds (default 5000)")  //
      ("json", "print one JSON document instead of text")          //
      ("ttl", po::value<std::string>()->value_name("MS"),
       "put/put-if-absent: time to live (0 = never expires; default: the map's)")             //
      ("record", "put/put-if-absent: VALUE is a JSON object stored as a GenericRecord")       //
      ("limit", po::value<std::string>()->value_name("N"), "entries/query: print at most N")  //
      ("where", po::value<std::string>()->value_name("PREDICATE"),
       "map entries: only the entries matching PREDICATE")                  //
      ("internal", "map list: the framework's and the grid's __ maps too")  //
      ("count", po::value<std::string>()->value_name("N"),
       "topic subscribe: exit after N messages")  //
      ("for", po::value<std::string>()->value_name("MS"),
       "topic subscribe: exit after MS milliseconds (default: run until Ctrl-C)")              //
      ("reliable", "topic publish/subscribe: use the reliable topic NAME (stored, numbered)")  //
      ("from", po::value<std::string>()->value_name("SEQ|oldest"),
       "topic subscribe: read the reliable topic from sequence SEQ or the oldest stored "
       "(implies --reliable; default: messages published from now on); stream tail: oldest")  //
      ("group", po::value<std::string>()->value_name("G"),
       "stream tail: consume as a member of group G (commits what it prints)")  //
      ("type", po::value<std::string>()->value_name("T"),
       "dlq list/count/replay: only dead letters of event type T")  //
      ("key", po::value<std::string>()->value_name("K"),
       "dlq list/count/replay: only dead letters of event key K")  //
      ("older-than", po::value<std::string>()->value_name("MS"),
       "dlq list/count: only dead letters whose last failure is at least MS ms old")  //
      ("newer-than", po::value<std::string>()->value_name("MS"),
       "dlq list/count: only dead letters whose last failure is at most MS ms old")  //
      ("all", "dlq replay: every dead letter of the group")                          //
      ("reason", po::value<std::string>()->value_name("TEXT"),
       "dlq discard: why (logged by the tool and printed)")  //
      ("status", po::value<std::string>()->value_name("S"),
       "saga list: only sagas in status S (STARTED, COMPLETED, COMPENSATING, COMPENSATED, "
       "TIMED_OUT, FAILED)")  //
      ("wait", po::value<std::string>()->value_name("MS"),
       "dlq replay: how long to wait for one of the group's consumers (default 30000)");
  return desc;
}

std::string GeneralHelp() {
  std::ostringstream out;
  out << "Usage: grid-cli [options] <command>\n\n"
         "Commands:\n"
         "  ping                 connect and measure one round trip\n"
         "  members              the cluster's members (oldest first; the first is master)\n"
         "  partitions           owner and backups of every partition, and a summary per member\n"
         "  cluster              health: members, master, migrations in flight, safe or not\n"
         "  metrics              the member's metrics (Prometheus text format)\n"
         "  map <subcommand>     read and write a map (grid-cli map --help)\n"
         "  topic publish NAME MESSAGE [--reliable]\n"
         "                       publish MESSAGE to topic NAME (every listener in the cluster)\n"
         "  topic subscribe NAME [--count N] [--for MS] [--reliable] [--from SEQ|oldest]\n"
         "                       print NAME's messages as they arrive (JSON lines with --json)\n"
         "  topic stats          per-topic counters summed over every member\n"
         "  stream list          streams: sub-streams, stored events, groups and their lag\n"
         "  stream info NAME     configuration, each sub-stream's range, each group's lag\n"
         "  stream groups NAME   each group's lag, oldest uncommitted event and lease holders\n"
         "  stream tail NAME [--group G] [--from oldest] [--count N] [--for MS]\n"
         "                       print events as they are appended (with --group: consume and\n"
         "                       commit them as a member of G)\n"
         "  dlq list|count GROUP [--type T] [--key K] [--older-than MS] [--newer-than MS]\n"
         "                       a consumer group's dead letters (saga framework)\n"
         "  dlq show GROUP EVENT_ID\n"
         "  dlq discard GROUP EVENT_ID [--reason TEXT]\n"
         "                       removes a dead letter without running it\n"
         "  dlq replay GROUP (EVENT_ID | --all | --type T | --key K) [--wait MS]\n"
         "                       one of the group's running consumers runs the handler again (and\n"
         "                       the events parked behind it); prints the outcome\n"
         "  persistence status   every member's data directory, map log (disk use, records,\n"
         "                       fsyncs, compactions), what its start replayed and, after a\n"
         "                       restart of every member, what the cluster waits for\n"
         "  persistence backup FOLDER\n"
         "                       every member copies its data directory, as of now, into\n"
         "                       FOLDER/<its member id> (an absolute path on its machine); a\n"
         "                       member started on the copy is that member as of the backup\n"
         "  recovery force       after a restart of every member: the cluster goes on without\n"
         "                       the members of its last table still missing, when every\n"
         "                       partition has a replica among those back (asks the master)\n"
         "  outbox status        a service member's outbox: pending events per service and\n"
         "                       partition, oldest age (connect to the service's member)\n"
         "  consumers            every stream's consumer groups: lag, leases, dead letters\n"
         "  saga list [--status S] [--type T] [--older-than MS]\n"
         "  saga show ID\n"
         "  saga stats           a service member's sagas (connect to the orchestrating\n"
         "                       service's member): list, one with its steps, counts and\n"
         "                       durations\n"
         "  fault block HOST:PORT[,HOST:PORT...]\n"
         "                       fault injection (tests, chaos runs): the member stops sending to\n"
         "                       those members, as if the network were cut; block each side of a\n"
         "                       partition towards the other. Needs grid-node --fault-injection\n"
         "  fault heal           lift the member's block\n\n"
      << Describe()
      << "\nExit codes: 0 ok (a missing key is ok and prints (nil)), 1 runtime error, 2 usage "
         "error.\n";
  return out.str();
}

std::string MapHelp() {
  std::ostringstream out;
  out << "Usage: grid-cli [options] map <subcommand> ARGS\n\nSubcommands:\n";
  for (const auto& spec : MapCommands()) {
    std::string usage = std::string(spec.name);
    for (auto arg : spec.args) usage += " " + std::string(arg);
    if (spec.writes) usage += " [--ttl MS] [--record]";
    if (spec.kind == CommandKind::kEntries) usage += " [--where PREDICATE]";
    if (spec.kind == CommandKind::kMapList) usage += " [--internal]";
    if (spec.lists) usage += " [--limit N]";
    out << "  map " << usage << "\n      " << spec.summary << "\n";
  }
  out << "\nPredicates: age >= 18 AND (city = 'Oslo' OR city IN ('Bergen')) AND NOT name LIKE "
         "'A%'\n  paths: __key (the key), this (a non-record value), a.b.c (record fields)\n"
         "Values that are GenericRecords print as JSON.\n";
  return out.str();
}

Result<std::int64_t> ParseNonNegative(const std::string& flag, const std::string& text) {
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < 0) {
    return Fail(ErrorCode::kBadRequest,
                "invalid " + flag + " '" + text + "': expected a non-negative integer");
  }
  return v;
}

Result<po::variables_map> ParseOptions(int argc, const char* const argv[]) {
  po::options_description all = Describe();
  all.add_options()("words", po::value<std::vector<std::string>>());
  po::positional_options_description positional;
  positional.add("words", -1);
  // No short options, so values like "-5" stay positional; "--" ends the options.
  auto style = po::command_line_style::unix_style ^ po::command_line_style::allow_short ^
               po::command_line_style::allow_guessing;
  po::variables_map vm;
  try {
    po::store(
        po::command_line_parser(argc, argv).options(all).positional(positional).style(style).run(),
        vm);
  } catch (const po::error& e) {
    return Fail(ErrorCode::kBadRequest, std::string(e.what()) + "; run grid-cli --help");
  }
  return vm;
}

Result<void> ApplyAddress(const std::string& address, grid::ClientOptions& client) {
  auto colon = address.rfind(':');
  std::uint32_t port = 0;
  const char* begin = address.data() + (colon == std::string::npos ? 0 : colon + 1);
  auto [end, ec] = std::from_chars(begin, address.data() + address.size(), port);
  if (colon == std::string::npos || colon == 0 || ec != std::errc() ||
      end != address.data() + address.size() || port == 0 || port > 65535) {
    return Fail(ErrorCode::kBadRequest,
                "invalid --address '" + address + "': expected HOST:PORT, e.g. 127.0.0.1:5701");
  }
  client.addresses = {address};
  return {};
}

Result<void> ApplyConnectionOptions(const po::variables_map& vm, CliCommand& command) {
  if (vm.count("address") != 0) {
    auto r = ApplyAddress(vm["address"].as<std::string>(), command.client);
    if (!r) return r;
  }
  if (vm.count("cluster-name") != 0)
    command.client.cluster_name = vm["cluster-name"].as<std::string>();
  if (vm.count("secret") != 0) command.client.secret = vm["secret"].as<std::string>();
  if (vm.count("timeout") != 0) {
    auto ms = ParseNonNegative("--timeout", vm["timeout"].as<std::string>());
    if (!ms) return std::unexpected(ms.error());
    if (*ms == 0) return Fail(ErrorCode::kBadRequest, "--timeout must be at least 1 ms");
    command.client.connect_timeout = std::chrono::milliseconds(*ms);
    command.client.call_timeout = std::chrono::milliseconds(*ms);
  }
  command.client.client_name = "grid-cli";
  command.json = vm.count("json") != 0;
  return {};
}

Result<void> CheckOptionsAllowed(const po::variables_map& vm, const MapCommandSpec* spec,
                                 const std::string& plain_name = "") {
  std::string name = spec == nullptr ? plain_name : "map " + std::string(spec->name);
  bool writes = spec != nullptr && spec->writes;
  bool lists = spec != nullptr && spec->lists;
  for (const char* flag : {"ttl", "record"}) {
    if (vm.count(flag) != 0 && !writes) {
      return Fail(ErrorCode::kBadRequest, "--" + std::string(flag) + " does not apply to '" + name +
                                              "'; run grid-cli map --help");
    }
  }
  if (vm.count("limit") != 0 && !lists) {
    return Fail(ErrorCode::kBadRequest,
                "--limit does not apply to '" + name + "'; run grid-cli map --help");
  }
  if (vm.count("where") != 0 && name != "map entries") {
    return Fail(ErrorCode::kBadRequest, "--where does not apply to '" + name +
                                            "'; it is for map entries (or use map query)");
  }
  if (vm.count("internal") != 0 && name != "map list") {
    return Fail(ErrorCode::kBadRequest,
                "--internal does not apply to '" + name + "'; it is for map list");
  }
  for (const char* flag : {"count", "for", "from"}) {
    if (vm.count(flag) != 0 && name != "topic subscribe" && name != "stream tail") {
      return Fail(ErrorCode::kBadRequest, "--" + std::string(flag) + " does not apply to '" + name +
                                              "'; it is for topic subscribe and stream tail");
    }
  }
  if (vm.count("group") != 0 && name != "stream tail") {
    return Fail(ErrorCode::kBadRequest,
                "--group does not apply to '" + name + "'; it is for stream tail");
  }
  if (vm.count("reliable") != 0 && name != "topic subscribe" && name != "topic publish") {
    return Fail(ErrorCode::kBadRequest,
                "--reliable does not apply to '" + name + "'; it is for topic publish/subscribe");
  }
  // ParseDlqCommand and ParseSagaCommand check which of their commands takes which.
  if (name.rfind("dlq ", 0) != 0 && name.rfind("saga ", 0) != 0) {
    for (const char* flag :
         {"type", "key", "older-than", "newer-than", "all", "reason", "wait", "status"}) {
      if (vm.count(flag) != 0) {
        return Fail(ErrorCode::kBadRequest, "--" + std::string(flag) + " does not apply to '" +
                                                name + "'; it is for the dlq commands");
      }
    }
  }
  return {};
}

// --count N and --for MS of topic subscribe and stream tail (each at least 1).
Result<void> ParseCountAndFor(const po::variables_map& vm, CliCommand& command) {
  for (const char* flag : {"count", "for"}) {
    if (vm.count(flag) == 0) continue;
    auto v = ParseNonNegative("--" + std::string(flag), vm[flag].as<std::string>());
    if (!v) return std::unexpected(v.error());
    if (*v == 0)
      return Fail(ErrorCode::kBadRequest, "--" + std::string(flag) + " must be at least 1");
    (std::string(flag) == "count" ? command.count : command.for_ms) = *v;
  }
  return {};
}

Result<void> ParseTopicCommand(const std::vector<std::string>& words, const po::variables_map& vm,
                               CliCommand& command) {
  static const struct {
    std::string_view name;
    CommandKind kind;
    std::size_t args;
    std::string_view usage;
  } kTopic[] = {{"publish", CommandKind::kTopicPublish, 2, "NAME MESSAGE"},
                {"subscribe", CommandKind::kTopicSubscribe, 1, "NAME"},
                {"stats", CommandKind::kTopicStats, 0, ""}};
  if (words.size() < 2) {
    return Fail(ErrorCode::kBadRequest,
                "'topic' needs a subcommand (publish, subscribe, stats); run grid-cli --help");
  }
  for (const auto& spec : kTopic) {
    if (words[1] != spec.name) continue;
    const std::string name = "topic " + std::string(spec.name);
    if (words.size() - 2 != spec.args) {
      return Fail(ErrorCode::kBadRequest,
                  "'" + name + "' takes " +
                      (spec.args == 0 ? std::string("no arguments") : std::string(spec.usage)) +
                      " (got " + std::to_string(words.size() - 2) +
                      " arguments); run grid-cli --help");
    }
    if (auto r = CheckOptionsAllowed(vm, nullptr, name); !r) return r;
    command.kind = spec.kind;
    if (spec.args >= 1) {
      command.topic_name = words[2];
      if (command.topic_name.empty()) return Fail(ErrorCode::kBadRequest, "NAME must not be empty");
    }
    if (spec.args == 2) command.message = words[3];
    command.reliable = vm.count("reliable") != 0 || vm.count("from") != 0;
    if (vm.count("from") != 0) {
      const auto text = vm["from"].as<std::string>();
      if (text == "oldest") {
        command.from = 0;
      } else {
        auto seq = ParseNonNegative("--from", text);
        if (!seq || *seq == 0) {
          return Fail(ErrorCode::kBadRequest,
                      "invalid --from '" + text + "': expected a sequence (1 or more) or 'oldest'");
        }
        command.from = *seq;
      }
    }
    return ParseCountAndFor(vm, command);
  }
  return Fail(ErrorCode::kBadRequest,
              "unknown topic subcommand '" + words[1] + "' (use publish, subscribe or stats)");
}

Result<void> ParseStreamCommand(const std::vector<std::string>& words, const po::variables_map& vm,
                                CliCommand& command) {
  static const struct {
    std::string_view name;
    CommandKind kind;
    std::size_t args;
  } kStream[] = {{"list", CommandKind::kStreamList, 0},
                 {"info", CommandKind::kStreamInfo, 1},
                 {"groups", CommandKind::kStreamGroups, 1},
                 {"tail", CommandKind::kStreamTail, 1}};
  if (words.size() < 2) {
    return Fail(ErrorCode::kBadRequest,
                "'stream' needs a subcommand (list, info, groups, tail); run grid-cli --help");
  }
  for (const auto& spec : kStream) {
    if (words[1] != spec.name) continue;
    const std::string name = "stream " + std::string(spec.name);
    if (words.size() - 2 != spec.args) {
      return Fail(ErrorCode::kBadRequest, "'" + name + "' takes " +
                                              (spec.args == 0 ? "no arguments" : "NAME") +
                                              "; run grid-cli --help");
    }
    if (auto r = CheckOptionsAllowed(vm, nullptr, name); !r) return r;
    command.kind = spec.kind;
    if (spec.args == 1) {
      command.stream_name = words[2];
      if (command.stream_name.empty()) {
        return Fail(ErrorCode::kBadRequest, "NAME must not be empty");
      }
    }
    if (vm.count("group") != 0) command.group = vm["group"].as<std::string>();
    if (vm.count("from") != 0) {
      if (vm["from"].as<std::string>() != "oldest") {
        return Fail(ErrorCode::kBadRequest,
                    "stream tail --from takes 'oldest' (default: events appended from now on)");
      }
      command.from = 0;
    }
    return ParseCountAndFor(vm, command);
  }
  return Fail(ErrorCode::kBadRequest,
              "unknown stream subcommand '" + words[1] + "' (use list, info, groups or tail)");
}

Result<void> FillMapArguments(const std::vector<std::string>& args, const MapCommandSpec& spec,
                              const po::variables_map& vm, CliCommand& command) {
  command.map_name = args[0];
  if (command.map_name.empty()) return Fail(ErrorCode::kBadRequest, "NAME must not be empty");
  if (spec.args.size() >= 2 && spec.args[1] == "KEY") {
    command.key = args[1];
    if (command.key.empty()) return Fail(ErrorCode::kBadRequest, "KEY must not be empty");
  }
  if (spec.args.size() == 3) command.value = args[2];
  if (vm.count("record") != 0) {
    auto r = RecordFromJson(command.value);
    if (!r) return std::unexpected(r.error());
    command.value = r->Encode();
  }
  if (vm.count("ttl") != 0) {
    auto ttl = ParseNonNegative("--ttl", vm["ttl"].as<std::string>());
    if (!ttl) return std::unexpected(ttl.error());
    command.ttl_ms = *ttl;
  }
  if (vm.count("limit") != 0) {
    auto limit = ParseNonNegative("--limit", vm["limit"].as<std::string>());
    if (!limit) return std::unexpected(limit.error());
    command.limit = *limit;
  }
  return {};
}

Result<void> ParsePredicate(const std::string& text, CliCommand& command) {
  auto p = map::Predicate::Parse(text);
  if (!p) {
    return Fail(ErrorCode::kBadRequest,
                "bad predicate: " + p.error().message() + "; run grid-cli map --help for syntax");
  }
  command.predicate = std::move(*p);
  command.predicate_text = text;
  return {};
}

const MapCommandSpec* FindSpec(const std::vector<MapCommandSpec>& specs, std::string_view name) {
  for (const auto& s : specs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

Result<void> ParseMapCommand(const std::vector<std::string>& words, const po::variables_map& vm,
                             CliCommand& command) {
  auto specs = MapCommands();
  if (words.size() < 2) {
    return Fail(ErrorCode::kBadRequest,
                "'map' needs a subcommand (list, put, get, remove, size, entries, query, "
                "put-if-absent, clear, stats); run grid-cli map --help");
  }
  const MapCommandSpec* spec = FindSpec(specs, words[1]);
  if (spec == nullptr) {
    return Fail(ErrorCode::kBadRequest,
                "unknown map subcommand '" + words[1] + "'; run grid-cli map --help");
  }
  std::vector<std::string> args(words.begin() + 2, words.end());
  if (args.size() != spec->args.size()) {
    std::string usage;
    for (auto a : spec->args) usage += " " + std::string(a);
    if (usage.empty()) usage = " no arguments";
    return Fail(ErrorCode::kBadRequest, "'map " + std::string(spec->name) + "' takes" + usage +
                                            " (got " + std::to_string(args.size()) +
                                            " arguments); run grid-cli map --help");
  }
  if (auto r = CheckOptionsAllowed(vm, spec); !r) return r;
  command.kind = spec->kind;
  if (spec->kind == CommandKind::kMapList) {
    command.internal = vm.count("internal") != 0;
    return {};
  }
  if (auto r = FillMapArguments(args, *spec, vm, command); !r) return r;
  if (spec->kind == CommandKind::kQuery) return ParsePredicate(args[1], command);
  if (vm.count("where") != 0) return ParsePredicate(vm["where"].as<std::string>(), command);
  return {};
}

Result<void> ParseFaultCommand(const std::vector<std::string>& words, const po::variables_map& vm,
                               CliCommand& command) {
  command.kind = CommandKind::kFault;
  if (words.size() == 2 && words[1] == "heal") return CheckOptionsAllowed(vm, nullptr, "fault");
  if (words.size() != 3 || words[1] != "block") {
    return Fail(ErrorCode::kBadRequest,
                "use 'fault block HOST:PORT[,HOST:PORT...]' or 'fault heal'; run grid-cli --help");
  }
  std::size_t start = 0;
  const std::string& list = words[2];
  while (start <= list.size()) {
    std::size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string address = list.substr(start, comma - start);
    start = comma + 1;
    if (address.empty()) continue;
    const auto colon = address.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
      return Fail(ErrorCode::kBadRequest, "invalid member address '" + address +
                                              "' for fault block: expected host:port, e.g. "
                                              "127.0.0.1:5702");
    }
    command.blocked.push_back(std::move(address));
  }
  if (command.blocked.empty()) {
    return Fail(ErrorCode::kBadRequest,
                "fault block needs at least one HOST:PORT (use 'fault heal' to lift the block)");
  }
  return CheckOptionsAllowed(vm, nullptr, "fault");
}

Result<void> ParseDlqCommand(const std::vector<std::string>& words, const po::variables_map& vm,
                             CliCommand& command) {
  static const struct {
    std::string_view name;
    CommandKind kind;
    int max_args;  // after GROUP: EVENT_ID
    bool needs_id;
  } kDlq[] = {{"list", CommandKind::kDlqList, 0, false},
              {"count", CommandKind::kDlqCount, 0, false},
              {"show", CommandKind::kDlqShow, 1, true},
              {"discard", CommandKind::kDlqDiscard, 1, true},
              {"replay", CommandKind::kDlqReplay, 1, false}};
  for (const auto& spec : kDlq) {
    if (words.size() < 2 || words[1] != spec.name) continue;
    const std::size_t min = spec.needs_id ? 4 : 3;
    const std::size_t max = 3 + static_cast<std::size_t>(spec.max_args);
    if (words.size() < min || words.size() > max) {
      return Fail(ErrorCode::kBadRequest, "'dlq " + std::string(spec.name) + "' takes GROUP" +
                                              (spec.needs_id       ? " EVENT_ID"
                                               : spec.max_args > 0 ? " [EVENT_ID]"
                                                                   : "") +
                                              "; run grid-cli --help");
    }
    command.kind = spec.kind;
    command.group = words[2];
    if (command.group.empty()) return Fail(ErrorCode::kBadRequest, "GROUP must not be empty");
    if (words.size() == 4) {
      auto id = ParseNonNegative("EVENT_ID", words[3]);
      if (!id || *id == 0) {
        return Fail(ErrorCode::kBadRequest,
                    "invalid EVENT_ID '" + words[3] + "': expected the event's numeric id");
      }
      command.event_id = *id;
    }
    const bool filters = spec.kind == CommandKind::kDlqList || spec.kind == CommandKind::kDlqCount;
    const bool replay = spec.kind == CommandKind::kDlqReplay;
    const std::string name = "dlq " + std::string(spec.name);
    const struct {
      const char* flag;
      bool allowed;
    } flags[] = {{"type", filters || replay},
                 {"key", filters || replay},
                 {"older-than", filters},
                 {"newer-than", filters},
                 {"all", replay},
                 {"wait", replay},
                 {"reason", spec.kind == CommandKind::kDlqDiscard}};
    for (const auto& f : flags) {
      if (vm.count(f.flag) != 0 && !f.allowed) {
        return Fail(ErrorCode::kBadRequest, "--" + std::string(f.flag) + " does not apply to '" +
                                                name + "'; run grid-cli --help");
      }
    }
    if (vm.count("type") != 0) command.event_type = vm["type"].as<std::string>();
    if (vm.count("key") != 0) command.event_key = vm["key"].as<std::string>();
    if (vm.count("reason") != 0) command.reason = vm["reason"].as<std::string>();
    command.all = vm.count("all") != 0;
    for (auto [flag, out] : {std::pair{"older-than", &command.older_than_ms},
                             std::pair{"newer-than", &command.newer_than_ms}}) {
      if (vm.count(flag) == 0) continue;
      auto ms = ParseNonNegative("--" + std::string(flag), vm[flag].as<std::string>());
      if (!ms) return std::unexpected(ms.error());
      *out = *ms;
    }
    if (vm.count("wait") != 0) {
      auto ms = ParseNonNegative("--wait", vm["wait"].as<std::string>());
      if (!ms || *ms == 0) {
        return Fail(ErrorCode::kBadRequest, "invalid --wait '" + vm["wait"].as<std::string>() +
                                                "': expected milliseconds, at least 1");
      }
      command.wait_ms = *ms;
    }
    if (replay) {
      const int ways = (command.event_id != 0) + command.all +
                       (!command.event_type.empty() || !command.event_key.empty());
      if (ways != 1) {
        return Fail(ErrorCode::kBadRequest,
                    "'dlq replay' needs exactly one of EVENT_ID, --all, or --type/--key filters "
                    "(so that every dead letter is replayed only when asked with --all)");
      }
    }
    return CheckOptionsAllowed(vm, nullptr, name);
  }
  return Fail(ErrorCode::kBadRequest,
              "'dlq' needs a subcommand (list, count, show, discard, replay); run grid-cli --help");
}

Result<void> ParseSagaCommand(const std::vector<std::string>& words, const po::variables_map& vm,
                              CliCommand& command) {
  const std::string sub = words.size() >= 2 ? words[1] : "";
  if (sub == "show") {
    if (words.size() != 3 || words[2].empty()) {
      return Fail(ErrorCode::kBadRequest, "'saga show' takes ID; run grid-cli --help");
    }
    command.kind = CommandKind::kSagaShow;
    command.key = words[2];
  } else if (sub == "list" || sub == "stats") {
    if (words.size() != 2) {
      return Fail(
          ErrorCode::kBadRequest,
          "'saga " + sub + "' takes no arguments (filters are options); run grid-cli --help");
    }
    command.kind = sub == "list" ? CommandKind::kSagaList : CommandKind::kSagaStats;
  } else {
    return Fail(ErrorCode::kBadRequest,
                "'saga' needs a subcommand (list, show, stats); run grid-cli --help");
  }
  for (const char* flag :
       {"type", "key", "older-than", "newer-than", "all", "reason", "wait", "status"}) {
    const bool allowed = command.kind == CommandKind::kSagaList &&
                         (std::string_view(flag) == "status" || std::string_view(flag) == "type" ||
                          std::string_view(flag) == "older-than");
    if (vm.count(flag) != 0 && !allowed) {
      return Fail(ErrorCode::kBadRequest, "--" + std::string(flag) + " does not apply to 'saga " +
                                              sub + "'; run grid-cli --help");
    }
  }
  if (vm.count("status") != 0) {
    command.status = vm["status"].as<std::string>();
    static const char* kStatuses[] = {"STARTED",     "COMPLETED", "COMPENSATING",
                                      "COMPENSATED", "TIMED_OUT", "FAILED"};
    bool known = false;
    for (const char* s : kStatuses) known = known || command.status == s;
    if (!known) {
      return Fail(ErrorCode::kBadRequest,
                  "invalid --status '" + command.status +
                      "': use STARTED, COMPLETED, COMPENSATING, COMPENSATED, TIMED_OUT or FAILED");
    }
  }
  if (vm.count("type") != 0) command.event_type = vm["type"].as<std::string>();
  if (vm.count("older-than") != 0) {
    auto ms = ParseNonNegative("--older-than", vm["older-than"].as<std::string>());
    if (!ms) return std::unexpected(ms.error());
    command.older_than_ms = *ms;
  }
  return CheckOptionsAllowed(vm, nullptr, "saga " + sub);
}

Result<void> ParseWords(const std::vector<std::string>& words, const po::variables_map& vm,
                        CliCommand& command) {
  if (words.empty()) {
    return Fail(ErrorCode::kBadRequest, "no command given; run grid-cli --help");
  }
  if (words[0] == "map") return ParseMapCommand(words, vm, command);
  if (words[0] == "topic") return ParseTopicCommand(words, vm, command);
  if (words[0] == "stream") return ParseStreamCommand(words, vm, command);
  if (words[0] == "fault") return ParseFaultCommand(words, vm, command);
  if (words[0] == "dlq") return ParseDlqCommand(words, vm, command);
  if (words[0] == "saga") return ParseSagaCommand(words, vm, command);
  if (words[0] == "persistence") {
    if (words.size() == 3 && words[1] == "backup") {
      if (words[2].empty() || words[2][0] != '/') {
        return Fail(ErrorCode::kBadRequest,
                    "persistence backup: the folder '" + words[2] +
                        "' is not an absolute path (a folder on each member's machine)");
      }
      command.kind = CommandKind::kPersistenceBackup;
      command.value = words[2];
      return CheckOptionsAllowed(vm, nullptr, "persistence backup");
    }
    if (words.size() != 2 || words[1] != "status") {
      return Fail(ErrorCode::kBadRequest,
                  "use 'persistence status' or 'persistence backup FOLDER'; run grid-cli --help");
    }
    command.kind = CommandKind::kPersistenceStatus;
    return CheckOptionsAllowed(vm, nullptr, "persistence status");
  }
  if (words[0] == "recovery") {
    if (words.size() != 2 || words[1] != "force") {
      return Fail(ErrorCode::kBadRequest, "use 'recovery force'; run grid-cli --help");
    }
    command.kind = CommandKind::kRecoveryForce;
    return CheckOptionsAllowed(vm, nullptr, "recovery force");
  }
  if (words[0] == "outbox") {
    if (words.size() != 2 || words[1] != "status") {
      return Fail(ErrorCode::kBadRequest, "use 'outbox status'; run grid-cli --help");
    }
    command.kind = CommandKind::kOutboxStatus;
    return CheckOptionsAllowed(vm, nullptr, "outbox status");
  }
  static const std::pair<std::string_view, CommandKind> kPlain[] = {
      {"consumers", CommandKind::kConsumers}, {"ping", CommandKind::kPing},
      {"members", CommandKind::kMembers},     {"partitions", CommandKind::kPartitions},
      {"cluster", CommandKind::kCluster},     {"metrics", CommandKind::kMetrics}};
  for (const auto& [name, kind] : kPlain) {
    if (words[0] != name) continue;
    if (words.size() != 1) {
      return Fail(ErrorCode::kBadRequest,
                  "'" + words[0] + "' takes no arguments; run grid-cli --help");
    }
    command.kind = kind;
    return CheckOptionsAllowed(vm, nullptr, words[0]);
  }
  return Fail(ErrorCode::kBadRequest,
              "unknown command '" + words[0] +
                  "' (use map, topic, stream, dlq, outbox, persistence, recovery, consumers, "
                  "saga, fault, "
                  "ping, "
                  "members, partitions, cluster or metrics); run "
                  "grid-cli --help");
}

}  // namespace

Result<CliCommand> ParseCommandLine(int argc, const char* const argv[]) {
  auto vm = ParseOptions(argc, argv);
  if (!vm) return std::unexpected(vm.error());
  std::vector<std::string> words;
  if (vm->count("words") != 0) words = (*vm)["words"].as<std::vector<std::string>>();
  CliCommand command;
  if (vm->count("help") != 0) {
    command.kind = CommandKind::kHelp;
    command.help_text = !words.empty() && words[0] == "map" ? MapHelp() : GeneralHelp();
    return command;
  }
  if (auto r = ApplyConnectionOptions(*vm, command); !r) return std::unexpected(r.error());
  if (auto r = ParseWords(words, *vm, command); !r) return std::unexpected(r.error());
  return command;
}

}  // namespace tessera::tools::cli
