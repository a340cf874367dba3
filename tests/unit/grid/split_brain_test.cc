// Split brain with real members on loopback: a network partition made with Member::BlockPeers
// (every member of each side stops sending to the other side), writes on both sides, then the
// heal; the smaller side merges into the larger and every map ends as its merge policy says.
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cluster_test_util.h"
#include "tessera/grid/id_generator.h"
#include "tessera/grid/map.h"
#include "tessera/grid/member.h"
#include "tessera/grid/reliable_topic.h"
#include "tessera/grid/stream.h"
#include "tessera/map/map_codec.h"
#include "tessera/net/client_connection.h"
#include "tessera/record/generic_record.h"

using tessera::base::ErrorCode;
using tessera::grid::Member;
using tessera::grid::MemberOptions;
using tessera::map::MapConfig;
using tessera::map::MergePolicy;
using namespace tessera::grid::testing;

namespace {

MemberOptions SplitMember(std::vector<std::string> join = {}) {
  MemberOptions o = ClusterMember(std::move(join));
  o.partition_count = 31;
  o.maps["pia"] = MapConfig{};  // put_if_absent, the default
  MapConfig pt;
  pt.merge_policy = MergePolicy::kPassThrough;
  o.maps["pt"] = pt;
  MapConfig lu;
  lu.merge_policy = MergePolicy::kLatestUpdate;
  o.maps["lu"] = lu;
  MapConfig hh;
  hh.merge_policy = MergePolicy::kHigherHits;
  o.maps["hh"] = hh;
  MapConfig quorum;
  quorum.min_cluster_size = 2;
  o.maps["quorum"] = quorum;
  return o;
}

std::string Value(Member& m, const std::string& map, const std::string& key) {
  auto got = m.GetMap(map)->Get(key);
  REQUIRE(got.has_value());
  return got->value_or("<absent>");
}

void Set(Member& m, const std::string& map, const std::string& key, const std::string& value) {
  auto ok = m.GetMap(map)->Set(key, value);
  INFO(map << " " << key << " on " << AddressOf(m) << ": "
           << (ok ? std::string("ok") : ok.error().ToString()));
  REQUIRE(ok.has_value());
}

// Three members of one cluster, b and c joining through a.
struct Trio {
  std::unique_ptr<Member> a, b, c;
  Trio() {
    a = std::make_unique<Member>(SplitMember());
    REQUIRE(a->Start());
    b = std::make_unique<Member>(SplitMember({AddressOf(*a)}));
    REQUIRE(b->Start());
    c = std::make_unique<Member>(SplitMember({AddressOf(*a)}));
    REQUIRE(c->Start());
    REQUIRE(WaitUntil([&] { return AllList({a.get(), b.get(), c.get()}, 3); }));
  }
  // The network partition {a, b} | {c}; returns once each side removed the other and c serves
  // every partition.
  void Split() {
    a->BlockPeers({AddressOf(*c)});
    b->BlockPeers({AddressOf(*c)});
    c->BlockPeers({AddressOf(*a), AddressOf(*b)});
    REQUIRE(WaitUntil([&] { return AllList({a.get(), b.get()}, 2) && AllList({c.get()}, 1); }));
    REQUIRE(WaitUntil([&] { return c->map_service().AwaitingPartitionCount() == 0; }));
  }
  void Heal() {
    for (Member* m : {a.get(), b.get(), c.get()}) m->BlockPeers({});
  }
};

}  // namespace

