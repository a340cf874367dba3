#pragma once
// Membership: the cluster-membership state machine of one member. Transport and clock are
// injected, so many members run deterministically in one process in tests (an in-memory
// network that drops, delays and partitions messages) and over TCP in grid-node.
//
// Protocol (see cluster_message.h for the messages):
//   - Join: a member with no seeds starts a cluster as its master. Otherwise it sends
//     JoinRequest to its seeds every join interval until a View lists it. A member answers
//     with JoinRefused (different cluster name, protocol version or partition count; logged on
//     both sides), JoinRedirect (not the master), or, as master, admits it: appends it to the
//     list, bumps the version, rebalances the partition table and sends the View to all.
//     A member that refused is not asked again by this process (its settings do not change).
//     Members that find only other joiners (started together): after one join interval the
//     one with the smallest address among them starts the cluster; the others' retries join
//     it. No answer within join_timeout: start alone, as master.
//   - A join from a new uuid at the address of a listed member (a restarted process) replaces
//     the old identity.
//   - Heartbeats every heartbeat_interval to every other member. The master removes members
//     silent for failure_timeout; when the master is silent that long, the oldest member that
//     is not silent takes over (removing the silent ones). Views are accepted only with a
//     higher list version, so a late, older View never rolls a member back.
//   - Own pause: when two Ticks are further apart than pause_threshold (default a third of
//     the failure timeout), this process was not running (SIGSTOP, a VM stall, swapping): its
//     peers were not silent, it could not hear them. It logs the pause with its length and
//     gives every member a fresh failure window instead of removing them; a member that
//     really died is removed one failure timeout later. A whole cluster frozen and resumed
//     together therefore stays one cluster. A joining member moves its join deadline on by
//     the pause, so it does not start a cluster of its own on waking.
//   - Split brain: a master sends SplitProbe every merge interval to the seed addresses and to
//     every address it has seen in a view that its cluster does not list now (members it lost
//     to a network partition or removed). A member of another cluster with the same settings
//     answers with its cluster's master and size. The smaller cluster merges into the larger;
//     between equal sizes the younger (its master started later; then the larger master uuid)
//     merges: its master sends MergeInto to its members and each, the master last, rejoins
//     through the other cluster's master. A non-master's answer names its master, whom the
//     prober then probes: a master decides only on what the other master itself sent (so that
//     master is alive and reachable from here, and its size current), the same way on both
//     sides. No merge is decided while the other cluster lists this member or a member of
//     this cluster (its master has not yet removed a member that left it, as Hazelcast's
//     membership-intersection check): its size counts a member that is ours, and the real
//     majority would merge into a lone member and lose what it acknowledged. The failure
//     timeout removes the member there (it heartbeats its own cluster only), and a later
//     probe decides.
//   - Rejoin (merging, or removed by the master while alive: a NotMember, or a view without
//     this member): the rejoin listener runs first (the member takes its data out of the old
//     partition table, to merge it into the cluster it joins), then the view is forgotten and
//     the member joins like a new one (same uuid), through the other cluster's master or the
//     members of the view it was dropped from. A joiner that knows a master does not start a
//     cluster with other joiners; when that master does not admit it within the join timeout
//     it joins through its old cluster's members instead (they elect one among them). A master
//     that receives a JoinRequest from a member it lists (more than a join interval after
//     admitting it) knows that member lost its state: it removes it and admits it afresh, so
//     the new table copies its partitions to it.
//   - Recovery (full-cluster restart): a member restarted on its data directory has a
//     RecoveryReport (MembershipOptions::recovery): the last table it persisted (its members
//     by persistent id) and, per partition, the replica version its log ends at. It sends the
//     report with its join requests and heartbeats until its cluster has a table. A master
//     whose cluster has no table yet and that knows a report (its own, a joiner's) publishes
//     member lists without a table (clients get kRecovering) until every member of the newest
//     reported table is back, by persistent id (at any address), or, with recovery policy
//     kPartial, the recovery timeout passed and every partition has a replica among those
//     back, or an operator forced it (ForceRecovery: the same without the timeout). Then it
//     publishes a table marked `recovered` listing for each partition one
//     replica: the member whose log ends at the newest version (the last table's owner
//     between equals); each member serves what it replayed. Once every member reported that
//     table, the next one adds backups, copied from those owners as any migration.
//   - Leave: the master hands mastership to the next-oldest by sending a View without itself;
//     another member asks the master to remove it. Every member that installs a View answers
//     its sender with a heartbeat at once (which carries its table version). The leave is
//     complete (the leaver, told with the new View, or the old master itself, goes to kLeft)
//     once every remaining member has reported the table without the leaver, or after half
//     of min(failure_timeout, 5 s) when one does not: until then the leaver still receives
//     backup writes from owners that route by the old table, so a graceful leave fails no
//     write (a leaver that vanished at once failed those writes with "backup did not
//     confirm").
//
// Thread-safety: none; the owner calls every method from one thread (MembershipService runs
// it on its own event loop).

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "tessera/base/clock.h"
#include "tessera/base/error.h"
#include "tessera/membership/cluster_message.h"
#include "tessera/membership/cluster_view.h"

