#include "event_executor.h"

#include <spdlog/spdlog.h>

namespace tessera::grid {

EventExecutor::EventExecutor(std::shared_ptr<spdlog::logger> log) : log_(std::move(log)) {
  work_.emplace(io_.get_executor());
  thread_ = std::thread([this] { io_.run(); });
}

EventExecutor::~EventExecutor() { Stop(); }

void EventExecutor::Post(std::function<void()> fn) {
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
  if (!thread_.joinable()) return;
  work_.reset();
  if (OnThread()) {
    thread_.detach();  // Stop from a callback: let the thread finish on its own.
    return;
  }
  thread_.join();
}

}  // namespace tessera::grid