TEST_CASE(
    "A 2|1 network partition heals into one cluster, each map holds what its merge "
    "policy says, and with a quorum the minority refused writes",
    "[grid][split]") {
  Trio trio;
  Member &a = *trio.a, &b = *trio.b, &c = *trio.c;
  for (int i = 0; i < 20; ++i) Set(a, "pia", "before" + std::to_string(i), "v0");

  trio.Split();  // {a, b} | {c}

  // Both sides write; the majority first, then the minority, then the majority again.
  Set(a, "pia", "both", "majority");
  Set(a, "pt", "both", "majority");
  Set(a, "lu", "first-majority", "majority");
  Set(a, "hh", "read-on-majority", "majority");
  Set(a, "hh", "read-on-minority", "majority");
  REQUIRE(a.GetMap("quorum")->Set("q", "majority").has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  Set(c, "pia", "both", "minority");
  Set(c, "pia", "minority-only", "minority");
  Set(c, "pt", "both", "minority");
  Set(c, "lu", "first-majority", "minority");  // later: wins
  Set(c, "lu", "last-majority", "minority");
  Set(c, "hh", "read-on-majority", "minority");
  Set(c, "hh", "read-on-minority", "minority");
  auto refused = c.GetMap("quorum")->Set("q", "minority");
  REQUIRE(!refused.has_value());
  CHECK(refused.error().code() == ErrorCode::kNoQuorum);
  CHECK(refused.error().message().find("map 'quorum' needs 2 cluster members for writes and "
                                       "this member's cluster has 1") != std::string::npos);
  CHECK(Value(c, "quorum", "q") != "minority");  // reads are served
  for (int i = 0; i < 5; ++i) Value(c, "hh", "read-on-minority");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  Set(a, "lu", "last-majority", "majority");  // later: wins
  for (int i = 0; i < 5; ++i) Value(a, "hh", "read-on-majority");

  // Heal: within a merge interval (2 s) c finds {a, b}, and merges into it.
  const auto healed = std::chrono::steady_clock::now();
  trio.Heal();
  REQUIRE(WaitUntil([&] { return AllList({&a, &b, &c}, 3); }, std::chrono::seconds(10)));
  const auto one_cluster_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::steady_clock::now() - healed)
                                  .count();
  WARN("heal to one cluster: " << one_cluster_ms << " ms");
  CHECK(c.rejoins() == 1);
  CHECK(a.rejoins() == 0);
  CHECK(b.rejoins() == 0);
  REQUIRE(WaitUntil([&] {
    return c.MetricsText().find("tessera_merge_entries_pending 0") != std::string::npos &&
           c.MetricsText().find("tessera_merge_entries_applied_total 0") == std::string::npos;
  }));

  for (Member* m : {&a, &b, &c}) {
    INFO("read through " << AddressOf(*m));
    CHECK(Value(*m, "pia", "both") == "majority");
    CHECK(Value(*m, "pia", "minority-only") == "minority");
    CHECK(Value(*m, "pt", "both") == "minority");
    CHECK(Value(*m, "lu", "first-majority") == "minority");
    CHECK(Value(*m, "lu", "last-majority") == "majority");
    CHECK(Value(*m, "hh", "read-on-majority") == "majority");
    CHECK(Value(*m, "hh", "read-on-minority") == "minority");
    CHECK(Value(*m, "quorum", "q") == "majority");
    for (int i = 0; i < 20; ++i) CHECK(Value(*m, "pia", "before" + std::to_string(i)) == "v0");
  }
  const std::string metrics = c.MetricsText();
  CHECK(metrics.find("\ntessera_member_merges_total 1\n") != std::string::npos);
  CHECK(metrics.find("\ntessera_merge_entries_discarded_total 0\n") == std::string::npos);
  // Writes need the quorum again and have it.
  CHECK(c.GetMap("quorum")->Set("q", "after").has_value());
}

// The payloads stored in reliable topic `topic`'s ring, in sequence order (read on `m`).
std::vector<std::string> RingPayloads(Member& m, const std::string& topic) {
  tessera::map::MapRequest read;
  read.op = tessera::map::MapOp::kRingRead;
  read.map_name = tessera::grid::kReliableTopicMap;
  read.key = "ring@" + topic;
  read.argument =
      tessera::record::GenericRecord::Build().Int64("from", 1).Int64("max", 1000).Done();
  auto result = m.map_service().ExecuteSync(read);
  REQUIRE(result.has_value());
  std::vector<std::string> out;
  for (const auto& [seq, bytes] : result->entries) {
    auto record = tessera::record::GenericRecord::Decode(bytes);
    REQUIRE(record.has_value());
    const auto* payload = record->Find("payload");
    REQUIRE(payload != nullptr);
    out.push_back(payload->AsBytes().data);
  }
  return out;
}

