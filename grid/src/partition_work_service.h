#pragma once
// PartitionWorkService: runs the registered partition work (partition_work.h) of a member.
// Private to grid/.
//
// Each shard keeps the work instances of the partitions it holds. Reconcile(p), on p's
// shard, brings p's work in line with MapService::OwnsPartition(p): it starts every work
// type when the member owns p and none runs, and stops (destroys) them when it does not.
// MapService's ownership hook calls it on every change (map_service.h), and Start
// reconciles every partition once.
//
// Thread-safety: Register before Start; Start and Stop from one thread; counters from any.

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/grid/partition_work.h"
#include "tessera/map/map_service.h"
#include "tessera/runtime/shard_set.h"

namespace tessera::grid {

class PartitionWorkService {
 public:
  PartitionWorkService(runtime::ShardSet& shards, map::MapService& maps, Instance& instance);
  ~PartitionWorkService();

  // REQUIRES: before Start; names are unique (a second registration of a name replaces it).
  void Register(std::string name, PartitionWorkFactory factory);
  bool empty() const { return types_.empty(); }

  // Installs the ownership hook and starts the work of every partition owned now.
  void Start();
  // Stops every running work instance (on its shard) and waits for that; no work starts
  // after it. Does nothing when Start did not run. REQUIRES: not on a shard thread; the
  // shards are running if Start ran.
  void Stop();

  std::int64_t started() const { return started_.load(); }
  std::int64_t stopped() const { return stopped_.load(); }
  // Partitions with work running on this member.
  std::int64_t running_partitions() const { return running_.load(); }

 private:
  class Context;
  struct Running;
  void Reconcile(std::uint32_t partition);

  runtime::ShardSet& shards_;
  map::MapService& maps_;
  Instance& instance_;
  std::vector<std::pair<std::string, PartitionWorkFactory>> types_;
  // Per shard, the partitions with work running; touched on that shard only.
  std::vector<std::map<std::uint32_t, std::unique_ptr<Running>>> running_by_shard_;
  bool started_service_ = false;  // Start ran (the shards are running)
  std::atomic<bool> stopping_{false};
  std::atomic<std::int64_t> started_{0}, stopped_{0}, running_{0};
};

}  // namespace tessera::grid
