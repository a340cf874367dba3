// grid-cli as a process against a real grid-node: text and --json output, exit codes, and the
// one-line errors for an unreachable member, a bad secret, a silent peer and bad arguments.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "child_process.h"
#include "tessera/grid/member.h"
#include "tessera/grid/transaction.h"
#include "tessera/saga/consumer.h"
#include "tessera/saga/dead_letter.h"
#include "tessera/saga/outbox.h"
#include "tessera/saga/saga_store.h"

namespace tessera::integration {
namespace {

using nlohmann::json;

ProcessResult Cli(const NodeProcess& node, std::vector<std::string> args) {
  args.insert(args.begin(), {"--address", node.address()});
  return RunProcess(GRID_CLI_PATH, args, 20s);
}

// Runs the CLI with --json; requires exit 0 and one parsable JSON document.
json CliJson(const NodeProcess& node, std::vector<std::string> args) {
  args.insert(args.begin(), "--json");
  auto r = Cli(node, args);
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE(Lines(r.out).size() == 1);
  auto doc = json::parse(r.out, nullptr, false);
  REQUIRE_FALSE(doc.is_discarded());
  return doc;
}

void RequireOk(const ProcessResult& r, const std::string& out) {
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == out);
  CHECK(r.err.empty());
}

void RequireOneLineError(const ProcessResult& r, int exit_code, const std::string& mentions) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == exit_code);
  CHECK(r.out.empty());
  REQUIRE(Lines(r.err).size() == 1);
  CHECK(r.err.rfind("grid-cli: ", 0) == 0);
  CHECK(r.err.find(mentions) != std::string::npos);
}

}  // namespace

TEST_CASE("grid-cli puts, gets, sizes and lists entries as text", "[tools][cli]") {
  auto node = NodeProcess::StartOrFail();
  RequireOk(Cli(*node, {"map", "put", "fruit", "apple", "red"}), "(nil)\n");
  RequireOk(Cli(*node, {"map", "put", "fruit", "apple", "green"}), "red\n");
  RequireOk(Cli(*node, {"map", "put", "fruit", "kiwi", "-5"}), "(nil)\n");  // not a flag
  RequireOk(Cli(*node, {"map", "get", "fruit", "apple"}), "green\n");
  RequireOk(Cli(*node, {"map", "get", "fruit", "pear"}), "(nil)\n");
  RequireOk(Cli(*node, {"map", "size", "fruit"}), "2\n");
  RequireOk(Cli(*node, {"map", "entries", "fruit"}),
            "KEY    VALUE\napple  green\nkiwi   -5\n(2 entries)\n");
  RequireOk(Cli(*node, {"map", "entries", "fruit", "--limit", "1"}),
            "KEY    VALUE\napple  green\n(showing 1 of 2 entries)\n");
  RequireOk(Cli(*node, {"map", "put-if-absent", "fruit", "apple", "blue"}), "exists: green\n");
  RequireOk(Cli(*node, {"map", "put-if-absent", "fruit", "plum", "blue", "--ttl", "60000"}),
            "stored\n");
  RequireOk(Cli(*node, {"map", "remove", "fruit", "kiwi"}), "-5\n");
  RequireOk(Cli(*node, {"map", "remove", "fruit", "kiwi"}), "(nil)\n");
  RequireOk(Cli(*node, {"map", "clear", "fruit"}), "cleared 2 entries\n");
  RequireOk(Cli(*node, {"map", "size", "fruit"}), "0\n");
  auto ping = Cli(*node, {"ping"});
  CHECK(ping.exit_code == 0);
  CHECK(ping.out.rfind("PONG from " + node->address(), 0) == 0);
}

