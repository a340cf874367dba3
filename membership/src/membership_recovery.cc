// Membership's full-cluster restart ("Recovery" in membership.h): the master of a cluster that
// has no partition table yet waits for the members of the last one, by persistent id, then
// publishes a table that gives each partition to the member whose log ends at its newest
// version.
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "tessera/membership/membership.h"

namespace tessera::membership {

std::string_view RecoveryPolicyName(RecoveryPolicy policy) {
  switch (policy) {
    case RecoveryPolicy::kFull:
      return "full";
    case RecoveryPolicy::kPartial:
      return "partial";
  }
  return "unknown";
}

namespace {

// The partitions `report` says its member holds data of.
std::vector<bool> DataOf(const RecoveryReport& report) {
  std::vector<bool> out(report.versions.size(), false);
  for (std::size_t p = 0; p < out.size(); ++p) {
    out[p] = p < report.held.size() && report.held[p] && report.versions[p] > 0;
  }
  return out;
}

}  // namespace

void Membership::NoteRecovery(const ClusterMessage& m) {
  if (!m.recovery || m.recovery->table_version == 0) return;
  affinity_[m.from.uuid] = DataOf(*m.recovery);
  if (view_.partitions.version == 0) recovery_reports_[m.from.uuid] = *m.recovery;
}

const partition::Affinity* Membership::TakeAffinity() {
  if (own_recovery_ && own_recovery_->table_version > 0) {
    affinity_[self_.uuid] = DataOf(*own_recovery_);
  }
  if (affinity_.empty()) return nullptr;
  placing_ = std::move(affinity_);
  affinity_.clear();
  return &placing_;
}

bool Membership::Recovering() const {
  if (view_.partitions.version != 0) return false;
  if (own_recovery_) return true;
  return std::ranges::any_of(view_.members.members, [this](const MemberInfo& m) {
    return recovery_reports_.contains(m.uuid);
  });
}

void Membership::MaybeFinishRecovery() {
  if (!is_master() || !Recovering()) return;
  const base::Millis now = clock_.NowMs();
  if (recovery_since_ms_ == 0) recovery_since_ms_ = now;
  // The reports of the members listed now, in list order.
  struct Back {
    const MemberInfo* member;
    const RecoveryReport* report;
  };
  std::vector<Back> back;
  for (const auto& m : view_.members.members) {
    const RecoveryReport* report = nullptr;
    if (m.uuid == self_.uuid) {
      report = own_recovery_ ? &*own_recovery_ : nullptr;
    } else if (auto it = recovery_reports_.find(m.uuid); it != recovery_reports_.end()) {
      report = &it->second;
    }
    if (report) back.push_back({&m, report});
  }
  if (back.empty()) return;
  const RecoveryReport* newest = back.front().report;
  std::set<std::string> ids;
  for (const auto& b : back) {
    ids.insert(b.report->member_id);
    if (b.report->table_version > newest->table_version) newest = b.report;
  }
  std::vector<std::string> missing;
  for (const auto& id : newest->table_members) {
    if (!ids.contains(id)) missing.push_back(id);
  }
  // Per partition, the member back whose replica is newest (the last table's owner between
  // equal versions, then the older member).
  const std::uint32_t count = options_.settings.partition_count;
  std::vector<int> best(count, -1);
  std::vector<std::uint32_t> unheld;
  for (std::uint32_t p = 0; p < count; ++p) {
    for (std::size_t i = 0; i < back.size(); ++i) {
      const RecoveryReport& r = *back[i].report;
      if (p >= r.held.size() || p >= r.versions.size() || !r.held[p]) continue;
      if (best[p] < 0) {
        best[p] = static_cast<int>(i);
        continue;
      }
      const RecoveryReport& b = *back[static_cast<std::size_t>(best[p])].report;
      const bool owned = p < r.owned.size() && r.owned[p];
      const bool b_owned = p < b.owned.size() && b.owned[p];
      if (r.versions[p] > b.versions[p] || (r.versions[p] == b.versions[p] && owned && !b_owned)) {
        best[p] = static_cast<int>(i);
      }
    }
    if (best[p] < 0) unheld.push_back(p);
  }
  const bool timed_out = now - recovery_since_ms_ >= options_.recovery_timeout_ms;
  const bool go =
      missing.empty() ||
      ((force_recovery_ || (options_.recovery_policy == RecoveryPolicy::kPartial && timed_out)) &&
       unheld.empty());
  force_recovery_ = false;
  recovery_unheld_ = unheld.size();
  if (!go) {
    recovery_status_ = fmt::format(
        "recovering: waiting for {} of the {} members of the last partition table (version {}) "
        "to restart with their data directories (member ids {}); {} back (recovery {}{})",
        missing.size(), newest->table_members.size(), newest->table_version, missing, back.size(),
        RecoveryPolicyName(options_.recovery_policy),
        options_.recovery_policy == RecoveryPolicy::kPartial
            ? fmt::format(", goes on {} ms after it began when every partition has a replica "
                          "back; {} have none",
                          options_.recovery_timeout_ms, unheld.size())
            : std::string(", waits for all of them"));
    if (recovery_logged_ms_ == 0 || now - recovery_logged_ms_ >= 10'000) {
      recovery_logged_ms_ = now;
      log_->warn("{}", recovery_status_);
    }
    return;
  }
  if (!missing.empty()) {
    log_->warn(
        "recovery {}: going on without the members {} of the last partition table after {} ms; "
        "every partition has a replica among the {} back",
        RecoveryPolicyName(options_.recovery_policy), missing, now - recovery_since_ms_,
        back.size());
  }
  if (!unheld.empty()) {
    log_->error(
        "recovery: no member back holds partition(s) {} (their logs had no complete replica); "
        "they start empty",
        unheld);
  }
  partition::PartitionTable table;
  table.version = newest->table_version + 1;
  table.backup_count = options_.backup_count;
  table.recovered = true;
  table.replicas.resize(count);
  for (std::uint32_t p = 0; p < count; ++p) {
    if (best[p] >= 0) table.replicas[p] = {back[static_cast<std::size_t>(best[p])].member->uuid};
  }
  ClusterView next;
  next.members = view_.members;
  ++next.members.version;
  next.partitions = std::move(table);
  recovered_version_ = next.partitions.version;
  // The next table adds backups: on the members whose replicas are here too.
  if (own_recovery_) affinity_[self_.uuid] = DataOf(*own_recovery_);
  log_->warn(
      "recovered the partition table from the data of {} member(s) (last table version {}, "
      "{} of its {} members back) after {} ms; each partition is served by the member with its "
      "newest replica, and backups follow",
      back.size(), newest->table_version, newest->table_members.size() - missing.size(),
      newest->table_members.size(), now - recovery_since_ms_);
  InstallView(std::move(next));
  Broadcast();
}

base::Result<std::string> Membership::ForceRecovery() {
  if (!is_master()) {
    const MemberInfo* master = view_.members.master();
    return base::Fail(base::ErrorCode::kBadRequest,
                      "this member is not its cluster's master; ask the master" +
                          (master ? " at " + master->address : std::string()));
  }
  if (!Recovering()) {
    return base::Fail(base::ErrorCode::kBadRequest,
                      "the cluster is not recovering (it has a partition table); nothing to "
                      "force");
  }
  const std::string waited_for = recovery_status_;
  force_recovery_ = true;
  MaybeFinishRecovery();
  force_recovery_ = false;
  if (Recovering()) {
    return base::Fail(base::ErrorCode::kConflict,
                      fmt::format("cannot go on: {} partition(s) have no replica among the "
                                  "members back; start a member that holds them ({})",
                                  recovery_unheld_, waited_for));
  }
  log_->warn("recovery forced by an operator: {}", waited_for);
  return fmt::format("recovery forced: the cluster serves from the {} member(s) back (it was {})",
                     view_.members.members.size(), waited_for);
}

}  // namespace tessera::membership
