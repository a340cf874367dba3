#include "listener_queue.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>

namespace tessera::grid {

struct ListenerQueue::State {
  std::string topic;
  TopicListener listener;
  std::size_t capacity = 0;
  std::shared_ptr<spdlog::logger> log;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<TopicMessage> queue;  // guarded by mu
  bool stopping = false;           // guarded by mu
  std::atomic<std::int64_t> dropped{0};
  std::atomic<std::int64_t> errors{0};
  std::function<void()> on_drop;
  std::function<void()> on_error;
};

ListenerQueue::ListenerQueue(std::string topic, TopicListener listener, std::size_t capacity,
                             std::shared_ptr<spdlog::logger> log, std::function<void()> on_drop,
                             std::function<void()> on_error)
    : state_(std::make_shared<State>()) {
  state_->on_drop = std::move(on_drop);
  state_->on_error = std::move(on_error);
  state_->topic = std::move(topic);
  state_->listener = std::move(listener);
  state_->capacity = capacity;
  state_->log = std::move(log);
  thread_ = std::thread([state = state_] { Run(state); });
}

ListenerQueue::~ListenerQueue() {
  {
    std::lock_guard lock(state_->mu);
    state_->stopping = true;
    state_->queue.clear();
  }
  state_->cv.notify_all();
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // the thread holds the state and ends after the running callback
  } else if (thread_.joinable()) {
    thread_.join();
  }
}

void ListenerQueue::Push(TopicMessage message) {
  State& s = *state_;
  {
    std::lock_guard lock(s.mu);
    if (s.stopping) return;
    if (s.queue.size() < s.capacity) {
      s.queue.push_back(std::move(message));
      s.cv.notify_one();
      return;
    }
  }
  const auto n = s.dropped.fetch_add(1, std::memory_order_relaxed) + 1;
  if (s.on_drop) s.on_drop();
  if (n == 1 || n % 1000 == 0) {
    s.log->warn("a listener of topic '{}' is {} messages behind; dropped {} message(s) so far",
                s.topic, s.capacity, n);
  }
}

std::int64_t ListenerQueue::dropped() const {
  return state_->dropped.load(std::memory_order_relaxed);
}

std::int64_t ListenerQueue::errors() const {
  return state_->errors.load(std::memory_order_relaxed);
}

void ListenerQueue::Run(const std::shared_ptr<State>& state) {
  State& s = *state;
  std::unique_lock lock(s.mu);
  for (;;) {
    s.cv.wait(lock, [&s] { return s.stopping || !s.queue.empty(); });
    if (s.stopping) return;
    TopicMessage message = std::move(s.queue.front());
    s.queue.pop_front();
    lock.unlock();
    bool threw = true;
    try {
      s.listener(message);
      threw = false;
    } catch (const std::exception& e) {
      s.log->warn("a listener of topic '{}' threw: {}; it keeps receiving", s.topic, e.what());
    } catch (...) {
      s.log->warn("a listener of topic '{}' threw a non-exception; it keeps receiving", s.topic);
    }
    if (threw) {
      s.errors.fetch_add(1, std::memory_order_relaxed);
      if (s.on_error) s.on_error();
    }
    lock.lock();
  }
}

}  // namespace tessera::grid
