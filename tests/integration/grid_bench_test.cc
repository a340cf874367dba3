// grid-bench: its histogram's percentiles, and short runs against a real grid-node whose
// effects on the map are checked through a client (the bench really did the work it reports).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <regex>
#include <thread>

#include "child_process.h"
#include "latency_histogram.h"

namespace tessera::integration {
namespace {

using nlohmann::json;
using tools::bench::LatencyHistogram;

// grid-bench with `first`, then `args`, expecting success and one JSON document.
json RunJson(std::vector<std::string> first, const std::vector<std::string>& args) {
  std::vector<std::string> all = std::move(first);
  all.insert(all.end(), {"--json", "--warmup", "0"});
  all.insert(all.end(), args.begin(), args.end());
  auto r = RunProcess(GRID_BENCH_PATH, all, 60s);
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  auto doc = json::parse(r.out, nullptr, false);
  REQUIRE_FALSE(doc.is_discarded());
  return doc;
}

json RunBench(const NodeProcess& node, const std::vector<std::string>& args) {
  return RunJson({"--address", node.address()}, args);
}

}  // namespace

TEST_CASE("LatencyHistogram percentiles are within 1% above the exact sample", "[tools][bench]") {
  LatencyHistogram h;
  CHECK(h.Percentile(0.5) == 0);
  for (std::uint64_t v = 1; v <= 100000; ++v) h.Record(v * 10);
  CHECK(h.count() == 100000);
  CHECK(h.min() == 10);
  CHECK(h.max() == 1000000);
  for (double q : {0.5, 0.99, 0.999}) {
    auto exact = static_cast<std::uint64_t>(q * 100000) * 10;
    CHECK(h.Percentile(q) >= exact);
    CHECK(h.Percentile(q) <= exact + exact / 100);
  }
  CHECK(h.Percentile(1.0) == 1000000);
  LatencyHistogram other;
  other.Record(5000000);
  h.Merge(other);
  CHECK(h.count() == 100001);
  CHECK(h.max() == 5000000);
  CHECK(h.Percentile(1.0) == 5000000);
  CHECK(h.Mean() == Approx((50000500000.0 + 5000000) / 100001).epsilon(0.01));
}

TEST_CASE("grid-bench topic mode: every message published in the window is received",
          "[tools][bench][topic]") {
  auto a = NodeProcess::StartOrFail({"--heartbeat-ms", "200"});
  auto b = NodeProcess::StartOrFail({"--heartbeat-ms", "200", "--join", a->address()});
  WaitForMembers(*b, 2);
  // Publishers on a, the subscriber on b: every message crosses members.
  auto doc = RunBench(*a, {"--topic", "bench", "--subscribe-address", b->address(), "--connections",
                           "2", "--duration", "1"});
  CHECK(doc["errors"] == 0);
  CHECK(doc["published"].get<std::uint64_t>() > 0);
  CHECK(doc["received"] == doc["published"]);
  CHECK(doc["latency_us"]["p50"].get<double>() <= doc["latency_us"]["p99"].get<double>());
}

TEST_CASE("grid-bench preloads the key space and runs a get/set mix", "[tools][bench]") {
  auto node = NodeProcess::StartOrFail();
  auto doc = RunBench(*node, {"--ops", "get=50,set=50", "--keys", "2000", "--preload",
                              "--connections", "2", "--pipeline", "4", "--duration", "1"});
  CHECK(doc["errors"] == 0);
  CHECK(doc["unfinished"] == 0);
  CHECK(doc["ops"].get<std::uint64_t>() > 0);
  CHECK(doc["ops_per_sec"].get<double>() > 0);
  // Every call costs the client some CPU; a second of it per call would be absurd.
  CHECK(doc["client_cpu_us_per_op"].get<double>() > 0);
  CHECK(doc["client_cpu_us_per_op"].get<double>() < 1e6);
  CHECK(doc["ops_by_kind"]["get"].get<std::uint64_t>() > 0);
  CHECK(doc["ops_by_kind"]["set"].get<std::uint64_t>() > 0);
  auto latency = doc["latency_us"];
  CHECK(latency["p50"].get<double>() <= latency["p99"].get<double>());
  CHECK(latency["p99"].get<double>() <= latency["p999"].get<double>());
  CHECK(latency["p999"].get<double>() <= latency["max"].get<double>());
  auto client = ConnectOrFail(*node);
  auto m = client->GetMap("bench");
  CHECK(m->Size().value() == 2000);  // the whole key space, and nothing outside it
  CHECK(m->Get("k000000000001999").value().value().size() == 100);
  client->Shutdown();
}

TEST_CASE("grid-bench putIfAbsentTtl stores fresh keys with the TTL", "[tools][bench]") {
  auto node = NodeProcess::StartOrFail();
  auto doc = RunBench(*node, {"--ops", "putIfAbsentTtl=100", "--ttl", "60000", "--pipeline", "8",
                              "--duration", "1", "--map", "fresh"});
  CHECK(doc["errors"] == 0);
  auto ops = doc["ops"].get<std::int64_t>();
  CHECK(ops > 0);
  auto client = ConnectOrFail(*node);
  auto m = client->GetMap("fresh");
  // Every counted op stored a new key (fresh keys never collide), so the map holds at least
  // as many entries; each has the TTL.
  CHECK(m->Size().value() >= ops);
  auto keys = m->KeySet().value();
  REQUIRE_FALSE(keys.empty());
  auto view = m->GetEntryView(keys.front()).value();
  REQUIRE(view);
  CHECK(view->second.ttl_ms == 60000);
  client->Shutdown();
}

TEST_CASE("grid-bench over RESP runs the same mix against a member's RESP port",
          "[tools][bench][resp]") {
  // --redis: GET, SET and SET NX PX with the native runs' client design; the keys land in
  // the map RESP strings live in, with the value size and TTL asked for.
  auto node = NodeProcess::StartOrFail({"--resp-port", "0"});
  std::smatch port;
  REQUIRE(std::regex_search(node->ready_line(), port, std::regex(R"(resp (127\.0\.0\.1:[0-9]+))")));
  const std::string resp = port[1].str();
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--duration", "1"});
    return RunJson({"--redis", resp}, args);
  };
  auto mix = run({"--ops", "get=50,set=50", "--keys", "2000", "--preload", "--connections", "3",
                  "--pipeline", "4"});
  CHECK(mix["protocol"] == "resp");
  CHECK(mix["errors"] == 0);
  CHECK(mix["unfinished"] == 0);
  CHECK(mix["ops_by_kind"]["get"].get<std::uint64_t>() > 0);
  CHECK(mix["ops_by_kind"]["set"].get<std::uint64_t>() > 0);
  CHECK(mix["latency_us"]["p50"].get<double>() <= mix["latency_us"]["p99"].get<double>());
  auto fresh = run({"--ops", "putIfAbsentTtl=100", "--ttl", "60000", "--pipeline", "8"});
  CHECK(fresh["errors"] == 0);
  const auto stored = fresh["ops"].get<std::int64_t>();
  CHECK(stored > 0);
  auto client = ConnectOrFail(*node);
  auto m = client->GetMap("default");
  // The 2,000 preloaded keys and at least one key per counted putIfAbsent.
  CHECK(m->Size().value() >= 2000 + stored);
  CHECK(m->Get("k000000000001999").value().value().size() == 100);
  auto keys = m->KeySet().value();
  auto it =
      std::find_if(keys.begin(), keys.end(), [](const std::string& k) { return k[0] == 'f'; });
  REQUIRE(it != keys.end());
  auto view = m->GetEntryView(*it).value();
  REQUIRE(view);
  CHECK(view->second.ttl_ms == 60000);
  // tx3 over RESP: MULTI, three SETs in one partition, EXEC, counted as one operation.
  auto tx = run({"--ops", "tx3=100", "--keys", "300", "--connections", "2", "--pipeline", "4"});
  CHECK(tx["errors"] == 0);
  CHECK(tx["unfinished"] == 0);
  CHECK(tx["ops_by_kind"]["tx3"].get<std::uint64_t>() > 0);
  std::size_t batches = 0;
  for (int i = 0; i < 300; ++i) {
    const std::string key =
        "k" + std::string(15 - std::to_string(i).size(), '0') + std::to_string(i);
    auto a = m->Get(key + ":a@" + key).value();
    if (!a) continue;  // no batch picked this key
    // A committed block wrote all three of its keys.
    auto b = m->Get(key + ":b@" + key).value();
    REQUIRE(b);
    CHECK(a->size() == 100);
    CHECK(b->size() == 100);
    CHECK(m->Get(key).value().has_value());
    ++batches;
  }
  CHECK(batches > 0);
  client->Shutdown();
  // What RESP mode does not run is refused, naming it.
  auto refused = RunProcess(GRID_BENCH_PATH, {"--redis", resp, "--ops", "remove=100"}, 30s);
  CHECK(refused.exit_code == 1);
  CHECK(refused.err.find("drop remove") != std::string::npos);
}

