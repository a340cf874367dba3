#include "topic_relay.h"

#include "native_protocol.h"
#include "topic_protocol.h"

namespace tessera::grid {

TopicRelay::TopicRelay(topic::TopicService& topics, MemberRouter& router,
                       const runtime::ShardSet& shards,
                       std::map<std::string, topic::TopicConfig> configs,
                       partition::Partitioner partitioner, std::shared_ptr<spdlog::logger> log)
    : topics_(topics),
      router_(router),
      configs_(std::move(configs)),
      partitioner_(partitioner),
      log_(std::move(log)),
      view_(shards, std::make_shared<const View>()) {}

void TopicRelay::SetPeers(std::vector<std::string> others, std::string self,
                          std::vector<std::string> owners) {
  view_.Set(
      std::make_shared<const View>(View{std::move(others), std::move(self), std::move(owners)}));
}

std::int64_t TopicRelay::Publish(topic::Message message) {
  const bool ordered = !configs_.empty() && [&] {
    auto config = configs_.find(message.topic);
    return config != configs_.end() && config->second.global_ordering;
  }();
  return view_.Read([&](const View& view) {
    if (!ordered || view.owners.empty()) return FanOut(view, std::move(message));
    return PublishOrdered(view, std::move(message));
  });
}

std::int64_t TopicRelay::PublishOrdered(const View& view, topic::Message message) {
  const std::string& owner =
      view.owners[partitioner_.PartitionOf(message.topic) % view.owners.size()];
  if (owner.empty() || owner == view.self) {
    // One thread does every ordered fan-out: its local deliveries and its sends then leave in
    // one order (posts from different threads, e.g. a shard's, need not keep theirs).
    router_.Post([this, view = std::make_shared<const View>(view),
                  message = std::move(message)]() mutable { FanOut(*view, std::move(message)); });
    return 0;
  }
  // The owner orders it: forwarded as a publish, delivered here when the owner sends it back.
  router_.SendTopic(
      owner,
      EncodeTopicBatch(
          {message.topic, {message.payload}, message.publisher_id, message.publish_time_ms}),
      native::kTopicPublish,
      [failed = failed_sends_, log = log_, owner, topic = message.topic](base::Result<void> r) {
        if (r) return;
        const auto n = failed->fetch_add(1, std::memory_order_relaxed) + 1;
        if (n == 1 || n % 1000 == 0) {
          log->warn(
              "topic '{}': a message did not reach its ordering member {} ({}); {} lost so far",
              topic, owner, r.error().ToString(), n);
        }
      });
  return 0;
}

std::int64_t TopicRelay::FanOut(const View& view, topic::Message message) {
  if (!view.peers.empty()) {
    std::string encoded = EncodeTopicBatch(
        {message.topic, {message.payload}, message.publisher_id, message.publish_time_ms});
    for (const auto& peer : view.peers) {
      router_.SendTopic(
          peer, encoded, native::kTopicDeliver,
          [failed = failed_sends_, log = log_, peer, topic = message.topic](base::Result<void> r) {
            if (r) return;
            const auto n = failed->fetch_add(1, std::memory_order_relaxed) + 1;
            if (n == 1 || n % 1000 == 0) {
              log->warn(
                  "topic '{}': a message did not reach member {} ({}); {} "
                  "lost so far",
                  topic, peer, r.error().ToString(), n);
            }
          });
    }
  }
  return topics_.PublishLocal(std::move(message));
}

}  // namespace tessera::grid
