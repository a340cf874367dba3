#include "cluster_merger.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <cstdlib>
#include <iterator>
#include <string_view>
#include <vector>

namespace tessera::grid {

ClusterMerger::ClusterMerger(map::MapService& maps, std::string self_id,
                             std::int64_t failure_timeout_ms, std::int64_t join_timeout_ms,
                             std::shared_ptr<spdlog::logger> log)
    : maps_(maps),
      self_id_(std::move(self_id)),
      failure_timeout_(failure_timeout_ms),
      join_timeout_(join_timeout_ms),
      log_(std::move(log)),
      thread_([this] { Run(); }) {}

ClusterMerger::~ClusterMerger() { Stop(); }

void ClusterMerger::OnRejoin(const std::string& why, std::int64_t silent_ms) {
  const auto started = std::chrono::steady_clock::now();
  const std::int64_t wall = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
  auto batches = maps_.LeaveCluster(silent_ms);
  std::size_t entries = 0, standby = 0;
  std::map<std::string, Standby> taken;
  std::deque<map::MergeBatch> own;
  for (auto& b : batches) {
    if (b.standby_for.empty()) {
      entries += b.entries.size();
      own.push_back(std::move(b));
    } else {
      standby += b.entries.size();
      Standby& s = taken[b.standby_for];
      s.entries += b.entries.size();
      s.batches.push_back(std::move(b));
    }
  }
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - started)
                        .count();
  {
    std::lock_guard lock(mu_);
    joined_ = false;
    merging_ = true;
    announced_ = false;
    left_wall_ms_ = wall;
    ++stats_.merges;
    stats_.pending += entries;
    stats_.standby += standby;
    for (auto& b : own) batches_.push_back(std::move(b));
    for (auto& [owner, s] : taken) {
      Standby& held = standby_[owner];
      held.entries += s.entries;
      held.listed_since.reset();
      std::move(s.batches.begin(), s.batches.end(), std::back_inserter(held.batches));
    }
    merge_started_ = started;
    merge_applied_ = merge_discarded_ = 0;
  }
  log_->warn(
      "leaving the cluster ({}): took {} entries, stream events and reliable-topic messages of "
      "the partitions this member owned out in {} ms, to merge into the cluster it joins, and "
      "{} of the partitions it held backups of ({} owners), sent only if their owner's merge "
      "does not arrive",
      why, entries, took, standby, taken.size());
}

void ClusterMerger::OnJoined() {
  {
    std::lock_guard lock(mu_);
    if (joined_) return;
    joined_ = true;
    joined_at_ = std::chrono::steady_clock::now();
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
  if (stats_.standby > 0) {
    log_->warn(
        "shutting down with {} standby entries of {} merging owners' partitions; they are lost "
        "if those owners' merges do not arrive",
        stats_.standby, standby_.size());
  }
}

ClusterMerger::Stats ClusterMerger::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void ClusterMerger::Run() {
  std::unique_lock lock(mu_);
  int failures = 0;
  auto back_off = [&] {
    wake_.wait_for(lock, std::chrono::milliseconds(std::min(2000, 100 * ++failures)),
                   [this] { return stop_; });
  };
  while (true) {
    wake_.wait(lock, [this] {
      return stop_ || (joined_ && (merging_ || !batches_.empty() || !standby_.empty()));
    });
    if (stop_) return;
    // Announced first: the copies below can take a while, and standby holders wait for it.
    if (merging_ && !announced_) {
      if (!WriteMarker(lock, "pending")) {
        back_off();
        continue;
      }
      failures = 0;
      announced_ = true;
    }
    if (maps_.AwaitingPartitionCount() > 0) {
      // The new cluster's copies of this member's partitions are on their way: a batch sent
      // now would fail on them and be sent again whole (parts applied twice).
      wake_.wait_for(lock, std::chrono::milliseconds(20), [this] { return stop_; });
      continue;
    }
    if (!batches_.empty()) {
      map::MapRequest request = batches_.front().Request();
      lock.unlock();
      auto result = maps_.ExecuteSync(std::move(request));
      lock.lock();
      if (!result) {
        if (failures == 0) {
          log_->warn("merging {} entries of map '{}' failed: {}; retrying until it is applied",
                     batches_.front().entries.size(), batches_.front().map_name,
                     result.error().ToString());
        }
        back_off();
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
      continue;
    }
    if (merging_) {
      if (!WriteMarker(lock, "done")) {
        back_off();
        continue;
      }
      failures = 0;
      merging_ = false;
      continue;
    }
    CheckStandby(lock);
    if (!standby_.empty() && batches_.empty()) {
      wake_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stop_; });
    }
  }
}

