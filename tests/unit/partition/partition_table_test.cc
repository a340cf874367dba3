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
