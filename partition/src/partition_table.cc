// Rebalance works on fixed replica slots (an empty string is a free slot) one replica index at a
// time, owners first:
//   1. keep every surviving replica in its order, compacted (a dead owner's first surviving
//      backup becomes owner: promotion, no data moves);
//   2. per index, shed slots of members above their quota (floor or ceil of P/n; only P % n
//      members may hold ceil), fill free slots with the least-loaded member that does not already
//      hold the partition, then repair any imbalance the "not twice in one partition" rule forced.
//      With an Affinity, shedding takes the slots of partitions another member has data of
//      first, and filling prefers, among members under quota, one with data of the partition.
// Moves are therefore limited to what balance needs: a table already balanced is kept as is.
#include "tessera/partition/partition_table.h"

#include <algorithm>
#include <unordered_map>

#include "tessera/base/check.h"

namespace tessera::partition {
namespace {

using Slots = std::vector<std::vector<std::string>>;

bool Holds(const std::vector<std::string>& slots, const std::string& member) {
  return std::find(slots.begin(), slots.end(), member) != slots.end();
}

// Step 1: surviving replicas, in order, compacted into `replica_count` slots.
Slots Survivors(const PartitionTable& previous, const std::vector<std::string>& members,
                std::uint32_t partition_count, std::size_t replica_count) {
  Slots slots(partition_count, std::vector<std::string>(replica_count));
  if (previous.partition_count() != partition_count) return slots;
  for (std::uint32_t p = 0; p < partition_count; ++p) {
    std::size_t next = 0;
    for (const auto& member : previous.replicas[p]) {
      if (next == replica_count) break;
      if (member.empty() || !Holds(members, member) || Holds(slots[p], member)) continue;
      slots[p][next++] = member;
    }
  }
  return slots;
}

class IndexBalancer {
 public:
  IndexBalancer(Slots& slots, const std::vector<std::string>& members, std::size_t index,
                const Affinity* affinity)
      : slots_(slots), members_(members), index_(index), affinity_(affinity) {
    floor_ = static_cast<std::uint32_t>(slots.size() / members.size());
    extra_ = static_cast<std::uint32_t>(slots.size() % members.size());
    for (const auto& m : members) counts_[m] = 0;
    for (const auto& s : slots_) {
      if (!s[index_].empty()) ++counts_[s[index_]];
    }
  }

  void Run() {
    Shed();
    Fill();
    Repair();
  }

 private:
  std::uint32_t Ceil() const { return floor_ + (extra_ > 0 ? 1 : 0); }

  // Whether `member` has data of partition p that its slots there do not hold yet.
  bool HasDataOf(const std::string& member, std::size_t p) const {
    if (affinity_ == nullptr) return false;
    auto it = affinity_->find(member);
    return it != affinity_->end() && p < it->second.size() && it->second[p] &&
           !Holds(slots_[p], member);
  }
  // Whether another member has data of partition p (its slot is better shed than another).
  bool WantedElsewhere(const std::string& holder, std::size_t p) const {
    if (affinity_ == nullptr) return false;
    for (const auto& m : members_) {
      if (m != holder && HasDataOf(m, p)) return true;
    }
    return false;
  }

  void Clear(const std::string& member, std::uint32_t keep) {
    for (int pass = affinity_ != nullptr ? 0 : 1; pass < 2; ++pass) {
      for (std::size_t p = slots_.size(); p-- > 0 && counts_[member] > keep;) {
        if (slots_[p][index_] == member && (pass == 1 || WantedElsewhere(member, p))) {
          slots_[p][index_].clear();
          --counts_[member];
        }
      }
    }
  }

  void Shed() {
    std::uint32_t at_ceil = 0;
    for (const auto& m : members_) {
      Clear(m, Ceil());
      if (extra_ > 0 && counts_[m] == Ceil()) {
        if (at_ceil == extra_) {
          Clear(m, floor_);
        } else {
          ++at_ceil;
        }
      }
    }
    at_ceil_ = at_ceil;
  }

