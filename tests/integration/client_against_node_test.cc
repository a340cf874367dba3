// tessera::grid::Client against a real grid-node process: the map operations a service relies
// on, TTL expiry, entry processors, predicate queries and entry listeners, end to end over TCP.
#include <catch2/catch.hpp>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "child_process.h"
#include "tessera/record/generic_record.h"

namespace tessera::integration {
namespace {

using record::GenericRecord;
using Optional = std::optional<std::string>;

GenericRecord Person(std::int64_t age, std::string city) {
  return GenericRecord::Build("Person").Int64("age", age).String("city", std::move(city)).Done();
}

// Entry events as a listener receives them; thread-safe.
struct EventLog {
  std::mutex mutex;
  std::condition_variable arrived;
  std::vector<map::EntryEvent> events;

  map::EntryListener Listener() {
    return [this](const map::EntryEvent& e) {
      std::lock_guard lock(mutex);
      events.push_back(e);
      arrived.notify_all();
    };
  }
  // The first `n` events, once they arrived within 5 s; fewer if they did not.
  std::vector<map::EntryEvent> WaitFor(std::size_t n) {
    std::unique_lock lock(mutex);
    arrived.wait_for(lock, 5s, [&] { return events.size() >= n; });
    return events;
  }
};

}  // namespace

TEST_CASE("Client put/get/remove/putIfAbsent round-trip through grid-node", "[tools][client]") {
  auto node = NodeProcess::StartOrFail();
  auto client = ConnectOrFail(*node);
  auto m = client->GetMap("orders");

  CHECK(m->Put("k1", "v1").value() == std::nullopt);
  CHECK(m->Put("k1", "v2").value() == Optional("v1"));
  CHECK(m->Get("k1").value() == Optional("v2"));
  CHECK(m->Get("absent").value() == std::nullopt);
  CHECK(m->PutIfAbsent("k1", "v3").value() == Optional("v2"));
  CHECK(m->PutIfAbsent("k2", "w").value() == std::nullopt);
  CHECK(m->Size().value() == 2);
  CHECK(m->Remove("k1").value() == Optional("v2"));
  CHECK(m->Remove("k1").value() == std::nullopt);
  CHECK(m->Get("k1").value() == std::nullopt);
  CHECK(m->Size().value() == 1);
  std::string binary("a\0b\xff", 4);
  REQUIRE(m->Set(binary, binary));
  CHECK(m->Get(binary).value() == Optional(binary));
  client->Shutdown();
  CHECK(node->Stop() == 0);
}

TEST_CASE("putIfAbsent with a TTL expires after the TTL and the key can be taken again",
          "[tools][client][ttl]") {
  auto node = NodeProcess::StartOrFail();
  auto client = ConnectOrFail(*node);
  auto m = client->GetMap("locks");
  auto taken_at = std::chrono::steady_clock::now();
  REQUIRE(m->PutIfAbsent("lock", "owner-a", grid::WithTtl(500)).value() == std::nullopt);
  CHECK(m->PutIfAbsent("lock", "owner-b", grid::WithTtl(500)).value() == Optional("owner-a"));
  CHECK(m->Get("lock").value() == Optional("owner-a"));

  bool expired = false;
  for (int i = 0; i < 300 && !expired; ++i) {  // bounded: 3 s
    expired = !m->Get("lock").value().has_value();
    if (!expired) std::this_thread::sleep_for(10ms);
  }
  REQUIRE(expired);
  CHECK(std::chrono::steady_clock::now() - taken_at >= 450ms);
  CHECK(m->PutIfAbsent("lock", "owner-b", grid::WithTtl(500)).value() == std::nullopt);
  CHECK(m->Get("lock").value() == Optional("owner-b"));
  client->Shutdown();
}

TEST_CASE("increment entry processor runs on the member and returns the new value",
          "[tools][client][processor]") {
  auto node = NodeProcess::StartOrFail();
  auto client = ConnectOrFail(*node);
  auto m = client->GetMap("counters");
  auto by5 = GenericRecord::Build().String("field", "hits").Int64("delta", 5).Done();
  CHECK(m->ExecuteOnKey("page", "increment", by5).value().GetInt64("value").value() == 5);
  CHECK(m->ExecuteOnKey("page", "increment", by5).value().GetInt64("value").value() == 10);
  auto stored = GenericRecord::Decode(m->Get("page").value().value());
  REQUIRE(stored);
  CHECK(stored->GetInt64("hits").value() == 10);
  auto unknown = m->ExecuteOnKey("page", "noSuchProcessor");
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().code() == base::ErrorCode::kUnknownProcessor);
  client->Shutdown();
}

TEST_CASE("A predicate query returns exactly the matching entries", "[tools][client][query]") {
  auto node = NodeProcess::StartOrFail();
  auto client = ConnectOrFail(*node);
  auto people = client->GetTypedMap<std::string, GenericRecord>("people");
  REQUIRE(people.Set("ann", Person(34, "Oslo")));
  REQUIRE(people.Set("bob", Person(29, "Oslo")));
  REQUIRE(people.Set("cid", Person(51, "Bergen")));
  REQUIRE(people.Set("dag", Person(40, "Oslo")));
  REQUIRE(people.raw().Set("eve", "not a record"));

  auto predicate = map::Predicate::Parse("age > 30 AND city = 'Oslo'");
  REQUIRE(predicate);
  auto entries = people.raw().EntrySet(*predicate);
  REQUIRE(entries);
  std::set<std::string> keys;
  for (const auto& [key, value] : *entries) {
    keys.insert(key);
    CHECK(GenericRecord::Decode(value).value().GetString("city").value() == "Oslo");
  }
  CHECK(keys == std::set<std::string>{"ann", "dag"});
  auto key_set = people.raw().KeySet(map::Predicate::Parse("__key LIKE 'b%'").value());
  CHECK(key_set.value() == std::vector<std::string>{"bob"});
  client->Shutdown();
}