namespace spdlog {
class logger;
}

namespace tessera::membership {

// Sends one-way messages to other members by address. Delivery is best effort: a message may
// be lost, delayed or reordered; the protocol repairs that on the next heartbeat round.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual void Send(const std::string& address, const ClusterMessage& message) = 0;
};

enum class RecoveryPolicy { kFull, kPartial };
// "full", "partial".
std::string_view RecoveryPolicyName(RecoveryPolicy policy);

struct MembershipOptions {
  ClusterSettings settings;
  std::uint32_t backup_count = 1;  // replicas beyond the owner (max partition::kMaxBackupCount)
  std::vector<std::string> seeds;  // "host:port" of members to join through; may include self
  base::Millis heartbeat_interval_ms = 1000;
  base::Millis failure_timeout_ms = 5000;  // silence after which a member is removed
  base::Millis join_interval_ms = 500;     // JoinRequest retry interval while joining
  base::Millis join_timeout_ms = 5000;     // no cluster found by then: start one
  // A gap between two Ticks longer than this is a pause of this process (see above);
  // 0 = failure_timeout_ms / 3.
  base::Millis pause_threshold_ms = 0;
  // How often a master looks for other clusters with the same settings (split brain, see
  // above); 0 = never. After a network partition heals, the clusters merge within about this
  // long plus a join.
  base::Millis merge_interval_ms = 2000;
  // Replica copies this member still waits for (migrations), sent with every heartbeat so
  // each member knows whether the whole cluster is safe to stop a member of (peer_reports);
  // called on the membership's thread. Null: reports 0.
  std::function<std::int64_t()> migrations_pending;
  // This member's data, when it restarted on a data directory that held a partition table
  // (see "Recovery"); nullopt or table_version 0: nothing to recover.
  std::optional<RecoveryReport> recovery;
  // kFull: wait for every member of the last table; kPartial: after recovery_timeout_ms, go on
  // with the members back when every partition has a replica among them.
  RecoveryPolicy recovery_policy = RecoveryPolicy::kFull;
  base::Millis recovery_timeout_ms = 300'000;
};

// What a member last said of itself in a heartbeat.
struct PeerReport {
  std::int64_t table_version = 0;       // the partition table it had installed
  std::int64_t migrations_pending = 0;  // replica copies it still waited for under that table
  base::Millis heard_ms = 0;            // when (this member's clock)

  friend bool operator==(const PeerReport&, const PeerReport&) = default;
};

enum class MemberState {
  kJoining,  // looking for a cluster
  kMember,   // listed in the current view
  kLeaving,  // asked to leave; waits for a view without it
  kLeft,     // out of the cluster; does nothing more
};
std::string_view MemberStateName(MemberState state);

class Membership {
 public:
  using ViewListener = std::function<void(const ClusterView& view)>;
  // `silent_ms`: how long before the call this member went silent, when a pause that ended
  // within the failure timeout preceded it (0 otherwise): what it wrote just before the pause
  // may not have reached its peers.
  using RejoinListener = std::function<void(const std::string& why, base::Millis silent_ms)>;

