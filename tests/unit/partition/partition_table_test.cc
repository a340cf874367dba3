#include "tessera/partition/partition_table.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

using tessera::partition::CountReplicas;
using tessera::partition::PartitionTable;
using tessera::partition::Rebalance;

namespace {

std::vector<std::string> Members(int n, int first = 0) {
  std::vector<std::string> out;
  for (int i = first; i < first + n; ++i) out.push_back("m" + std::to_string(i));
  return out;
}

// Every invariant the header promises.
void CheckInvariants(const PartitionTable& t, const std::vector<std::string>& members,
                     std::uint32_t partitions, std::uint32_t backups) {
  REQUIRE(t.partition_count() == partitions);
  const std::size_t replicas = std::min<std::size_t>(backups + 1, members.size());
  for (std::uint32_t p = 0; p < partitions; ++p) {
    const auto& r = t.replicas[p];
    REQUIRE(r.size() == replicas);
    std::set<std::string> distinct(r.begin(), r.end());
    REQUIRE(distinct.size() == r.size());  // never owner and backup on one member
    for (const auto& m : r) REQUIRE(std::find(members.begin(), members.end(), m) != members.end());
  }
  for (std::size_t i = 0; i < replicas; ++i) {
    std::uint32_t lo = partitions, hi = 0;
    for (const auto& m : members) {
      std::uint32_t c = 0;
      for (const auto& r : t.replicas) c += r[i] == m;
      lo = std::min(lo, c);
      hi = std::max(hi, c);
    }
    INFO("replica index " << i << " members " << members.size());
    REQUIRE(hi - lo <= 1);
  }
}

// Replica slots whose member differs between two tables (a move = data copied somewhere).
std::size_t Moves(const PartitionTable& a, const PartitionTable& b) {
  std::size_t moves = 0;
  for (std::size_t p = 0; p < b.replicas.size(); ++p) {
    for (const auto& m : b.replicas[p]) {
      if (std::find(a.replicas[p].begin(), a.replicas[p].end(), m) == a.replicas[p].end()) ++moves;
    }
  }
  return moves;
}

}  // namespace

TEST_CASE("Rebalance gives balanced owners and backups, never two replicas on one member",
          "[partition]") {
  for (std::uint32_t backups : {0u, 1u, 2u, 3u}) {
    for (int n = 1; n <= 7; ++n) {
      auto members = Members(n);
      auto t = Rebalance({}, members, 271, backups);
      CHECK(t.version == 1);
      CheckInvariants(t, members, 271, backups);
    }
  }
}

TEST_CASE("Growing one member at a time stays balanced and moves about P/n per replica",
          "[partition]") {
  PartitionTable t;
  for (int n = 1; n <= 6; ++n) {
    auto members = Members(n);
    auto next = Rebalance(t, members, 271, 1);
    CheckInvariants(next, members, 271, 1);
    if (n >= 3) {
      // The new member takes about 271/n owners and 271/n backups; little else moves.
      std::size_t fair = 2 * (271 / n + 1);
      CHECK(Moves(t, next) <= fair + fair / 2);
    }
    t = next;
  }
}

TEST_CASE("A dead owner's backup is promoted: surviving replicas keep their partitions",
          "[partition]") {
  auto three = Members(3);
  auto t = Rebalance({}, three, 271, 1);
  std::vector<std::string> two = {"m0", "m2"};  // m1 died
  auto after = Rebalance(t, two, 271, 1);
  CheckInvariants(after, two, 271, 1);
  for (std::uint32_t p = 0; p < 271; ++p) {
    const auto& before = t.replicas[p];
    if (before[0] == "m1") {
      CHECK(after.replicas[p][0] == before[1]);  // promotion, no data movement
    } else {
      CHECK(after.replicas[p][0] == before[0]);  // owners that survived stay owners
    }
  }
}

TEST_CASE("Rebalancing an already balanced table changes nothing", "[partition]") {
  auto members = Members(4);
  auto t = Rebalance({}, members, 271, 2);
  auto again = Rebalance(t, members, 271, 2);
  CHECK(again.version == t.version + 1);
  CHECK(again.replicas == t.replicas);
}

