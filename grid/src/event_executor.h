#pragma once
// EventExecutor: one thread that runs user callbacks (entry listeners, async results) off
// the shard threads, in the order they were posted. The thread starts with the first Post (a
// client without listeners never has one). A callback that throws is logged and counted; the
// executor keeps running.
//
// Thread-safety: Post is safe from any thread. Stop joins the thread (not from itself); a Post
// after Stop is dropped.

#include <utility>  // before Asio

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <functional>
#include <memory>
#include <mutex>
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

 private:
  std::shared_ptr<spdlog::logger> log_;
  boost::asio::io_context io_{1};
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::mutex mu_;  // thread_ and stopped_
  std::thread thread_;
  bool stopped_ = false;
  std::atomic<std::int64_t> failures_{0};
};

}  // namespace tessera::grid
