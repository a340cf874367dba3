// The membership state machine. Every decision is made from the current view, the time each
// member was last heard from, and the message at hand; nothing blocks and nothing waits for a
// reply, so lost messages only delay convergence until the next join retry or heartbeat.
#include "tessera/membership/membership.h"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <ranges>

namespace tessera::membership {

std::string_view MemberStateName(MemberState state) {
  switch (state) {
    case MemberState::kJoining:
      return "joining";
    case MemberState::kMember:
      return "member";
    case MemberState::kLeaving:
      return "leaving";
    case MemberState::kLeft:
      return "left";
  }
  return "unknown";
}

Membership::Membership(MemberInfo self, MembershipOptions options, Transport& transport,
                       const base::Clock& clock, std::shared_ptr<spdlog::logger> log)
    : self_(std::move(self)),
      options_(std::move(options)),
      transport_(transport),
      clock_(clock),
      log_(std::move(log)) {
  if (options_.recovery && options_.recovery->table_version > 0) own_recovery_ = options_.recovery;
}

bool Membership::is_master() const {
  const MemberInfo* master = view_.members.master();
  return state_ == MemberState::kMember && master && master->uuid == self_.uuid;
}

void Membership::Start() {
  join_started_ms_ = clock_.NowMs();
  last_tick_ms_ = join_started_ms_;  // a pause before the first Tick counts too
  bool has_seed = std::any_of(options_.seeds.begin(), options_.seeds.end(),
                              [this](const std::string& s) { return s != self_.address; });
  if (!has_seed) {
    StartAsMaster("no seed addresses to join through");
    return;
  }
  SendJoinRequests();
}

void Membership::Tick() {
  const base::Millis now = clock_.NowMs();
  const base::Millis threshold = options_.pause_threshold_ms > 0 ? options_.pause_threshold_ms
                                                                 : options_.failure_timeout_ms / 3;
  if (last_tick_ms_ != 0 && now - last_tick_ms_ > threshold) OnOwnPause(now - last_tick_ms_, now);
  last_tick_ms_ = now;
  switch (state_) {
    case MemberState::kJoining:
      if (now - join_started_ms_ >= options_.join_timeout_ms && !master_hint_.empty() &&
          !rejoin_addresses_.empty()) {
        // A merge whose target master did not answer (gone, or reachable only one way): join
        // back with the members of the old cluster (they elect one among the joiners) rather
        // than each starting a cluster alone; the next probe finds the other cluster again.
        log_->warn(
            "the master at {} did not admit this member within {} ms; joining through "
            "[{}] instead",
            master_hint_, options_.join_timeout_ms, fmt::join(rejoin_addresses_, ", "));
        master_hint_.clear();
        join_started_ms_ = now;
        SendJoinRequests();
      } else if (now - join_started_ms_ >= options_.join_timeout_ms) {
        StartAsMaster(fmt::format("no member answered through [{}] within {} ms",
                                  fmt::join(options_.seeds, ", "), options_.join_timeout_ms));
      } else if (!MaybeStartWithJoiners() && now >= next_join_ms_) {
        SendJoinRequests();
      }
      return;
    case MemberState::kMember:
    case MemberState::kLeaving:
      if (handover_) {
        CompleteLeaves();  // an old master's view lists only the others: nothing else to do
        return;
      }
      if (now >= next_heartbeat_ms_) SendHeartbeats();
      if (state_ == MemberState::kMember) DetectFailures();
      if (is_master() && Recovering()) {
        MaybeFinishRecovery();  // the timeout of kPartial, and what it waits for
      } else if (is_master() && recovered_version_ != 0 && AllReported(recovered_version_)) {
        log_->info("every member installed the recovered partition table; adding backups");
        PublishMembers(view_.members.members);
      }
      CompleteLeaves();
      if (is_master() && options_.merge_interval_ms > 0 && now >= next_probe_ms_) {
        SendSplitProbes();
      }
      if (state_ == MemberState::kLeaving && now >= next_join_ms_) {
        if (const MemberInfo* master = view_.members.master()) {
          transport_.Send(master->address, Make(MessageType::kLeave));
        }
        next_join_ms_ = now + options_.join_interval_ms;
      }
      return;
    case MemberState::kLeft:
      return;
  }
}

void Membership::OnMessage(const ClusterMessage& message) {
  if (state_ == MemberState::kLeft) return;
  // Signs of life of a member of this cluster. Split-brain probes and NotMember come from
  // members of another cluster (maybe still listed here): counting them would keep members
  // that left this cluster listed for good, and the two clusters would never merge.
  if (message.type != MessageType::kSplitProbe && message.type != MessageType::kSplitProbeReply &&
      message.type != MessageType::kNotMember) {
    last_heard_ms_[message.from.uuid] = clock_.NowMs();
  }
  if (message.type == MessageType::kHeartbeat) heartbeat_since_admitted_.insert(message.from.uuid);
  switch (message.type) {
    case MessageType::kJoinRequest:
      OnJoinRequest(message);
      return;
    case MessageType::kJoinRefused:
      if (state_ == MemberState::kJoining && refused_by_.insert(message.from.address).second) {
        // Not asked again: the settings will not change while this process runs.
        log_->error("member {} at {} refused this member: {}", message.from.uuid,
                    message.from.address, message.reason);
      }
      return;
    case MessageType::kJoinRedirect:
      // A redirect to this member's own address names the process it replaced (a master
      // restarted at its address, redirected by a member of an older release): not a master
      // to join. The seeds, asked again, name the member that takes over.
      if (state_ == MemberState::kJoining && !message.master_address.empty() &&
          message.master_address != self_.address) {
        master_hint_ = message.master_address;
        transport_.Send(master_hint_, Make(MessageType::kJoinRequest));
      }
      return;
    case MessageType::kView:
      OnView(message);
      return;
    case MessageType::kHeartbeat:
      OnHeartbeat(message);
      return;
    case MessageType::kLeave:
      OnLeave(message);
      return;
    case MessageType::kNotMember:
      OnNotMember(message);
      return;
    case MessageType::kSplitProbe:
      OnSplitProbe(message);
      return;
    case MessageType::kSplitProbeReply:
      OnSplitProbeReply(message);
      return;
    case MessageType::kMergeInto:
      OnMergeInto(message);
      return;
  }
}

void Membership::Leave() {
  if (state_ == MemberState::kJoining) {
    state_ = MemberState::kLeft;
    return;
  }
  if (state_ != MemberState::kMember) return;
  if (view_.members.members.size() == 1) {
    state_ = MemberState::kLeft;
    log_->info("left the cluster (it was the only member)");
    return;
  }
  if (is_master()) {
    // Hand mastership over: the next-oldest member heads the new list. If this view is lost,
    // the others detect the silence and fail over anyway.
    std::vector<MemberInfo> rest;
    for (const auto& m : view_.members.members) {
      if (m.uuid != self_.uuid) rest.push_back(m);
    }
    ClusterView next;
    next.members.version = view_.members.version + 1;
    next.members.members = std::move(rest);
    // Still recovering: no table either (the next master, which heard every member's report
    // in their heartbeats, goes on waiting for the last table's members).
    next.partitions = Recovering() ? view_.partitions
                                   : partition::Rebalance(view_.partitions, next.members.Uuids(),
                                                          options_.settings.partition_count,
                                                          options_.backup_count);
    state_ = MemberState::kLeaving;
    handover_ = Leaver{self_.address, next.partitions.version, clock_.NowMs() + LeaveBoundMs()};
    InstallView(std::move(next));
    Broadcast();
    log_->info("leaving the cluster; {} is the master now", view_.members.master()->address);
    return;
  }
  state_ = MemberState::kLeaving;
  transport_.Send(view_.members.master()->address, Make(MessageType::kLeave));
  next_join_ms_ = clock_.NowMs() + options_.join_interval_ms;
  log_->info("leaving the cluster: asked master {} to remove this member",
             view_.members.master()->address);
}

void Membership::SendJoinRequests() {
  std::vector<std::string> targets = options_.seeds;
  targets.insert(targets.end(), rejoin_addresses_.begin(), rejoin_addresses_.end());
  if (!master_hint_.empty()) targets.push_back(master_hint_);
  std::sort(targets.begin(), targets.end());
  targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
  ClusterMessage request = Make(MessageType::kJoinRequest);
  request.recovery = own_recovery_;
  for (const auto& address : targets) {
    if (address != self_.address && !refused_by_.count(address)) transport_.Send(address, request);
  }
  next_join_ms_ = clock_.NowMs() + options_.join_interval_ms;
}

bool Membership::MaybeStartWithJoiners() {
  // Members started together find only each other, all joining. After one join interval each
  // has heard the others' requests; the one with the smallest address among them starts the
  // cluster and the others, still retrying, join it. Requests older than two intervals are
  // forgotten (that joiner found a cluster or died).
  const base::Millis now = clock_.NowMs();
  std::erase_if(joiners_heard_ms_, [&](const auto& entry) {
    return now - entry.second > 2 * options_.join_interval_ms;
  });
  if (joiners_heard_ms_.empty() || now - join_started_ms_ < options_.join_interval_ms ||
      !master_hint_.empty()) {  // a master exists: join it
    return false;
  }
  const std::string& smallest_other = joiners_heard_ms_.begin()->first;
  if (self_.address > smallest_other) return false;
  StartAsMaster(
      fmt::format("the members at [{}] are also looking for a cluster and this "
                  "member's address is the smallest",
                  fmt::join(joiners_heard_ms_ | std::views::keys, ", ")));
  return true;
}

std::string Membership::RefusalReason(const ClusterSettings& theirs) const {
  const ClusterSettings& ours = options_.settings;
  if (theirs.cluster_name != ours.cluster_name) {
    return fmt::format(
        "cluster name '{}' differs from this cluster's '{}'; start the member with "
        "--cluster-name {} to join it, or give the clusters different seed addresses",
        theirs.cluster_name, ours.cluster_name, ours.cluster_name);
  }
  if (theirs.protocol_version != ours.protocol_version) {
    return fmt::format(
        "protocol version {} differs from this cluster's {}; run the same Tessera "
        "version on every member",
        theirs.protocol_version, ours.protocol_version);
  }
  if (theirs.partition_count != ours.partition_count) {
    return fmt::format(
        "partition count {} differs from this cluster's {}; start the member with "
        "--partitions {}",
        theirs.partition_count, ours.partition_count, ours.partition_count);
  }
  return {};
}

void Membership::OnJoinRequest(const ClusterMessage& m) {
  const std::string reason = RefusalReason(m.settings);
  if (!reason.empty()) {
    log_->warn("refused join of member {} at {}: {}", m.from.uuid, m.from.address, reason);
    ClusterMessage refusal = Make(MessageType::kJoinRefused);
    refusal.reason = reason;
    transport_.Send(m.from.address, refusal);
    return;
  }
  NoteRecovery(m);  // kept for when this member is (or becomes) the master
  if (state_ == MemberState::kJoining) {
    joiners_heard_ms_[m.from.address] = clock_.NowMs();  // see MaybeStartWithJoiners
    return;
  }
  if (is_master()) {
    Admit(m.from);
    return;
  }
  const MemberInfo* master = view_.members.master();
  if (master && master->uuid != self_.uuid && master->address == m.from.address &&
      master->uuid != m.from.uuid) {
    // The master's process was replaced (restarted at its address): the old one is gone, and
    // redirecting the new one to its own address would make it start a cluster of its own.
    // The old master counts as silent from now on, so the member next in line takes over at
    // its next tick (not after the failure timeout) and admits the new process when it asks
    // again.
    if (IsSilent(master->uuid)) return;
    log_->warn(
        "master {} at {} restarted (new identity {} asks to join): taking it as gone; the "
        "next member in line takes over",
        master->uuid, master->address, m.from.uuid);
    last_heard_ms_[master->uuid] = clock_.NowMs() - options_.failure_timeout_ms - 1;
    return;
  }
  if (master && master->uuid != self_.uuid) {
    ClusterMessage redirect = Make(MessageType::kJoinRedirect);
    redirect.master_address = master->address;
    transport_.Send(m.from.address, redirect);
  }
}

void Membership::Admit(const MemberInfo& joiner) {
  if (view_.members.Find(joiner.uuid)) {
    const auto admitted = admitted_ms_.find(joiner.uuid);
    if (admitted != admitted_ms_.end() &&
        (clock_.NowMs() - admitted->second <= options_.join_interval_ms ||
         !heartbeat_since_admitted_.contains(joiner.uuid))) {
      // A request of the join in progress: a redirect's copy, or a joiner whose view has not
      // reached it yet (slow, or lost) asking again. It has not acted as a member (no heartbeat
      // since it was admitted), so it has no state to lose: send the view again.
      SendView(joiner.address);
      return;
    }
    // A listed member that joins has forgotten its view and emptied its stores (it left to
    // merge, or it was removed and we re-listed it meanwhile): the table must not count on its
    // replicas. Take it out, then admit it afresh, so that its partitions are copied to it.
    log_->warn(
        "member {} at {} joins again while listed: it lost its state; removing it and "
        "admitting it afresh",
        joiner.uuid, joiner.address);
    std::vector<MemberInfo> rest;
    for (const auto& m : view_.members.members) {
      if (m.uuid != joiner.uuid) rest.push_back(m);
    }
    PublishMembers(std::move(rest));
  }
  std::vector<MemberInfo> members = view_.members.members;
  auto same_address = std::find_if(members.begin(), members.end(), [&](const MemberInfo& m) {
    return m.address == joiner.address;
  });
  if (same_address != members.end()) {
    log_->info("member at {} restarted: new identity {} replaces {}", joiner.address, joiner.uuid,
               same_address->uuid);
    members.erase(same_address);
  }
  log_->info("admitting member {} at {}", joiner.uuid, joiner.address);
  admitted_ms_[joiner.uuid] = clock_.NowMs();
  heartbeat_since_admitted_.erase(joiner.uuid);
  members.push_back(joiner);
  last_heard_ms_[joiner.uuid] = clock_.NowMs();
  PublishMembers(std::move(members));
}

void Membership::StartAsMaster(const std::string& why) {
  log_->info("starting a new cluster '{}' as its master: {}", options_.settings.cluster_name, why);
  state_ = MemberState::kMember;
  rejoin_addresses_.clear();
  master_hint_.clear();
  joiners_heard_ms_.clear();
  PublishMembers({self_});
}

void Membership::PublishMembers(std::vector<MemberInfo> members) {
  ClusterView next;
  next.members.version = view_.members.version + 1;
  next.members.members = std::move(members);
  if (Recovering()) {
    next.partitions = view_.partitions;  // none until MaybeFinishRecovery
    InstallView(std::move(next));
    Broadcast();
    MaybeFinishRecovery();
    return;
  }
  recovered_version_ = 0;  // this table adds the backups too
  next.partitions = partition::Rebalance(view_.partitions, next.members.Uuids(),
                                         options_.settings.partition_count, options_.backup_count,
                                         TakeAffinity());
  InstallView(std::move(next));
  Broadcast();
}

void Membership::Broadcast() {
  for (const auto& m : view_.members.members) {
    if (m.uuid != self_.uuid) SendView(m.address);
  }
}

void Membership::SendView(const std::string& address) {
  ClusterMessage message = Make(MessageType::kView);
  message.view = view_;
  transport_.Send(address, message);
}

bool Membership::AllReported(std::int64_t version) const {
  return std::ranges::all_of(view_.members.members, [&](const MemberInfo& m) {
    if (m.uuid == self_.uuid) return true;
    auto it = peer_reports_.find(m.uuid);
    return it != peer_reports_.end() && it->second.table_version >= version;
  });
}

base::Millis Membership::LeaveBoundMs() const {
  return std::min<base::Millis>(options_.failure_timeout_ms, 5000) / 2;
}

void Membership::CompleteLeaves() {
  const base::Millis now = clock_.NowMs();
  if (handover_) {
    const bool reported = AllReported(handover_->table_version);
    if (!reported && now < handover_->deadline_ms) return;
    if (!reported) {
      log_->warn("not every member reported the table without this member within {} ms",
                 LeaveBoundMs());
    }
    handover_.reset();
    state_ = MemberState::kLeft;
    log_->info("left the cluster");
    return;
  }
  if (!is_master()) {
    leavers_.clear();  // the master that removes them tells them
    return;
  }
  for (auto it = leavers_.begin(); it != leavers_.end();) {
    const bool reported = AllReported(it->second.table_version);
    if (!reported && now < it->second.deadline_ms) {
      ++it;
      continue;
    }
    if (!reported) {
      log_->warn(
          "not every member reported the table without {} within {} ms; telling it "
          "that it is out",
          it->second.address, LeaveBoundMs());
    }
    SendView(it->second.address);
    it = leavers_.erase(it);
  }
}

void Membership::InstallView(ClusterView view) {
  view_ = std::move(view);
  if (view_.partitions.version > 0) {  // the cluster has a table: nothing left to recover
    own_recovery_.reset();
    recovery_reports_.clear();
    recovery_since_ms_ = 0;
    recovery_status_.clear();
  } else if (own_recovery_ && !is_master() && view_.members.master()) {
    recovery_status_ = fmt::format(
        "the cluster is recovering: its master at {} restores the partition table once the "
        "members of the last one are back",
        view_.members.master()->address);
  }
  const base::Millis now = clock_.NowMs();
  std::unordered_map<std::string, base::Millis> heard;
  for (const auto& m : view_.members.members) {
    auto it = last_heard_ms_.find(m.uuid);
    heard[m.uuid] = it == last_heard_ms_.end() ? now : it->second;
  }
  last_heard_ms_ = std::move(heard);
  std::vector<std::string> addresses;
  for (const auto& m : view_.members.members) {
    addresses.push_back(m.address);
    if (m.address != self_.address) known_addresses_.insert(m.address);
  }
  std::erase_if(admitted_ms_, [this](const auto& e) { return !view_.members.Find(e.first); });
  std::erase_if(heartbeat_since_admitted_,
                [this](const std::string& uuid) { return !view_.members.Find(uuid); });
  std::erase_if(peer_reports_, [this](const auto& e) { return !view_.members.Find(e.first); });
  log_->info("members (version {}, master {}): [{}]; partition table version {}",
             view_.members.version,
             view_.members.master() ? view_.members.master()->address : "none",
             fmt::join(addresses, ", "), view_.partitions.version);
  if (on_view_) on_view_(view_);
}

void Membership::OnView(const ClusterMessage& m) {
  if (!m.view || m.view->members.version <= view_.members.version) return;  // old news
  const bool listed = m.view->members.Find(self_.uuid) != nullptr;
  if (!listed) {
    if (state_ == MemberState::kLeaving) {
      state_ = MemberState::kLeft;
      InstallView(*m.view);
      log_->info("left the cluster");
    } else if (state_ == MemberState::kMember) {
      Rejoin(fmt::format("member list version {} from {} no longer lists this member",
                         m.view->members.version, m.from.address));
    }
    return;
  }
  if (state_ == MemberState::kJoining) {
    state_ = MemberState::kMember;
    rejoin_addresses_.clear();
    master_hint_.clear();
    log_->info("joined cluster '{}' (master {})", options_.settings.cluster_name,
               m.view->members.master()->address);
  } else if (is_master() || !view_.members.Find(m.from.uuid)) {
    // A master takes no view from another member (a member takes over only once it removed
    // this one, whose views it then does not list), and a member none from outside its view.
    // Such a view comes from another cluster's master (or is a delayed one from a cluster
    // this member's master merged out of; list versions of two clusters do not compare).
    // Typically it answers a join request that arrived after the join timeout, when this
    // member had started a cluster of its own and taken writes in it: installing it would
    // drop those writes (the tables differ, nothing merges them). Alone, this member merges
    // into that cluster as a split brain does (its entries go in by each map's merge policy);
    // otherwise the view is not taken, and the split-brain probes merge the two clusters.
    if (is_master() && view_.members.members.size() == 1) {
      Rejoin(fmt::format("member list version {} from {} lists this member, which started a "
                         "cluster of its own meanwhile (its join request was answered after "
                         "the join timeout); merging into that cluster",
                         m.view->members.version, m.from.address),
             m.from.address);
    } else {
      log_->info("ignored member list version {} from {}: it is not this cluster's master",
                 m.view->members.version, m.from.address);
    }
    return;
  }
  InstallView(*m.view);
  transport_.Send(m.from.address, MakeHeartbeat());  // "installed" (see Leave)
}

void Membership::OnHeartbeat(const ClusterMessage& m) {
  if (state_ != MemberState::kMember && state_ != MemberState::kLeaving) return;
  if (!view_.members.Find(m.from.uuid)) {
    // A leaver not told yet hears it with the view (see Leave), not from this heartbeat.
    if (is_master() && !leavers_.count(m.from.uuid)) {
      transport_.Send(m.from.address, Make(MessageType::kNotMember));
    }
    return;
  }
  peer_reports_[m.from.uuid] = {m.table_version, m.migrations_pending, clock_.NowMs()};
  NoteRecovery(m);
  CompleteLeaves();
  if (is_master() &&
      (m.list_version < view_.members.version || m.table_version < view_.partitions.version)) {
    SendView(m.from.address);
  }
}

void Membership::OnLeave(const ClusterMessage& m) {
  if (!is_master()) return;  // the leaver retries towards the master it knows
  if (view_.members.Find(m.from.uuid)) {
    log_->info("member {} at {} is leaving", m.from.uuid, m.from.address);
    std::vector<MemberInfo> rest;
    for (const auto& member : view_.members.members) {
      if (member.uuid != m.from.uuid) rest.push_back(member);
    }
    PublishMembers(std::move(rest));
    leavers_[m.from.uuid] = {m.from.address, view_.partitions.version,
                             clock_.NowMs() + LeaveBoundMs()};
    CompleteLeaves();  // at once when no other member is left
    return;
  }
  // A repeated request: the leaver is told once the others have the table without it.
  if (!leavers_.count(m.from.uuid)) SendView(m.from.address);
}

void Membership::OnNotMember(const ClusterMessage& m) {
  const MemberInfo* master = view_.members.master();
  if (master && master->uuid == m.from.uuid) {
    if (state_ == MemberState::kLeaving) {
      state_ = MemberState::kLeft;
      log_->info("left the cluster");
    } else if (state_ == MemberState::kMember) {
      Rejoin(fmt::format("the master {} no longer lists this member", m.from.address));
    }
    return;
  }
  // Just awake from a pause longer than the failure timeout, and another member of our view
  // masters a cluster without us: our peers went on without us and our data is the stale
  // copy. Join them (our entries merge in by each map's policy, theirs stay), instead of
  // keeping our view until the split-brain probe makes the younger cluster, theirs when sizes
  // tie, merge into ours and lose what it wrote meanwhile.
  if (state_ == MemberState::kMember && last_pause_ms_ > options_.failure_timeout_ms &&
      clock_.NowMs() - woke_ms_ <= options_.failure_timeout_ms && view_.members.Find(m.from.uuid) &&
      m.from.uuid != self_.uuid) {
    Rejoin(fmt::format("this member was paused for {} ms, longer than the failure timeout, and "
                       "{} masters a cluster without it",
                       last_pause_ms_, m.from.address),
           m.from.address);
  }
}

void Membership::Rejoin(const std::string& why, const std::string& master) {
  log_->warn("{}; rejoining", why);
  ++rejoins_;
  if (on_rejoin_) {
    const base::Millis now = clock_.NowMs();
    const bool just_woke = last_pause_ms_ > 0 && now - woke_ms_ <= options_.failure_timeout_ms;
    on_rejoin_(why, just_woke ? now - woke_ms_ + last_pause_ms_ : 0);
  }
  rejoin_addresses_.clear();
  for (const auto& m : view_.members.members) {
    if (m.uuid != self_.uuid) rejoin_addresses_.push_back(m.address);
  }
  // Forget the old cluster: the one we join may have lower list versions.
  view_ = ClusterView{};
  last_heard_ms_.clear();
  joiners_heard_ms_.clear();
  state_ = MemberState::kJoining;
  join_started_ms_ = clock_.NowMs();
  master_hint_ = master;
  SendJoinRequests();
}

ClusterMessage Membership::MakeSummary(MessageType type) const {
  ClusterMessage m = Make(type);
  if (const MemberInfo* master = view_.members.master()) m.master = *master;
  m.member_count = static_cast<std::uint32_t>(view_.members.members.size());
  for (const auto& member : view_.members.members) m.member_uuids.push_back(member.uuid);
  return m;
}

void Membership::SendSplitProbes() {
  std::set<std::string> targets(options_.seeds.begin(), options_.seeds.end());
  targets.insert(known_addresses_.begin(), known_addresses_.end());
  const ClusterMessage probe = MakeSummary(MessageType::kSplitProbe);
  for (const auto& address : targets) {
    if (address == self_.address || refused_by_.count(address) ||
        view_.members.FindByAddress(address) != nullptr) {
      continue;
    }
    transport_.Send(address, probe);
  }
  next_probe_ms_ = clock_.NowMs() + options_.merge_interval_ms;
}

bool Membership::FromOwnCluster(const ClusterMessage& m) const {
  const MemberInfo* master = view_.members.master();
  return m.master.uuid.empty() || master == nullptr || view_.members.Find(m.from.uuid) ||
         m.master.uuid == master->uuid || m.master.uuid == self_.uuid;
}

void Membership::OnSplitProbe(const ClusterMessage& m) {
  if (state_ != MemberState::kMember || FromOwnCluster(m)) return;
  if (!RefusalReason(m.settings).empty()) return;  // another cluster altogether: never merged
  transport_.Send(m.from.address, MakeSummary(MessageType::kSplitProbeReply));
  ConsiderMerge(m);
}

void Membership::OnSplitProbeReply(const ClusterMessage& m) {
  if (state_ != MemberState::kMember || FromOwnCluster(m)) return;
  if (!RefusalReason(m.settings).empty()) return;
  ConsiderMerge(m);
}

void Membership::ConsiderMerge(const ClusterMessage& m) {
  if (!is_master()) return;  // the prober hears our master's address and asks it
  if (m.from.uuid != m.master.uuid) {
    // Second-hand: decide only on what their master itself says (it is then alive, reachable
    // from here, and its size is current), so ask it.
    transport_.Send(m.master.address, MakeSummary(MessageType::kSplitProbe));
    return;
  }
  const MemberInfo& mine = *view_.members.master();
  const std::size_t ours = view_.members.members.size();
  for (const auto& uuid : m.member_uuids) {
    if (const MemberInfo* shared = view_.members.Find(uuid)) {
      // Their master still lists a member of ours (it left that cluster less than a failure
      // timeout ago, or this very master): their size is not what they have. Decided by a
      // later probe, once their failure detection removed it.
      if (!overlap_logged_.insert(m.master.uuid + "/" + uuid).second) return;
      log_->info(
          "split brain: not merging with the cluster of master {} at {} yet: it still lists {} "
          "at {}, a member of this cluster (until its failure timeout removes it)",
          m.master.uuid, m.master.address, shared->uuid == self_.uuid ? "this member" : uuid,
          shared->address);
      return;
    }
  }
  bool merge = false;
  if (m.member_count != ours) {
    merge = m.member_count > ours;
  } else if (m.master.start_wall_ms != mine.start_wall_ms) {
    merge = m.master.start_wall_ms < mine.start_wall_ms;  // theirs is older
  } else {
    merge = m.master.uuid < mine.uuid;
  }
  if (!merge) return;  // the larger cluster stays; its master told us, ours will be told
  const std::string why = fmt::format(
      "split brain: another cluster '{}' of {} member(s) with master {} at {} can be reached; "
      "this cluster of {} member(s) (master {}) is the {} and merges into it",
      options_.settings.cluster_name, m.member_count, m.master.uuid, m.master.address, ours,
      mine.address, m.member_count > ours ? "smaller" : "younger");
  ClusterMessage order = Make(MessageType::kMergeInto);
  order.master_address = m.master.address;
  for (const auto& member : view_.members.members) {
    if (member.uuid != self_.uuid) transport_.Send(member.address, order);
  }
  Rejoin(why, m.master.address);
}

void Membership::OnMergeInto(const ClusterMessage& m) {
  const MemberInfo* master = view_.members.master();
  if (state_ != MemberState::kMember || master == nullptr || master->uuid != m.from.uuid ||
      m.from.uuid == self_.uuid || m.master_address.empty()) {
    return;
  }
  Rejoin(fmt::format("split brain: master {} merges this cluster into the one whose master is "
                     "at {}",
                     m.from.address, m.master_address),
         m.master_address);
}

ClusterMessage Membership::MakeHeartbeat() const {
  ClusterMessage heartbeat = Make(MessageType::kHeartbeat);
  if (options_.migrations_pending) heartbeat.migrations_pending = options_.migrations_pending();
  heartbeat.recovery = own_recovery_;  // until the cluster has a table (InstallView)
  return heartbeat;
}

void Membership::SendHeartbeats() {
  const ClusterMessage heartbeat = MakeHeartbeat();
  for (const auto& m : view_.members.members) {
    if (m.uuid != self_.uuid) transport_.Send(m.address, heartbeat);
  }
  next_heartbeat_ms_ = clock_.NowMs() + options_.heartbeat_interval_ms;
}

bool Membership::IsSilent(const std::string& uuid) const {
  if (uuid == self_.uuid) return false;
  auto it = last_heard_ms_.find(uuid);
  return it != last_heard_ms_.end() && clock_.NowMs() - it->second > options_.failure_timeout_ms;
}

void Membership::DetectFailures() {
  const auto& members = view_.members.members;
  if (members.empty()) return;
  const base::Millis now = clock_.NowMs();
  const MemberInfo& master = members.front();
  if (!is_master()) {
    if (!IsSilent(master.uuid)) return;
    auto first_alive = std::find_if(members.begin(), members.end(),
                                    [this](const MemberInfo& m) { return !IsSilent(m.uuid); });
    if (first_alive == members.end() || first_alive->uuid != self_.uuid) return;  // not my turn
    log_->warn("master {} at {} silent for {} ms (failure timeout {} ms); taking over as master",
               master.uuid, master.address, now - last_heard_ms_[master.uuid],
               options_.failure_timeout_ms);
  }
  std::vector<MemberInfo> alive;
  for (const auto& m : members) {
    if (!IsSilent(m.uuid)) {
      alive.push_back(m);
    } else {
      log_->warn("member {} at {} silent for {} ms (failure timeout {} ms); removing it", m.uuid,
                 m.address, now - last_heard_ms_[m.uuid], options_.failure_timeout_ms);
    }
  }
  if (alive.size() != members.size()) {
    PublishMembers(std::move(alive));
    next_probe_ms_ = 0;  // the removed members may be a cluster of their own: look now
  }
}

void Membership::OnOwnPause(base::Millis gap, base::Millis now) {
  ++pauses_;
  last_pause_ms_ = gap;
  woke_ms_ = now;
  log_->warn(
      "this member did not run for {} ms (stopped, a VM stall or swapping; failure timeout {} "
      "ms): its peers were not silent, it could not hear them; giving every member a fresh "
      "failure window",
      gap, options_.failure_timeout_ms);
  for (const auto& m : view_.members.members) last_heard_ms_[m.uuid] = now;
  for (auto& [address, heard] : joiners_heard_ms_) heard = now;
  join_started_ms_ += gap;  // a paused joiner does not give up on joining because of it
}

ClusterMessage Membership::Make(MessageType type) const {
  ClusterMessage m;
  m.type = type;
  m.from = self_;
  m.settings = options_.settings;
  m.list_version = view_.members.version;
  m.table_version = view_.partitions.version;
  return m;
}

}  // namespace tessera::membership
