// The embedded instance: a Member used through the Instance API, without any network port.
#include "tessera/grid/member.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>

using namespace tessera;
using grid::Member;
using grid::MemberOptions;
using record::GenericRecord;

namespace {
MemberOptions Embedded() {
  MemberOptions o;
  o.listen = false;
  o.threads = 2;
  o.map_options.sweep_interval_ms = 10;
  return o;
}
}  // namespace

TEST_CASE("An embedded member serves maps through the Instance API", "[grid]") {
  base::ManualClock clock;
  Member member(Embedded(), nullptr, &clock);
  REQUIRE(member.Start());
  grid::Instance& instance = member;
  auto orders = instance.GetMap("orders");

  CHECK(orders->Put("o1", "new").value() == std::nullopt);
  CHECK(orders->Put("o1", "paid").value() == std::optional<std::string>("new"));
  CHECK(orders->Get("o1").value() == std::optional<std::string>("paid"));
  CHECK(orders->PutIfAbsent("o1", "other").value() == std::optional<std::string>("paid"));
  CHECK(orders->PutIfAbsent("o2", "fresh", grid::WithTtl(1000)).value() == std::nullopt);
  CHECK(orders->Size().value() == 2);

  clock.Advance(1000);
  CHECK(orders->Get("o2").value() == std::nullopt);  // expired exactly at its TTL
  CHECK(orders->PutIfAbsent("o2", "again").value() == std::nullopt);

  CHECK(orders->Replace("o1", "paid", "shipped").value());
  CHECK_FALSE(orders->Replace("o1", "paid", "lost").value());
  CHECK(orders->Remove("o1").value() == std::optional<std::string>("shipped"));
  CHECK_FALSE(orders->ContainsKey("o1").value());
  member.Shutdown();
}

TEST_CASE("Typed maps share the stored form with raw maps", "[grid]") {
  Member member(Embedded());
  REQUIRE(member.Start());
  auto counters = member.GetTypedMap<std::string, std::int64_t>("counters");
  REQUIRE(counters.Set("hits", 41));
  CHECK(member.GetMap("counters")->Get("hits").value() == std::optional<std::string>("41"));
  auto customers = member.GetTypedMap<std::string, GenericRecord>("customers");
  auto ada = GenericRecord::Build("Customer").String("name", "Ada").Int64("age", 36).Done();
  REQUIRE(customers.Set("c1", ada));
  CHECK(customers.Get("c1").value() == std::optional<GenericRecord>(ada));
  // A value that is not a GenericRecord is a type error naming the problem, not a crash.
  REQUIRE(member.GetMap("customers")->Set("c2", "plain text"));
  auto bad = customers.Get("c2");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code() == base::ErrorCode::kWrongType);
}

TEST_CASE("Embedded entry processors, predicates and listeners", "[grid]") {
  Member member(Embedded());
  member.processors().Register(
      "uppercaseName",
      [](map::MutableEntry& entry, const GenericRecord&) -> base::Result<GenericRecord> {
        auto rec = entry.Record();
        if (!rec) return std::unexpected(rec.error());
        auto name = rec->GetString("name");
        if (!name) return std::unexpected(name.error());
        std::string upper = *name;
        for (auto& c : upper) c = static_cast<char>(std::toupper(c));
        rec->Set("name", upper);
        entry.SetRecord(*rec);
        return GenericRecord::Build().String("name", upper).Done();
      });
  REQUIRE(member.Start());
  auto people = member.GetMap("people");

  std::mutex mu;
  std::condition_variable cv;
  std::vector<map::EntryEventType> seen;
  auto id = people->AddEntryListener([&](const map::EntryEvent& e) {
    std::lock_guard lock(mu);
    seen.push_back(e.type);
    cv.notify_all();
  });
  REQUIRE(id);

  for (int i = 0; i < 10; ++i) {
    auto rec = GenericRecord::Build("Person")
                   .String("name", "p" + std::to_string(i))
                   .Int64("age", 20 + i)
                   .Done();
    REQUIRE(people->Set("k" + std::to_string(i), rec.Encode()));
  }
  auto adults = people->KeySet(map::Predicate::Parse("age >= 25").value());
  REQUIRE(adults);
  CHECK(adults->size() == 5);

  auto r = people->ExecuteOnKey("k3", "uppercaseName");
  REQUIRE(r);
  CHECK(r->GetString("name").value() == "P3");
  auto stored = GenericRecord::Decode(people->Get("k3").value().value()).value();
  CHECK(stored.GetString("name").value() == "P3");

  auto unknown = people->ExecuteOnKey("k3", "noSuchProcessor");
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().code() == base::ErrorCode::kUnknownProcessor);

  auto counted = people->ExecuteOnKey(
      "k4", "increment", GenericRecord::Build().String("field", "age").Int64("delta", 2).Done());
  REQUIRE(counted);
  CHECK(counted->GetInt64("value").value() == 26);

  {
    std::unique_lock lock(mu);
    // 10 adds + 2 updates (processor results).
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(5), [&] { return seen.size() >= 12; }));
    CHECK(std::count(seen.begin(), seen.end(), map::EntryEventType::kAdded) == 10);
    CHECK(std::count(seen.begin(), seen.end(), map::EntryEventType::kUpdated) == 2);
  }
  CHECK(people->RemoveEntryListener(*id).value());
}

