#include "tessera/membership/membership.h"

#include <catch2/catch.hpp>

#include <functional>
#include <set>

#include "sim_network.h"

using tessera::membership::ClusterMessage;
using tessera::membership::ClusterView;
using tessera::membership::DecodeClusterMessage;
using tessera::membership::EncodeClusterMessage;
using tessera::membership::Membership;
using tessera::membership::MembershipOptions;
using tessera::membership::MemberState;
using tessera::membership::MessageType;
using tessera::membership::testing::SimNetwork;

namespace {

MembershipOptions Options(std::vector<std::string> seeds = {}) {
  MembershipOptions o;
  o.seeds = std::move(seeds);
  o.settings.partition_count = 271;
  o.backup_count = 1;
  return o;
}

// Every live member is a member, all hold the same view, and it lists exactly `expected`.
void CheckConverged(SimNetwork& net, const std::vector<std::string>& expected) {
  const ClusterView* first = nullptr;
  for (const auto& address : net.LiveAddresses()) {
    Membership* m = net.Find(address);
    INFO("member " << address << " state " << MemberStateName(m->state()));
    REQUIRE(m->state() == MemberState::kMember);
    if (!first) {
      first = &m->view();
    } else {
      REQUIRE(m->view() == *first);
    }
  }
  REQUIRE(first);
  std::vector<std::string> addresses;
  for (const auto& m : first->members.members) addresses.push_back(m.address);
  CHECK(addresses == expected);
  CHECK(first->AllReplicasPresent());
  int masters = 0;
  for (const auto& address : net.LiveAddresses()) masters += net.Find(address)->is_master();
  CHECK(masters == 1);
}

// Starts the members 100 ms apart, each joining through the first, so list order = this order.
void StartInOrder(SimNetwork& net, const std::vector<std::string>& addresses) {
  for (std::size_t i = 0; i < addresses.size(); ++i) {
    if (i > 0) net.Run(100);
    net.Start(addresses[i], i == 0 ? Options() : Options({addresses[0]}));
  }
}

}  // namespace

TEST_CASE("Members join through a seed, the oldest is master, all share one view", "[membership]") {
  SimNetwork net;
  Membership& a = net.Start("10.0.0.1:5701", Options());
  CHECK(a.is_master());  // no seeds: starts the cluster
  net.Start("10.0.0.2:5701", Options({"10.0.0.1:5701"}));
  net.Run(200);
  net.Start("10.0.0.3:5701", Options({"10.0.0.2:5701"}));  // seed is not the master: redirect
  net.Run(500);
  CheckConverged(net, {"10.0.0.1:5701", "10.0.0.2:5701", "10.0.0.3:5701"});
  CHECK(a.is_master());
  CHECK(a.view().members.version == 3);
  // The master balanced the table: 271 owners over 3 members, 90 or 91 each.
  for (const auto& c :
       tessera::partition::CountReplicas(a.view().partitions, a.view().members.Uuids())) {
    CHECK(c.owned >= 90);
    CHECK(c.owned <= 91);
    CHECK(c.backups >= 90);
    CHECK(c.backups <= 91);
  }
}

TEST_CASE("Members started together with each other as seeds form one cluster", "[membership]") {
  SimNetwork net;
  std::vector<std::string> all = {"10.0.0.3:5701", "10.0.0.1:5701", "10.0.0.2:5701"};
  for (const auto& address : all) net.Start(address, Options(all));
  net.Run(1000);
  CHECK(net.Find("10.0.0.1:5701")->is_master());  // the smallest address starts it
  const auto& members = net.Find("10.0.0.1:5701")->view().members.members;
  REQUIRE(members.size() == 3);
  std::set<std::string> listed;
  for (const auto& m : members) listed.insert(m.address);
  CHECK(listed == std::set<std::string>(all.begin(), all.end()));
  CheckConverged(net, {members[0].address, members[1].address, members[2].address});
}

TEST_CASE("A crashed member is removed after the failure timeout, its backups are promoted",
          "[membership]") {
  SimNetwork net;
  StartInOrder(net, {"a:1", "b:1", "c:1"});
  net.Run(300);
  CheckConverged(net, {"a:1", "b:1", "c:1"});
  const auto before = net.Find("a:1")->view();
  const std::string dead = before.members.members[2].uuid;

  net.Crash("c:1");
  net.Run(4000);  // heartbeat 1 s, failure timeout 5 s: not yet
  CHECK(net.Find("a:1")->view().members.members.size() == 3);
  net.Run(2500);
  CheckConverged(net, {"a:1", "b:1"});
  const auto& after = net.Find("a:1")->view();
  for (std::uint32_t p = 0; p < 271; ++p) {
    if (before.partitions.replicas[p][0] == dead) {
      CHECK(after.partitions.replicas[p][0] == before.partitions.replicas[p][1]);
    }
  }
  CHECK(net.Log("a:1").find("silent for") != std::string::npos);
}

