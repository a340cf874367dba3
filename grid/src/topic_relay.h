#pragma once
// TopicRelay: the member's cluster publisher for its TopicService. A message published on this
// member (by RESP, a client or the embedded API) is delivered to this member's listeners and
// sent to every other member (native kTopicDeliver), which delivers it to its own. One
// publisher's messages leave in publish order over one connection per member, so every
// listener sees them in that order. Delivery to other members is at-most-once: a send that
// fails (member gone) is counted, not retried.
//
// Thread-safety: Publish and SetPeers from any thread.

#include <spdlog/logger.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "member_router.h"
#include "tessera/topic/topic_service.h"

namespace tessera::grid {

class TopicRelay {
 public:
  // Both must outlive the relay.
  TopicRelay(topic::TopicService& topics, MemberRouter& router,
             std::shared_ptr<spdlog::logger> log);

  // The other members' addresses (from every new cluster view).
  void SetPeers(std::vector<std::string> others);
  // Delivers here and sends to the peers; returns the local receivers.
  std::int64_t Publish(topic::Message message);
  // Sends to other members that failed (the member was gone or did not answer).
  std::int64_t failed_sends() const { return failed_sends_->load(std::memory_order_relaxed); }

 private:
  topic::TopicService& topics_;
  MemberRouter& router_;
  std::shared_ptr<spdlog::logger> log_;
  mutable std::mutex mu_;
  std::shared_ptr<const std::vector<std::string>> peers_;  // guarded by mu_
  std::shared_ptr<std::atomic<std::int64_t>> failed_sends_ =
      std::make_shared<std::atomic<std::int64_t>>(0);
};

}  // namespace tessera::grid
