#pragma once
// ClusterMerger: the member's half of a split-brain merge. When the membership leaves its
// cluster to join another (it merges into a larger cluster, or it was removed while alive),
// OnRejoin takes the member's data out of the old partition table (MapService::LeaveCluster)
// and queues it; once the member is listed in a view again (OnJoined), a thread of its own
// sends the batches to their new owners as kMergeEntries, where each map's merge policy
// decides entry by entry. A batch that fails (the table is still moving, an owner is
// unreachable) is retried until it is applied or the member shuts down; nothing is dropped
// while the member runs. A later rejoin before the queue drained keeps what is queued and
// adds what the member owned by then.
//
// A crash while merging: the queue lives in this process only, so the member also takes out
// the partitions it held backup replicas of, as standby batches per owner, and every merging
// member announces its merge in the internal map kMergeMarkerMap (key: its identity, value:
// "<wall ms it left> pending" once it joined, "... done" once its queue was applied). A
// standby holder, after it joined:
//   - drops an owner's standby when the owner's marker says done (for a leave within the
//     failure timeout of its own: the same merge), or when the owner has been listed for a
//     failure timeout without such a marker (it did not leave: this member's copy was a stale
//     backup, e.g. of a member removed while paused);
//   - sends it (as its own batches) when the owner is not listed for the failure timeout plus
//     the join timeout after this member joined, and its marker does not say done: the owner
//     died before its merge was applied, or never joined.
// So a merge survives the crash of one merging member when its partitions had a backup on the
// same side (backup_count >= 1, two members or more); a one-member side's merge is in memory
// only. An owner that crashed after part of its queue was applied has that part merged twice
// (the merge policies take the same entry again as they would a retry; stream events with ids
// are deduplicated, id-less events and reliable-topic messages can repeat). Wall clocks must
// agree within the failure timeout for a marker to count.
//
// Thread-safety: every method is safe from any thread.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "tessera/map/map_service.h"

namespace spdlog {
class logger;
}

namespace tessera::grid {

// The internal map where merging members announce their merges (key: the member's identity).
inline constexpr const char* kMergeMarkerMap = "__tessera.merges";

class ClusterMerger {
 public:
  struct Stats {
    std::uint64_t merges = 0;        // times this member took its data out to join another cluster
    std::uint64_t applied = 0;       // entries the new owners took (the policy let them in)
    std::uint64_t discarded = 0;     // entries the merge policy kept out
    std::uint64_t pending = 0;       // entries taken out and not applied yet
    std::uint64_t standby = 0;       // entries held as standby copies of other owners' partitions
    std::uint64_t standby_sent = 0;  // standby entries sent: their owner's merge never came
    std::uint64_t standby_dropped = 0;  // standby entries dropped: the owner merged, or stayed
  };

  // `self_id`: this member's identity (its marker's key). `failure_timeout_ms` and
  // `join_timeout_ms`: the membership's, for how long a standby holder waits (above).
  ClusterMerger(map::MapService& maps, std::string self_id, std::int64_t failure_timeout_ms,
                std::int64_t join_timeout_ms, std::shared_ptr<spdlog::logger> log);
  ~ClusterMerger();
  ClusterMerger(const ClusterMerger&) = delete;
  ClusterMerger& operator=(const ClusterMerger&) = delete;

  // The membership leaves its cluster (its rejoin listener, on its thread): takes the data out
  // (`silent_ms`: see MapService::LeaveCluster).
  void OnRejoin(const std::string& why, std::int64_t silent_ms);
  // A view listing this member arrived (its view listener).
  void OnJoined();
  // Waits up to `timeout` until every queued batch is applied (true), e.g. before a graceful
  // leave: the queue is the only copy of those entries.
  bool WaitApplied(std::chrono::milliseconds timeout);
  // Stops the thread; what is still queued is logged as lost. Idempotent.
  void Stop();
  Stats stats() const;

 private:
  using SteadyTime = std::chrono::steady_clock::time_point;
  // Another owner's partitions this member held backups of, taken out when it left.
  struct Standby {
    std::deque<map::MergeBatch> batches;
    std::uint64_t entries = 0;
    std::optional<SteadyTime> listed_since;  // since when the owner is listed (unbroken)
  };
  enum class Verdict { kWait, kSend, kDrop };

  void Run();
  // Writes this member's marker ("<left_wall_ms_> <state>"); false (logged) when it failed.
  // Called with `lock` held; unlocks it meanwhile.
  bool WriteMarker(std::unique_lock<std::mutex>& lock, const char* state);
  // Decides each standby owner's fate (above) and acts on it. With `lock` held; unlocks it
  // meanwhile.
  void CheckStandby(std::unique_lock<std::mutex>& lock);
  // Without the lock: `left_wall_ms` and `joined_at` are the members' values read under it.
  Verdict Judge(const std::string& owner, Standby& standby, SteadyTime now,
                std::int64_t left_wall_ms, SteadyTime joined_at);

  map::MapService& maps_;
  const std::string self_id_;
  const std::chrono::milliseconds failure_timeout_;
  const std::chrono::milliseconds join_timeout_;
  std::shared_ptr<spdlog::logger> log_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable applied_;         // the queue drained
  std::deque<map::MergeBatch> batches_;     // guarded by mu_
  std::map<std::string, Standby> standby_;  // by owner identity; guarded by mu_
  bool joined_ = true;                      // guarded by mu_
  SteadyTime joined_at_;                    // guarded by mu_
  std::int64_t left_wall_ms_ = 0;           // wall clock at the last leave; guarded by mu_
  bool merging_ = false;    // left and the "done" marker not written yet; guarded by mu_
  bool announced_ = false;  // the "pending" marker of this merge is written; guarded by mu_
  bool stop_ = false;       // guarded by mu_
  Stats stats_;             // guarded by mu_
  std::chrono::steady_clock::time_point merge_started_;    // guarded by mu_
  std::uint64_t merge_applied_ = 0, merge_discarded_ = 0;  // this merge's; guarded by mu_
  std::thread thread_;
};

}  // namespace tessera::grid