TEST_CASE(
    "A stream and a reliable topic written on both sides of a 2|1 partition hold every "
    "event either side accepted once after the merge, in each side's order",
    "[grid][split][stream]") {
  Trio trio;
  Member &a = *trio.a, &c = *trio.c;
  tessera::grid::StreamConfig config;
  config.sub_streams = 4;
  config.groups = {"billing"};  // nobody consumes: every event stays
  auto append = [&](Member& m, const std::string& id, const std::string& key) {
    auto r = m.GetStream("orders", config)->Append(key, id, id);
    INFO(id << " on " << AddressOf(m));
    REQUIRE(r.has_value());
  };
  for (int i = 0; i < 10; ++i) append(a, "pre-" + std::to_string(i), "k" + std::to_string(i % 4));
  auto publish = [&](Member& m, const std::string& payload) {
    REQUIRE(m.GetReliableTopic("news")->Publish(payload).has_value());
  };
  for (int i = 0; i < 5; ++i) publish(a, "pre-" + std::to_string(i));
  trio.Split();
  for (int i = 0; i < 10; ++i) {
    publish(a, "maj-" + std::to_string(i));
    publish(c, "min-" + std::to_string(i));
  }
  for (int i = 0; i < 30; ++i) {
    append(a, "maj-" + std::to_string(i), "k" + std::to_string(i % 4));
    append(c, "min-" + std::to_string(i), "k" + std::to_string(i % 4));
  }
  append(a, "both", "k0");  // the same event accepted by each side
  append(c, "both", "k0");
  trio.Heal();
  REQUIRE(WaitUntil(
      [&] {
        return AllList({trio.a.get(), trio.b.get(), &c}, 3);
      },
      std::chrono::seconds(10)));
  REQUIRE(WaitUntil([&] {
    return c.MetricsText().find("\ntessera_merge_entries_pending 0\n") != std::string::npos;
  }));

  for (Member* m : {trio.a.get(), trio.b.get(), &c}) {
    INFO("read through " << AddressOf(*m));
    auto stream = m->GetStream("orders", config);
    std::map<std::string, int> seen;
    std::map<std::string, std::vector<std::string>> by_key;  // ids in stream order
    for (std::uint32_t sub = 0; sub < config.sub_streams; ++sub) {
      auto slice = stream->Read(sub, 1, 1000);
      REQUIRE(slice.has_value());
      CHECK(!slice->lost);
      for (const auto& e : slice->events) {
        ++seen[e.id];
        by_key[e.key].push_back(e.id);
      }
    }
    CHECK(seen.size() == 10 + 30 + 30 + 1);
    for (const auto& [id, count] : seen) {
      INFO(id);
      CHECK(count == 1);
    }
    auto in_order = [](const std::vector<std::string>& ids) {  // each side's, in order
      for (const char* side : {"maj-", "min-", "pre-"}) {
        int last = -1;
        for (const auto& id : ids) {
          if (id.rfind(side, 0) != 0) continue;
          const int n = std::stoi(id.substr(4));
          if (n <= last) return false;
          last = n;
        }
      }
      return true;
    };
    for (const auto& [key, ids] : by_key) {
      INFO("key " << key);
      CHECK(in_order(ids));
    }
    // The reliable topic: the 5 published before, each side's 10, each once, in order.
    const auto ring = RingPayloads(*m, "news");
    CHECK(ring.size() == 25);
    CHECK(std::set<std::string>(ring.begin(), ring.end()).size() == 25);
    CHECK(in_order(ring));
  }
}

