// Clusters of real grid-node processes on loopback: join through seeds, failure detection
// after SIGKILL, a restart at the same address, graceful leave on SIGTERM, master failover,
// refusal of mismatched settings, and grid-cli's members/partitions/cluster commands.
#include <signal.h>

#include <catch2/catch.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "child_process.h"

namespace tessera::integration {
namespace {

using Clock = std::chrono::steady_clock;

// A node on a fixed port, so that it can be restarted at the same address.
std::unique_ptr<NodeProcess> StartAt(std::uint16_t port, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"--port", std::to_string(port), "--log-level",
                                   "warn",   "--threads",          "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto node = NodeProcess::Start(args);
  if (!node) FAIL(node.error().message());
  return std::move(*node);
}

membership::ClusterView ViewOf(const NodeProcess& node) {
  auto client = ConnectOrFail(node);
  auto view = client->FetchClusterView();
  REQUIRE(view);
  return *view;
}

// Polls `node`'s view until `done(view)` holds; FAILs after `timeout`.
template <typename Done>
membership::ClusterView WaitForView(const NodeProcess& node, Done done,
                                    std::chrono::milliseconds timeout = 15s) {
  auto deadline = Clock::now() + timeout;
  while (true) {
    auto view = ViewOf(node);
    if (done(view)) return view;
    if (Clock::now() > deadline) {
      FAIL("view of " << node.address() << " did not reach the expected state; it has "
                      << view.members.members.size() << " member(s), version "
                      << view.members.version);
    }
    std::this_thread::sleep_for(50ms);
  }
}

std::vector<std::string> Addresses(const membership::ClusterView& view) {
  std::vector<std::string> out;
  for (const auto& m : view.members.members) out.push_back(m.address);
  return out;
}

}  // namespace

TEST_CASE("grid-node processes form a cluster, detect a SIGKILL, rejoin and leave gracefully",
          "[tools][cluster]") {
  auto a = NodeProcess::StartOrFail(FastClusterArgs({}));
  auto b = NodeProcess::StartOrFail(FastClusterArgs({"--join", a->address()}));
  const std::uint16_t c_port = UnusedPort();
  const std::vector<std::string> c_args = FastClusterArgs({"--join", b->address()});  // redirected
  auto c = StartAt(c_port, c_args);

  auto view = WaitForMembers(*a, 3);
  CHECK(Addresses(view) == std::vector<std::string>{a->address(), b->address(), c->address()});
  // Every member holds the same view, and the master balanced the partition table.
  auto on_c =
      WaitForView(*c, [&](const auto& v) { return v.members.version == view.members.version; });
  CHECK(on_c == view);
  CHECK(view.AllReplicasPresent());
  for (const auto& count : partition::CountReplicas(view.partitions, view.members.Uuids())) {
    CHECK(count.owned >= 90);
    CHECK(count.owned <= 91);
  }
  const std::string c_uuid = view.members.members[2].uuid;

  SECTION("SIGKILL: removed after the failure timeout; a restart at the address rejoins") {
    auto killed_at = Clock::now();
    c->Stop(SIGKILL);
    auto after = WaitForMembers(*a, 2);
    auto detection = Clock::now() - killed_at;
    CHECK(detection >= 1000ms);  // not before the failure timeout (1.5 s, minus tick slack)
    CHECK(Addresses(after) == std::vector<std::string>{a->address(), b->address()});
    CHECK(after.AllReplicasPresent());

    c = StartAt(c_port, c_args);
    auto rejoined = WaitForMembers(*a, 3);
    CHECK(rejoined.members.members[2].address == c->address());
    CHECK(rejoined.members.members[2].uuid != c_uuid);  // a new identity
    CHECK(!rejoined.members.Find(c_uuid));
  }

  SECTION("SIGTERM: the member leaves at once, without waiting for the failure timeout") {
    auto stopped_at = Clock::now();
    CHECK(b->Stop(SIGTERM) == 0);
    auto after = WaitForView(
        *a, [](const auto& v) { return v.members.members.size() == 2; }, 1000ms);
    CHECK(Clock::now() - stopped_at < 1500ms);
    CHECK(Addresses(after) == std::vector<std::string>{a->address(), c->address()});
  }

  SECTION("The master is killed: the next-oldest member takes over") {
    a->Stop(SIGKILL);
    auto after = WaitForMembers(*c, 2);
    CHECK(after.members.master()->address == b->address());
    CHECK(after.AllReplicasPresent());
  }
}

TEST_CASE("Members with a different partition count or cluster name never merge",
          "[tools][cluster]") {
  auto a = NodeProcess::StartOrFail(FastClusterArgs({}));
  auto b =
      NodeProcess::StartOrFail(FastClusterArgs({"--join", a->address(), "--partitions", "100"}));
  auto c = NodeProcess::StartOrFail(
      FastClusterArgs({"--join", a->address(), "--cluster-name", "other"}));
  std::this_thread::sleep_for(2500ms);  // past the 1.5 s join timeout
  CHECK(ViewOf(*a).members.members.size() == 1);
  auto b_view = ViewOf(*b);
  CHECK(b_view.members.members.size() == 1);
  CHECK(b_view.partitions.partition_count() == 100);
  auto options = ClientOptionsFor(*c);
  options.cluster_name = "other";
  auto client = grid::Client::Connect(options);
  REQUIRE(client);
  auto c_view = (*client)->FetchClusterView();
  REQUIRE(c_view);
  CHECK(c_view->members.members.size() == 1);
  CHECK(c_view->members.master()->address == c->address());
}

TEST_CASE("grid-cli members, partitions and cluster describe the cluster", "[tools][cluster]") {
  auto a = NodeProcess::StartOrFail(FastClusterArgs({}));
  auto b = NodeProcess::StartOrFail(FastClusterArgs({"--join", a->address()}));
  WaitForMembers(*a, 2);
  WaitForMembers(*b, 2);

  auto members = RunProcess(GRID_CLI_PATH, {"--address", b->address(), "--json", "members"});
  REQUIRE(members.exit_code == 0);
  auto doc = nlohmann::json::parse(members.out);
  CHECK(doc["master"] == a->address());
  REQUIRE(doc["members"].size() == 2);
  CHECK(doc["members"][1]["address"] == b->address());
  CHECK(doc["members"][0]["master"] == true);

  auto partitions = RunProcess(GRID_CLI_PATH, {"--address", a->address(), "--json", "partitions"});
  REQUIRE(partitions.exit_code == 0);
  doc = nlohmann::json::parse(partitions.out);
  REQUIRE(doc["partitions"].size() == 271);
  for (const auto& p : doc["partitions"]) {
    REQUIRE(p["backups"].size() == 1);
    CHECK(p["owner"] != p["backups"][0]);
  }
  CHECK(doc["summary"][0]["owned"].get<int>() + doc["summary"][1]["owned"].get<int>() == 271);

  auto text = RunProcess(GRID_CLI_PATH, {"--address", a->address(), "cluster"});
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("members: 2\nmaster: " + a->address()) != std::string::npos);
  CHECK(text.out.find("safe: yes") != std::string::npos);

