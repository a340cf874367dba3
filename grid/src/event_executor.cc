#include "event_executor.h"

#include <spdlog/spdlog.h>

namespace tessera::grid {

EventExecutor::EventExecutor(std::shared_ptr<spdlog::logger> log) : log_(std::move(log)) {
  work_.emplace(io_.get_executor());
}

EventExecutor::~EventExecutor() { Stop(); }

void EventExecutor::Post(std::function<void()> fn) {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    if (!thread_.joinable()) thread_ = std::thread([this] { io_.run(); });
  }
  boost::asio::post(io_, [this, fn = std::move(fn)] {
    try {
      fn();
    } catch (const std::exception& e) {
      failures_.fetch_add(1);
      log_->warn("a listener callback threw: {}; it keeps receiving events", e.what());
    } catch (...) {
      failures_.fetch_add(1);
      log_->warn("a listener callback threw a non-standard exception; it keeps receiving events");
    }
  });
}

void EventExecutor::Stop() {
  std::thread thread;
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    work_.reset();
    thread = std::move(thread_);
  }
  if (!thread.joinable()) return;
  if (std::this_thread::get_id() == thread.get_id()) {
    thread.detach();  // Stop from a callback: let the thread finish on its own.
    return;
  }
  thread.join();
}

}  // namespace tessera::grid