// Figures for docs/benchmarks.md, not a check (hidden; run with "[.split-figures]"): time from
// the heal to one cluster, and how fast the merging side's entries are applied.
TEST_CASE("Split-brain figures: heal to one cluster, entries merged per second",
          "[.split-figures]") {
  constexpr int kEntries = 50'000;
  Trio trio;
  Member &a = *trio.a, &b = *trio.b, &c = *trio.c;
  trio.Split();
  auto pia = c.GetMap("pia");
  tessera::grid::Entries batch;
  for (int i = 0; i < kEntries; ++i) {
    batch.emplace_back("key-" + std::to_string(i), std::string(100, 'v'));
    if (batch.size() == 1000) {
      REQUIRE(pia->PutAll(batch));
      batch.clear();
    }
  }
  const auto healed = std::chrono::steady_clock::now();
  trio.Heal();
  REQUIRE(WaitUntil([&] { return AllList({&a, &b, &c}, 3); }, std::chrono::seconds(10)));
  const auto joined = std::chrono::steady_clock::now();
  REQUIRE(WaitUntil(
      [&] { return c.MetricsText().find("tessera_merge_entries_pending 0") != std::string::npos; },
      std::chrono::seconds(60)));
  const auto merged = std::chrono::steady_clock::now();
  auto ms = [](auto d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
  REQUIRE(a.GetMap("pia")->Size().value() == kEntries);
  WARN("heal to one cluster " << ms(joined - healed) << " ms; " << kEntries << " entries merged in "
                              << ms(merged - joined) << " ms after "
                              << "joining = "
                              << kEntries * 1000.0 / std::max<long>(1, ms(merged - joined))
                              << " entries/s");
}

TEST_CASE(
    "Id generators created on both sides of a partition lease the same node id, after the "
    "merge the merged side's generator takes a new one",
    "[grid][split][ids]") {
  // Each side increments its own copy of the node counter and finds the same lease free, so
  // both sides' new generators get one node id. Event ids deduplicate stream appends and key
  // inbox markers: a generator that kept it after the merge could repeat the other's ids.
  Trio trio;
  Member &a = *trio.a, &c = *trio.c;
  auto before = tessera::grid::IdGenerator::Create(a);  // the counter and a lease exist
  REQUIRE(before);
  trio.Split();  // {a, b} | {c}
  auto on_c = tessera::grid::IdGenerator::Create(c);
  auto on_a = tessera::grid::IdGenerator::Create(a);
  REQUIRE(on_c);
  REQUIRE(on_a);
  const std::set<std::uint32_t> split_nodes = {(*before)->node_id(), (*on_a)->node_id()};
  INFO("nodes: before " << (*before)->node_id() << ", a " << (*on_a)->node_id() << ", c "
                        << (*on_c)->node_id());
  REQUIRE(split_nodes.count((*on_c)->node_id()) == 1);  // the collision this test is about
  trio.Heal();
  REQUIRE(WaitUntil(
      [&] {
        return AllList({trio.a.get(), trio.b.get(), &c}, 3);
      },
      std::chrono::seconds(10)));
  REQUIRE(WaitUntil([&] { return c.map_service().AwaitingPartitionCount() == 0; }));
  const std::int64_t id_c = (*on_c)->Next();  // checks its lease first: c merged
  const std::int64_t id_a = (*on_a)->Next();
  const std::int64_t id_before = (*before)->Next();
  using tessera::grid::IdGenerator;
  CHECK(IdGenerator::NodeOf(id_c) != IdGenerator::NodeOf(id_a));
  CHECK(IdGenerator::NodeOf(id_c) != IdGenerator::NodeOf(id_before));
  CHECK(IdGenerator::NodeOf(id_a) == (*on_a)->node_id());  // a did not merge: kept its lease
  CHECK(IdGenerator::NodeOf(id_before) == (*before)->node_id());
  // The new node id is leased to c's generator: a generator created now gets another one.
  auto later = IdGenerator::Create(a);
  REQUIRE(later);
  CHECK((*later)->node_id() != IdGenerator::NodeOf(id_c));
}

TEST_CASE(
    "A member's map requests from a member its view does not list are refused, so a restarted "
    "master's cluster of one cannot acknowledge writes for the old cluster",
    "[grid][split][fence]") {
  // A master restarted at its address formed a cluster of its own (its seeds redirected it to
  // the master address: itself); the others still routed the old master's partitions to that
  // address, and the new process, owning every partition of its one-member cluster, applied
  // and acknowledged their writes, which the merge then discarded (a lost register write
  // under kill-restart in tests/jepsen).
  Member a(ClusterMember());
  REQUIRE(a.Start());
  REQUIRE(WaitUntil([&] { return AllList({&a}, 1); }));
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  auto call_as = [&](const std::string& uuid) {
    tessera::net::ClientOptions options;
    options.port = a.native_port();
    options.hello.cluster_name = "dev";
    options.hello.role = tessera::wire::Role::kMember;
    options.hello.client_name = "member " + uuid;
    auto conn = tessera::net::ClientConnection::Connect(io, options, nullptr);
    REQUIRE(conn);
    tessera::map::MapRequest set;
    set.op = tessera::map::MapOp::kSet;
    set.map_name = "orders";
    set.key = "k";
    set.value = uuid;
    tessera::wire::Message request;
    request.service = tessera::wire::Service::kMap;
    request.op = static_cast<std::uint16_t>(set.op);
    request.payload = tessera::map::EncodeRequest(set);
    auto reply = (*conn)->CallSync(std::move(request), std::chrono::seconds(5));
    (*conn)->Close();
    return reply;
  };
  auto refused = call_as("a-process-of-another-cluster");
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == ErrorCode::kNotOwner);
  CHECK(refused.error().message().find("is not in this member's cluster view") !=
        std::string::npos);
  CHECK(a.GetMap("orders")->Get("k")->has_value() == false);  // nothing applied
  CHECK(call_as(a.uuid()));                                   // a listed member's request runs
  CHECK(a.GetMap("orders")->Get("k")->value_or("") == a.uuid());
  work.reset();
  io.stop();
  runner.join();
}

