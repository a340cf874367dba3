#include "bench_options.h"

#include <boost/program_options.hpp>
#include <charconv>
#include <cmath>
#include <sstream>

namespace tessera::tools::bench {
namespace {

namespace po = boost::program_options;
using base::ErrorCode;
using base::Fail;
using base::Result;

po::options_description Describe() {
  po::options_description desc("Options");
  desc.add_options()                                                                              //
      ("help", "print this help and exit")                                                        //
      ("address", po::value<std::string>()->default_value("127.0.0.1:5701"), "member HOST:PORT")  //
      ("cluster-name", po::value<std::string>()->default_value("dev"), "cluster name")            //
      ("secret", po::value<std::string>()->default_value(""), "cluster secret")                   //
      ("map", po::value<std::string>()->default_value("bench"), "map to load")                    //
      ("ops", po::value<std::string>()->default_value("get=50,set=50"),
       "op mix: get, set, put, putIfAbsentTtl (fresh keys), remove, tx3 (3-set transaction), "
       "tx3NoId (the same without a deduplication id)")                                //
      ("keys", po::value<std::int64_t>()->default_value(100000), "key space size")     //
      ("key-size", po::value<std::size_t>()->default_value(16), "bytes per key")       //
      ("value-size", po::value<std::size_t>()->default_value(100), "bytes per value")  //
      ("ttl", po::value<base::Millis>(),
       "TTL in ms for putIfAbsentTtl (default 60000) and, if given, set/put")                   //
      ("connections", po::value<int>()->default_value(1), "clients (one connection each)")      //
      ("pipeline", po::value<int>()->default_value(1), "in-flight async calls per connection")  //
      ("io-threads", po::value<int>()->default_value(1),
       "client I/O threads the connections share (0: one per connection)")  //
      ("protocol", po::value<int>()->default_value(4),
       "highest native protocol version to offer: 2 sends get/set/put/putIfAbsent/remove as "
       "lean frames when the member speaks it, 3 stream appends too, 4 partition "
       "transactions too, 1 uses Cap'n Proto frames only")                              //
      ("duration", po::value<double>()->default_value(10), "measured seconds")          //
      ("warmup", po::value<double>()->default_value(1), "unmeasured seconds first")     //
      ("timeout", po::value<int>()->default_value(5000), "connect/call timeout in ms")  //
      ("preload", "fill the key space before the run so gets hit")                      //
      ("topic", po::value<std::string>(),
       "topic mode: publish to this topic instead of map ops (--value-size bytes per message)")  //
      ("subscribe-address", po::value<std::string>(),
       "topic mode: the member the subscriber connects to (default --address)")  //
      ("reliable", "topic mode: use the reliable topic")                         //
      ("stream", po::value<std::string>(),
       "stream mode: append --events events, consume them as a group, then measure "
       "append-to-handler latency for --duration s (a fresh stream NAME-<random> per run)")  //
      ("redis", po::value<std::string>(),
       "run against the RESP server at IPv4:PORT instead (a member's RESP port or redis-server): "
       "map mode runs get, set and putIfAbsentTtl as GET, SET and SET NX PX with the native "
       "runs' client design and latency; stream mode XADD and XREADGROUP")  //
      ("events", po::value<std::uint64_t>()->default_value(200000),
       "stream mode: events to append and consume")                                //
      ("consumers", po::value<int>()->default_value(1), "stream mode: consumers")  //
      ("batch", po::value<int>()->default_value(1),
       "stream mode: events per append call (Stream::AppendAll; for Redis, XADDs sent "
       "together), instead of --pipeline")  //
      ("rate", po::value<int>()->default_value(2000),
       "stream mode: events/s appended in the end-to-end phase (latency, not saturation)")  //
      ("json", "print the result as one JSON document");
  return desc;
}

Result<OpKind> ParseOpName(std::string_view name) {
  for (OpKind kind : {OpKind::kGet, OpKind::kSet, OpKind::kPut, OpKind::kPutIfAbsentTtl,
                      OpKind::kRemove, OpKind::kTx3, OpKind::kTx3NoId}) {
    if (OpKindName(kind) == name) return kind;
  }
  return Fail(ErrorCode::kBadRequest,
              "unknown op '" + std::string(name) +
                  "' in --ops: use get, set, put, putIfAbsentTtl, remove, tx3, tx3NoId");
}

Result<OpWeight> ParseOpItem(std::string_view item) {
  auto eq = item.find('=');
  if (eq == std::string_view::npos) {
    return Fail(ErrorCode::kBadRequest,
                "--ops item '" + std::string(item) + "' must be NAME=WEIGHT, e.g. get=50");
  }
  auto kind = ParseOpName(item.substr(0, eq));
  if (!kind) return std::unexpected(kind.error());
  int weight = 0;
  auto digits = item.substr(eq + 1);
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), weight);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || weight < 0) {
    return Fail(ErrorCode::kBadRequest,
                "--ops weight '" + std::string(digits) + "' must be a non-negative integer");
  }
  return OpWeight{*kind, weight};
}

