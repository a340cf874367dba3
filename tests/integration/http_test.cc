// grid-node --http-port: the health probes and /metrics of real processes, over HTTP on
// 127.0.0.1: ready only once joined, safe only once every member reported every replica
// copied under the current partition table, and /metrics valid for Prometheus (promtool).
#include <signal.h>

#include <utility>  // before Asio's awaitable header (Boost 1.74)

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>

#include "child_process.h"

namespace tessera::integration {
namespace {

namespace asio = boost::asio;

std::vector<std::string> NodeArgs(std::vector<std::string> extra) {
  // Slow failure detection: a member frozen by the test stays listed for the whole check.
  std::vector<std::string> args = {"--http-port",          "0",     "--heartbeat-ms",    "200",
                                   "--failure-timeout-ms", "30000", "--join-timeout-ms", "3000"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST_CASE("HTTP is off unless --http-port is given", "[http][integration]") {
  auto node = NodeProcess::StartOrFail();
  CHECK(node->ready_line().find(" http off ") != std::string::npos);
}

TEST_CASE("A joining member is live but not ready, then ready once it is in a cluster",
          "[http][integration]") {
  // Its only seed does not answer: it looks for a cluster for the join timeout (3 s), then
  // starts one of its own.
  const auto seed = "127.0.0.1:" + std::to_string(UnusedPort());
  auto node = NodeProcess::StartOrFail(NodeArgs({"--join", seed}));
  const auto port = HttpPortOf(*node);
  auto live = HttpGet(port, "/health/live");
  CHECK(live.status == 200);
  CHECK(live.Json()["status"] == "UP");
  auto ready = HttpGet(port, "/health/ready");
  CHECK(ready.status == 503);
  CHECK(ready.content_type == "application/json");
  CHECK(ready.Json()["status"] == "DOWN");
  CHECK(ready.Json()["member"]["state"] == "joining");
  CHECK_THAT(ready.Json()["reason"].get<std::string>(), Catch::Contains("joining"));
  auto safe = HttpGet(port, "/health/safe");
  CHECK(safe.status == 503);
  CHECK_THAT(safe.Json()["reason"].get<std::string>(), Catch::Contains("not ready"));

  ready = WaitForStatus(port, "/health/ready", 200);
  REQUIRE(ready.status == 200);
  CHECK(ready.Json()["member"]["state"] == "member");
  CHECK(ready.Json()["member"]["members"] == 1);
  // Alone, with its partitions assigned: stopping another member cannot lose anything.
  CHECK(WaitForStatus(port, "/health/safe", 200).status == 200);
  auto all = HttpGet(port, "/health");
  CHECK(all.status == 200);
  CHECK(all.Json()["live"]["ok"] == true);
  CHECK(all.Json()["ready"]["ok"] == true);
  CHECK(all.Json()["safe"]["ok"] == true);
}

TEST_CASE("Safe only when every member reported every replica copied under the current table",
          "[http][integration]") {
  auto a = NodeProcess::StartOrFail(NodeArgs({}));
  const auto pa = HttpPortOf(*a);
  REQUIRE(WaitForStatus(pa, "/health/ready", 200).status == 200);
  {  // Data to migrate.
    auto client = ConnectOrFail(*a);
    auto map = client->GetMap("orders");
    for (int i = 0; i < 2000; ++i)
      REQUIRE(map->Put("k" + std::to_string(i), std::string(200, 'v')));
  }
  auto b = NodeProcess::StartOrFail(NodeArgs({"--join", a->address()}));
  const auto pb = HttpPortOf(*b);
  WaitForMembers(*a, 2);
  auto safe = WaitForStatus(pa, "/health/safe", 200);
  REQUIRE(safe.status == 200);
  CHECK_THAT(safe.Json()["reason"].get<std::string>(), Catch::Contains("2 replica(s)"));
  REQUIRE(WaitForStatus(pb, "/health/safe", 200).status == 200);

  // b freezes, nothing else changes: it may hold the only copy of some partitions, so a is
  // not safe to stop once b has been silent for three heartbeat intervals (600 ms).
  REQUIRE(kill(b->pid(), SIGSTOP) == 0);
  safe = WaitForStatus(pa, "/health/safe", 503, 5s);
  CHECK(safe.status == 503);
  CHECK_THAT(safe.Json()["reason"].get<std::string>(),
             Catch::Contains("no heartbeat from member " + b->address()));
  REQUIRE(kill(b->pid(), SIGCONT) == 0);
  REQUIRE(WaitForStatus(pa, "/health/safe", 200).status == 200);

  // b stops (SIGSTOP) and c joins: a new partition table that b has not installed, and copies
  // b does not confirm. Stopping a member now could lose the only copy: not safe, anywhere.
  REQUIRE(kill(b->pid(), SIGSTOP) == 0);
  auto c = NodeProcess::StartOrFail(NodeArgs({"--join", a->address()}));
  const auto pc = HttpPortOf(*c);
  WaitForMembers(*a, 3);
  REQUIRE(WaitForStatus(pc, "/health/ready", 200).status == 200);
  std::this_thread::sleep_for(1s);  // five heartbeat rounds of a and c
  // a has its copies; b's last heartbeat was under the old table.
  safe = HttpGet(pa, "/health/safe");
  CHECK(safe.status == 503);
  CHECK(safe.Json()["status"] == "DOWN");
  CHECK_THAT(safe.Json()["reason"].get<std::string>(), Catch::Contains(b->address()));
  // c waits for copies, some of them from b.
  safe = HttpGet(pc, "/health/safe");
  CHECK(safe.status == 503);
  CHECK(safe.Json()["member"]["migrations_pending"].get<int>() > 0);
  // Ready is about each member only.
  CHECK(HttpGet(pa, "/health/ready").status == 200);
  CHECK(HttpGet(pc, "/health/ready").status == 200);
  REQUIRE(kill(b->pid(), SIGCONT) == 0);
  for (auto port : {pa, pb, pc}) {
    safe = WaitForStatus(port, "/health/safe", 200);
    CHECK(safe.status == 200);
    CHECK(safe.Json()["member"]["members"] == 3);
    CHECK(safe.Json()["member"]["migrations_pending"] == 0);
  }
  {  // Nothing was lost meanwhile.
    auto client = ConnectOrFail(*c);
    auto map = client->GetMap("orders");
    for (int i = 0; i < 2000; i += 97) {
      auto v = map->Get("k" + std::to_string(i));
      REQUIRE(v);
      CHECK(v->has_value());
    }
  }
}

TEST_CASE("/metrics is the Prometheus text format and passes promtool check metrics",
          "[http][integration]") {
  REQUIRE_FALSE(std::string(PROMTOOL_PATH).empty());  // scripts/bootstrap installs prometheus
  auto a = NodeProcess::StartOrFail(NodeArgs({}));
  auto b = NodeProcess::StartOrFail(NodeArgs({"--join", a->address()}));
  WaitForMembers(*a, 2);
  // Every partition settled on its owner: the entry's partition is owned by one of them.
  REQUIRE(WaitForStatus(HttpPortOf(*a), "/health/safe", 200).status == 200);
  {
    auto client = ConnectOrFail(*a);
    REQUIRE(client->GetMap("m")->Put("k", "v"));
    REQUIRE(client->GetTopic("t")->Publish("hello"));
  }
  const auto metrics = HttpGet(HttpPortOf(*a), "/metrics");
  REQUIRE(metrics.status == 200);
  CHECK(metrics.content_type == "text/plain; version=0.0.4; charset=utf-8");
  CHECK_THAT(metrics.body, Catch::Contains("# TYPE tessera_member_partitions_owned gauge"));
  CHECK_THAT(metrics.body, Catch::Contains("tessera_topic_published_total{topic=\"t\"} 1"));
  // Per map, each member counts the partitions it owns: the one entry is on one owner.
  const std::string one = "tessera_map_entries{map=\"m\"} 1\n";
  const auto other = HttpGet(HttpPortOf(*b), "/metrics");
  CHECK((metrics.body.find(one) != std::string::npos) +
            (other.body.find(one) != std::string::npos) ==
        1);
  CHECK_THAT(metrics.body, Catch::Contains("tessera_cluster_members 2\n"));
  TempFile file(metrics.body);
  auto check =
      RunProcess("/bin/sh", {"-c", std::string(PROMTOOL_PATH) + " check metrics < " + file.path()});
  INFO(check.out << check.err);
  CHECK(check.exit_code == 0);
}

TEST_CASE("Stalled HTTP clients slow neither map operations nor other HTTP clients",
          "[http][integration]") {
  auto node = NodeProcess::StartOrFail(NodeArgs({}));
  const auto port = HttpPortOf(*node);
  // Twenty connections that send half a request and then nothing.
  asio::io_context io;
  std::vector<std::unique_ptr<asio::ip::tcp::socket>> stalled;
  for (int i = 0; i < 20; ++i) {
    auto s = std::make_unique<asio::ip::tcp::socket>(io);
    s->connect({asio::ip::make_address("127.0.0.1"), port});
    const std::string half = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    asio::write(*s, asio::buffer(half));
    stalled.push_back(std::move(s));
  }
  auto client = ConnectOrFail(*node);
  auto map = client->GetMap("busy");
  for (int i = 0; i < 500; ++i) REQUIRE(map->Set("k" + std::to_string(i), "v"));
  auto size = map->Size();
  REQUIRE(size);
  CHECK(*size == 500);
  // The HTTP threads still answer others.
  CHECK(HttpGet(port, "/health/live").status == 200);
  const auto metrics = HttpGet(port, "/metrics");
  CHECK(metrics.status == 200);
  CHECK_THAT(metrics.body, Catch::Contains("tessera_map_entries{map=\"busy\"} 500"));
  CHECK_THAT(metrics.body, Catch::Contains("tessera_map_puts_total{map=\"busy\"} 500"));
}

TEST_CASE("A bad --http-port is a one-line error naming it", "[http][integration]") {
  auto r = RunProcess(GRID_NODE_PATH, {"--port", "0", "--http-port", "70000"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("http-port"));
}

}  // namespace
}  // namespace tessera::integration
