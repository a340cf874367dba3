#pragma once
// EventExecutor: one thread that runs user callbacks (entry listeners, async results) off
// the shard threads, in the order they were posted. A callback that throws is logged and
// counted; the executor keeps running.
//
// Thread-safety: Post is safe from any thread. Stop joins the thread (not from itself).

#include <utility>  // before Asio

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <thread>

namespace spdlog {
class logger;
}

namespace tessera::grid {

class EventExecutor {
 public:
  explicit EventExecutor(std::shared_ptr<spdlog::logger> log);
  ~EventExecutor();

  void Post(std::function<void()> fn);
  // Runs queued callbacks, then stops. Idempotent.
  void Stop();
  std::int64_t failures() const { return failures_.load(); }
  bool OnThread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  std::shared_ptr<spdlog::logger> log_;
  boost::asio::io_context io_{1};
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::thread thread_;
  std::atomic<std::int64_t> failures_{0};
};

}  // namespace tessera::grid
