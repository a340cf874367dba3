#pragma once
// ListenerRegistry: the entry listeners of every map on the member. Registration happens on
// any thread; shards read an immutable per-map snapshot and refresh it only when version()
// changed, so delivering events costs no lock on the hot path.
//
// Thread-safety: all methods are safe from any thread. Snapshots are immutable.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tessera/map/map_service.h"

namespace tessera::map {

class ListenerRegistry {
 public:
  struct Listener {
    ListenerId id = 0;
    ListenerOptions options;
    EntryListener fn;
    // Cleared by Remove so a shard holding an old snapshot stops delivering at once.
    std::shared_ptr<std::atomic<bool>> active;
  };
  using Snapshot = std::shared_ptr<const std::vector<std::shared_ptr<const Listener>>>;

  ListenerId Add(const std::string& map_name, ListenerOptions options, EntryListener fn);
  bool Remove(ListenerId id);

  // Changes whenever a listener is added or removed.
  std::uint64_t version() const { return version_.load(std::memory_order_acquire); }
  // The listeners of `map_name` (nullptr when none).
  Snapshot SnapshotOf(const std::string& map_name) const;
  // How many listeners each map has, for every map that ever had one (0 once all are
  // removed). Sorted by map name.
  std::vector<std::pair<std::string, std::size_t>> Counts() const;

  // Whether any listener in `snapshot` wants values.
  static bool WantsValues(const Snapshot& snapshot);
  // Delivers `event` to every active listener in `snapshot` whose filter accepts it.
  static void Deliver(const Snapshot& snapshot, const EntryEvent& event);

 private:
  mutable std::mutex mu_;
  std::map<std::string, Snapshot> by_map_;  // guarded by mu_
  ListenerId next_id_ = 1;                  // guarded by mu_
  std::atomic<std::uint64_t> version_{1};
};

}  // namespace tessera::map
