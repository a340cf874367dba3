#pragma once
// ListenerQueue: one topic listener's bounded queue and the thread that drains it, so a slow
// listener delays only itself. Push never blocks: a message that finds the queue full is
// dropped and counted (the first drop, and every 1000th, is logged). A listener that throws
// is logged and keeps receiving.
//
// Thread-safety: Push and dropped() from any thread. The destructor stops the thread
// (discarding what is queued); called from the listener's own thread (a listener removing
// itself) it lets the thread end on its own after the callback returns.

#include <spdlog/logger.h>

#include <memory>
#include <string>
#include <thread>

#include "tessera/grid/topic.h"

namespace tessera::grid {

class ListenerQueue {
 public:
  // `on_drop` / `on_error` (may be null) run after each drop / each throwing call.
  ListenerQueue(std::string topic, TopicListener listener, std::size_t capacity,
                std::shared_ptr<spdlog::logger> log, std::function<void()> on_drop = nullptr,
                std::function<void()> on_error = nullptr);
  ~ListenerQueue();
  ListenerQueue(const ListenerQueue&) = delete;
  ListenerQueue& operator=(const ListenerQueue&) = delete;

  void Push(TopicMessage message);
  std::int64_t dropped() const;
  std::int64_t errors() const;  // calls that threw

 private:
  struct State;  // shared with the thread, which may outlive this object (see above)
  static void Run(const std::shared_ptr<State>& state);
  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace tessera::grid
