// Each shard thread records its index in a thread_local (shard_set.h's detail) so
// CurrentShard() is two loads.
// A thread belongs to at most one ShardSet at a time (true for members and tests alike).
#include "tessera/runtime/shard_set.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <string>

#include "tessera/base/check.h"
#include "tessera/runtime/idle_poll.h"

namespace tessera::runtime {

std::size_t DefaultShardCount() {
  const std::size_t hardware = std::thread::hardware_concurrency();
  return hardware > 1 ? hardware - 1 : 1;
}

ShardSet::ShardSet(std::size_t shard_count, std::chrono::microseconds idle_poll)
    : idle_poll_(idle_poll) {
  TESSERA_CHECK(shard_count >= 1, "a ShardSet needs at least one shard");
  TESSERA_CHECK(idle_poll.count() >= 0, "a ShardSet's idle poll cannot be negative");
  for (std::size_t i = 0; i < shard_count; ++i) shards_.push_back(std::make_unique<Shard>());
}

ShardSet::~ShardSet() { Stop(); }

void ShardSet::Start() {
  if (running_) return;
  running_ = true;
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    Shard& shard = *shards_[i];
    shard.io.restart();
    shard.work.emplace(shard.io.get_executor());
    shard.thread = std::thread([this, &shard, i] {
      detail::tls_shard_owner = this;
      detail::tls_shard_index = i;
      const std::string name = "shard-" + std::to_string(i);  // as top -H and gdb show it
      pthread_setname_np(pthread_self(), name.c_str());
      Run(shard, idle_poll_);
      detail::tls_shard_owner = nullptr;
    });
  }
}

// poll() runs what is ready, with a non-blocking epoll_wait when nothing is queued;
// run_one() sleeps until there is something. A polling phase runs from the first empty poll
// the policy lets continue until work turns up or the thread goes to sleep.
void ShardSet::Run(Shard& shard, std::chrono::microseconds idle_poll) {
  asio::io_context& io = shard.io;
  if (idle_poll.count() == 0) {
    io.run();
    return;
  }
  using Clock = IdlePoll::Clock;
  const RunQueueWait run_queue_wait;
  IdlePoll policy(
      idle_poll, [&run_queue_wait] { return run_queue_wait.Read(); }, Clock::now());
  bool polling = false;
  Clock::time_point polling_since;
  const auto end_polling = [&](Clock::time_point now) {
    if (!polling) return;
    const auto polled = std::chrono::duration_cast<std::chrono::microseconds>(now - polling_since);
    shard.polled_us.fetch_add(polled.count(), std::memory_order_relaxed);
    polling = false;
  };
  while (!io.stopped()) {
    if (io.poll() > 0) {
      const auto now = Clock::now();
      end_polling(now);
      policy.Worked(now);
      continue;
    }
    const auto now = Clock::now();
    if (policy.KeepPolling(now)) {
      if (!polling) {
        polling = true;
        polling_since = now;
      }
      std::this_thread::yield();  // lets another thread that wants this core have it
      continue;
    }
    end_polling(now);
    shard.contended_samples.store(policy.contended_samples(), std::memory_order_relaxed);
    io.run_one();
    policy.Slept(now, Clock::now());
  }
}

ShardSet::PollStats ShardSet::IdlePollStats(std::size_t shard) const {
  const Shard& s = *shards_[shard];
  return {std::chrono::microseconds(s.polled_us.load(std::memory_order_relaxed)),
          s.contended_samples.load(std::memory_order_relaxed)};
}

void ShardSet::Stop() {
  if (!running_) return;
  TESSERA_CHECK(!CurrentShard().has_value(), "ShardSet::Stop called from a shard thread");
  running_ = false;
  for (auto& shard : shards_) {
    shard->work.reset();
    shard->io.stop();
  }
  for (auto& shard : shards_) {
    if (shard->thread.joinable()) shard->thread.join();
  }
}

void ShardSet::InvokeOnAll(std::function<void(std::size_t)> fn) {
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    InvokeOn(i, [fn, i] { fn(i); });
  }
}

}  // namespace tessera::runtime
