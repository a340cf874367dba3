// MapService's partition table (map_service.h SetPartitionTable): what a new table changes on
// this member. Per partition it decides, from the previous table and the next, whether this
// member serves it, waits for its copy, waits for a work handoff, hands its work over, and
// copies it to new holders (as its previous owner, its first surviving replica, or a source
// that defers until its own copy arrived). Tables are compared by member identity: a process
// restarted at the same address is the old one's death and a new holder.
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "map_service_impl.h"
#include "tessera/base/check.h"

namespace tessera::map {
namespace {

bool Contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

base::Millis SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// How long a new owner waits for its previous owner's kHandoff (GiveUpStaleCopies).
constexpr base::Millis kAwaitLimit = 10'000;

}  // namespace

MapService::Impl::CopyPlan MapService::Impl::PlanCopies(
    Lineage& l, const std::vector<std::string>& before, const std::vector<std::string>& after,
    const std::function<bool(const std::string&)>& alive, const std::string& self,
    bool self_whole) {
  // The copies the previous table ordered arrived, unless their source is gone now: it was
  // listed but already dead (killed, not yet removed), or died before it sent them.
  CopyPlan plan;
  std::vector<std::string> alternates;  // the lost copies' other possible sources
  for (const auto& in : l.incoming) {
    if (!alive(in.member) || alive(in.source)) continue;
    if (in.member == self && self_whole) continue;  // its copy is here (this member knows)
    plan.lost.push_back(in.member);
    for (const auto& m : in.alternates) {
      if (!Contains(alternates, m)) alternates.push_back(m);
    }
  }
  l.incoming.clear();
  // Who has the data: the previous table's holders that did not lose their copy (the previous
  // owner first: its copy has every write it applied), else the members that held it when a
  // lost copy was ordered (its source's peers then; a holder whose lost copy did arrive after
  // all refuses their copy).
  std::vector<std::string> candidates;
  const std::vector<std::string>* lists[] = {&before, &alternates};
  for (const auto* list : lists) {
    for (const auto& m : *list) {
      if (alive(m) && !Contains(plan.lost, m) && !Contains(candidates, m)) {
        candidates.push_back(m);
      }
    }
  }
  if (!candidates.empty()) {
    plan.source = candidates.front();
    plan.tentative = !Contains(before, plan.source);
  } else {
    // Nobody known to have it: a holder whose copy's source died (it may have arrived), or
    // this member, leaving with the only copy (not listed any more).
    for (const auto& m : before) {
      if (alive(m)) {
        plan.source = m;
        break;
      }
    }
    if (plan.source.empty() && Contains(before, self)) plan.source = self;
  }
  if (plan.source.empty()) return plan;
  for (const auto& m : after) {
    if (m != plan.source && !(Contains(before, m) && Contains(candidates, m))) {
      plan.to.push_back(m);
    }
  }
  std::vector<std::string> others;  // each new copy's alternates
  for (const auto& m : candidates) {
    if (m != plan.source) others.push_back(m);
  }
  for (const auto& m : plan.to) l.incoming.push_back({m, plan.source, others});
  return plan;
}

void MapService::Impl::SendDeferredCopies(std::size_t shard, std::uint32_t p) {
  std::vector<std::string> to;
  std::shared_ptr<const Routing> current;
  {
    std::lock_guard lock(ownership_mu);
    to = std::move(deferred_copies[p]);
    deferred_copies[p].clear();
    current = routing;
  }
  if (to.empty() || !current || current->routing == nullptr) return;
  if (log) log->info("partition {} arrived: copying it on to {}", p, fmt::join(to, ", "));
  for (auto& target : to) CopyToNewHolder(shard, p, std::move(target), SteadyMs());
}

void MapService::SetRecovering(std::string why) {
  std::lock_guard lock(impl_->recovering_mu);
  impl_->recovering = std::move(why);
}

void MapService::ExpectPartitionTable() {
  Impl::OwnershipChange change(*impl_);
  if (impl_->routing) return;
  impl_->expects_table.store(true);
  for (std::uint32_t p = 0; p < partitioner_.partition_count(); ++p) {
    impl_->flags[p].local.store(false);
  }
}

void MapService::SetPartitionTable(std::vector<std::vector<std::string>> replicas,
                                   const std::vector<TableMember>& listed, std::string self,
                                   ClusterRouting* routing, bool recovered) {
  TESSERA_CHECK(replicas.size() == partitioner_.partition_count(),
                "the partition table must list replicas for every partition");
  std::vector<std::pair<std::uint32_t, std::vector<std::string>>> copies;  // partition, to
  std::vector<std::vector<std::uint32_t>> changed(shards_.size());         // ownership, by shard
  // Partitions this member stopped owning whose new owner held them already: it waits for
  // our kHandoff, sent once the ownership hook stopped our work (on the shard).
  std::vector<std::vector<std::pair<std::uint32_t, std::string>>> handoffs(shards_.size());
  // Partitions this member replayed that the cluster gave to other members' replicas
  // (DropUnheldReplicas), by shard: at its first table, or, after a recovered first table
  // (whose next table adds the backups, which may be this member's replicas), at the next.
  std::vector<std::vector<std::uint32_t>> superseded(shards_.size());
  std::string self_address;
  // Copies from a source a table dropped before (PlanCopies' `tentative`), by shard: they
  // leave a little later (CopyLater).
  std::vector<std::vector<std::pair<std::uint32_t, std::vector<std::string>>>> tentative(
      shards_.size());
  {
    Impl::OwnershipChange change(*impl_);
    auto previous = impl_->routing;
    std::vector<std::string> members;
    std::unordered_map<std::string, std::string> ids;
    for (const auto& m : listed) {
      members.push_back(m.address);
      ids[m.address] = m.id;
    }
    // Addresses whose process was replaced since the previous table (restarted at once, before
    // the failure timeout removed it): the old process is gone with its data. It leaves the
    // previous replica lists below, so its partitions count as a dead member's (the surviving
    // replicas hold them and copy them on), and the new process is a new holder.
    std::set<std::string> replaced;
    if (previous) {
      for (const auto& [address, id] : previous->ids) {
        auto it = ids.find(address);
        if (it != ids.end() && it->second != id) replaced.insert(address);
      }
    }
    if (!replaced.empty() && impl_->log) {
      impl_->log->warn(
          "member(s) at {} restarted (new identity): their old processes' replicas are gone; "
          "the surviving replicas take their partitions and copy them to the new holders",
          fmt::join(replaced, ", "));
    }
    auto next = std::make_shared<Impl::Routing>(
        Impl::Routing{std::move(replicas), std::move(self), routing,
                      members.empty() ? std::string() : members.front(), std::move(ids)});
    // A member that left its cluster (LeaveCluster) applied no copy since (ApplyOnShard): its
    // partitions wait for this table's copies, which start by clearing what it holds.
    impl_->left_cluster.store(false);
    // The cluster's size before any flag: a shard that sees a partition lose its backups
    // (a smaller cluster) sees the smaller size too, so a quorum map's write is not applied
    // without backups under the old size.
    impl_->cluster_size.store(members.size());
    impl_->size_history.emplace_back(impl_->clock.NowMs(), members.size());
    if (impl_->size_history.size() > 64) impl_->size_history.pop_front();
    const base::Millis now = SteadyMs();
    const bool drop_replayed =
        impl_->logging.load() && (previous ? impl_->replayed_drop_deferred : !recovered);
    impl_->replayed_drop_deferred = !previous && recovered && impl_->logging.load();
    // Listed, and not a process replaced since (its successor at the address has none of its
    // data).
    auto alive = [&](const std::string& m) {
      return Contains(members, m) && !replaced.contains(m);
    };
    bool shrank = !replaced.empty();  // a member of the previous table is gone
    if (previous) {
      for (const auto& [address, id] : previous->ids)
        shrank = shrank || !next->ids.contains(address);
    }
    static const std::vector<std::string> kNone;
    std::vector<std::string> survivors;  // the previous replicas of p without replaced ones
    for (std::uint32_t p = 0; p < next->replicas.size(); ++p) {
      const auto& after = next->replicas[p];
      // A recovered first table: its holders have their replicas from their own logs, as if
      // a previous table had listed them.
      const std::vector<std::string>* before_p =
          previous ? &previous->replicas[p] : (recovered ? &next->replicas[p] : &kNone);
      if (!replaced.empty()) {
        survivors.clear();
        for (const auto& m : *before_p) {
          if (!replaced.contains(m)) survivors.push_back(m);
        }
        before_p = &survivors;
      }
      const auto& before = *before_p;
      const bool owner = !after.empty() && after[0] == next->self;
      const bool holder = Contains(after, next->self);
      const bool had = Contains(before, next->self);
      // Who copies the partition to which new holders (PlanCopies): its previous owner if
      // alive, else the first surviving previous replica, skipping holders whose copy's source
      // died. Without a previous table (this member just joined) some member that had one
      // will: the members listed hold what they are listed for, this one waits for its copy.
      auto& lineage = impl_->lineage[p];
      Impl::CopyPlan plan;
      if (previous) {
        plan = Impl::PlanCopies(lineage, before, after, alive, next->self,
                                !impl_->flags[p].pending.load());
        if (!plan.lost.empty() && impl_->log) {
          impl_->log->info(
              "partition {}: the copy to {} came from a member that is gone; {} copies it", p,
              fmt::join(plan.lost, ", "), plan.source.empty() ? "nobody" : plan.source);
        }
        if (!plan.to.empty() && impl_->log) {
          impl_->log->debug("partition {}: [{}] -> [{}]: {} copies it to {}", p,
                            fmt::join(before, ", "), fmt::join(after, ", "), plan.source,
                            fmt::join(plan.to, ", "));
        }
      } else {
        for (const auto& m : before) {
          if (Contains(members, m)) {
            plan.source = m;
            break;
          }
        }
        lineage.incoming.clear();  // its own copy's source is not known here
      }
      const std::string& source = plan.source;
      if (drop_replayed && !holder && source != next->self && impl_->flags[p].replayed.load()) {
        superseded[shards_.ShardOfPartition(p)].push_back(p);
      }
      const bool data_elsewhere =
          previous ? !source.empty() && source != next->self : members.size() > 1;
      auto& f = impl_->flags[p];
      // The source of new holders' copies that still waits for the partition itself keeps
      // waiting (even when it holds no replica now), and copies on once it is here.
      const bool tentative_wait = previous && plan.tentative && source == next->self && holder &&
                                  !had && !f.copy_arrived.load();
      if (!tentative_wait) f.tentative_source.store(false);
      if (tentative_wait && !f.pending.exchange(true)) {
        f.tentative_source.store(true);
        // Listed again after a table dropped it, and the source for want of a better one: what
        // it holds may be stale. It waits as a new holder for kTentativeCopyDelayMs (a holder
        // counted lost may have it fresher and copy it here), then copies on what it has.
        f.pending_since_ms.store(now - impl_->options.migration_copy_wait_ms +
                                 Impl::kTentativeCopyDelayMs);
        if (impl_->log) {
          impl_->log->info(
              "partition {}: no holder of the last table has it; serving and "
              "copying what this member held in {} ms unless a copy comes first",
              p, Impl::kTentativeCopyDelayMs);
        }
      }
      const bool awaiting_source = source == next->self && f.pending.load();
      if (!holder) {
        if (!awaiting_source) f.pending.store(false);
        f.copy_arrived.store(false);
        f.versioned.store(false);
      } else if ((previous ? Contains(plan.to, next->self) : !had) && data_elsewhere &&
                 !f.copy_arrived.load()) {
        // A new holder: wait for the copy (it may serve nothing before). Again after its
        // copy's source died: the wait starts over for the copy from the new source.
        f.pending.store(true);
        f.pending_since_ms.store(now);
      } else if (f.pending.load() && shrank && !tentative_wait) {
        f.pending_since_ms.store(now);  // its copy's source may have been the one gone
      }
      f.listed_before.store(holder && had);  // HoldsWhole: it had it before this table
      const bool was_local = f.local.load();
      f.local.store(owner && !f.pending.load());
      const std::size_t shard = shards_.ShardOfPartition(p);
      if (was_local != f.local.load()) changed[shard].push_back(p);
      // Work handoff between two live holders of the partition (no copy orders them).
      const std::string& previous_owner = before.empty() ? next->self : before[0];
      const bool was_owner = previous_owner == next->self;
      if (owner && !was_owner && had && Contains(members, previous_owner)) {
        if (f.handoff_arrived.exchange(false) && impl_->handoff_from[p] == previous_owner) {
          f.handoff_pending.store(false);
        } else if (!f.handoff_pending.load()) {
          f.handoff_since_ms.store(now);  // before the flag: GiveUpStaleCopies reads both
          f.handoff_pending.store(true);
          impl_->handoff_from[p] = previous_owner;
        }
      } else if (!owner) {
        f.handoff_arrived.store(false);
        if (f.handoff_pending.exchange(false)) changed[shard].push_back(p);
      } else if (f.handoff_pending.load() && (!Contains(members, impl_->handoff_from[p]) ||
                                              replaced.contains(impl_->handoff_from[p]))) {
        f.handoff_pending.store(false);  // the member we waited for is gone
        changed[shard].push_back(p);
      }
      if (was_owner && !owner && !after.empty() && Contains(before, after[0]) &&
          Contains(members, after[0])) {
        handoffs[shard].emplace_back(p, after[0]);
      }
      if (owner && !f.pending.load()) f.versioned.store(true);
      f.has_backups.store(owner && after.size() > 1);
      auto& deferred = impl_->deferred_copies[p];
      if (!source.empty() && source == next->self) {
        std::vector<std::string> to = std::move(plan.to);
        if (!to.empty() && awaiting_source) {
          // Still waiting for the partition ourselves: copy once it is here (ApplyOnShard).
          for (auto& m : to) {
            if (!Contains(deferred, m)) deferred.push_back(std::move(m));
          }
        } else if (!to.empty() && plan.tentative) {
          tentative[shards_.ShardOfPartition(p)].emplace_back(p, std::move(to));
        } else if (!to.empty()) {
          copies.emplace_back(p, std::move(to));
        }
      }
      // Deferred copies go only to members that still hold the partition.
      std::erase_if(deferred, [&](const std::string& m) { return !Contains(after, m); });
      if (!deferred.empty() && !awaiting_source) deferred.clear();  // another source now
    }
    self_address = next->self;
    impl_->routing = std::move(next);
    std::lock_guard lock(impl_->recovering_mu);
    impl_->recovering.clear();
  }
  // Before the copies are posted: on each shard, work stopped by the hook is over before the
  // partition's copy leaves (posts to a shard run in order).
  for (std::size_t shard = 0; shard < changed.size(); ++shard) {
    if (!changed[shard].empty()) impl_->NotifyOwnership(shard, std::move(changed[shard]));
    if (!superseded[shard].empty()) {
      shards_.InvokeOn(shard,
                       [impl = impl_.get(), shard, list = std::move(superseded[shard]),
                        token = impl_->EnterRequest()] { impl->DropUnheldReplicas(shard, list); });
    }
    if (handoffs[shard].empty() || routing == nullptr) continue;
    shards_.InvokeOn(shard, [impl = impl_.get(), routing, self_address,
                             list = std::move(handoffs[shard]), token = impl_->EnterRequest()] {
      for (const auto& [p, to] : list) {
        if (impl->IsLocal(p)) continue;  // a later table gave it back: our work runs on
        ReplicaUpdate u;
        u.kind = ReplicaUpdate::Kind::kHandoff;
        u.partition_id = p;
        u.key = self_address;  // the sender: the receiver accepts only the owner it waits for
        routing->SendReplica(to, {u}, [](const base::Result<ReplicaAck>&) {});
      }
    });
  }
  for (std::size_t shard = 0; shard < tentative.size() && routing != nullptr; ++shard) {
    for (auto& [p, to] : tentative[shard]) {
      shards_.InvokeOn(shard, [impl = impl_.get(), shard, p = p, to = std::move(to),
                               token = impl_->EnterRequest()]() mutable {
        impl->CopyLater(shard, p, std::move(to));
      });
    }
  }
  if (copies.empty() || routing == nullptr) return;
  if (impl_->log)
    impl_->log->info("copying {} partition(s) to their new replica holders", copies.size());
  // In turn, not all posted at once: a shard would read none of its connections until every
  // copy had left (a one-shard member copying 271 partitions under load heard no heartbeat
  // for longer than its failure timeout, and removed the member it was copying to).
  std::vector<std::shared_ptr<Impl::CopyQueue>> queues(shards_.size());
  for (auto& [p, to] : copies) {
    auto& queue = queues[shards_.ShardOfPartition(p)];
    if (!queue) queue = std::make_shared<Impl::CopyQueue>();
    queue->copies.emplace_back(p, std::move(to));
  }
  for (std::size_t shard = 0; shard < queues.size(); ++shard) {
    if (queues[shard]) impl_->CopyInTurn(shard, std::move(queues[shard]));
  }
}

void MapService::Impl::CopyInTurn(std::size_t shard, std::shared_ptr<CopyQueue> queue) {
  // Not cut short by Stop: a member leaving its cluster hands its partitions over while Stop
  // waits for the chain's token (its last copies went missing when the chain stopped there).
  shards.InvokeOn(shard, [this, shard, queue = std::move(queue), token = EnterRequest()] {
    if (!history.empty() && !queue->answers) {
      // With a log: a queue per target, each probed once and sent in turns once its target
      // answered. Never one wait for all targets: a dead target's probe (answered only by its
      // connection's failure, or its call timeout) held every live target's copies past their
      // wait for them, and they served empty partitions.
      std::map<std::string, std::shared_ptr<CopyQueue>> by_target;
      for (const auto& [p, to] : queue->copies) {
        for (const auto& target : to) {
          auto& q = by_target[target];
          if (!q) q = std::make_shared<CopyQueue>();
          q->copies.emplace_back(p, std::vector<std::string>{target});
        }
      }
      for (auto& [target, q] : by_target) {
        std::vector<std::pair<std::uint32_t, std::string>> pairs;
        for (const auto& [p, to] : q->copies) pairs.emplace_back(p, target);
        ProbeTargets(shard, pairs, [this, shard, q](std::shared_ptr<const ProbeAnswers> answers) {
          q->answers = std::move(answers);
          CopyInTurn(shard, q);
        });
      }
      return;
    }
    // Partitions until about options.scan_entries_per_task entries left (a partition counts
    // at least one): few tasks for many small partitions, one per large one.
    const auto budget =
        static_cast<std::size_t>(std::max<std::int64_t>(options.scan_entries_per_task, 1));
    std::size_t sent = 0;
    while (queue->next < queue->copies.size() && sent < budget) {
      auto& [p, to] = queue->copies[queue->next++];
      sent += std::max<std::size_t>(PartitionEntryCount(shard, p), 1);
      for (auto& target : to) {
        if (!queue->answers) {
          CopyToNewHolder(shard, p, std::move(target), SteadyMs());
          continue;
        }
        Probed probed;
        auto it = queue->answers->find({p, target});
        if (it != queue->answers->end()) probed.point = it->second;
        CopyToNewHolder(shard, p, std::move(target), SteadyMs(), &probed);
      }
    }
    if (queue->next < queue->copies.size()) CopyInTurn(shard, queue);
  });
}

void MapService::Impl::CopyLater(std::size_t shard, std::uint32_t p, std::vector<std::string> to) {
  if (log) {
    log->info(
        "partition {}: no holder of the last table has it; copying what this member held "
        "to {} in {} ms unless they have it by then",
        p, fmt::join(to, ", "), kTentativeCopyDelayMs);
  }
  auto timer = std::make_shared<boost::asio::steady_timer>(
      shards.Context(shard), std::chrono::milliseconds(kTentativeCopyDelayMs));
  timer->async_wait([this, timer, shard, p, to = std::move(to),
                     token = EnterRequest()](const boost::system::error_code& e) {
    if (e || stopped.load()) return;
    for (const auto& target : to) CopyToNewHolder(shard, p, target, SteadyMs());
  });
}

void MapService::Impl::GiveUpStaleCopies(std::size_t shard) {
  const base::Millis now = SteadyMs();
  for (auto p = static_cast<std::uint32_t>(shard); p < partitioner.partition_count();
       p += static_cast<std::uint32_t>(shards.size())) {
    auto& f = flags[p];
    bool gave_up_handoff = false;
    if (f.handoff_pending.load(std::memory_order_relaxed)) {
      std::lock_guard lock(ownership_mu);  // against a table setting up a new wait meanwhile
      gave_up_handoff = f.handoff_pending.load() && now - f.handoff_since_ms.load() > kAwaitLimit &&
                        f.handoff_pending.exchange(false);
    }
    if (gave_up_handoff) {
      if (log) {
        log->warn(
            "partition {}: no work handoff from its previous owner within {} ms; "
            "starting its partition work here",
            p, kAwaitLimit);
      }
      NotifyOwnership(shard, {p});
    }
    if (!f.pending.load(std::memory_order_relaxed) ||
        now - f.pending_since_ms.load() <= options.migration_copy_wait_ms) {
      continue;
    }
    bool tentative = false;
    {
      OwnershipChange change(*this);
      if (!f.pending.exchange(false)) continue;
      // A tentative source's wait: no fresher copy came, so what it held is the partition's
      // copy, whole. Marked so, a copy head from a holder that waited in vain (a member that
      // joined with no lineage of its own copy, say, and serves nothing) is refused
      // (HoldsWhole) instead of replacing the data.
      tentative = f.tentative_source.exchange(false);
      if (tentative) f.copy_arrived.store(true);
      f.local.store(routing && routing->Owner(p) == routing->self);
    }
    SendDeferredCopies(shard, p);  // what this member has is the best copy left
    NotifyOwnership(shard, {p});
    if (log && tentative) {
      log->info("partition {}: no fresher copy came within {} ms; serving what this member held", p,
                kTentativeCopyDelayMs);
    } else if (log) {
      log->warn(
          "partition {}: its migration copy did not arrive within {} ms; serving and backing "
          "it up with what this member has (entries written elsewhere meanwhile may be "
          "missing)",
          p, options.migration_copy_wait_ms);
    }
  }
}

}  // namespace tessera::map