TEST_CASE("grid-bench tx3 and tx3NoId commit three keys of one partition per batch",
          "[tools][bench]") {
  auto node = NodeProcess::StartOrFail();
  for (const std::string op : {"tx3", "tx3NoId"}) {
    const std::string map = "tx-" + op;
    auto doc = RunBench(*node, {"--ops", op + "=100", "--keys", "200", "--pipeline", "4",
                                "--duration", "1", "--map", map});
    CHECK(doc["errors"] == 0);
    CHECK(doc["ops_by_kind"][op].get<std::uint64_t>() > 0);
    auto client = ConnectOrFail(*node);
    auto m = client->GetMap(map);
    const auto keys = m->KeySet().value();
    REQUIRE_FALSE(keys.empty());
    CHECK(keys.size() % 3 == 0);  // whole batches only
    for (const auto& key : keys) {
      if (key.find('@') != std::string::npos) continue;
      CHECK(m->Get(key + ":a@" + key).value().has_value());
      CHECK(m->Get(key + ":b@" + key).value().has_value());
    }
    client->Shutdown();
  }
}

TEST_CASE("grid-bench rejects bad flags with exit code 2", "[tools][bench]") {
  for (std::vector<std::string> args : {std::vector<std::string>{"--ops", "get=50,fly=50"},
                                        {"--ops", "get"},
                                        {"--keys", "1000000", "--key-size", "4"},
                                        {"--pipeline", "0"},
                                        {"--bogus"}}) {
    auto r = RunProcess(GRID_BENCH_PATH, args);
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(Lines(r.err).size() == 1);
  }
}

}  // namespace tessera::integration