bool ClusterMerger::WriteMarker(std::unique_lock<std::mutex>& lock, const char* state) {
  map::MapRequest marker;
  marker.op = map::MapOp::kSet;
  marker.map_name = kMergeMarkerMap;
  marker.key = self_id_;
  marker.value = fmt::format("{} {}", left_wall_ms_, state);
  marker.options.ttl_ms = 24LL * 3600 * 1000;  // a day: far longer than any merge
  lock.unlock();
  auto written = maps_.ExecuteSync(std::move(marker));
  lock.lock();
  if (!written) {
    log_->warn("announcing this member's merge ({}) failed: {}; retrying", state,
               written.error().ToString());
  }
  return written.has_value();
}

ClusterMerger::Verdict ClusterMerger::Judge(const std::string& owner, Standby& standby,
                                            SteadyTime now, std::int64_t left_wall_ms,
                                            SteadyTime joined_at) {
  map::MapRequest get;
  get.op = map::MapOp::kGet;
  get.map_name = kMergeMarkerMap;
  get.key = owner;
  auto marker = maps_.ExecuteSync(std::move(get));
  if (!marker) return Verdict::kWait;  // asked again in a moment
  // "<wall ms> <state>" of a leave within a failure timeout of this member's: the same merge.
  bool fresh = false, done = false;
  if (marker->value) {
    const std::string& text = *marker->value;
    std::int64_t wall = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), wall);
    fresh = ec == std::errc() && wall >= left_wall_ms - failure_timeout_.count();
    done = fresh && std::string_view(end, text.data() + text.size()) == " done";
  }
  if (done) return Verdict::kDrop;
  if (maps_.ListsMember(owner)) {
    if (!standby.listed_since) standby.listed_since = now;
    if (fresh || now - *standby.listed_since < failure_timeout_) return Verdict::kWait;
    return Verdict::kDrop;  // it never left: this member's copy was a stale backup
  }
  standby.listed_since.reset();
  return now - joined_at < failure_timeout_ + join_timeout_ ? Verdict::kWait : Verdict::kSend;
}

void ClusterMerger::CheckStandby(std::unique_lock<std::mutex>& lock) {
  if (!maps_.HasPartitionTable()) return;
  std::vector<std::string> owners;
  for (const auto& [owner, standby] : standby_) owners.push_back(owner);
  for (const auto& owner : owners) {
    auto it = standby_.find(owner);
    if (it == standby_.end()) continue;
    Standby copy;  // judged without the lock; what a rejoin adds meanwhile stays held
    copy.listed_since = it->second.listed_since;
    const SteadyTime now = std::chrono::steady_clock::now();
    const std::int64_t left_wall_ms = left_wall_ms_;
    const SteadyTime joined_at = joined_at_;
    lock.unlock();
    const Verdict verdict = Judge(owner, copy, now, left_wall_ms, joined_at);
    lock.lock();
    it = standby_.find(owner);
    if (it == standby_.end() || stop_ || !joined_) return;
    it->second.listed_since = copy.listed_since;
    if (verdict == Verdict::kWait) continue;
    const std::uint64_t entries = it->second.entries;
    stats_.standby -= std::min(stats_.standby, entries);
    if (verdict == Verdict::kSend) {
      log_->warn(
          "the merge of member {} did not arrive (it is not in this cluster): sending the {} "
          "entries of its partitions this member held backups of in its place",
          owner, entries);
      stats_.standby_sent += entries;
      stats_.pending += entries;
      for (auto& b : it->second.batches) batches_.push_back(std::move(b));
    } else {
      log_->info(
          "member {} merged or never left its cluster: dropping the {} standby entries "
          "of its partitions",
          owner, entries);
      stats_.standby_dropped += entries;
    }
    standby_.erase(it);
  }
}

}  // namespace tessera::grid