  // The member to take a free slot of partition p: under quota first, with data of p, least
  // loaded, oldest.
  const std::string* Pick(std::size_t p) const {
    const std::string* best = nullptr;
    bool best_has_data = false;
    const std::string* best_any = nullptr;
    for (const auto& m : members_) {
      if (Holds(slots_[p], m)) continue;
      std::uint32_t c = counts_.at(m);
      if (!best_any || c < counts_.at(*best_any)) best_any = &m;
      bool under = c < floor_ || (c == floor_ && at_ceil_ < extra_);
      if (!under) continue;
      const bool has_data = HasDataOf(m, p);
      if (!best || (has_data && !best_has_data) ||
          (has_data == best_has_data && c < counts_.at(*best))) {
        best = &m;
        best_has_data = has_data;
      }
    }
    return best ? best : best_any;
  }

  void Fill() {
    for (std::size_t p = 0; p < slots_.size(); ++p) {
      if (!slots_[p][index_].empty()) continue;
      const std::string* m = Pick(p);
      TESSERA_CHECK(m != nullptr, "no member can take a replica slot");
      slots_[p][index_] = *m;
      if (++counts_[*m] == Ceil() && extra_ > 0) ++at_ceil_;
    }
  }

  // Moves single slots from the most to the least loaded member while they differ by > 1.
  void Repair() {
    for (std::size_t guard = 0; guard < slots_.size() * members_.size(); ++guard) {
      auto [lo, hi] = std::minmax_element(
          members_.begin(), members_.end(),
          [this](const auto& a, const auto& b) { return counts_.at(a) < counts_.at(b); });
      if (counts_[*hi] <= counts_[*lo] + 1) return;
      bool moved = false;
      // A partition the receiving member has data of first.
      for (int pass = affinity_ != nullptr ? 0 : 1; pass < 2 && !moved; ++pass) {
        for (std::size_t p = 0; p < slots_.size() && !moved; ++p) {
          if (slots_[p][index_] == *hi && !Holds(slots_[p], *lo) &&
              (pass == 1 || HasDataOf(*lo, p))) {
            slots_[p][index_] = *lo;
            --counts_[*hi];
            ++counts_[*lo];
            moved = true;
          }
        }
      }
      if (!moved) return;  // the constraint allows no better balance
    }
  }

  Slots& slots_;
  const std::vector<std::string>& members_;
  const std::size_t index_;
  const Affinity* affinity_;
  std::uint32_t floor_ = 0;
  std::uint32_t extra_ = 0;
  std::uint32_t at_ceil_ = 0;
  std::unordered_map<std::string, std::uint32_t> counts_;
};

}  // namespace

const std::string& PartitionTable::Owner(std::uint32_t partition) const {
  static const std::string kNone;
  if (partition >= replicas.size() || replicas[partition].empty()) return kNone;
  return replicas[partition][0];
}

int PartitionTable::ReplicaIndex(std::uint32_t partition, const std::string& member) const {
  if (partition >= replicas.size()) return -1;
  const auto& r = replicas[partition];
  auto it = std::find(r.begin(), r.end(), member);
  return it == r.end() ? -1 : static_cast<int>(it - r.begin());
}

PartitionTable Rebalance(const PartitionTable& previous, const std::vector<std::string>& members,
                         std::uint32_t partition_count, std::uint32_t backup_count,
                         const Affinity* affinity) {
  TESSERA_CHECK(partition_count >= 1, "partition count must be at least 1");
  TESSERA_CHECK(backup_count <= kMaxBackupCount, "backup count above the maximum");
  PartitionTable table;
  table.version = previous.version + 1;
  table.backup_count = backup_count;
  const std::size_t replica_count = std::min<std::size_t>(backup_count + 1, members.size());
  Slots slots = Survivors(previous, members, partition_count, replica_count);
  for (std::size_t i = 0; i < replica_count; ++i) IndexBalancer(slots, members, i, affinity).Run();
  table.replicas = std::move(slots);
  return table;
}

std::vector<ReplicaCounts> CountReplicas(const PartitionTable& table,
                                         const std::vector<std::string>& members) {
  std::vector<ReplicaCounts> out;
  std::unordered_map<std::string, std::size_t> at;
  for (const auto& m : members) {
    at[m] = out.size();
    out.push_back({m, 0, 0});
  }
  for (const auto& replicas : table.replicas) {
    for (std::size_t i = 0; i < replicas.size(); ++i) {
      auto it = at.find(replicas[i]);
      if (it == at.end()) continue;
      if (i == 0) {
        ++out[it->second].owned;
      } else {
        ++out[it->second].backups;
      }
    }
  }
  return out;
}

}  // namespace tessera::partition