TEST_CASE(
    "A cluster frozen for 10 s and resumed together stays one cluster, a member that "
    "died meanwhile is still removed",
    "[membership]") {
  SimNetwork net;
  StartInOrder(net, {"a:1", "b:1", "c:1"});
  net.Run(300);
  CheckConverged(net, {"a:1", "b:1", "c:1"});

  net.clock().Advance(10'000);  // every process stopped: no timer, no message
  net.Run(500);
  CheckConverged(net, {"a:1", "b:1", "c:1"});
  for (const auto& address : net.LiveAddresses()) {
    CHECK(net.Find(address)->pauses() == 1);
    CHECK(net.Find(address)->last_pause_ms() >= 10'000);
    CHECK(net.Log(address).find("did not run for") != std::string::npos);
    CHECK(net.Log(address).find("silent for") == std::string::npos);
  }
  net.Run(6'000);  // well past a failure timeout after waking: nobody was removed
  CheckConverged(net, {"a:1", "b:1", "c:1"});

  net.Crash("c:1");
  net.clock().Advance(10'000);  // frozen again; c does not come back
  net.Run(4'000);               // a fresh window: not yet
  CHECK(net.Find("a:1")->view().members.members.size() == 3);
  net.Run(2'500);
  CheckConverged(net, {"a:1", "b:1"});
}

TEST_CASE("When the master dies the next-oldest member takes over", "[membership]") {
  SimNetwork net;
  StartInOrder(net, {"a:1", "b:1", "c:1"});
  net.Run(100);
  net.Start("d:1", Options({"a:1"}));
  net.Run(300);
  CheckConverged(net, {"a:1", "b:1", "c:1", "d:1"});
  net.Crash("a:1");
  net.Run(7000);
  CheckConverged(net, {"b:1", "c:1", "d:1"});
  CHECK(net.Find("b:1")->is_master());
  CHECK(net.Log("b:1").find("taking over as master") != std::string::npos);
  // The new master keeps admitting members.
  net.Start("e:1", Options({"c:1"}));
  net.Run(500);
  CheckConverged(net, {"b:1", "c:1", "d:1", "e:1"});
}

TEST_CASE("Graceful leave: a member and then the master leave without a failure timeout",
          "[membership]") {
  SimNetwork net;
  StartInOrder(net, {"a:1", "b:1", "c:1"});
  net.Run(300);
  net.Find("c:1")->Leave();
  net.Run(200);  // far below the failure timeout
  CHECK(net.Find("c:1")->state() == MemberState::kLeft);
  net.Crash("c:1");
  CheckConverged(net, {"a:1", "b:1"});

  // The master hands over: it is out once b reported the table without it.
  net.Find("a:1")->Leave();
  CHECK(net.Find("a:1")->state() == MemberState::kLeaving);
  net.Run(200);
  CHECK(net.Find("a:1")->state() == MemberState::kLeft);
  net.Crash("a:1");
  CheckConverged(net, {"b:1"});
  CHECK(net.Find("b:1")->is_master());
  // b now holds every partition as owner.
  for (const auto& r : net.Find("b:1")->view().partitions.replicas) {
    REQUIRE(r.size() == 1);
    CHECK(r[0] == net.Find("b:1")->self().uuid);
  }
}

TEST_CASE("A leaver is out only once the other members have the table without it, or after a bound",
          "[membership]") {
  SimNetwork net;
  StartInOrder(net, {"a:1", "b:1", "c:1"});
  net.Run(300);
  // b does not hear the master: it keeps routing backups to c by the old table, so c stays.
  net.BlockOneWay("a:1", "b:1");
  net.Find("c:1")->Leave();
  net.Run(600);
  CHECK(net.Find("c:1")->state() == MemberState::kLeaving);
  CHECK(net.Find("b:1")->view().members.Find("c:1#3") != nullptr);
  // b gets the view with its next heartbeat's answer, reports it, and c is told.
  net.Heal();
  net.Run(1200);
  CHECK(net.Find("c:1")->state() == MemberState::kLeft);
  net.Crash("c:1");
  CheckConverged(net, {"a:1", "b:1"});

  // A member that never reports holds a leave up for half of min(failure timeout, 5 s).
  net.Start("d:1", Options({"a:1"}));
  net.Run(500);
  CheckConverged(net, {"a:1", "b:1", "d:1"});
  net.BlockOneWay("a:1", "b:1");
  net.Find("d:1")->Leave();
  net.Run(2000);
  CHECK(net.Find("d:1")->state() == MemberState::kLeaving);
  net.Run(700);
  CHECK(net.Find("d:1")->state() == MemberState::kLeft);
  CHECK(net.Log("a:1").find("not every member reported the table without d:1") !=
        std::string::npos);
}

TEST_CASE("Different cluster names or partition counts never merge, both sides log why",
          "[membership]") {
  SimNetwork net;
  net.Start("a:1", Options());
  auto other = Options({"a:1"});
  other.settings.cluster_name = "prod";
  net.Start("b:1", other);
  auto partitions = Options({"a:1"});
  partitions.settings.partition_count = 100;
  net.Start("c:1", partitions);
  net.Run(6000);  // past the join timeout: each refused member starts its own cluster
  CHECK(net.Find("a:1")->view().members.members.size() == 1);
  CHECK(net.Find("b:1")->view().members.members.size() == 1);
  CHECK(net.Find("c:1")->view().members.members.size() == 1);
  CHECK(net.Find("b:1")->is_master());
  CHECK(net.Find("c:1")->is_master());
  CHECK(net.Log("a:1").find("refused join of member b:1#2 at b:1: cluster name 'prod' differs "
                            "from this cluster's 'dev'") != std::string::npos);
  CHECK(net.Log("b:1").find("refused this member: cluster name 'prod'") != std::string::npos);
  CHECK(net.Log("c:1").find("partition count 100 differs from this cluster's 271; start the "
                            "member with --partitions 271") != std::string::npos);
}

TEST_CASE("A member restarted at the same address gets a new identity and rejoins cleanly",
          "[membership]") {
  SimNetwork net;
  net.Start("a:1", Options());
  net.Start("b:1", Options({"a:1"}));
  net.Run(300);
  const std::string old_uuid = net.Find("b:1")->self().uuid;
  net.Crash("b:1");
  net.Run(1000);  // back well before the failure timeout
  Membership& b = net.Start("b:1", Options({"a:1"}));
  net.Run(500);
  CHECK(b.self().uuid != old_uuid);
  CheckConverged(net, {"a:1", "b:1"});
  CHECK(!b.view().members.Find(old_uuid));
  CHECK(net.Log("a:1").find("restarted: new identity") != std::string::npos);
  net.Run(8000);  // no stale identity is left to time out
  CheckConverged(net, {"a:1", "b:1"});
}

TEST_CASE(
    "A master restarted at its address joins its old cluster: the next member takes over at "
    "once and admits it",
    "[membership]") {
  // Its seeds used to redirect it to the master's address, its own: it asked itself, found no
  // cluster and started one alone, which other members' requests then reached (and whose
  // writes a later merge discarded).
  SimNetwork net;
  StartInOrder(net, {"a:1", "b:1", "c:1"});
  net.Run(300);
  const std::string old_uuid = net.Find("a:1")->self().uuid;
  net.Crash("a:1");
  net.Run(500);
  Membership& a = net.Start("a:1", Options({"b:1", "c:1"}));
  net.Run(2000);  // well within the failure timeout (5 s) and the join timeout (5 s)
  CheckConverged(net, {"b:1", "c:1", "a:1"});
  CHECK(a.self().uuid != old_uuid);
  CHECK(!a.is_master());
  CHECK(net.Log("a:1").find("starting a new cluster") == std::string::npos);
  CHECK(net.Log("b:1").find("restarted (new identity") != std::string::npos);
  net.Run(8000);  // nothing left to time out or merge
  CheckConverged(net, {"b:1", "c:1", "a:1"});
}

TEST_CASE("Lost and delayed messages: the cluster still converges, and detects a crash",
          "[membership]") {
  SimNetwork net(42);
  net.set_drop_rate(0.2);
  net.set_max_delay_ms(300);
  net.Start("a:1", Options());
  for (const char* address : {"b:1", "c:1", "d:1", "e:1"}) net.Start(address, Options({"a:1"}));
  net.Run(4000);
  // The join order depends on which requests got through; every member is listed once.
  const auto& members = net.Find("a:1")->view().members.members;
  REQUIRE(members.size() == 5);
  std::vector<std::string> order;
  for (const auto& m : members) order.push_back(m.address);
  CheckConverged(net, order);
  net.Crash("d:1");
  order.erase(std::find(order.begin(), order.end(), "d:1"));
  net.Run(8000);
  CheckConverged(net, order);
}

TEST_CASE("A member cut off from the rest is removed, the rest keep one consistent view",
          "[membership]") {
  SimNetwork net;
  StartInOrder(net, {"a:1", "b:1", "c:1"});
  net.Run(300);
  net.Partition({"c:1"}, {"a:1", "b:1"});
  net.Run(7000);
  const auto& view = net.Find("a:1")->view();
  REQUIRE(view.members.members.size() == 2);
  CHECK(net.Find("b:1")->view() == view);
  CHECK(view.AllReplicasPresent());
}

// Counts the rejoin-listener calls of `m` (a member taking its data out of its old cluster);
// `silent_ms`, when given, gets the last call's.
std::shared_ptr<int> CountRejoins(Membership& m,
                                  std::shared_ptr<tessera::base::Millis> silent_ms = nullptr) {
  auto count = std::make_shared<int>(0);
  m.set_rejoin_listener([count, silent_ms](const std::string&, tessera::base::Millis silent) {
    ++*count;
    if (silent_ms) *silent_ms = silent;
  });
  return count;
}

TEST_CASE(
    "Split brain: a 2|1 partition heals into one cluster within the merge interval, the "
    "smaller side merging into the larger",
    "[membership][split]") {
  SimNetwork net;
  StartInOrder(net, {"a:1", "b:1", "c:1"});
  net.Run(300);
  auto a_rejoins = CountRejoins(*net.Find("a:1"));
  auto c_rejoins = CountRejoins(*net.Find("c:1"));
  net.Partition({"c:1"}, {"a:1", "b:1"});
  net.Run(7000);  // both sides remove the other: two clusters, {a, b} and {c}
  REQUIRE(net.Find("a:1")->view().members.members.size() == 2);
  REQUIRE(net.Find("c:1")->view().members.members.size() == 1);
  REQUIRE(net.Find("c:1")->is_master());
  CHECK(*c_rejoins == 0);

  net.Heal();
  net.Run(2600);  // one merge interval (2 s) and a join
  CheckConverged(net, {"a:1", "b:1", "c:1"});
  CHECK(*c_rejoins == 1);
  CHECK(*a_rejoins == 0);
  CHECK(net.Find("c:1")->rejoins() == 1);
  CHECK(net.Find("a:1")->rejoins() == 0);
  CHECK(net.Find("a:1")->is_master());
  CHECK(net.Log("c:1").find("split brain: another cluster 'dev' of 2 member(s)") !=
        std::string::npos);
  net.Run(6000);  // and it stays one
  CheckConverged(net, {"a:1", "b:1", "c:1"});
}

TEST_CASE("Split brain between equal halves: the younger cluster merges, all its members rejoin",
          "[membership][split]") {
  SimNetwork net;
  StartInOrder(net, {"a:1", "b:1", "c:1", "d:1"});
  net.Run(300);
  auto c_rejoins = CountRejoins(*net.Find("c:1"));
  auto d_rejoins = CountRejoins(*net.Find("d:1"));
  auto b_rejoins = CountRejoins(*net.Find("b:1"));
  net.Partition({"c:1", "d:1"}, {"a:1", "b:1"});
  net.Run(7000);
  REQUIRE(net.Find("c:1")->is_master());  // took over its half; started after a
  REQUIRE(net.Find("c:1")->view().members.members.size() == 2);
  net.Heal();
  net.Run(3000);
  CheckConverged(net, {"a:1", "b:1", "c:1", "d:1"});
  CHECK(*c_rejoins == 1);
  CHECK(*d_rejoins == 1);
  CHECK(*b_rejoins == 0);
  CHECK(net.Log("c:1").find("is the younger and merges into it") != std::string::npos);
  CHECK(net.Log("d:1").find("merges this cluster into the one whose master is at a:1") !=
        std::string::npos);
}

TEST_CASE(
    "A cut-off master that still lists a member of the majority does not make the majority "
    "merge into it: the lone master merges once it removed that member",
    "[membership][split]") {
  // The jepsen unique/partition-master/quorum run that lost 295 acknowledged writes: the cut
  // reached c's heartbeats to the old master last, so at the heal a still listed c, its
  // cluster counted 2 like the majority's, and the majority (the younger) merged into it,
  // leaving out its quorum map's writes of the last failure timeout.
  SimNetwork net;
  StartInOrder(net, {"a:1", "b:1", "c:1"});
  net.Run(300);
  auto a_rejoins = CountRejoins(*net.Find("a:1"));
  auto b_rejoins = CountRejoins(*net.Find("b:1"));
  auto c_rejoins = CountRejoins(*net.Find("c:1"));
  net.BlockOneWay("a:1", "b:1");
  net.BlockOneWay("b:1", "a:1");
  net.BlockOneWay("a:1", "c:1");  // c's heartbeats still reach a
  Membership& a = *net.Find("a:1");
  Membership& b = *net.Find("b:1");
  for (int i = 0; i < 400 && !(b.is_master() && b.view().members.members.size() == 2); ++i) {
    net.Run(50);
  }
  REQUIRE(b.is_master());
  REQUIRE(b.view().members.members.size() == 2);
  // a removed b (silent) but still lists c, whose last heartbeat is recent.
  REQUIRE(a.is_master());
  REQUIRE(a.view().members.FindByAddress("c:1") != nullptr);
  REQUIRE(a.view().members.members.size() == 2);
  net.Heal();
  net.Run(12'000);
  CheckConverged(net, {"b:1", "c:1", "a:1"});
  CHECK(*a_rejoins == 1);
  CHECK(*b_rejoins == 0);
  CHECK(*c_rejoins == 0);
  CHECK(net.Log("b:1").find("not merging with the cluster of master") != std::string::npos);
  CHECK(net.Log("a:1").find("is the smaller and merges into it") != std::string::npos);
}

TEST_CASE(
    "A member paused past the failure timeout is removed, and on waking rejoins with a "
    "fresh view",
    "[membership][split]") {
  SimNetwork net;
  StartInOrder(net, {"a:1", "b:1", "c:1"});
  net.Run(300);
  auto c_rejoins = CountRejoins(*net.Find("c:1"));
  net.Freeze("c:1");
  net.Run(10'000);
  REQUIRE(net.Find("a:1")->view().members.members.size() == 2);
  net.Thaw("c:1");
  net.Run(1500);
  CheckConverged(net, {"a:1", "b:1", "c:1"});
  CHECK(*c_rejoins == 1);
  CHECK(net.Find("c:1")->pauses() == 1);
  CHECK(net.Log("c:1").find("no longer lists this member; rejoining") != std::string::npos);
}

TEST_CASE(
    "A master paused past the failure timeout is replaced, and on waking merges into the "
    "cluster that went on without it",
    "[membership][split]") {
  SimNetwork net;
  StartInOrder(net, {"a:1", "b:1", "c:1"});
  net.Run(300);
  auto a_silent = std::make_shared<tessera::base::Millis>(-1);
  auto a_rejoins = CountRejoins(*net.Find("a:1"), a_silent);
  auto b_rejoins = CountRejoins(*net.Find("b:1"));
  net.Freeze("a:1");
  net.Run(10'000);
  REQUIRE(net.Find("b:1")->is_master());
  REQUIRE(net.Find("b:1")->view().members.members.size() == 2);
  net.Thaw("a:1");
  // a wakes believing it masters {a, b, c}; b answers its heartbeats with NotMember, which is
  // no sign of life of a member of a's cluster: a loses b and c, finds {b, c} and merges.
  net.Run(6000);
  CheckConverged(net, {"b:1", "c:1", "a:1"});
  CHECK(*a_rejoins == 1);
  CHECK(*b_rejoins == 0);
  // a tells its listener it went silent when it was frozen: 10 s and the time since it woke
  // (what it wrote just before may not have reached its peers; MapService::LeaveCluster).
  CHECK(*a_silent >= 10'000);
  CHECK(*a_silent <= 16'000);
}

TEST_CASE(
    "A merge whose target master cannot be reached falls back to the old members instead "
    "of leaving each one alone",
    "[membership][split]") {
  SimNetwork net;
  StartInOrder(net, {"a:1", "b:1", "c:1", "d:1"});
  net.Run(300);
  net.Partition({"c:1", "d:1"}, {"a:1", "b:1"});
  net.Run(7000);
  REQUIRE(net.Find("c:1")->view().members.members.size() == 2);
  // Now only a and b reach c and d: c hears a's probes, decides to merge into a (same size,
  // a is older), but its join requests never arrive.
  net.Heal();
  for (const auto& from : {"c:1", "d:1"}) {
    for (const auto& to : {"a:1", "b:1"}) net.BlockOneWay(from, to);
  }
  net.Run(12'000);
  for (const auto& address : {"c:1", "d:1"}) {
    INFO(net.Log(address));
    CHECK(net.Log(address).find("did not admit this member within 5000 ms; joining through") !=
          std::string::npos);
    CHECK(net.Log(address).find("no member answered") == std::string::npos);
  }
  net.Heal();
  net.Run(10'000);
  CheckConverged(net, {"a:1", "b:1", "c:1", "d:1"});
}

TEST_CASE(
    "A joiner that started a cluster of its own after the join timeout merges into the cluster "
    "whose late view lists it, instead of installing that view over its own writes",
    "[membership][split]") {
  // Seen in examples:chaos-orders-short under load: the master's answer reached the joiner
  // just after its join timeout; it installed that view over the table it had served writes
  // under, and the orders it had accepted alone were gone.
  SimNetwork net;
  net.Start("a:1", Options());
  net.Run(300);
  net.DelayOneWay("a:1", "b:1", 6000);  // a admits b at once; b hears it 6 s later
  Membership& b = net.Start("b:1", Options({"a:1"}));
  auto b_rejoins = CountRejoins(b);
  net.Run(5500);
  REQUIRE(b.is_master());  // the join timeout (5 s) passed with no answer
  REQUIRE(b.view().members.members.size() == 1);
  REQUIRE(net.Find("a:1")->view().members.Find(b.self().uuid));
  net.Run(1000);  // a's first view arrives
  CHECK(*b_rejoins == 1);
  CHECK(net.Log("b:1").find("started a cluster of its own meanwhile") != std::string::npos);
  net.Heal();
  net.Run(3000);
  CheckConverged(net, {"a:1", "b:1"});
  CHECK(*b_rejoins == 1);
}

TEST_CASE(
    "A late view from another cluster's master is not installed by a member whose own cluster "
    "has others: the split-brain merge joins the clusters",
    "[membership][split]") {
  SimNetwork net;
  StartInOrder(net, {"a:1", "z:1"});
  net.Run(300);
  net.Find("z:1")->Leave();  // a's list versions run ahead of the ones b's cluster will have
  net.Run(3000);
  net.Crash("z:1");  // stopped after leaving
  REQUIRE(net.Find("a:1")->view().members.members.size() == 1);
  net.DelayOneWay("a:1", "b:1", 8000);
  Membership& b = net.Start("b:1", Options({"a:1"}));
  net.Run(5500);
  REQUIRE(b.is_master());
  net.Start("c:1", Options({"b:1"}));  // joins b's cluster
  net.Run(1000);
  REQUIRE(b.view().members.members.size() == 2);
  net.Run(2500);  // a's views reach b
  CHECK(net.Log("b:1").find("it is not this cluster's master") != std::string::npos);
  CHECK(b.view().members.members.size() == 2);
  CHECK(b.view().members.FindByAddress("a:1") == nullptr);
  net.Heal();
  net.Run(15'000);
  // a lost b (silent: b heartbeats its own cluster) and, the smaller cluster, merged into b's.
  CheckConverged(net, {"b:1", "c:1", "a:1"});
}

TEST_CASE("Split-brain detection can be switched off: the halves then stay apart",
          "[membership][split]") {
  SimNetwork net;
  auto options = [](std::vector<std::string> seeds) {
    auto o = Options(std::move(seeds));
    o.merge_interval_ms = 0;
    return o;
  };
  net.Start("a:1", options({}));
  net.Run(100);
  net.Start("b:1", options({"a:1"}));
  net.Run(300);
  net.Partition({"b:1"}, {"a:1"});
  net.Run(7000);
  net.Heal();
  net.Run(5000);
  CHECK(net.Find("a:1")->view().members.members.size() == 1);
  CHECK(net.Find("b:1")->view().members.members.size() == 1);
}

TEST_CASE("Cluster messages round-trip through the codec, bad bytes are rejected", "[membership]") {
  ClusterMessage m;
  m.type = MessageType::kView;
  m.from = {"u1", "h:1", 123};
  m.settings = {"dev", 1, 7};
  ClusterView view;
  view.members.version = 4;
  view.members.members = {{"u1", "h:1", 123}, {"u2", "h:2", 456}};
  view.partitions = tessera::partition::Rebalance({}, {"u1", "u2"}, 7, 1);
  m.view = view;
  m.member_uuids = {"u1", "u2"};
  auto decoded = DecodeClusterMessage(EncodeClusterMessage(m));
  REQUIRE(decoded);
  CHECK(*decoded == m);

  CHECK(DecodeClusterMessage("").error().message().find("not a valid cluster message") == 0);
  CHECK(!DecodeClusterMessage(std::string(16, '\xff')));
  ClusterMessage unknown = m;
  auto bytes = EncodeClusterMessage(unknown);
  CHECK(DecodeClusterMessage(bytes.substr(0, 8)).has_value() == false);
}

TEST_CASE(
    "A joiner whose view is slow to arrive asks again and is sent the view, not removed and "
    "admitted afresh",
    "[membership]") {
  SimNetwork net;
  net.Start("a:1", Options());
  net.Run(300);
  net.BlockOneWay("a:1", "b:1");  // b's join requests reach a; a's view does not reach b
  net.Start("b:1", Options({"a:1"}));
  net.Run(100);
  REQUIRE(net.Find("a:1")->view().members.members.size() == 2);  // a admitted b
  const auto version_admitted = net.Find("a:1")->view().members.version;
  net.Run(1400);  // b asks again every join interval (500 ms)
  net.Heal();
  net.Run(1000);
  CheckConverged(net, {"a:1", "b:1"});
  // Listed once: a member that never had its view is not removed and admitted a second time
  // (it may already act on a view on its way, so the removal could take partitions it serves).
  CHECK(net.Find("a:1")->view().members.version == version_admitted);
  CHECK(net.Log("a:1").find("joins again while listed") == std::string::npos);
}

TEST_CASE(
    "One of two members paused past the failure timeout joins the one that went on without it, "
    "which keeps its data",
    "[membership][split]") {
  SimNetwork net;
  StartInOrder(net, {"a:1", "b:1"});
  net.Run(300);
  auto a_silent = std::make_shared<tessera::base::Millis>(-1);
  auto a_rejoins = CountRejoins(*net.Find("a:1"), a_silent);
  auto b_rejoins = CountRejoins(*net.Find("b:1"));
  net.Freeze("a:1");  // the master, so the two clusters tie on size and a's is the older
  net.Run(10'000);
  REQUIRE(net.Find("b:1")->is_master());
  REQUIRE(net.Find("b:1")->view().members.members.size() == 1);
  net.Thaw("a:1");
  net.Run(6000);
  CheckConverged(net, {"b:1", "a:1"});
  CHECK(*a_rejoins == 1);  // a, with the stale copy, merges into b
  CHECK(*b_rejoins == 0);  // b, which took the writes while a was stopped, stays
  CHECK(net.Log("a:1").find("masters a cluster without it") != std::string::npos);
  CHECK(*a_silent >= 10'000);  // frozen 10 s: its last writes before that may be unconfirmed
  CHECK(*a_silent <= 16'000);
}

TEST_CASE("Heartbeats carry each member's partition table and pending copies to every other",
          "[membership]") {
  SimNetwork net;
  std::int64_t pending_b = 7;  // what b's map service would report
  Membership& a = net.Start("10.0.0.1:5701", Options());
  MembershipOptions ob = Options({"10.0.0.1:5701"});
  ob.migrations_pending = [&pending_b] { return pending_b; };
  Membership& b = net.Start("10.0.0.2:5701", ob);
  net.Run(3000);  // joined, then heartbeat rounds (1 s)
  CheckConverged(net, {"10.0.0.1:5701", "10.0.0.2:5701"});
  const auto& ra = a.peer_reports();
  REQUIRE(ra.size() == 1);
  const auto& of_b = ra.at(b.self().uuid);
  CHECK(of_b.table_version == a.view().partitions.version);
  CHECK(of_b.migrations_pending == 7);
  // a has no hook: it reports 0; b hears it.
  REQUIRE(b.peer_reports().count(a.self().uuid) == 1);
  CHECK(b.peer_reports().at(a.self().uuid).migrations_pending == 0);
  pending_b = 0;
  net.Run(1500);
  CHECK(a.peer_reports().at(b.self().uuid).migrations_pending == 0);
  // The codec keeps the field.
  ClusterMessage hb;
  hb.type = MessageType::kHeartbeat;
  hb.migrations_pending = 42;
  auto decoded = DecodeClusterMessage(EncodeClusterMessage(hb));
  REQUIRE(decoded);
  CHECK(decoded->migrations_pending == 42);
  // A member that leaves the view leaves the reports.
  net.Crash("10.0.0.2:5701");
  net.Run(8000);
  CHECK(a.peer_reports().empty());
}

namespace {

using tessera::membership::RecoveryReport;

// What a member restarted on its data directory reports: `id`, the last table (version 7) of
// members a, b, c, and per partition the version `version(p)` (every partition held).
RecoveryReport Report(const std::string& id, const std::function<std::uint64_t(int)>& version,
                      const std::function<bool(int)>& owned) {
  RecoveryReport r;
  r.member_id = id;
  r.table_version = 7;
  r.table_members = {"id-a", "id-b", "id-c"};
  for (int p = 0; p < 271; ++p) {
    r.versions.push_back(version(p));
    r.held.push_back(true);
    r.owned.push_back(owned(p));
  }
  return r;
}

MembershipOptions Recovering(RecoveryReport report, std::vector<std::string> seeds = {}) {
  MembershipOptions o = Options(std::move(seeds));
  o.recovery = std::move(report);
  return o;
}

}  // namespace

TEST_CASE(
    "A restarted cluster publishes no table until every member of the last one is back, then "
    "gives each partition to the member with its newest replica, then adds backups",
    "[membership][recovery]") {
  SimNetwork net;
  // The last table: partition p owned by member p % 3 (a, b, c) and backed up by the next,
  // both at version 20. b's log has partition 5 (c's) newest: it took it over after the table
  // was written. Partition 6 (a's) is at a's version on b too.
  auto version = [](int member) {
    return [member](int p) -> std::uint64_t {
      if (p == 5) return member == 1 ? 30 : 20;
      return p % 3 == member || (p + 1) % 3 == member ? 20 : 0;
    };
  };
  auto owns = [](int member) { return [member](int p) { return p % 3 == member; }; };
  Membership& a = net.Start("a:1", Recovering(Report("id-a", version(0), owns(0))));
  std::vector<tessera::partition::PartitionTable> tables;
  a.set_view_listener([&](const ClusterView& view) {
    if (view.partitions.version != 0 &&
        (tables.empty() || tables.back().version != view.partitions.version)) {
      tables.push_back(view.partitions);
    }
  });
  net.Start("b:1", Recovering(Report("id-b", version(1), owns(1)), {"a:1"}));
  net.Run(2000);
  REQUIRE(a.is_master());
  CHECK(a.view().members.members.size() == 2);
  CHECK(tables.empty());  // waits for c
  CHECK(a.recovery_status().find("waiting for 1 of the 3 members") != std::string::npos);
  CHECK(a.recovery_status().find("id-c") != std::string::npos);
  net.Start("c:1", Recovering(Report("id-c", version(2), owns(2)), {"a:1"}));
  net.Run(2000);
  REQUIRE(tables.size() >= 2);
  const auto& recovered = tables[0];
  CHECK(recovered.version == 8);
  CHECK(recovered.recovered);
  const std::string ua = a.self().uuid;
  const std::string ub = net.Find("b:1")->self().uuid;
  const std::string uc = net.Find("c:1")->self().uuid;
  CHECK(recovered.replicas[0] == std::vector<std::string>{ua});
  CHECK(recovered.replicas[1] == std::vector<std::string>{ub});
  CHECK(recovered.replicas[2] == std::vector<std::string>{uc});
  CHECK(recovered.replicas[5] == std::vector<std::string>{ub});  // the newest replica
  CHECK(recovered.replicas[6] == std::vector<std::string>{ua});  // the owner between equals
  CHECK(a.recovery_status().empty());
  // Once every member installed it, the next table adds backups; owners move only as balance
  // requires (partition 5 went to b, so one partition moves on to c).
  CheckConverged(net, {"a:1", "b:1", "c:1"});
  const auto& after = tables[1];
  CHECK(!after.recovered);
  CHECK(after.version == 9);
  int moved = 0;
  for (std::uint32_t p = 0; p < 271; ++p) moved += after.Owner(p) != recovered.Owner(p);
  CHECK(moved <= 2);
}

TEST_CASE(
    "Recovery policy partial goes on without a missing member after the timeout when every "
    "partition has a replica back, full waits",
    "[membership][recovery]") {
  for (auto policy : {tessera::membership::RecoveryPolicy::kFull,
                      tessera::membership::RecoveryPolicy::kPartial}) {
    SimNetwork net;
    auto options = Recovering(Report(
        "id-a", [](int) { return 3; }, [](int) { return true; }));
    options.recovery_policy = policy;
    options.recovery_timeout_ms = 3000;
    Membership& a = net.Start("a:1", options);
    net.Run(2000);
    CHECK(a.view().partitions.version == 0);
    net.Run(2000);
    INFO(RecoveryPolicyName(policy));
    if (policy == tessera::membership::RecoveryPolicy::kFull) {
      CHECK(a.view().partitions.version == 0);
      CHECK(a.recovery_status().find("waits for all of them") != std::string::npos);
    } else {
      CHECK(a.view().partitions.version >= 8);
      CHECK(a.view().partitions.Owner(100) == a.self().uuid);
    }
  }
}

TEST_CASE(
    "ForceRecovery goes on at once without the missing members when every partition has a "
    "replica back, refuses while one has none, and is refused by a member that is not the "
    "master or a cluster that is not recovering",
    "[membership][recovery]") {
  SimNetwork net;
  // a holds every partition but 7 (its log has no complete replica of it); b holds 7.
  auto a_report = Report(
      "id-a", [](int) { return 3; }, [](int) { return true; });
  a_report.held[7] = false;
  Membership& a = net.Start("a:1", Recovering(a_report));
  net.Run(2000);
  REQUIRE(a.is_master());
  auto refused = a.ForceRecovery();  // partition 7 has no replica back
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == tessera::base::ErrorCode::kConflict);
  CHECK(refused.error().message().find("1 partition(s) have no replica") != std::string::npos);
  net.Run(1000);
  CHECK(a.view().partitions.version == 0);  // still waiting (policy full, no timeout)

  auto b_report = Report(
      "id-b", [](int) { return 3; }, [](int p) { return p == 7; });
  Membership& b = net.Start("b:1", Recovering(b_report, {"a:1"}));
  net.Run(2000);
  REQUIRE(a.view().members.members.size() == 2);
  CHECK(a.view().partitions.version == 0);  // c (id-c) is still missing
  auto not_master = b.ForceRecovery();
  REQUIRE_FALSE(not_master);
  CHECK(not_master.error().code() == tessera::base::ErrorCode::kBadRequest);
  CHECK(not_master.error().message().find("a:1") != std::string::npos);
  auto forced = a.ForceRecovery();
  INFO((forced ? *forced : forced.error().message()));
  REQUIRE(forced);
  CHECK(forced->find("recovery forced") != std::string::npos);
  CHECK(a.view().partitions.version == 8);
  CHECK(a.view().partitions.recovered);
  CHECK(a.view().partitions.Owner(7) == b.self().uuid);
  auto again = a.ForceRecovery();
  REQUIRE_FALSE(again);
  CHECK(again.error().message().find("not recovering") != std::string::npos);
}

TEST_CASE("A recovery report and a persistent member id round-trip through the codec",
          "[membership][recovery]") {
  ClusterMessage m;
  m.type = MessageType::kJoinRequest;
  m.from = {"u1", "h:1", 123, "persistent-1"};
  m.recovery = Report(
      "persistent-1", [](int p) { return p; }, [](int p) { return p < 3; });
  m.recovery->held[4] = false;
  auto decoded = DecodeClusterMessage(EncodeClusterMessage(m));
  REQUIRE(decoded);
  CHECK(*decoded == m);
}

TEST_CASE(
    "A master that leaves while its cluster recovers hands over no table: the next master goes "
    "on waiting for the last table's members",
    "[membership][recovery]") {
  SimNetwork net;
  auto every = [](int) -> std::uint64_t { return 5; };
  auto none = [](int) { return false; };
  Membership& a = net.Start("a:1", Recovering(Report("id-a", every, none)));
  Membership& b = net.Start("b:1", Recovering(Report("id-b", every, none), {"a:1"}));
  net.Run(1500);
  REQUIRE(a.is_master());
  REQUIRE(b.view().members.members.size() == 2);
  a.Leave();
  net.Run(1500);
  REQUIRE(b.is_master());
  CHECK(b.view().members.members.size() == 1);
  CHECK(b.view().partitions.version == 0);
  CHECK(b.recovery_status().find("waiting for 2 of the 3 members") != std::string::npos);
  // Both others back: b recovers.
  net.Start("a:1", Recovering(Report("id-a", every, none), {"b:1"}));
  net.Start("c:1", Recovering(Report("id-c", every, none), {"b:1"}));
  net.Run(3000);
  CHECK(b.view().partitions.version >= 8);
  CHECK(b.recovery_status().empty());
}
