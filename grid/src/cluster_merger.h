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
// Thread-safety: every method is safe from any thread.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "tessera/map/map_service.h"

namespace spdlog {
class logger;
}

namespace tessera::grid {

class ClusterMerger {
 public:
  struct Stats {
    std::uint64_t merges = 0;     // times this member took its data out to join another cluster
    std::uint64_t applied = 0;    // entries the new owners took (the policy let them in)
    std::uint64_t discarded = 0;  // entries the merge policy kept out
    std::uint64_t pending = 0;    // entries taken out and not applied yet
  };

  ClusterMerger(map::MapService& maps, std::shared_ptr<spdlog::logger> log);
  ~ClusterMerger();
  ClusterMerger(const ClusterMerger&) = delete;
  ClusterMerger& operator=(const ClusterMerger&) = delete;

  // The membership leaves its cluster (its rejoin listener, on its thread): takes the data out.
  void OnRejoin(const std::string& why);
  // A view listing this member arrived (its view listener).
  void OnJoined();
  // Waits up to `timeout` until every queued batch is applied (true), e.g. before a graceful
  // leave: the queue is the only copy of those entries.
  bool WaitApplied(std::chrono::milliseconds timeout);
  // Stops the thread; what is still queued is logged as lost. Idempotent.
  void Stop();
  Stats stats() const;

 private:
  void Run();

  map::MapService& maps_;
  std::shared_ptr<spdlog::logger> log_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable applied_;                        // the queue drained
  std::deque<map::MergeBatch> batches_;                    // guarded by mu_
  bool joined_ = true;                                     // guarded by mu_
  bool stop_ = false;                                      // guarded by mu_
  Stats stats_;                                            // guarded by mu_
  std::chrono::steady_clock::time_point merge_started_;    // guarded by mu_
  std::uint64_t merge_applied_ = 0, merge_discarded_ = 0;  // this merge's; guarded by mu_
  std::thread thread_;
};

}  // namespace tessera::grid
