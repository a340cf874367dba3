#pragma once
// ShardSet: N shards = N threads, each running its own asio::io_context. Partition p belongs
// to shard p % N; only that shard's thread touches the partition's state, so operations on one
// partition run one at a time without locks. Cross-shard work goes through InvokeOn /
// InvokeOnAll; nothing blocks on a shard thread.
//
// Thread-safety: all methods are safe from any thread. Handlers posted to one shard run in
// the order they were posted from one thread (asio's FIFO strand-free io_context with one
// runner thread).

#include <utility>  // before Asio's awaitable header (Boost 1.74)

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

namespace tessera::runtime {

namespace asio = boost::asio;

class ShardSet;

namespace detail {
// The ShardSet and index of the shard whose thread this is (set by that thread; null and 0 on
// any other thread). In the header so that CurrentShard, called several times per request,
// inlines to two thread-local loads.
inline thread_local const ShardSet* tls_shard_owner = nullptr;
inline thread_local std::size_t tls_shard_index = 0;
}  // namespace detail

// The shard count a member uses when none is configured: one per hardware thread less one,
// at least 1. The core left over serves what runs beside the shards and competes with them
// when it has no core of its own: the kernel's network processing, the member's other
// threads (membership, replication, client I/O), and whatever shares the host (the service
// an embedded member lives in, clients on the same machine). On a 2-core host with a load
// generator beside it, one shard did better than two, in throughput and in tail latency
// (docs/benchmarks.md): three busy threads on two cores are time-sliced, and half the keys pay a
// cross-thread hop.
std::size_t DefaultShardCount();

class ShardSet {
 public:
  // REQUIRES: shard_count >= 1.
  //
  // idle_poll: when a shard runs out of work, it keeps polling (non-blocking epoll_wait, then
  // sched_yield, in a loop) for up to this long before it sleeps, but only while its work is
  // arriving less than idle_poll apart and its core is not contended (IdlePoll has the
  // rule). A shard that would be woken again within microseconds anyway stays awake: the
  // peer that sends it work (a client on this host, another shard) no longer pays for waking
  // it (a wake-up is a few µs of kernel time, charged to the sender), and the work is picked
  // up without the wake-up latency. The cost is CPU: under a steady stream of events less
  // than idle_poll apart the shard's thread is busy all the time; an idle member, or one
  // woken less often, polls not at all. 0 = never poll, sleep as soon as there is no work.
  // Shard threads are named "shard-N" (as top -H shows them).
  explicit ShardSet(std::size_t shard_count, std::chrono::microseconds idle_poll = {});
  // Stops and joins the threads if still running.
  ~ShardSet();
  ShardSet(const ShardSet&) = delete;
  ShardSet& operator=(const ShardSet&) = delete;

  // Starts one thread per shard. Idempotent.
  void Start();
  // Stops the io_contexts (pending handlers are dropped) and joins the threads. Idempotent.
  // REQUIRES: not called from a shard thread.
  void Stop();

  std::size_t size() const { return shards_.size(); }

  // What idle polling cost `shard` so far: time spent polling (finding work or not), and the
  // contention samples that stopped it (see IdlePoll). Both 0 when idle_poll is 0.
  struct PollStats {
    std::chrono::microseconds polled{0};
    std::uint64_t contended_samples = 0;
  };
  PollStats IdlePollStats(std::size_t shard) const;
  asio::io_context& Context(std::size_t shard) { return shards_[shard]->io; }

  // The shard that owns `partition_id`.
  std::size_t ShardOfPartition(std::uint32_t partition_id) const {
    return partition_id % shards_.size();
  }

  // Index of the shard whose thread is calling, or nullopt on any other thread.
  std::optional<std::size_t> CurrentShard() const {
    if (detail::tls_shard_owner != this) return std::nullopt;
    return detail::tls_shard_index;
  }
  bool OnShard(std::size_t shard) const { return CurrentShard() == shard; }

  // Runs fn on `shard`'s thread later (always posts, never inline).
  template <typename Fn>
  void InvokeOn(std::size_t shard, Fn&& fn) {
    asio::post(shards_[shard]->io, std::forward<Fn>(fn));
  }

  // Runs fn inline when the caller is already on `shard`, else posts it there.
  template <typename Fn>
  void DispatchOn(std::size_t shard, Fn&& fn) {
    if (OnShard(shard)) {
      fn();
    } else {
      InvokeOn(shard, std::forward<Fn>(fn));
    }
  }

  // Runs fn(shard_index) on every shard (posted).
  void InvokeOnAll(std::function<void(std::size_t)> fn);

  // Runs map(shard) on every shard, then done(results) once on the shard that finished last.
  // `results[i]` is shard i's value. T must be movable. Called on a shard, that shard's part
  // runs inline, before MapReduce returns (the others are posted first): so the caller's
  // work on its own shard stays in call order, as it does on the others (posts are FIFO).
  // done may then run inline too.
  template <typename T>
  void MapReduce(std::function<T(std::size_t)> map, std::function<void(std::vector<T>)> done);

 private:
  struct Shard {
    asio::io_context io{1};
    std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
    std::thread thread;
    // Written by the shard's thread, read by IdlePollStats.
    std::atomic<std::int64_t> polled_us{0};
    std::atomic<std::uint64_t> contended_samples{0};
  };
  static void Run(Shard& shard, std::chrono::microseconds idle_poll);

  std::vector<std::unique_ptr<Shard>> shards_;
  std::chrono::microseconds idle_poll_;
  bool running_ = false;
};

template <typename T>
void ShardSet::MapReduce(std::function<T(std::size_t)> map,
                         std::function<void(std::vector<T>)> done) {
  struct State {
    std::vector<std::optional<T>> parts;
    std::atomic<std::size_t> remaining;
    std::function<void(std::vector<T>)> done;
  };
  auto state = std::make_shared<State>();
  state->parts.resize(size());
  state->remaining = size();
  state->done = std::move(done);
  auto run = [state, map](std::size_t i) {
    state->parts[i] = map(i);
    if (state->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::vector<T> out;
      out.reserve(state->parts.size());
      for (auto& p : state->parts) out.push_back(std::move(*p));
      state->done(std::move(out));
    }
  };
  const std::optional<std::size_t> here = CurrentShard();
  for (std::size_t i = 0; i < size(); ++i) {
    if (i != here) InvokeOn(i, [run, i] { run(i); });
  }
  if (here) run(*here);
}

}  // namespace tessera::runtime