TEST_CASE("grid-cli --json emits one parsable document per command", "[tools][cli]") {
  auto node = NodeProcess::StartOrFail();
  CHECK(CliJson(*node, {"map", "put", "m", "a", "1"})["previous"].is_null());
  auto get = CliJson(*node, {"map", "get", "m", "a"});
  CHECK(get["key"] == "a");
  CHECK(get["value"] == "1");
  CHECK(CliJson(*node, {"map", "get", "m", "missing"})["value"].is_null());
  CHECK(CliJson(*node, {"map", "size", "m"})["size"] == 1);
  auto pia = CliJson(*node, {"map", "put-if-absent", "m", "a", "2"});
  CHECK(pia["stored"] == false);
  CHECK(pia["existing"] == "1");
  auto entries = CliJson(*node, {"map", "entries", "m"});
  CHECK(entries["count"] == 1);
  CHECK(entries["entries"] == json::array({{{"key", "a"}, {"value", "1"}}}));
  auto stats = CliJson(*node, {"map", "stats", "m"});
  CHECK(stats["entries"] == 1);
  CHECK(stats["puts"].get<std::int64_t>() >= 1);
  CHECK(CliJson(*node, {"map", "remove", "m", "a"})["removed"] == "1");
  auto ping = CliJson(*node, {"ping"});
  CHECK(ping["address"] == node->address());
}

TEST_CASE("grid-cli query filters records with a predicate and prints them as JSON",
          "[tools][cli][query]") {
  auto node = NodeProcess::StartOrFail();
  struct Row {
    const char* key;
    const char* value;
  };
  for (Row row :
       {Row{"ann", R"({"age": 34, "city": "Oslo"})"}, Row{"bob", R"({"age": 29, "city": "Oslo"})"},
        Row{"cid", R"({"age": 51, "city": "Bergen"})"}}) {
    RequireOk(Cli(*node, {"map", "put", "people", row.key, row.value, "--record"}), "(nil)\n");
  }
  RequireOk(Cli(*node, {"map", "put", "people", "raw", "plain text"}), "(nil)\n");
  auto doc = CliJson(*node, {"map", "query", "people", "age > 30 AND city = 'Oslo'"});
  REQUIRE(doc["count"] == 1);
  CHECK(doc["entries"][0]["key"] == "ann");
  CHECK(doc["entries"][0]["value"]["age"] == 34);
  CHECK(doc["entries"][0]["value"]["city"] == "Oslo");
  auto text = Cli(*node, {"map", "query", "people", "age >= 29"});
  CHECK(text.exit_code == 0);
  CHECK(Lines(text.out).size() == 5);  // header, ann, bob, cid, footer
  CHECK(text.out.find("\"city\":\"Bergen\"") != std::string::npos);
  CHECK(text.out.find("(3 entries)") != std::string::npos);
}