  auto usage = RunProcess(GRID_CLI_PATH, {"--address", a->address(), "members", "extra"});
  CHECK(usage.exit_code == 2);
  CHECK(usage.err.find("'members' takes no arguments") != std::string::npos);
}

}  // namespace tessera::integration

namespace tessera::integration {

TEST_CASE("A cluster serves one data set: any member reaches every key", "[tools][cluster]") {
  auto a = NodeProcess::StartOrFail(FastClusterArgs({}));
  auto b = NodeProcess::StartOrFail(FastClusterArgs({"--join", a->address()}));
  auto c = NodeProcess::StartOrFail(FastClusterArgs({"--join", a->address()}));
  for (const auto* node : {a.get(), b.get(), c.get()}) WaitForMembers(*node, 3);

  auto via_a = ConnectOrFail(*a);
  auto via_c = ConnectOrFail(*c);
  auto orders_a = via_a->GetMap("orders");
  auto orders_c = via_c->GetMap("orders");
  constexpr int kKeys = 600;
  for (int i = 0; i < kKeys; ++i) {
    auto set = orders_a->Set("order-" + std::to_string(i), "v" + std::to_string(i));
    INFO("set " << i << ": " << (set ? "ok" : set.error().ToString()));
    REQUIRE(set);
  }
  // Every key is readable through another member, and whole-map operations see all of them
  // exactly once, whichever member is asked.
  for (int i = 0; i < kKeys; i += 7) {
    CHECK(orders_c->Get("order-" + std::to_string(i)).value() == "v" + std::to_string(i));
  }
  CHECK(orders_c->Size().value() == kKeys);
  CHECK(ConnectOrFail(*b)->GetMap("orders")->Size().value() == kKeys);
  auto all = orders_c->GetAll({"order-1", "order-2", "order-599", "missing"});
  REQUIRE(all);
  CHECK(all->size() == 3);
  // putIfAbsent through two members on the same key: one winner.
  auto first = orders_a->PutIfAbsent("lock", "a");
  auto second = orders_c->PutIfAbsent("lock", "c");
  REQUIRE(first);
  REQUIRE(second);
  CHECK(!first->has_value());
  CHECK(second->value() == "a");
  CHECK(orders_c->Clear().value() == kKeys + 1);
  CHECK(orders_a->Size().value() == 0);
}

TEST_CASE("A cluster whose processes are all stopped for 10 s and resumed stays one cluster",
          "[tools][cluster][pause]") {
  // The failure timeout is 1.5 s: a 10 s SIGSTOP of every member used to leave each one
  // finding the others silent and removing them (two or three clusters, for good).
  auto a = NodeProcess::StartOrFail(FastClusterArgs({}));
  auto b = NodeProcess::StartOrFail(FastClusterArgs({"--join", a->address()}));
  auto c = NodeProcess::StartOrFail(FastClusterArgs({"--join", a->address()}));
  for (const auto* node : {a.get(), b.get(), c.get()}) WaitForMembers(*node, 3);
  auto client = ConnectOrFail(*a);
  REQUIRE(client->GetMap("kept")->Set("k", "v"));

  for (const auto* node : {a.get(), b.get(), c.get()}) kill(node->pid(), SIGSTOP);
  std::this_thread::sleep_for(10s);
  for (const auto* node : {a.get(), b.get(), c.get()}) kill(node->pid(), SIGCONT);
  std::this_thread::sleep_for(4s);  // more than two failure timeouts after waking

  for (const auto* node : {a.get(), b.get(), c.get()}) {
    auto connected = ConnectOrFail(*node);
    auto view = connected->FetchClusterView();
    REQUIRE(view);
    CHECK(Addresses(*view) == std::vector<std::string>{a->address(), b->address(), c->address()});
    auto metrics = connected->FetchMetricsText();
    REQUIRE(metrics);
    // At least the 10 s stop (a busy machine may add a late timer of its own).
    const auto at = metrics->find("\ntessera_member_pauses_total ");
    REQUIRE(at != std::string::npos);
    CHECK(std::stod(metrics->substr(at + 29)) >= 1);
    CHECK(metrics->find("\ntessera_member_last_pause_seconds ") != std::string::npos);
  }
  CHECK(ConnectOrFail(*c)->GetMap("kept")->Get("k").value() == "v");
}

TEST_CASE(
    "One member stopped for 10 s is removed, rejoins within 10 s of waking, and its stale "
    "entries do not overwrite the writes made meanwhile",
    "[tools][cluster][pause][split]") {
  TempFile config("maps:\n  carts: {merge_policy: latest_update}\n");
  auto a = NodeProcess::StartOrFail(FastClusterArgs({"--config", config.path()}));
  auto b = NodeProcess::StartOrFail(
      FastClusterArgs({"--config", config.path(), "--join", a->address()}));
  auto c = NodeProcess::StartOrFail(
      FastClusterArgs({"--config", config.path(), "--join", a->address()}));
  for (const auto* node : {a.get(), b.get(), c.get()}) WaitForMembers(*node, 3);
  constexpr int kKeys = 300;
  {
    auto client = ConnectOrFail(*a);
    auto carts = client->GetMap("carts");
    for (int i = 0; i < kKeys; ++i) REQUIRE(carts->Set("k" + std::to_string(i), "old"));
  }

  const auto stopped = Clock::now();
  kill(c->pid(), SIGSTOP);
  // a and b remove c (failure timeout 1.5 s), then overwrite every key and add new ones.
  WaitForView(*a, [](const auto& v) { return v.members.members.size() == 2; });
  {
    auto client = ConnectOrFail(*a);
    auto carts = client->GetMap("carts");
    for (int i = 0; i < kKeys; ++i) REQUIRE(carts->Set("k" + std::to_string(i), "new"));
    for (int i = 0; i < kKeys; ++i) REQUIRE(carts->Set("n" + std::to_string(i), "added"));
  }
  std::this_thread::sleep_until(stopped + 10s);
  const auto woke = Clock::now();
  kill(c->pid(), SIGCONT);
  WaitForView(
      *a, [](const auto& v) { return v.members.members.size() == 3; }, 10s);
  const auto rejoined_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - woke).count();
  WARN("woke to rejoined: " << rejoined_ms << " ms");
  WaitForMembers(*c, 3);