Result<void> CheckRanges(const BenchOptions& o) {
  auto bad = [](const std::string& what) { return Fail(ErrorCode::kBadRequest, what); };
  if (o.keys < 1) return bad("--keys must be at least 1");
  auto digits = std::to_string(o.keys - 1).size();
  if (o.key_size < digits + 1) {
    return bad("--key-size " + std::to_string(o.key_size) + " is too small for --keys " +
               std::to_string(o.keys) + ": use at least " + std::to_string(digits + 1));
  }
  if (o.key_size > 1 << 20 || o.value_size > 64 << 20)
    return bad("--key-size/--value-size too large");
  if (o.ttl_ms < 0) return bad("--ttl must be >= 0");
  if (o.connections < 1 || o.connections > 1024) return bad("--connections must be 1..1024");
  if (o.pipeline < 1 || o.pipeline > 4096) return bad("--pipeline must be 1..4096");
  if (o.io_threads < 0 || o.io_threads > 64) return bad("--io-threads must be 0..64");
  if (!(o.duration_s > 0) || o.duration_s > 86400) return bad("--duration must be > 0 seconds");
  if (!(o.warmup_s >= 0) || o.warmup_s > 3600) return bad("--warmup must be >= 0 seconds");
  if (o.client.call_timeout.count() < 1) return bad("--timeout must be at least 1 ms");
  if (o.protocol < 1 || o.protocol > 4) return bad("--protocol must be 1, 2, 3 or 4");
  if (o.reliable && o.topic.empty()) return bad("--reliable needs --topic");
  if (!o.redis.empty() && !o.topic.empty()) return bad("--redis does not run topics");
  if (!o.stream.empty() && !o.topic.empty()) return bad("use either --stream or --topic");
  if (o.consumers < 1 || o.consumers > 64) return bad("--consumers must be 1..64");
  if (o.events < 1) return bad("--events must be at least 1");
  if (o.rate < 1 || o.rate > 1'000'000) return bad("--rate must be 1..1000000");
  if (o.batch < 1 || o.batch > 10'000) return bad("--batch must be 1..10000");
  if (o.batch > 1 && o.pipeline > 1) return bad("use either --batch or --pipeline");
  if (!o.topic.empty() && o.value_size < 8) {
    return bad("--value-size must be at least 8 in topic mode (messages carry a timestamp)");
  }
  return {};
}

void ApplyVariables(const po::variables_map& vm, BenchOptions& o) {
  o.client.addresses = {vm["address"].as<std::string>()};
  o.client.cluster_name = vm["cluster-name"].as<std::string>();
  o.client.secret = vm["secret"].as<std::string>();
  o.client.client_name = "grid-bench";
  o.protocol = vm["protocol"].as<int>();
  o.client.max_protocol_version = static_cast<std::uint32_t>(o.protocol);
  o.client.call_timeout = o.client.connect_timeout =
      std::chrono::milliseconds(vm["timeout"].as<int>());
  o.map_name = vm["map"].as<std::string>();
  o.keys = vm["keys"].as<std::int64_t>();
  o.key_size = vm["key-size"].as<std::size_t>();
  o.value_size = vm["value-size"].as<std::size_t>();
  if (vm.count("ttl") != 0) {
    o.ttl_ms = vm["ttl"].as<base::Millis>();
    o.ttl_given = true;
  }
  o.connections = vm["connections"].as<int>();
  o.pipeline = vm["pipeline"].as<int>();
  o.io_threads = vm["io-threads"].as<int>();
  o.duration_s = vm["duration"].as<double>();
  o.warmup_s = vm["warmup"].as<double>();
  o.preload = vm.count("preload") != 0;
  if (vm.count("topic") != 0) o.topic = vm["topic"].as<std::string>();
  o.reliable = vm.count("reliable") != 0;
  o.subscribe_address = vm.count("subscribe-address") != 0
                            ? vm["subscribe-address"].as<std::string>()
                            : o.client.addresses.front();
  o.json = vm.count("json") != 0;
  if (vm.count("stream") != 0) o.stream = vm["stream"].as<std::string>();
  if (vm.count("redis") != 0) o.redis = vm["redis"].as<std::string>();
  o.events = vm["events"].as<std::uint64_t>();
  o.consumers = vm["consumers"].as<int>();
  o.rate = vm["rate"].as<int>();
  o.batch = vm["batch"].as<int>();
}

}  // namespace

