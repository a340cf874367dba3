#pragma once
// EmbeddedTopics: the member's own TopicBackend. Publishing goes through the member's
// TopicService (so, in a cluster, to every member); each listener is a TopicService
// subscription that hands messages to the listener's own ListenerQueue, so user code never
// runs on a shard and a slow listener delays only itself.
//
// Thread-safety: safe from any thread.

#include <spdlog/logger.h>

#include <map>
#include <memory>
#include <mutex>

#include "listener_queue.h"
#include "tessera/grid/topic.h"
#include "tessera/topic/topic_service.h"

namespace tessera::grid {

class EmbeddedTopics final : public TopicBackend {
 public:
  // `topics` must outlive the backend's use (the member keeps it until Shutdown).
  EmbeddedTopics(topic::TopicService& topics, std::size_t shard_count, std::string publisher_id,
                 std::shared_ptr<spdlog::logger> log);

  base::Result<void> Publish(const std::string& topic, std::vector<std::string> payloads) override;
  base::Result<TopicListenerId> AddListener(const std::string& topic,
                                            TopicListener listener) override;
  base::Result<bool> RemoveListener(TopicListenerId id) override;
  std::int64_t Dropped(TopicListenerId id) const override;
  std::int64_t ListenerErrors(TopicListenerId id) const override;
  // Removes every listener (the member shuts down); later calls fail with kShuttingDown.
  void Stop();

 private:
  topic::TopicService& topics_;
  const std::size_t shard_count_;
  const std::string publisher_id_;
  std::shared_ptr<spdlog::logger> log_;
  mutable std::mutex mu_;
  bool stopped_ = false;                                              // guarded by mu_
  std::map<TopicListenerId, std::shared_ptr<ListenerQueue>> queues_;  // guarded by mu_
};

}  // namespace tessera::grid