  // c merged what it held (every key "old", written before the others' "new"): nothing of it
  // wins, and nothing acknowledged on a and b is lost.
  auto on_c = ConnectOrFail(*c);
  auto metrics_deadline = Clock::now() + 15s;
  std::string metrics;
  while (Clock::now() < metrics_deadline) {
    metrics = on_c->FetchMetricsText().value_or("");
    if (metrics.find("\ntessera_merge_entries_pending 0\n") != std::string::npos) break;
    std::this_thread::sleep_for(100ms);
  }
  CHECK(metrics.find("\ntessera_member_merges_total 1\n") != std::string::npos);
  CHECK(metrics.find("\ntessera_merge_entries_pending 0\n") != std::string::npos);
  CHECK(metrics.find("\ntessera_merge_entries_applied_total 0\n") != std::string::npos);
  CHECK(metrics.find("\ntessera_merge_entries_discarded_total 0\n") == std::string::npos);
  auto carts = on_c->GetMap("carts");
  int stale = 0, lost = 0;
  for (int i = 0; i < kKeys; ++i) {
    stale += carts->Get("k" + std::to_string(i)).value() != std::optional<std::string>("new");
    lost += carts->Get("n" + std::to_string(i)).value() != std::optional<std::string>("added");
  }
  CHECK(stale == 0);
  CHECK(lost == 0);
  CHECK(carts->Size().value() == 2 * kKeys);
}