std::string_view OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kGet:
      return "get";
    case OpKind::kSet:
      return "set";
    case OpKind::kPut:
      return "put";
    case OpKind::kPutIfAbsentTtl:
      return "putIfAbsentTtl";
    case OpKind::kRemove:
      return "remove";
    case OpKind::kTx3:
      return "tx3";
    case OpKind::kTx3NoId:
      return "tx3NoId";
  }
  return "?";
}

Result<std::vector<OpWeight>> ParseOpMix(std::string_view text) {
  std::vector<OpWeight> mix;
  int total = 0;
  while (!text.empty()) {
    auto comma = text.find(',');
    auto item = ParseOpItem(text.substr(0, comma));
    if (!item) return std::unexpected(item.error());
    total += item->weight;
    if (item->weight > 0) mix.push_back(*item);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  if (total <= 0) return Fail(ErrorCode::kBadRequest, "--ops needs at least one positive weight");
  return mix;
}

Result<BenchOptions> ParseBenchOptions(int argc, const char* const argv[]) {
  po::variables_map vm;
  try {
    auto style = po::command_line_style::unix_style ^ po::command_line_style::allow_guessing;
    po::store(po::command_line_parser(argc, argv).options(Describe()).style(style).run(), vm);
  } catch (const po::error& e) {
    return Fail(ErrorCode::kBadRequest, std::string(e.what()) + "; see grid-bench --help");
  }
  BenchOptions o;
  if (vm.count("help") != 0) {
    o.help = true;
    return o;
  }
  ApplyVariables(vm, o);
  auto mix = ParseOpMix(vm["ops"].as<std::string>());
  if (!mix) return std::unexpected(mix.error());
  o.mix = std::move(*mix);
  if (auto r = CheckRanges(o); !r) return std::unexpected(r.error());
  return o;
}

std::string BenchHelpText() {
  std::ostringstream out;
  out << "Usage: grid-bench [options]\n"
         "Drives a member with a mix of map operations and reports throughput and latency.\n\n"
      << Describe()
      << "\nExample: grid-bench --ops get=80,set=20 --keys 10000 --preload --connections 4 "
         "--pipeline 16 --duration 10\n";
  return out.str();
}

}  // namespace tessera::tools::bench
