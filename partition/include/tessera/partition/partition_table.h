#pragma once
// PartitionTable: who holds each partition. For every partition id, an ordered list of member
// uuids: [0] is the owner, [1..] are its backups (replica 1, 2, ...). The master computes it
// (Rebalance) whenever the member list changes and pushes it, versioned, to members and clients.
//
// Invariants of a table produced by Rebalance:
//   - no member appears twice in one partition's list (never owner and backup on one member);
//   - every partition has min(backup_count + 1, member count) replicas;
//   - at each replica index, members hold floor(P/n) or ceil(P/n) partitions (balanced);
//   - a surviving replica keeps its data: when an owner leaves, its first surviving backup
//     becomes owner (promotion), and replicas move only as far as balance requires.
//
// Value type; thread-compatible.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace tessera::partition {

inline constexpr std::uint32_t kMaxBackupCount = 6;

struct PartitionTable {
  std::int64_t version = 0;  // 0 = never computed
  std::uint32_t backup_count = 1;
  // replicas[p][i]: uuid of the member holding replica i of partition p (0 = owner).
  std::vector<std::vector<std::string>> replicas;
  // A full-cluster restart's first table (Membership, "Recovery"): every member listed holds
  // its replica from its own data directory, so nothing is copied to it. Tables Rebalance
  // makes are not.
  bool recovered = false;

  std::uint32_t partition_count() const { return static_cast<std::uint32_t>(replicas.size()); }
  // The owner's uuid, or empty when the partition has none (no members).
  const std::string& Owner(std::uint32_t partition) const;
  // Replica index of `member` in `partition`, or -1 when it holds none.
  int ReplicaIndex(std::uint32_t partition, const std::string& member) const;

  friend bool operator==(const PartitionTable&, const PartitionTable&) = default;
};

// Per member uuid, the partitions it has data of ([p] true) though `previous` does not list it
// as their holder: a member restarted on its data directory. Rebalance gives such a member
// those partitions' slots before others (a copy to it is then only what it missed).
using Affinity = std::unordered_map<std::string, std::vector<bool>>;

// The table for `members` (uuids, oldest first), derived from `previous` with as few moves as
// balance allows. The result's version is previous.version + 1. With `affinity`, of the slots
// a member above its quota sheds, those of partitions a member has data of go first, and a
// free slot goes to an under-quota member with data of its partition first: no more moves,
// but the moves land where the data is.
// REQUIRES: partition_count >= 1; backup_count <= kMaxBackupCount; uuids are distinct.
PartitionTable Rebalance(const PartitionTable& previous, const std::vector<std::string>& members,
                         std::uint32_t partition_count, std::uint32_t backup_count,
                         const Affinity* affinity = nullptr);

// Per member: how many partitions it owns and how many backups it holds.
struct ReplicaCounts {
  std::string member;
  std::uint32_t owned = 0;
  std::uint32_t backups = 0;
};
std::vector<ReplicaCounts> CountReplicas(const PartitionTable& table,
                                         const std::vector<std::string>& members);

}  // namespace tessera::partition