namespace {

// grid-cli fault on `node` (block: the addresses; none: heal); REQUIREs success.
void Fault(const NodeProcess& node, std::vector<std::string> blocked) {
  std::string list;
  for (const auto& address : blocked) list += (list.empty() ? "" : ",") + address;
  std::vector<std::string> args = {"--address", node.address(), "fault"};
  if (blocked.empty()) {
    args.push_back("heal");
  } else {
    args.push_back("block");
    args.push_back(list);
  }
  auto r = RunProcess(GRID_CLI_PATH, args, 20s);
  INFO("grid-cli " << list << ": " << r.out << r.err);
  REQUIRE(r.exit_code == 0);
}

std::string ValueOn(grid::Client& client, const std::string& map, const std::string& key) {
  auto got = client.GetMap(map)->Get(key);
  REQUIRE(got);
  return got->value_or("<absent>");
}

}  // namespace

namespace {

// Three grid-nodes cut 2|1 (a, b | c) for 20 s with writes on both sides; `heal` ends the cut.
// Then they are one cluster, c merged at least `min_merges` and at most `max_merges` times (its
// tessera_member_merges_total), and every map holds what its merge policy says, key by key,
// read through each member.
void SplitWritesMerge(const std::function<void(const NodeProcess& a, const NodeProcess& b,
                                               const NodeProcess& c)>& heal,
                      int min_merges, int max_merges) {
  TempFile config(
      "maps:\n"
      "  pt: {merge_policy: pass_through}\n"
      "  lu: {merge_policy: latest_update}\n"
      "  quorum: {min_cluster_size: 2}\n");
  auto args = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), {"--config", config.path(), "--fault-injection", "true"});
    return FastClusterArgs(extra);
  };
  auto a = NodeProcess::StartOrFail(args({}));
  auto b = NodeProcess::StartOrFail(args({"--join", a->address()}));
  auto c = NodeProcess::StartOrFail(args({"--join", a->address()}));
  for (const auto* node : {a.get(), b.get(), c.get()}) WaitForMembers(*node, 3);
  constexpr int kKeys = 50;
  auto key = [](const char* prefix, int i) { return prefix + std::to_string(i); };
  {
    auto client = ConnectOrFail(*a);
    for (int i = 0; i < kKeys; ++i) REQUIRE(client->GetMap("pia")->Set(key("pre", i), "v0"));
  }

  const auto cut = Clock::now();
  Fault(*a, {c->address()});
  Fault(*b, {c->address()});
  Fault(*c, {a->address(), b->address()});
  WaitForView(*a, [](const auto& v) { return v.members.members.size() == 2; });
  WaitForView(*c, [](const auto& v) { return v.members.members.size() == 1; });
  std::this_thread::sleep_for(1s);  // c's promotions settle
  {
    auto majority = ConnectOrFail(*a);
    auto minority = ConnectOrFail(*c);
    for (int i = 0; i < kKeys; ++i) {
      REQUIRE(majority->GetMap("pia")->Set(key("both", i), "majority"));
      REQUIRE(majority->GetMap("pt")->Set(key("both", i), "majority"));
      REQUIRE(majority->GetMap("lu")->Set(key("first", i), "majority"));
      REQUIRE(majority->GetMap("quorum")->Set(key("q", i), "majority"));
    }
    std::this_thread::sleep_for(20ms);
    for (int i = 0; i < kKeys; ++i) {
      REQUIRE(minority->GetMap("pia")->Set(key("both", i), "minority"));
      REQUIRE(minority->GetMap("pia")->Set(key("minority", i), "minority"));
      REQUIRE(minority->GetMap("pt")->Set(key("both", i), "minority"));
      REQUIRE(minority->GetMap("lu")->Set(key("first", i), "minority"));
      REQUIRE(minority->GetMap("lu")->Set(key("last", i), "minority"));
      auto refused = minority->GetMap("quorum")->Set(key("q", i), "minority");
      REQUIRE(!refused);
      CHECK(refused.error().code() == base::ErrorCode::kNoQuorum);
    }
    std::this_thread::sleep_for(20ms);
    for (int i = 0; i < kKeys; ++i) {
      REQUIRE(majority->GetMap("lu")->Set(key("last", i), "majority"));
    }
  }
  std::this_thread::sleep_until(cut + 20s);

  const auto healed = Clock::now();
  heal(*a, *b, *c);
  WaitForView(
      *a, [](const auto& v) { return v.members.members.size() == 3; }, 10s);
  WaitForView(
      *c, [](const auto& v) { return v.members.members.size() == 3; }, 10s);
  WARN("heal to one cluster: "
       << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - healed).count()
       << " ms");

  auto on_c = ConnectOrFail(*c);
  std::string metrics;
  const auto deadline = Clock::now() + 15s;
  while (Clock::now() < deadline) {
    metrics = on_c->FetchMetricsText().value_or("");
    if (metrics.find("\ntessera_merge_entries_pending 0\n") != std::string::npos) break;
    std::this_thread::sleep_for(100ms);
  }
  const std::string counter = "\ntessera_member_merges_total ";
  const auto at = metrics.find(counter);
  REQUIRE(at != std::string::npos);
  const int merges = std::atoi(metrics.c_str() + at + counter.size());
  CHECK(merges >= min_merges);
  CHECK(merges <= max_merges);
  CHECK(metrics.find("\ntessera_merge_entries_pending 0\n") != std::string::npos);
  for (const auto* node : {a.get(), b.get(), c.get()}) {
    auto client = ConnectOrFail(*node);
    std::string wrong;  // "map key=found" for every key not as its policy says
    auto expect = [&](const char* map, const std::string& k, const char* value) {
      const std::string found = ValueOn(*client, map, k);
      if (found != value) wrong += std::string(map) + " " + k + "=" + found + "; ";
    };
    for (int i = 0; i < kKeys; ++i) {
      expect("pia", key("pre", i), "v0");
      expect("pia", key("both", i), "majority");
      expect("pia", key("minority", i), "minority");
      expect("pt", key("both", i), "minority");
      expect("lu", key("first", i), "minority");
      expect("lu", key("last", i), "majority");
      expect("quorum", key("q", i), "majority");
    }
    INFO("through " << node->address());
    CHECK(wrong == "");
  }
}

}  // namespace