  // `self.uuid` and `self.address` identify this member. `transport`, `clock` outlive this.
  Membership(MemberInfo self, MembershipOptions options, Transport& transport,
             const base::Clock& clock, std::shared_ptr<spdlog::logger> log);

  // Called after every accepted change of the view (members or partition table).
  void set_view_listener(ViewListener listener) { on_view_ = std::move(listener); }
  // Called when this member leaves its cluster to join another (see "Rejoin"), before it
  // forgets its view: the partition table it held is void from then on, and the views of the
  // cluster it joins follow.
  void set_rejoin_listener(RejoinListener listener) { on_rejoin_ = std::move(listener); }

  // Starts joining (or, without seeds, starts a cluster). REQUIRES: called once, first.
  void Start();
  // Runs timers: join retries, heartbeats, failure detection. Call often (every ~100 ms or
  // at most a tenth of heartbeat_interval); lateness delays detection by as much.
  void Tick();
  // A message from another member.
  void OnMessage(const ClusterMessage& message);
  // Begins a graceful leave; state() becomes kLeft once the cluster no longer lists this
  // member (at once when it is the only member). Tick() keeps resending the request.
  void Leave();

  MemberState state() const { return state_; }
  const MemberInfo& self() const { return self_; }
  const ClusterView& view() const { return view_; }
  bool is_master() const;
  // Pauses of this process seen by Tick (see "Own pause"), and the length of the last one.
  std::uint64_t pauses() const { return pauses_; }
  base::Millis last_pause_ms() const { return last_pause_ms_; }
  // Times this member left its cluster to join another: merged after a split brain, or
  // removed while alive and rejoined.
  std::uint64_t rejoins() const { return rejoins_; }
  // The last heartbeat of each other member of the view (by uuid); a member not heard since
  // it joined (or since this member joined) is absent.
  const std::map<std::string, PeerReport>& peer_reports() const { return peer_reports_; }
  // While the cluster waits to recover (see "Recovery"), what it waits for; empty otherwise.
  const std::string& recovery_status() const { return recovery_status_; }
  // The master of a recovering cluster goes on without the members of the last table still
  // missing, now, as kPartial would after its timeout: when every partition has a replica
  // among the members back. Returns what it did. Errors: kBadRequest (not recovering, or not
  // the master: the text names the master), kConflict (partitions without a replica among
  // the members back: it goes on waiting).
  base::Result<std::string> ForceRecovery();

 private:
  void SendJoinRequests();
  void OnJoinRequest(const ClusterMessage& m);
  void OnView(const ClusterMessage& m);
  void OnHeartbeat(const ClusterMessage& m);
  void OnLeave(const ClusterMessage& m);
  void OnNotMember(const ClusterMessage& m);
  void StartAsMaster(const std::string& why);
  bool MaybeStartWithJoiners();
  void Admit(const MemberInfo& joiner);
  // Master: installs `members` as the next list version, rebalances, broadcasts, notifies.
  void PublishMembers(std::vector<MemberInfo> members);
  void Broadcast();
  void SendView(const std::string& address);
  // Whether every other member of the view has reported partition table `version` or later.
  bool AllReported(std::int64_t version) const;
  // Master: tells the leavers whose leave is complete (see "Leave") that they are out.
  // Old master handing over: goes to kLeft once its leave is complete.
  void CompleteLeaves();
  base::Millis LeaveBoundMs() const;
  void SendHeartbeats();
  ClusterMessage MakeHeartbeat() const;
  void DetectFailures();
  void OnOwnPause(base::Millis gap, base::Millis now);
  // Leaves the cluster to join through `master` (a merge; the members of the current view if
  // it does not answer) or, when empty, through the members of the current view.
  void Rejoin(const std::string& why, const std::string& master = {});
  void SendSplitProbes();
  void OnSplitProbe(const ClusterMessage& m);
  void OnSplitProbeReply(const ClusterMessage& m);
  void OnMergeInto(const ClusterMessage& m);
  // Whether `m` comes from this member's own cluster (or is no split-brain summary at all).
  bool FromOwnCluster(const ClusterMessage& m) const;
  // Master: merges into the cluster `m` describes when it is the larger (then older) one;
  // otherwise makes sure that cluster's master hears of this one.
  void ConsiderMerge(const ClusterMessage& m);
  ClusterMessage MakeSummary(MessageType type) const;
  bool IsSilent(const std::string& uuid) const;
  std::string RefusalReason(const ClusterSettings& theirs) const;
  ClusterMessage Make(MessageType type) const;
  void InstallView(ClusterView view);
  // Recovery (see above): whether this cluster has no table yet and a member's data to
  // recover; the master's check whether it can publish the recovered table (and does).
  bool Recovering() const;
  void MaybeFinishRecovery();
  void NoteRecovery(const ClusterMessage& m);
  // The affinity (affinity_, with this member's own report) for the table being computed, or
  // null when there is none; affinity_ is empty afterwards (those members are placed).
  const partition::Affinity* TakeAffinity();
  partition::Affinity placing_;  // TakeAffinity's, until the next call