TEST_CASE(
    "A member's quorum (the maps' default min_cluster_size) covers its internal maps: cut "
    "off, it refuses writes to the framework's outbox, sagas and streams too",
    "[grid][split][quorum]") {
  // A service's instances run partition-owned work (the outbox relay, saga deadlines) on both
  // sides of a partition of their cluster; the quorum keeps the minority from writing what
  // those act on. Internal maps take no other default (no TTL, eviction, async backups).
  auto options = [](std::vector<std::string> join) {
    MemberOptions o = SplitMember(std::move(join));
    o.map_options.default_config.min_cluster_size = 2;
    o.map_options.default_config.default_ttl_ms = 60'000;
    return o;
  };
  Member a(options({}));
  REQUIRE(a.Start());
  Member b(options({AddressOf(a)}));
  REQUIRE(b.Start());
  REQUIRE(WaitUntil([&] { return AllList({&a, &b}, 2); }));
  for (const char* map : {"__outbox", "__sagas", "orders"}) Set(a, map, "before", "v");
  CHECK(a.map_service().ConfigOf("__outbox").default_ttl_ms == 0);

  a.BlockPeers({AddressOf(b)});
  b.BlockPeers({AddressOf(a)});
  REQUIRE(WaitUntil([&] { return AllList({&a}, 1) && AllList({&b}, 1); }));
  for (Member* m : {&a, &b}) {
    for (const char* map : {"__outbox", "__sagas", "orders"}) {
      auto refused = m->GetMap(map)->Set("during", "v");
      INFO(map << " on " << AddressOf(*m));
      REQUIRE_FALSE(refused.has_value());
      CHECK(refused.error().code() == ErrorCode::kNoQuorum);
    }
    // A map configured on its own keeps its own setting (no quorum for "pia").
    Set(*m, "pia", "during", "v");
    CHECK(Value(*m, "__outbox", "before") == "v");  // reads are served
  }
  a.BlockPeers({});
  b.BlockPeers({});
  REQUIRE(WaitUntil([&] { return AllList({&a, &b}, 2); }, std::chrono::seconds(10)));
  REQUIRE(WaitUntil([&] {
    return a.map_service().AwaitingPartitionCount() == 0 &&
           b.map_service().AwaitingPartitionCount() == 0;
  }));
  Set(b, "__outbox", "after", "v");
  CHECK(Value(a, "__outbox", "after") == "v");
}