TEST_CASE(
    "grid-node processes cut 2|1 for 20 s with writes on both sides merge into one "
    "cluster within 10 s, each map holds what its merge policy says, key by key",
    "[tools][cluster][split]") {
  // c, the side that merges, is healed first and a, the master it joins, last: c can send by
  // the time it learns of a's cluster, so its join is answered at once and it merges once.
  // (Healed the other way round, c's join requests are dropped until c heals; see below.)
  SplitWritesMerge(
      [](const NodeProcess& a, const NodeProcess& b, const NodeProcess& c) {
        for (const auto* node : {&c, &b, &a}) Fault(*node, {});
      },
      1, 1);
}

TEST_CASE(
    "A cut healed one way first (the merging member hears the other cluster but cannot answer "
    "it past the join timeout) merges again, each map as its merge policy says, key by key",
    "[tools][cluster][split]") {
  // c hears a's split probes and merges, but its join requests are dropped: after the join
  // timeout (1.5 s) it starts a cluster of its own (list version 1) with what it took out, and
  // merges again once it can reach a (once more if a's next probe comes before c can send).
  // Merged entries keep their last-update times and hits, so a second merge judges them as
  // the first would have.
  SplitWritesMerge(
      [](const NodeProcess& a, const NodeProcess& b, const NodeProcess& c) {
        Fault(a, {});
        Fault(b, {});
        WaitForView(
            c,
            [](const auto& v) { return v.members.version == 1 && v.members.members.size() == 1; },
            15s);
        Fault(c, {});
      },
      2, 3);
}

}  // namespace tessera::integration