TEST_CASE("grid-cli reports runtime failures in one line with exit code 1", "[tools][cli]") {
  std::string nowhere = "127.0.0.1:" + std::to_string(UnusedPort());
  RequireOneLineError(RunProcess(GRID_CLI_PATH, {"--address", nowhere, "map", "get", "m", "k"}), 1,
                      nowhere);

  auto node = NodeProcess::StartOrFail({"--secret", "s3cret"});
  RequireOneLineError(Cli(*node, {"--secret", "wrong", "map", "size", "m"}), 1, "secret");
  RequireOneLineError(Cli(*node, {"--cluster-name", "other", "map", "size", "m"}), 1, "cluster");
  auto ok = Cli(*node, {"--secret", "s3cret", "map", "size", "m"});
  CHECK(ok.exit_code == 0);

  // A peer that accepts connections but never answers: bounded by --timeout, one line.
  int silent = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(silent, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(listen(silent, 4) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(getsockname(silent, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  std::string silent_address = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  auto start = std::chrono::steady_clock::now();
  auto r = RunProcess(GRID_CLI_PATH,
                      {"--address", silent_address, "--timeout", "500", "map", "get", "m", "k"});
  close(silent);
  RequireOneLineError(r, 1, silent_address);
  CHECK(std::chrono::steady_clock::now() - start < 6s);

  CHECK(node->Stop() == 0);
  RequireOneLineError(Cli(*node, {"map", "size", "m"}), 1, node->address());
}

TEST_CASE("grid-cli map list shows every map of the cluster, map entries --where filters",
          "[tools][cli]") {
  auto a = NodeProcess::StartOrFail({});
  auto b = NodeProcess::StartOrFail({"--join", a->address()});
  auto c = NodeProcess::StartOrFail({"--join", a->address()});
  WaitForMembers(*a, 3);
  WaitForMembers(*c, 3);
  RequireOk(
      Cli(*a, {"map", "list"}),
      "map                                   entries   memory bytes         gets         puts\n"
      "(no maps: a map exists once it holds an entry)\n");
  // One entry is on two of the three members: asked through either, the list has its map.
  REQUIRE(Cli(*a, {"map", "put", "solo", "k", "v"}).exit_code == 0);
  for (int i = 0; i < 5; ++i) {
    REQUIRE(Cli(*b, {"map", "put", "people", "p" + std::to_string(i),
                     R"({"age": )" + std::to_string(20 + 10 * i) + "}", "--record"})
                .exit_code == 0);
  }
  REQUIRE(Cli(*b, {"map", "put", "__internal", "k", "v"}).exit_code == 0);
  for (const auto* node : {a.get(), b.get(), c.get()}) {
    auto listed = CliJson(*node, {"map", "list"});
    REQUIRE(listed["maps"].size() == 2);
    CHECK(listed["maps"][0]["map"] == "people");
    CHECK(listed["maps"][0]["entries"] == 5);
    CHECK(listed["maps"][0]["memory_bytes"].get<std::int64_t>() > 0);
    CHECK(listed["maps"][1]["map"] == "solo");
    CHECK(listed["maps"][1]["entries"] == 1);
    CHECK(listed["members"] == 3);
  }
  auto all = CliJson(*c, {"map", "list", "--internal"});
  REQUIRE(all["maps"].size() == 3);
  CHECK(all["maps"][0]["map"] == "__internal");
  auto text = Cli(*c, {"map", "list"});
  CHECK(text.exit_code == 0);
  CHECK(std::regex_search(text.out, std::regex(R"(\npeople +5 +[1-9][0-9]* +0 +5\n)")));

  auto old = CliJson(*a, {"map", "entries", "people", "--where", "age >= 40", "--limit", "1"});
  CHECK(old["count"] == 3);
  REQUIRE(old["entries"].size() == 1);
  CHECK(old["entries"][0]["key"] == "p2");
  CHECK(old["predicate"] == "age >= 40");
  RequireOk(Cli(*a, {"map", "entries", "people", "--where", "age > 55"}),
            "KEY  VALUE\np4   {\"age\":60}\n(1 entries)\n");
  RequireOneLineError(Cli(*a, {"map", "entries", "people", "--where", "age >>"}), 2,
                      "bad predicate");
  RequireOneLineError(Cli(*a, {"map", "get", "people", "p1", "--where", "age > 1"}), 2,
                      "--where does not apply to 'map get'");
  RequireOneLineError(Cli(*a, {"map", "list", "extra"}), 2, "'map list' takes no arguments");
  RequireOneLineError(Cli(*a, {"map", "size", "people", "--internal"}), 2,
                      "--internal does not apply");
}

TEST_CASE("grid-cli rejects bad arguments with exit code 2 before connecting", "[tools][cli]") {
  // No member anywhere: usage errors must not depend on the network.
  auto cli = [](std::vector<std::string> args) { return RunProcess(GRID_CLI_PATH, args, 20s); };
  RequireOneLineError(cli({}), 2, "--help");
  RequireOneLineError(cli({"frobnicate"}), 2, "frobnicate");
  RequireOneLineError(cli({"map"}), 2, "subcommand");
  RequireOneLineError(cli({"map", "fly", "m"}), 2, "fly");
  RequireOneLineError(cli({"map", "get", "m"}), 2, "NAME KEY");
  RequireOneLineError(cli({"map", "put", "m", "k", "v", "--ttl", "soon"}), 2, "soon");
  RequireOneLineError(cli({"map", "get", "m", "k", "--ttl", "5"}), 2, "--ttl");
  RequireOneLineError(cli({"map", "query", "m", "age >> 3"}), 2, "predicate");
  RequireOneLineError(cli({"map", "put", "m", "k", "[1]", "--record"}), 2, "JSON object");
  RequireOneLineError(cli({"--address", "nohost", "ping"}), 2, "nohost");
  RequireOneLineError(cli({"--timeout", "0", "ping"}), 2, "--timeout");
  RequireOneLineError(cli({"--bogus", "ping"}), 2, "bogus");
  RequireOneLineError(cli({"topic"}), 2, "subcommand");
  RequireOneLineError(cli({"topic", "publish", "t"}), 2, "NAME MESSAGE");
  RequireOneLineError(cli({"topic", "stats", "--count", "3"}), 2, "--count");
  RequireOneLineError(cli({"topic", "subscribe", "t", "--for", "soon"}), 2, "soon");
  RequireOneLineError(cli({"topic", "subscribe", "t", "--from", "0"}), 2, "--from");
  RequireOneLineError(cli({"topic", "stats", "--reliable"}), 2, "--reliable");
  RequireOneLineError(cli({"stream"}), 2, "subcommand");
  RequireOneLineError(cli({"stream", "info"}), 2, "NAME");
  RequireOneLineError(cli({"stream", "list", "--group", "g"}), 2, "--group");
  RequireOneLineError(cli({"stream", "tail", "s", "--from", "3"}), 2, "oldest");
  RequireOneLineError(cli({"fault"}), 2, "fault heal");
  RequireOneLineError(cli({"dlq"}), 2, "subcommand");
  RequireOneLineError(cli({"dlq", "show", "billing"}), 2, "GROUP EVENT_ID");
  RequireOneLineError(cli({"dlq", "discard", "billing", "x"}), 2, "invalid EVENT_ID 'x'");
  RequireOneLineError(cli({"dlq", "replay", "billing"}), 2, "exactly one of EVENT_ID, --all");
  RequireOneLineError(cli({"dlq", "replay", "billing", "5", "--all"}), 2, "exactly one of");
  RequireOneLineError(cli({"dlq", "list", "billing", "--all"}), 2, "--all");
  RequireOneLineError(cli({"dlq", "replay", "billing", "--all", "--wait", "0"}), 2, "--wait");
  RequireOneLineError(cli({"dlq", "count", "billing", "--older-than", "x"}), 2, "--older-than");
  RequireOneLineError(cli({"map", "size", "m", "--type", "T"}), 2, "--type");
  RequireOneLineError(cli({"outbox"}), 2, "outbox status");
  RequireOneLineError(cli({"consumers", "x"}), 2, "takes no arguments");
  RequireOneLineError(cli({"fault", "block", "nohost"}), 2, "'nohost'");
  RequireOneLineError(cli({"fault", "block", ","}), 2, "at least one HOST:PORT");
}

TEST_CASE("grid-cli --help describes the tool and each command group", "[tools][cli]") {
  auto general = RunProcess(GRID_CLI_PATH, {"--help"});
  CHECK(general.exit_code == 0);
  CHECK(general.out.find("--address") != std::string::npos);
  CHECK(general.out.find("map <subcommand>") != std::string::npos);
  auto group = RunProcess(GRID_CLI_PATH, {"map", "--help"});
  CHECK(group.exit_code == 0);
  for (const char* sub : {"put ", "get ", "remove ", "size ", "entries ", "query ",
                          "put-if-absent ", "clear ", "stats "}) {
    CHECK(group.out.find(std::string("map ") + sub) != std::string::npos);
  }
}

TEST_CASE("grid-cli publishes to a topic on one member and subscribes through another",
          "[tools][cli][topic]") {
  auto a = NodeProcess::StartOrFail({"--heartbeat-ms", "200"});
  auto b = NodeProcess::StartOrFail({"--heartbeat-ms", "200", "--join", a->address()});
  WaitForMembers(*b, 2);
  ProcessResult subscriber;
  std::thread listen([&] {
    subscriber =
        Cli(*b, {"--json", "topic", "subscribe", "news", "--count", "2", "--for", "15000"});
  });
  // Once the subscriber (a separate process) is registered, publish through the other member.
  bool listening = false;
  for (int i = 0; i < 100 && !listening; ++i) {
    auto stats = CliJson(*a, {"topic", "stats"});
    listening = stats["topics"].contains("news") && stats["topics"]["news"]["listeners"] == 1;
    if (!listening) std::this_thread::sleep_for(100ms);
  }
  REQUIRE(listening);
  RequireOk(Cli(*a, {"topic", "publish", "news", "first"}), "published to news\n");
  RequireOk(Cli(*a, {"topic", "publish", "news", "second"}), "published to news\n");
  listen.join();
  INFO("subscriber stderr: " << subscriber.err);
  CHECK(subscriber.exit_code == 0);
  auto lines = Lines(subscriber.out);
  REQUIRE(lines.size() == 2);
  CHECK(json::parse(lines[0])["payload"] == "first");
  CHECK(json::parse(lines[1])["payload"] == "second");
  CHECK(json::parse(lines[1])["publisher"].get<std::string>().rfind("client:", 0) == 0);
  // Summed over both members: published once (on a), delivered to the one listener (on b).
  auto stats = CliJson(*a, {"topic", "stats"});
  CHECK(stats["members"] == 2);
  CHECK(stats["topics"]["news"]["published"] == 2);
  CHECK(stats["topics"]["news"]["delivered"] == 2);
  // The same counters per member in the Prometheus text format.
  auto metrics_a = Cli(*a, {"metrics"});
  CHECK(metrics_a.exit_code == 0);
  CHECK(metrics_a.out.find("tessera_topic_published_total{topic=\"news\"} 2") != std::string::npos);
  auto metrics_b = Cli(*b, {"metrics"});
  CHECK(metrics_b.out.find("tessera_topic_delivered_total{topic=\"news\"} 2") != std::string::npos);
  CHECK(metrics_b.out.find("tessera_topic_listeners{topic=\"news\"}") != std::string::npos);

  // A reliable topic keeps its messages: a subscriber started later reads them by sequence.
  RequireOk(Cli(*a, {"topic", "publish", "ledger", "one", "--reliable"}),
            "published to ledger as sequence 1\n");
  RequireOk(Cli(*b, {"topic", "publish", "ledger", "two", "--reliable"}),
            "published to ledger as sequence 2\n");
  RequireOk(Cli(*b, {"topic", "subscribe", "ledger", "--from", "oldest", "--count", "2"}),
            "1 one\n2 two\n");
  RequireOk(Cli(*a, {"topic", "subscribe", "ledger", "--from", "2", "--count", "1"}), "2 two\n");
}

TEST_CASE("grid-node keeps statistics of their own for at most --topic-stats-limit topic names",
          "[tools][cli][topic]") {
  auto node = NodeProcess::StartOrFail({"--topic-stats-limit", "1"});
  for (std::string name : {"a", "b", "c"}) {
    RequireOk(Cli(*node, {"topic", "publish", name, "m"}), "published to " + name + "\n");
  }
  auto metrics = Cli(*node, {"metrics"});
  REQUIRE(metrics.exit_code == 0);
  CHECK(metrics.out.find("tessera_topics_published_total 3\n") != std::string::npos);
  std::size_t per_topic = 0;
  for (const auto& line : Lines(metrics.out)) {
    if (line.starts_with("tessera_topic_published_total{")) ++per_topic;
  }
  CHECK(per_topic == 1);
}

TEST_CASE("grid-cli shows streams, their groups' lag, and tails events", "[tools][cli][stream]") {
  auto node = NodeProcess::StartOrFail();
  auto client = ConnectOrFail(*node);
  grid::StreamConfig config;
  config.sub_streams = 4;
  config.groups = {"billing"};
  auto stream = client->GetStream("orders", config);
  std::vector<grid::StreamAppend> events;
  for (int i = 0; i < 10; ++i) {
    events.push_back(
        {"k" + std::to_string(i % 3), "p" + std::to_string(i), "e" + std::to_string(i)});
  }
  REQUIRE(stream->AppendAll(events));

  auto list = CliJson(*node, {"stream", "list"});
  REQUIRE(list["streams"].size() == 1);
  CHECK(list["streams"][0]["stream"] == "orders");
  CHECK(list["streams"][0]["events"] == 10);
  CHECK(list["streams"][0]["groups"][0]["lag"] == 10);
  auto text = Cli(*node, {"stream", "list"});
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("orders") != std::string::npos);

  auto info = CliJson(*node, {"stream", "info", "orders"});
  CHECK(info["config"]["sub_streams"] == 4);
  CHECK(info["sub_streams"].size() == 4);
  CHECK(info["appended"] == 10);

  // Consume 4 as group billing (committed), then the groups view shows the rest as lag.
  auto tail = Cli(
      *node, {"stream", "tail", "orders", "--group", "billing", "--count", "4", "--for", "10000"});
  CHECK(tail.exit_code == 0);
  CHECK(Lines(tail.out).size() == 4);
  auto groups = CliJson(*node, {"stream", "groups", "orders"});
  REQUIRE(groups["groups"].size() == 1);
  CHECK(groups["groups"][0]["group"] == "billing");
  CHECK(groups["groups"][0]["lag"] == 6);
  CHECK(groups["groups"][0]["leases"] == 0);  // grid-cli released its leases

  // Without a group: every stored event from the oldest, nothing committed. The 4 billing
  // committed are gone (its only group has them), so 6 remain.
  auto all =
      Cli(*node, {"--json", "stream", "tail", "orders", "--from", "oldest", "--for", "1500"});
  CHECK(all.exit_code == 0);
  CHECK(Lines(all.out).size() == 6);
  CHECK(CliJson(*node, {"stream", "groups", "orders"})["groups"][0]["lag"] == 6);

  auto missing = Cli(*node, {"stream", "info", "nope"});
  RequireOneLineError(missing, 1, "does not exist");
}

TEST_CASE("grid-cli lists, counts, shows and discards a consumer group's dead letters",
          "[tools][cli][dlq]") {
  auto node = NodeProcess::StartOrFail({});
  std::shared_ptr<grid::Instance> client = ConnectOrFail(*node);
  saga::DeadLetterQueue dlq(client, "billing");
  auto letter = [](std::int64_t id, bool parked) {
    saga::DeadLetter l;
    l.event.id = id;
    l.event.type = "OrderPlaced";
    l.event.key = "order-1@cust-1";
    l.group = "billing";
    l.handler = "OrderPlaced";
    l.parked = parked;
    l.error = parked ? "" : "card declined";
    l.attempts = parked ? 0 : 3;
    return l;
  };
  REQUIRE(dlq.Add(letter(501, false)));
  REQUIRE(dlq.Add(letter(502, true)));

  RequireOk(Cli(*node, {"dlq", "count", "billing"}), "2\n");
  RequireOk(Cli(*node, {"dlq", "list", "billing"}),
            "501 OrderPlaced order-1@cust-1 failed attempts=3 replays=0 card declined\n"
            "502 OrderPlaced order-1@cust-1 parked attempts=0 replays=0\n");
  auto shown = CliJson(*node, {"dlq", "show", "billing", "502"});
  CHECK(shown["event_id"] == 502);
  CHECK(shown["parked"] == true);
  auto listed = CliJson(*node, {"dlq", "list", "billing"});
  CHECK(listed["dead_letters"].size() == 2);
  RequireOk(Cli(*node, {"dlq", "discard", "billing", "501"}),
            "discarded dead letter 501 of group billing: (no reason given)\n");
  RequireOk(Cli(*node, {"dlq", "discard", "billing", "502", "--reason", "order cancelled"}),
            "discarded dead letter 502 of group billing: order cancelled\n");
  RequireOk(Cli(*node, {"dlq", "count", "billing"}), "0\n");
  REQUIRE(dlq.Add(letter(502, true)));
  RequireOk(Cli(*node, {"dlq", "count", "billing"}), "1\n");
  RequireOneLineError(Cli(*node, {"dlq", "show", "billing", "501"}), 1,
                      "group 'billing' has no dead letter of event 501");
  RequireOk(Cli(*node, {"dlq", "count", "audit"}), "0\n");  // another group: none
}

}  // namespace tessera::integration

namespace tessera::integration {
namespace {

saga::Event OrderEvent(std::int64_t id, int n) {
  saga::Event e;
  e.id = id;
  e.type = "Placed";
  e.key = "order@cust-9";
  e.source = "orders-svc";
  e.time_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  e.payload = record::GenericRecord::Build().Int64("n", n).Done();
  return e;
}

}  // namespace

TEST_CASE(
    "grid-cli replays dead letters through the group's running consumer, filters them, lists "
    "consumer groups and shows a service member's outbox",
    "[tools][cli][dlq]") {
  auto node = NodeProcess::StartOrFail({});
  std::shared_ptr<grid::Instance> shared = ConnectOrFail(*node);
  grid::MemberOptions service_options;  // the service's embedded member, on loopback
  service_options.port = 0;
  service_options.threads = 1;
  service_options.cluster_name = "orders-svc";
  grid::Member service(service_options);
  REQUIRE(service.Start());
  saga::Inbox inbox(service);
  saga::ConsumerOptions o;
  o.group = "billing";
  o.streams = {"orders"};
  o.stream_config.sub_streams = 2;
  o.retry.max_attempts = 1;
  o.maintenance_ms = 50;
  auto billing = std::make_unique<saga::Consumer>(shared, service, inbox, o);
  std::atomic<bool> broken{true};
  billing->On("Placed", [&](const saga::Event&, saga::HandlerContext&) -> base::Result<void> {
    if (broken) return base::Fail(base::ErrorCode::kBadRequest, "cannot bill");
    return {};
  });
  REQUIRE(billing->Start());
  auto stream = shared->GetStream("orders", o.stream_config);
  for (int n = 0; n < 2; ++n) {
    const auto e = OrderEvent(801 + n, n);
    REQUIRE(stream->Append(e.key, saga::EncodeEvent(e), std::to_string(e.id)));
  }
  const auto settled = [&] {
    const auto st = billing->stats();
    return st.dead_lettered == 1 && st.parked == 1;
  };
  for (int i = 0; i < 2000 && !settled(); ++i) std::this_thread::sleep_for(10ms);
  REQUIRE(settled());

  // Filters.
  RequireOk(Cli(*node, {"dlq", "count", "billing", "--key", "order@cust-9"}), "2\n");
  RequireOk(Cli(*node, {"dlq", "count", "billing", "--type", "Shipped"}), "0\n");
  RequireOk(Cli(*node, {"dlq", "count", "billing", "--older-than", "3600000"}), "0\n");
  CHECK(CliJson(*node, {"dlq", "list", "billing", "--newer-than", "3600000"})["dead_letters"]
            .size() == 2);
  // Still broken: the consumer runs the replay, which fails, and the tool says so.
  RequireOneLineError(Cli(*node, {"dlq", "replay", "billing", "801"}), 1,
                      "0 replayed, 1 failed: cannot bill");
  broken = false;
  auto replayed = Cli(*node, {"dlq", "replay", "billing", "--all"});
  INFO("stderr: " << replayed.err);
  CHECK(replayed.exit_code == 0);
  CHECK(replayed.out.rfind("replayed 2 event(s) in group billing (by billing-", 0) == 0);
  RequireOk(Cli(*node, {"dlq", "count", "billing"}), "0\n");
  CHECK(billing->stats().replayed == 2);

  auto consumers = CliJson(*node, {"consumers"});
  REQUIRE(consumers["groups"].size() == 1);
  const auto& group = consumers["groups"][0];
  CHECK(group["group"] == "billing");
  CHECK(group["stream"] == "orders");
  CHECK(group["lag"] == 0);
  CHECK(group["leases"] == 2);
  CHECK(group["dead_letters"] == 0);
  auto text = Cli(*node, {"consumers"});
  CHECK(text.exit_code == 0);
  CHECK(text.out.rfind("group ", 0) == 0);
  CHECK(text.out.find("billing              orders") != std::string::npos);

  // Nobody consumes the group: the request is withdrawn and the tool says what to do.
  billing.reset();
  RequireOneLineError(Cli(*node, {"dlq", "replay", "billing", "--all", "--wait", "300"}), 1,
                      "no consumer of group 'billing' took the replay request within 300 ms");

  // The outbox of the service member: staged events no relay has published.
  grid::Transaction tx("cust-5");
  for (int n = 0; n < 3; ++n) {
    auto e = OrderEvent(900 + n, n);
    e.key = "order@cust-5";
    REQUIRE(saga::Outbox::Stage(tx, e));
  }
  REQUIRE(service.Transact(tx));
  const std::string service_address = "127.0.0.1:" + std::to_string(service.native_port());
  auto outbox = RunProcess(
      GRID_CLI_PATH,
      {"--address", service_address, "--cluster-name", "orders-svc", "--json", "outbox", "status"},
      20s);
  INFO("stderr: " << outbox.err);
  REQUIRE(outbox.exit_code == 0);
  auto doc = json::parse(outbox.out);
  CHECK(doc["pending"] == 3);
  REQUIRE(doc["services"].size() == 1);
  CHECK(doc["services"][0]["service"] == "orders-svc");
  CHECK(doc["services"][0]["pending"] == 3);
  CHECK(doc["services"][0]["partitions"].size() == 1);
  CHECK(doc["services"][0]["oldest_age_ms"].get<std::int64_t>() < 60'000);
  auto empty = RunProcess(GRID_CLI_PATH, {"--address", node->address(), "outbox", "status"}, 20s);
  CHECK(empty.exit_code == 0);
  CHECK(empty.out.find("(nothing pending") != std::string::npos);
}

}  // namespace tessera::integration

namespace tessera::integration {

TEST_CASE("grid-cli lists, shows and counts the sagas of an orchestrating service's member",
          "[tools][cli][saga]") {
  grid::MemberOptions o;  // the orchestrating service's embedded member, on loopback
  o.port = 0;
  o.threads = 1;
  o.cluster_name = "orders-svc";
  grid::Member service(o);
  saga::RegisterSagaProcessor(service.processors());
  REQUIRE(service.Start());
  saga::SagaStore sagas(service);
  const auto order = record::GenericRecord::Build("Order").Int64("total", 1250).Done();
  const std::vector<std::string> steps = {"reserve", "charge", "ship"};
  REQUIRE(sagas.Start("order-1@cust-1", "fulfillment", steps, order, 0).value().applied);
  REQUIRE(sagas.Start("order-2@cust-2", "fulfillment", steps, order, 0).value().applied);
  REQUIRE(sagas.Start("refund-3@cust-3", "refund", {"pay"}, order, 0).value().applied);
  for (int i = 0; i < 3; ++i)
    REQUIRE(sagas.Apply("order-1@cust-1", saga::StepDone(i)).value().applied);
  REQUIRE(sagas.Apply("order-2@cust-2", saga::StepDone(0, "reserved")).value().applied);
  REQUIRE(sagas.Apply("order-2@cust-2", saga::StepFailed(1, "card declined")).value().applied);
  const std::string address = "127.0.0.1:" + std::to_string(service.native_port());
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--address", address, "--cluster-name", "orders-svc"});
    return RunProcess(GRID_CLI_PATH, args, 20s);
  };
  auto json_of = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "--json");
    auto r = cli(args);
    INFO("stderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    return json::parse(r.out);
  };
  auto list = json_of({"saga", "list"});
  REQUIRE(list["sagas"].size() == 3);
  CHECK(list["sagas"][0]["id"] == "order-1@cust-1");
  CHECK(list["sagas"][0]["status"] == "COMPLETED");
  CHECK(list["sagas"][1]["status"] == "COMPENSATING");
  CHECK(list["sagas"][1]["failure_reason"] == "step charge failed: card declined");
  CHECK(json_of({"saga", "list", "--status", "STARTED"})["sagas"].size() == 1);
  CHECK(json_of({"saga", "list", "--type", "fulfillment"})["sagas"].size() == 2);
  CHECK(json_of({"saga", "list", "--older-than", "3600000"})["sagas"].empty());
  auto shown = json_of({"saga", "show", "order-2@cust-2"});
  CHECK(shown["version"] == 3);
  REQUIRE(shown["steps"].size() == 3);
  CHECK(shown["steps"][0]["status"] == "DONE");
  CHECK(shown["steps"][0]["result"] == "reserved");
  CHECK(shown["steps"][1]["status"] == "FAILED");
  CHECK(shown["data"]["total"] == 1250);
  auto text = cli({"saga", "show", "order-2@cust-2"});
  CHECK(text.exit_code == 0);
  CHECK(text.out.rfind("saga order-2@cust-2 (fulfillment): COMPENSATING, version 3", 0) == 0);
  auto stats = json_of({"saga", "stats"});
  CHECK(stats["sagas"] == 3);
  CHECK(stats["active"] == 2);
  CHECK(stats["by_status"]["COMPLETED"] == 1);
  CHECK(stats["by_type"]["fulfillment"] == 2);
  RequireOneLineError(cli({"saga", "show", "order-9@cust-9"}), 1, "no saga 'order-9@cust-9'");
  RequireOneLineError(cli({"saga", "list", "--status", "DONE"}), 2, "invalid --status 'DONE'");
  RequireOneLineError(cli({"saga", "stats", "--type", "x"}), 2, "--type does not apply");
  RequireOneLineError(cli({"saga"}), 2, "subcommand");
}

}  // namespace tessera::integration
