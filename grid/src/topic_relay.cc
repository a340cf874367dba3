#include "topic_relay.h"

#include "topic_protocol.h"

namespace tessera::grid {

TopicRelay::TopicRelay(topic::TopicService& topics, MemberRouter& router,
                       std::shared_ptr<spdlog::logger> log)
    : topics_(topics),
      router_(router),
      log_(std::move(log)),
      peers_(std::make_shared<const std::vector<std::string>>()) {}

void TopicRelay::SetPeers(std::vector<std::string> others) {
  auto next = std::make_shared<const std::vector<std::string>>(std::move(others));
  std::lock_guard lock(mu_);
  peers_ = std::move(next);
}

std::int64_t TopicRelay::Publish(topic::Message message) {
  std::shared_ptr<const std::vector<std::string>> peers;
  {
    std::lock_guard lock(mu_);
    peers = peers_;
  }
  if (!peers->empty()) {
    std::string encoded =
        EncodeTopicBatch({message.topic, {message.payload}, message.publisher_id,
                          message.publish_time_ms});
    for (const auto& peer : *peers) {
      router_.SendTopic(peer, encoded, [failed = failed_sends_, log = log_, peer,
                                        topic = message.topic](base::Result<void> r) {
        if (r) return;
        const auto n = failed->fetch_add(1, std::memory_order_relaxed) + 1;
        if (n == 1 || n % 1000 == 0) {
          log->warn("topic '{}': a message did not reach member {} ({}); {} lost so far", topic,
                    peer, r.error().ToString(), n);
        }
      });
    }
  }
  return topics_.PublishLocal(std::move(message));
}

}  // namespace tessera::grid