TEST_CASE("An entry listener on a client receives added, updated and removed events",
          "[tools][client][listener]") {
  auto node = NodeProcess::StartOrFail();
  auto client = ConnectOrFail(*node);
  auto m = client->GetMap("watched");
  EventLog log;
  auto id = m->AddEntryListener(log.Listener());
  REQUIRE(id);
  REQUIRE(m->Put("k", "v1"));
  REQUIRE(m->Put("k", "v2"));
  REQUIRE(m->Remove("k"));
  auto events = log.WaitFor(3);
  REQUIRE(events.size() == 3);
  CHECK(events[0].type == map::EntryEventType::kAdded);
  CHECK(events[0].value == Optional("v1"));
  CHECK(events[1].type == map::EntryEventType::kUpdated);
  CHECK(events[1].value == Optional("v2"));
  CHECK(events[1].old_value == Optional("v1"));
  CHECK(events[2].type == map::EntryEventType::kRemoved);
  CHECK(events[2].old_value == Optional("v2"));
  for (const auto& e : events) {
    CHECK(e.key == "k");
    CHECK(e.map_name == "watched");
  }
  CHECK(m->RemoveEntryListener(*id).value());
  REQUIRE(m->Put("k", "v3"));
  REQUIRE(m->Get("k"));  // a round trip after the put: a stray event would have been sent
  std::this_thread::sleep_for(200ms);
  CHECK(log.WaitFor(0).size() == 3);
  client->Shutdown();
}

TEST_CASE(
    "An entry listener added while the member forms its first view gets the next writes' events",
    "[tools][client][listener]") {
  // The member asks an unreachable seed for 3 s before it starts a cluster alone; until then
  // its view lists no member, and map calls wait for the view.
  auto node = NodeProcess::StartOrFail(
      {"--join", "127.0.0.1:" + std::to_string(UnusedPort()), "--join-timeout-ms", "3000"});
  auto client = ConnectOrFail(*node);
  auto view = client->FetchClusterView();
  REQUIRE(view);
  REQUIRE(view->members.members.empty());  // the case under test: no view formed yet
  auto m = client->GetMap("watched");
  EventLog log;
  REQUIRE(m->AddEntryListener(log.Listener()));
  // Registered on the member when the call returns, not later when its view arrives: a write
  // the member runs as soon as it has its view must be reported.
  auto metrics = client->FetchMetricsText();
  REQUIRE(metrics);
  CHECK(metrics->find("tessera_map_entry_listeners{map=\"watched\"} 1\n") != std::string::npos);
  REQUIRE(m->Put("k", "v1"));  // runs once the member has started its cluster
  REQUIRE(m->Remove("k"));
  auto events = log.WaitFor(2);
  REQUIRE(events.size() == 2);
  CHECK(events[0].type == map::EntryEventType::kAdded);
  CHECK(events[0].value == Optional("v1"));
  CHECK(events[1].type == map::EntryEventType::kRemoved);
  CHECK(events[1].old_value == Optional("v1"));
  client->Shutdown();
}

}  // namespace tessera::integration

namespace tessera::integration {

TEST_CASE("grid-node answers lean frames by default and keeps to --max-protocol",
          "[tools][client][lean]") {
  for (const std::string version : {"4", "3", "2", "1"}) {
    auto node = NodeProcess::StartOrFail(version == "4"
                                             ? std::vector<std::string>{}
                                             : std::vector<std::string>{"--max-protocol", version});
    auto client = ConnectOrFail(*node);
    CHECK(client->protocol_version() == std::stoul(version));
    auto m = client->GetMap("orders");
    CHECK(m->Put("k", "v1").value() == std::nullopt);
    CHECK(m->PutIfAbsent("k", "v2").value() == Optional("v1"));
    CHECK(m->Remove("k").value() == Optional("v1"));
    // Stream appends travel lean from version 3: the same offsets and duplicates either way.
    grid::StreamConfig one_sub;
    one_sub.sub_streams = 1;
    auto s = client->GetStream("events", one_sub);
    CHECK(s->Append("k", "p1", "e1").value() == grid::AppendResult{0, 1, false});
    CHECK(s->Append("k", "p2", "e2").value() == grid::AppendResult{0, 2, false});
    CHECK(s->Append("k", "again", "e1").value() == grid::AppendResult{0, 1, true});
    // Partition transactions travel lean from version 4: the same results either way.
    grid::Transaction tx("c");
    tx.Set("orders", "o@c", "v").IfAbsent().Get("orders", "o@c");
    auto committed = client->Transact(tx);
    REQUIRE(committed);
    CHECK(committed->committed);
    REQUIRE(committed->results.size() == 2);
    CHECK(committed->results[1].value == Optional("v"));
    client->Shutdown();
    CHECK(node->Stop() == 0);
  }
}

}  // namespace tessera::integration
