#pragma once
// MembershipService: runs one member's Membership over TCP. It owns a thread with its own
// event loop on which the state machine, its timers and the connections to other members
// live. Messages to another member travel as native-protocol requests (service cluster, op
// kClusterMessageOp) on a member-role connection this service opens to it; messages from other
// members arrive through the member's native server, which hands their payload to Deliver().
//
// Thread-safety: every public method is safe from any thread after Start().

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "tessera/base/clock.h"
#include "tessera/membership/cluster_view.h"
#include "tessera/membership/membership.h"
#include "tessera/net/peer_pool.h"

namespace spdlog {
class logger;
}

namespace tessera::membership {

// Native-protocol op (service cluster) that carries one encoded ClusterMessage member to
// member. The response is empty.
inline constexpr std::uint16_t kClusterMessageOp = 10;

struct MembershipServiceOptions {
  MembershipOptions membership;
  std::string secret;  // presented in the Hello to other members
  std::size_t max_frame_bytes = 16 * 1024 * 1024;
  // Fault injection: members this one must not reach (null: none).
  std::shared_ptr<const net::PeerBlocklist> blocklist;
};

class MembershipService {
 public:
  // `self.address` must be the native address other members can reach. `clock` outlives this.
  MembershipService(MemberInfo self, MembershipServiceOptions options, const base::Clock& clock,
                    std::shared_ptr<spdlog::logger> log);
  ~MembershipService();
  MembershipService(const MembershipService&) = delete;
  MembershipService& operator=(const MembershipService&) = delete;

  // Called on the service's thread after every accepted view change. REQUIRES: before Start().
  void set_view_listener(std::function<void(const ClusterView&)> listener);
  // Called on the service's thread when this member leaves its cluster to join another
  // (Membership::set_rejoin_listener), before the views of the new cluster. It may block
  // briefly (the member takes its data out meanwhile); `silent_ms` as in
  // Membership::RejoinListener. REQUIRES: before Start().
  void set_rejoin_listener(Membership::RejoinListener listener);

  // Starts the thread and begins joining. REQUIRES: called once.
  void Start();
  // An encoded ClusterMessage from another member. An undecodable one is logged and dropped.
  void Deliver(std::string bytes);
  // Leaves the cluster gracefully, waiting up to `timeout` for the master to confirm.
  // Returns true when confirmed (or when this was the only member).
  bool Leave(std::chrono::milliseconds timeout);
  // Stops the thread and closes the connections to other members. Idempotent.
  void Stop();

  // The current view (empty before the first one); never null.
  std::shared_ptr<const ClusterView> view() const;
  MemberState state() const { return state_.load(); }
  bool is_master() const { return master_.load(); }
  const MemberInfo& self() const { return self_; }
  // Pauses of this process the state machine detected (Membership::pauses), and the length
  // of the last one: code holding leases compares the count before and after acting.
  std::uint64_t pauses() const { return pauses_.load(); }
  base::Millis last_pause_ms() const { return last_pause_ms_.load(); }
  // Membership::rejoins(): merges into another cluster and rejoins after removal.
  std::uint64_t rejoins() const { return rejoins_.load(); }
  // Membership::peer_reports(), as of the last event the loop handled.
  std::map<std::string, PeerReport> peer_reports() const;
  // Membership::recovery_status(), as of the last event the loop handled.
  std::string recovery_status() const;
  // Membership::ForceRecovery, run on the loop thread; waits for it (at most 5 s: kTimeout).
  // Call from a thread that is not the loop's.
  base::Result<std::string> ForceRecovery();

 private:
  struct Loop;     // the event loop, transport and state machine; private to the .cc
  void Publish();  // on the loop thread: copies state for the accessors
  void ArmTick();  // on the loop thread

  const MemberInfo self_;
  std::shared_ptr<spdlog::logger> log_;
  std::unique_ptr<Loop> loop_;
  std::function<void(const ClusterView&)> on_view_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::shared_ptr<const ClusterView> view_;         // guarded by mu_
  std::map<std::string, PeerReport> peer_reports_;  // guarded by mu_
  std::string recovery_status_;                     // guarded by mu_
  std::atomic<MemberState> state_{MemberState::kJoining};
  std::atomic<bool> master_{false};
  std::atomic<std::uint64_t> pauses_{0};
  std::atomic<base::Millis> last_pause_ms_{0};
  std::atomic<std::uint64_t> rejoins_{0};
  std::thread thread_;
  bool stopped_loop_ = false;  // loop thread only
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace tessera::membership
