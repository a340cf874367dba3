#include "embedded_topics.h"

namespace tessera::grid {

EmbeddedTopics::EmbeddedTopics(topic::TopicService& topics, std::size_t shard_count,
                               std::string publisher_id, std::shared_ptr<spdlog::logger> log)
    : topics_(topics),
      shard_count_(std::max<std::size_t>(1, shard_count)),
      publisher_id_(std::move(publisher_id)),
      log_(std::move(log)) {}

base::Result<void> EmbeddedTopics::Publish(const std::string& topic,
                                           std::vector<std::string> payloads) {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return base::Fail(base::ErrorCode::kShuttingDown, "the member is shut down");
  }
  for (auto& payload : payloads) {
    topics_.Publish(topic::Message{topic, std::move(payload), publisher_id_});  // moved, not copied
  }
  return {};
}

base::Result<TopicListenerId> EmbeddedTopics::AddListener(const std::string& topic,
                                                          TopicListener listener) {
  // Drops and errors count in the member's topic statistics (grid-cli topic stats).
  auto queue = std::make_shared<ListenerQueue>(
      topic, std::move(listener), kListenerQueueCapacity, log_,
      [&topics = topics_, topic] { topics.CountDropped(topic); },
      [&topics = topics_, topic] { topics.CountListenerError(topic); });
  std::lock_guard lock(mu_);
  if (stopped_) return base::Fail(base::ErrorCode::kShuttingDown, "the member is shut down");
  topic::ListenerOptions options;
  options.shard = queues_.size() % shard_count_;
  options.max_pending = kListenerQueueCapacity;
  auto id = topics_.Subscribe(
      topic, options, [queue](const topic::Message& m, std::string_view) { queue->Push(m); });
  queues_.emplace(id, std::move(queue));
  return id;
}

base::Result<bool> EmbeddedTopics::RemoveListener(TopicListenerId id) {
  std::shared_ptr<ListenerQueue> queue;
  {
    std::lock_guard lock(mu_);
    auto it = queues_.find(id);
    if (it == queues_.end()) return false;
    queue = std::move(it->second);
    queues_.erase(it);
  }
  topics_.Unsubscribe(id);
  return true;  // `queue` stops its thread here
}

std::int64_t EmbeddedTopics::Dropped(TopicListenerId id) const {
  std::lock_guard lock(mu_);
  auto it = queues_.find(id);
  return it == queues_.end() ? 0 : it->second->dropped();
}

std::int64_t EmbeddedTopics::ListenerErrors(TopicListenerId id) const {
  std::lock_guard lock(mu_);
  auto it = queues_.find(id);
  return it == queues_.end() ? 0 : it->second->errors();
}

void EmbeddedTopics::Stop() {
  std::map<TopicListenerId, std::shared_ptr<ListenerQueue>> queues;
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
    queues = std::move(queues_);
    queues_.clear();
  }
  for (auto& [id, queue] : queues) topics_.Unsubscribe(id);
}

}  // namespace tessera::grid