TEST_CASE("Two listening members in one process form a cluster, shutdown leaves it", "[grid]") {
  auto options = [] {
    MemberOptions o;
    o.port = 0;
    o.threads = 1;
    o.heartbeat_interval_ms = 100;
    o.failure_timeout_ms = 2000;
    return o;
  };
  Member a(options());
  REQUIRE(a.Start());
  auto b_options = options();
  b_options.join = {"127.0.0.1:" + std::to_string(a.native_port())};
  Member b(b_options);
  REQUIRE(b.Start());
  auto wait_for = [](Member& m, std::size_t count) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (m.cluster_view()->members.members.size() != count &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return m.cluster_view();
  };
  auto view = wait_for(a, 2);
  REQUIRE(view->members.members.size() == 2);
  CHECK(view->members.master()->uuid == a.uuid());
  CHECK(view->members.members[1].uuid == b.uuid());
  CHECK(*wait_for(b, 2) == *view);
  CHECK(view->AllReplicasPresent());

  b.Shutdown();  // graceful: a drops b at once, well before the 2 s failure timeout
  auto after = wait_for(a, 1);
  CHECK(after->members.members.size() == 1);
  CHECK(after->partitions.replicas[0] == std::vector<std::string>{a.uuid()});
}

TEST_CASE("Bad cluster options are refused at Start", "[grid]") {
  auto join_without_listen = Embedded();
  join_without_listen.join = {"127.0.0.1:5701"};
  Member a(join_without_listen);
  auto started = a.Start();
  REQUIRE(!started);
  CHECK(started.error().message().find("does not listen cannot join") != std::string::npos);

  auto too_many = Embedded();
  too_many.backup_count = 7;
  Member b(too_many);
  started = b.Start();
  REQUIRE(!started);
  CHECK(started.error().message().find("backup count 7 is above the maximum of 6") !=
        std::string::npos);
}

TEST_CASE("A member's metrics report each shard's idle polling", "[grid]") {
  Member member(Embedded());
  REQUIRE(member.Start());
  auto map = member.GetMap("m");
  for (int i = 0; i < 200; ++i) REQUIRE(map->Set("k" + std::to_string(i), "v"));
  const std::string text = member.MetricsText();
  for (const char* shard : {"0", "1"}) {
    INFO("shard " << shard);
    CHECK(text.find(std::string("tessera_shard_idle_poll_seconds_total{shard=\"") + shard +
                    "\"}") != std::string::npos);
    CHECK(text.find(std::string("tessera_shard_idle_poll_contended_total{shard=\"") + shard +
                    "\"}") != std::string::npos);
  }
  member.Shutdown();
}

TEST_CASE("A member's metrics count the entry listeners of each map", "[grid]") {
  Member member(Embedded());
  REQUIRE(member.Start());
  auto map = member.GetMap("watched");
  auto first = map->AddEntryListener([](const map::EntryEvent&) {});
  auto second = map->AddEntryListener([](const map::EntryEvent&) {});
  REQUIRE(first);
  REQUIRE(second);
  CHECK(member.MetricsText().find("tessera_map_entry_listeners{map=\"watched\"} 2\n") !=
        std::string::npos);
  REQUIRE(map->RemoveEntryListener(*first).value());
  REQUIRE(map->RemoveEntryListener(*second).value());
  CHECK(member.MetricsText().find("tessera_map_entry_listeners{map=\"watched\"} 0\n") !=
        std::string::npos);
  member.Shutdown();
}

TEST_CASE("A member's topic metrics stay bounded while names keep changing", "[grid]") {
  auto options = Embedded();
  options.topic_stats_limit = 2;
  Member member(options);
  REQUIRE(member.Start());
  for (int i = 0; i < 50; ++i) REQUIRE(member.GetTopic("user:" + std::to_string(i))->Publish("m"));
  const std::string text = member.MetricsText();
  CHECK(text.find("tessera_topics_published_total 50\n") != std::string::npos);
  std::size_t per_topic = 0;
  for (auto at = text.find("tessera_topic_published_total{"); at != std::string::npos;
       at = text.find("tessera_topic_published_total{", at + 1)) {
    ++per_topic;
  }
  CHECK(per_topic >= 1);
  CHECK(per_topic <= 2);
  member.Shutdown();
}

TEST_CASE(
    "A member with a data directory keeps its member id across restarts, and a second member "
    "cannot open the directory while the first runs",
    "[grid]") {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "tessera-member-data-XXXXXX").string();
  REQUIRE(::mkdtemp(pattern.data()) != nullptr);
  const std::filesystem::path dir = pattern;
  MemberOptions options = Embedded();
  options.data_dir = (dir / "m").string();
  std::string first_id, first_uuid;
  {
    Member first(options);
    REQUIRE(first.Start());
    first_id = first.member_id();
    first_uuid = first.uuid();
    CHECK(first_id != first_uuid);  // the directory's id, not the process's

    Member second(options);
    auto refused = second.Start();
    REQUIRE(!refused);
    CHECK(refused.error().code() == base::ErrorCode::kConflict);
    CHECK(refused.error().message().find("in use by another process") != std::string::npos);
    CHECK(first.GetMap("m")->Put("k", "v"));  // the first one serves on
    first.Shutdown();
  }
  Member restarted(options);
  REQUIRE(restarted.Start());
  CHECK(restarted.member_id() == first_id);
  CHECK(restarted.uuid() != first_uuid);

  MemberOptions other_cluster = options;
  other_cluster.cluster_name = "other";
  Member wrong(other_cluster);
  restarted.Shutdown();  // the directory is free: refused for its cluster name alone
  auto refused = wrong.Start();
  REQUIRE(!refused);
  CHECK(refused.error().code() == base::ErrorCode::kConflict);
  CHECK(refused.error().message().find("belongs to cluster 'dev', not 'other'") !=
        std::string::npos);
  std::filesystem::remove_all(dir);
}
