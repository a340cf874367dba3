#include "cluster_merger.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

namespace tessera::grid {

ClusterMerger::ClusterMerger(map::MapService& maps, std::shared_ptr<spdlog::logger> log)
    : maps_(maps), log_(std::move(log)), thread_([this] { Run(); }) {}

ClusterMerger::~ClusterMerger() { Stop(); }

void ClusterMerger::OnRejoin(const std::string& why) {
  const auto started = std::chrono::steady_clock::now();
  auto batches = maps_.LeaveCluster();
  std::size_t entries = 0;
  for (const auto& b : batches) entries += b.entries.size();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - started)
                        .count();
  {
    std::lock_guard lock(mu_);
    joined_ = false;
    ++stats_.merges;
    stats_.pending += entries;
    for (auto& b : batches) batches_.push_back(std::move(b));
    merge_started_ = started;
    merge_applied_ = merge_discarded_ = 0;
  }
  log_->warn(
      "leaving the cluster ({}): took {} entries, stream events and reliable-topic messages of "
      "the partitions this member owned out in {} ms, to merge into the cluster it joins",
      why, entries, took);
}

void ClusterMerger::OnJoined() {
  {
    std::lock_guard lock(mu_);
    if (joined_) return;
    joined_ = true;
  }
  wake_.notify_all();
}

bool ClusterMerger::WaitApplied(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return applied_.wait_for(lock, timeout, [this] {
    return batches_.empty() || !joined_ || stop_;
  }) && batches_.empty();
}

void ClusterMerger::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  if (stats_.pending > 0) {
    log_->error("shutting down with {} entries of a split-brain merge not applied; they are lost",
                stats_.pending);
  }
}

ClusterMerger::Stats ClusterMerger::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void ClusterMerger::Run() {
  std::unique_lock lock(mu_);
  int failures = 0;
  while (true) {
    wake_.wait(lock, [this] { return stop_ || (joined_ && !batches_.empty()); });
    if (stop_) return;
    if (maps_.AwaitingPartitionCount() > 0) {
      // The new cluster's copies of this member's partitions are on their way: a batch sent
      // now would fail on them and be sent again whole (parts applied twice).
      wake_.wait_for(lock, std::chrono::milliseconds(20), [this] { return stop_; });
      continue;
    }
    map::MapRequest request = batches_.front().Request();
    lock.unlock();
    auto result = maps_.ExecuteSync(std::move(request));
    lock.lock();
    if (!result) {
      if (failures++ == 0) {
        log_->warn("merging {} entries of map '{}' failed: {}; retrying until it is applied",
                   batches_.front().entries.size(), batches_.front().map_name,
                   result.error().ToString());
      }
      wake_.wait_for(lock, std::chrono::milliseconds(std::min(2000, 100 * failures)),
                     [this] { return stop_; });
      continue;
    }
    failures = 0;
    std::uint64_t discarded = 0;
    for (const auto& [name, count] : result->entries) {
      if (name == "discarded") discarded += std::strtoull(count.c_str(), nullptr, 10);
    }
    const auto applied = static_cast<std::uint64_t>(result->count);
    stats_.applied += applied;
    stats_.discarded += discarded;
    stats_.pending -= std::min<std::uint64_t>(stats_.pending, batches_.front().entries.size());
    merge_applied_ += applied;
    merge_discarded_ += discarded;
    batches_.pop_front();
    if (batches_.empty()) {
      applied_.notify_all();
      const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - merge_started_)
                            .count();
      log_->info(
          "merged into the cluster: {} entries applied, {} discarded by the maps' merge "
          "policies, {} ms after leaving the old cluster",
          merge_applied_, merge_discarded_, took);
    }
  }
}

}  // namespace tessera::grid
