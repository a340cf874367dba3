#pragma once
// SerialWorker: one thread running posted jobs in order, for the saga pieces that must make
// blocking grid calls on behalf of shard-side code (the outbox's publisher, the deadlines'
// firing): shards post, the worker blocks.
//
// Thread-safety: Post and Stop from any thread; jobs run on the worker thread.

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace tessera::saga {

class SerialWorker {
 public:
  SerialWorker() : thread_([this] { Run(); }) {}
  ~SerialWorker() { Stop(); }
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  // Queues `job`; dropped once stopped.
  void Post(std::function<void()> job) {
    {
      std::lock_guard lock(mu_);
      if (stop_) return;
      jobs_.push_back(std::move(job));
    }
    wake_.notify_one();
  }
  // Waits for the job running now; queued ones are dropped (destroyed here, so what they hold
  // is released while the caller still stands). Idempotent.
  void Stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
    std::deque<std::function<void()>> dropped;
    {
      std::lock_guard lock(mu_);
      dropped.swap(jobs_);
    }
  }

 private:
  void Run() {
    std::unique_lock lock(mu_);
    while (true) {
      wake_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      auto job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;  // guarded by mu_
  bool stop_ = false;                       // guarded by mu_
  std::thread thread_;                      // last: starts after the rest exists
};

}  // namespace tessera::saga