  const MemberInfo self_;
  const MembershipOptions options_;
  Transport& transport_;
  const base::Clock& clock_;
  std::shared_ptr<spdlog::logger> log_;
  ViewListener on_view_;
  RejoinListener on_rejoin_;

  MemberState state_ = MemberState::kJoining;
  ClusterView view_;
  base::Millis join_started_ms_ = 0;
  base::Millis next_join_ms_ = 0;
  base::Millis next_heartbeat_ms_ = 0;
  base::Millis last_tick_ms_ = 0;  // 0 before Start
  std::uint64_t pauses_ = 0;
  base::Millis last_pause_ms_ = 0;
  base::Millis woke_ms_ = 0;  // when the last pause ended
  std::uint64_t rejoins_ = 0;
  base::Millis next_probe_ms_ = 0;
  std::set<std::string> known_addresses_;  // every other address seen in a view
  // Master: when it admitted each member (a JoinRequest from a listed member soon after is a
  // duplicate; later, the member lost its state: see Admit).
  std::map<std::string, base::Millis> admitted_ms_;
  // Members (uuid) heard in a heartbeat since they were admitted: they had their view and
  // acted as members, so a join request from one of them means it lost its state.
  std::set<std::string> heartbeat_since_admitted_;
  std::string master_hint_;                    // from a JoinRedirect
  std::vector<std::string> rejoin_addresses_;  // members of the view we were dropped from
  std::unordered_map<std::string, base::Millis> last_heard_ms_;  // by uuid
  std::map<std::string, base::Millis> joiners_heard_ms_;         // joining peers, by address
  std::set<std::string> refused_by_;  // addresses that refused our settings; not asked again
  // (other master, shared member) pairs already logged by ConsiderMerge (logged once each).
  std::set<std::string> overlap_logged_;
  std::map<std::string, PeerReport> peer_reports_;  // by uuid, members of the view only
  // Recovery: this member's report until its cluster has a table; the others' (by uuid).
  std::optional<RecoveryReport> own_recovery_;
  std::map<std::string, RecoveryReport> recovery_reports_;
  // Per member (uuid) that reported a recovery (its own data directory), the partitions it
  // has data of, until the next table PublishMembers computes placed it: Rebalance gives it
  // those partitions' slots first, so a copy to it is the updates it missed (a restart of one
  // member), or nothing (the backups added after a recovered table).
  partition::Affinity affinity_;
  base::Millis recovery_since_ms_ = 0;  // master: when it began to wait (0: not waiting)
  base::Millis recovery_logged_ms_ = 0;
  std::int64_t recovered_version_ = 0;  // master: the recovered table, until all reported it
  std::string recovery_status_;
  bool force_recovery_ = false;      // ForceRecovery asked (one MaybeFinishRecovery)
  std::size_t recovery_unheld_ = 0;  // partitions without a replica back, at the last look
  // Master: members removed at their request, not yet told (see "Leave").
  struct Leaver {
    std::string address;
    std::int64_t table_version;  // the first table without it
    base::Millis deadline_ms;
  };
  std::map<std::string, Leaver> leavers_;  // by uuid
  // An old master handing over (kLeaving): the table it left in, and until when it waits.
  std::optional<Leaver> handover_;
};

}  // namespace tessera::membership