TEST_CASE("Fewer members than replicas: every member holds every partition", "[partition]") {
  auto members = Members(2);
  auto t = Rebalance({}, members, 13, 3);
  CheckInvariants(t, members, 13, 3);
  for (const auto& r : t.replicas) CHECK(r.size() == 2);
  auto counts = CountReplicas(t, members);
  REQUIRE(counts.size() == 2);
  CHECK(counts[0].owned + counts[1].owned == 13);
  CHECK(counts[0].backups + counts[1].backups == 13);
}

TEST_CASE("No members: partitions have no owner", "[partition]") {
  auto t = Rebalance({}, {}, 5, 1);
  CHECK(t.partition_count() == 5);
  CHECK(t.Owner(0).empty());
  CHECK(t.ReplicaIndex(0, "m0") == -1);
}

namespace {

// The partitions `member` holds a replica of in `t`, as an affinity row.
std::vector<bool> HeldBy(const PartitionTable& t, const std::string& member) {
  std::vector<bool> out(t.replicas.size(), false);
  for (std::size_t p = 0; p < t.replicas.size(); ++p) {
    out[p] = std::find(t.replicas[p].begin(), t.replicas[p].end(), member) != t.replicas[p].end();
  }
  return out;
}

// Of the slots `member` holds in `t`, how many are of partitions `data` marks.
std::pair<std::size_t, std::size_t> SlotsWithData(const PartitionTable& t,
                                                  const std::string& member,
                                                  const std::vector<bool>& data) {
  std::size_t slots = 0, with_data = 0;
  for (std::size_t p = 0; p < t.replicas.size(); ++p) {
    for (const auto& m : t.replicas[p]) {
      if (m != member) continue;
      ++slots;
      with_data += data[p] ? 1 : 0;
    }
  }
  return {slots, with_data};
}

}  // namespace

TEST_CASE(
    "A member restarted on its data is given the partitions it has data of, whether it "
    "replaces its old process at once or rejoins after the cluster moved on without it",
    "[partition]") {
  auto three = Members(3);
  const auto t = Rebalance({}, three, 271, 1);
  const std::vector<bool> data = HeldBy(t, "m2");  // what m2's directory holds
  const std::vector<std::string> restarted = {"m0", "m1", "m2b"};
  tessera::partition::Affinity affinity{{"m2b", data}};

  SECTION("replaced at once: its old process's slots are its") {
    auto with = Rebalance(t, restarted, 271, 1, &affinity);
    auto without = Rebalance(t, restarted, 271, 1);
    CheckInvariants(with, restarted, 271, 1);
    const auto [slots, with_data] = SlotsWithData(with, "m2b", data);
    const auto [slots_plain, with_data_plain] = SlotsWithData(without, "m2b", data);
    INFO("with affinity " << with_data << "/" << slots << ", without " << with_data_plain << "/"
                          << slots_plain);
    CHECK(with_data == slots);                   // every slot it is given, it has data of
    CHECK(with_data_plain < slots_plain);        // which balance alone does not do
    CHECK(Moves(t, with) <= Moves(t, without));  // no more moves than without
  }
  SECTION("removed first, then back: the slots balance takes from the others are its") {
    const std::vector<std::string> two = {"m0", "m1"};
    const auto shrunk = Rebalance(t, two, 271, 1);
    auto with = Rebalance(shrunk, restarted, 271, 1, &affinity);
    auto without = Rebalance(shrunk, restarted, 271, 1);
    CheckInvariants(with, restarted, 271, 1);
    const auto [slots, with_data] = SlotsWithData(with, "m2b", data);
    const auto [slots_plain, with_data_plain] = SlotsWithData(without, "m2b", data);
    INFO("with affinity " << with_data << "/" << slots << ", without " << with_data_plain << "/"
                          << slots_plain);
    // Its share is as large as its data (about 180 slots): balance at each replica index may
    // leave one or two slots to whichever partition is left (179 of 180 here).
    CHECK(with_data * 100 >= slots * 98);
    CHECK(with_data_plain * 100 < slots_plain * 80);
    CHECK(Moves(shrunk, with) == Moves(shrunk, without));  // the same number of moves
  }
}