namespace {

// The value of the metric line `name` (a counter or gauge without labels) in m's metrics; -1
// when it is missing.
double MetricOf(Member& m, const std::string& name) {
  const std::string text = m.MetricsText();
  const auto at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

// Five members: a, b, c, then e, then d (so e is older than d), all through a. Split()
// makes {a, b, c} | {e, d}; the minority's master is e, and with one backup each of d and e
// holds the other's partitions as backups.
struct Quintet {
  std::unique_ptr<Member> a, b, c, d, e;
  Quintet() {
    a = std::make_unique<Member>(SplitMember());
    REQUIRE(a->Start());
    for (auto* m : {&b, &c, &e, &d}) {
      *m = std::make_unique<Member>(SplitMember({AddressOf(*a)}));
      REQUIRE((*m)->Start());
      REQUIRE(WaitUntil([&] { return (*m)->cluster_view()->members.Find((*m)->uuid()); }));
    }
    REQUIRE(WaitUntil([&] { return AllList(All(), 5); }));
  }
  std::vector<Member*> All() const { return {a.get(), b.get(), c.get(), d.get(), e.get()}; }
  std::vector<Member*> Majority() const { return {a.get(), b.get(), c.get()}; }
  void Split() {
    std::vector<std::string> majority, minority;
    for (Member* m : Majority()) majority.push_back(AddressOf(*m));
    for (Member* m : {d.get(), e.get()}) minority.push_back(AddressOf(*m));
    for (Member* m : Majority()) m->BlockPeers(minority);
    for (Member* m : {d.get(), e.get()}) m->BlockPeers(majority);
    REQUIRE(WaitUntil([&] { return AllList(Majority(), 3) && AllList({d.get(), e.get()}, 2); }));
    REQUIRE(WaitUntil([&] {
      for (Member* m : All()) {
        if (m->map_service().AwaitingPartitionCount() != 0) return false;
      }
      return true;
    }));
  }
};

}  // namespace

TEST_CASE(
    "A merging member that dies before its merge arrives loses nothing its side acknowledged: "
    "the member that held its backups sends them in its place",
    "[grid][split][standby]") {
  // The merge queue lives in the merging process only. Here d takes its data out and never
  // reaches the cluster it merges into (cut off for good: to that cluster, d crashed); e held
  // backups of d's partitions and, once d is not listed for the failure and join timeouts,
  // merges them itself. Before standby copies, the keys d owned were gone.
  Quintet q;
  Member &a = *q.a, &d = *q.d, &e = *q.e;
  q.Split();
  for (int i = 0; i < 300; ++i) Set(e, "pia", "minority" + std::to_string(i), "v");
  std::size_t owned_by_d = 0;
  for (int i = 0; i < 300; ++i) {
    const auto p = d.map_service().partitioner().PartitionOf("minority" + std::to_string(i));
    owned_by_d += d.map_service().OwnsPartition(p) ? 1 : 0;
  }
  REQUIRE(owned_by_d > 0);
  // Heal e's links only: e (the minority's master) finds {a, b, c}, tells d to merge (d leaves
  // and takes its data out), and joins; d cannot reach them.
  for (Member* m : q.Majority()) m->BlockPeers({AddressOf(d)});
  std::vector<std::string> majority;
  for (Member* m : q.Majority()) majority.push_back(AddressOf(*m));
  d.BlockPeers(majority);
  e.BlockPeers({});
  REQUIRE(WaitUntil(
      [&] {
        return AllList({&a, q.b.get(), q.c.get(), &e}, 4);
      },
      std::chrono::seconds(20)));
  // d left its cluster with its data (e's MergeInto reaches it on d's own thread, maybe after
  // e joined): its merge never arrives.
  REQUIRE(WaitUntil([&] { return d.rejoins() == 1; }));
  REQUIRE(WaitUntil([&] { return MetricOf(e, "tessera_merge_standby_sent_total") > 0; },
                    std::chrono::seconds(20)));
  REQUIRE(WaitUntil([&] { return MetricOf(e, "tessera_merge_entries_pending") == 0; }));
  for (Member* m : {&a, q.b.get(), q.c.get(), &e}) {
    INFO("read through " << AddressOf(*m) << ", " << owned_by_d << " keys were d's");
    for (int i = 0; i < 300; ++i) CHECK(Value(*m, "pia", "minority" + std::to_string(i)) == "v");
  }
  CHECK(MetricOf(e, "tessera_merge_standby_entries") == 0);
  q.d.reset();  // stopped while cut off
}

TEST_CASE(
    "When every merging member's merge arrives, the standby copies of their partitions are "
    "dropped, never sent",
    "[grid][split][standby]") {
  Quintet q;
  Member &a = *q.a, &d = *q.d, &e = *q.e;
  q.Split();
  for (int i = 0; i < 300; ++i) Set(e, "pt", "minority" + std::to_string(i), "v");
  for (Member* m : q.All()) m->BlockPeers({});
  REQUIRE(WaitUntil([&] { return AllList(q.All(), 5); }, std::chrono::seconds(20)));
  CHECK(d.rejoins() == 1);
  CHECK(e.rejoins() == 1);
  REQUIRE(WaitUntil([&] {
    return MetricOf(d, "tessera_merge_standby_entries") == 0 &&
           MetricOf(e, "tessera_merge_standby_entries") == 0;
  }));
  for (Member* m : {&d, &e}) {
    INFO(AddressOf(*m));
    CHECK(MetricOf(*m, "tessera_merge_standby_sent_total") <= 0);
    CHECK(MetricOf(*m, "tessera_merge_standby_dropped_total") > 0);
  }
  // A pass-through write made after the merge stays: no copy comes in later to replace it.
  Set(a, "pt", "minority7", "after the merge");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (Member* m : q.All()) CHECK(Value(*m, "pt", "minority7") == "after the merge");
  for (int i = 0; i < 300; ++i) {
    if (i != 7) CHECK(Value(a, "pt", "minority" + std::to_string(i)) == "v");
  }
}
