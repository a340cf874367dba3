// PartitionWorkService: see partition_work_service.h. Starting and stopping happen on the
// partition's shard, so a work instance and the partition's map operations never run at once,
// and a stop triggered by a table change runs before the partition's migration copy is taken
// (both are posted to the shard, the stop first: map_service.h, SetOwnershipHook).
#include "partition_work_service.h"

#include <future>

#include "tessera/base/check.h"

namespace tessera::grid {

class PartitionWorkService::Context final : public PartitionWorkContext {
 public:
  Context(PartitionWorkService& service, std::uint32_t partition)
      : service_(service), partition_(partition) {}
  std::uint32_t partition() const override { return partition_; }
  boost::asio::io_context& shard_context() override {
    return service_.shards_.Context(service_.shards_.ShardOfPartition(partition_));
  }
  bool owned() const override {
    return !stopped_ && !service_.stopping_.load() && service_.maps_.RunsPartitionWork(partition_);
  }
  void ScanLocal(const std::string& map,
                 const std::function<void(std::string_view, std::string_view)>& fn) override {
    service_.maps_.ScanPartition(map, partition_, fn);
  }
  Instance& instance() override { return service_.instance_; }
  std::weak_ptr<const void> lifetime() const override { return life_; }
  void MarkStopped() {
    stopped_ = true;
    life_.reset();
  }

 private:
  PartitionWorkService& service_;
  std::uint32_t partition_;
  bool stopped_ = false;  // on the shard only
  std::shared_ptr<const int> life_ = std::make_shared<const int>(0);
};

struct PartitionWorkService::Running {
  std::unique_ptr<Context> context;
  std::vector<std::unique_ptr<PartitionWork>> work;  // one per type (null: none)
};

PartitionWorkService::PartitionWorkService(runtime::ShardSet& shards, map::MapService& maps,
                                           Instance& instance)
    : shards_(shards), maps_(maps), instance_(instance), running_by_shard_(shards.size()) {}

PartitionWorkService::~PartitionWorkService() = default;

void PartitionWorkService::Register(std::string name, PartitionWorkFactory factory) {
  for (auto& [existing, f] : types_) {
    if (existing == name) {
      f = std::move(factory);
      return;
    }
  }
  types_.emplace_back(std::move(name), std::move(factory));
}

void PartitionWorkService::Start() {
  if (types_.empty()) return;
  started_service_ = true;
  maps_.SetOwnershipHook([this](std::uint32_t partition) { Reconcile(partition); });
  const auto count = maps_.partitioner().partition_count();
  shards_.InvokeOnAll([this, count](std::size_t shard) {
    for (auto p = static_cast<std::uint32_t>(shard); p < count;
         p += static_cast<std::uint32_t>(shards_.size())) {
      Reconcile(p);
    }
  });
}

void PartitionWorkService::Reconcile(std::uint32_t partition) {
  const std::size_t shard = shards_.ShardOfPartition(partition);
  auto& running = running_by_shard_[shard];
  const bool owned = !stopping_.load() && maps_.RunsPartitionWork(partition);
  auto it = running.find(partition);
  if (owned && it == running.end()) {
    auto entry = std::make_unique<Running>();
    entry->context = std::make_unique<Context>(*this, partition);
    for (auto& [name, factory] : types_) entry->work.push_back(factory(*entry->context));
    running.emplace(partition, std::move(entry));
    started_.fetch_add(1);
    running_.fetch_add(1);
  } else if (!owned && it != running.end()) {
    it->second->context->MarkStopped();
    // Newest type first, the reverse of their start.
    while (!it->second->work.empty()) it->second->work.pop_back();
    running.erase(it);
    stopped_.fetch_add(1);
    running_.fetch_sub(1);
  }
}

void PartitionWorkService::Stop() {
  if (!started_service_ || stopping_.exchange(true)) return;
  TESSERA_CHECK(!shards_.CurrentShard().has_value(),
                "PartitionWorkService::Stop called on a shard thread; it waits for the shards");
  maps_.SetOwnershipHook(nullptr);
  std::vector<std::future<void>> done;
  for (std::size_t shard = 0; shard < shards_.size(); ++shard) {
    auto promise = std::make_shared<std::promise<void>>();
    done.push_back(promise->get_future());
    shards_.InvokeOn(shard, [this, shard, promise] {
      std::vector<std::uint32_t> partitions;
      for (const auto& [p, entry] : running_by_shard_[shard]) partitions.push_back(p);
      for (auto p : partitions) Reconcile(p);  // stopping_: stops each
      promise->set_value();
    });
  }
  for (auto& f : done) f.wait();
}

}  // namespace tessera::grid
