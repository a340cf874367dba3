#pragma once
// Topic: cluster-wide publish/subscribe with Hazelcast ITopic semantics. Obtained from
// Instance::GetTopic; the same class serves the embedded member and the client.
//
// Delivery: a message published on any member or client reaches every listener on every
// member and client of the cluster that is listening when it arrives there. Messages of one
// publisher reach each listener in publish order; messages of different publishers may
// interleave differently for different listeners. Each message carries its publisher's id
// and its publish time (the publishing member's wall clock).
//
// At-most-once: every listener has a bounded queue (kListenerQueueCapacity messages) and its
// own thread, so a slow listener never delays the publisher, other listeners or other topics;
// a message that finds the queue full is dropped for that listener, counted (dropped()) and
// logged. A message in flight to a member that dies is lost. A listener that throws is logged
// and keeps receiving. For messages that must not be lost use a reliable topic (not built yet).
//
// Errors: every call returns base::Result: kBadRequest (empty topic name), kTimeout,
// kConnectionFailed/kMemberLeft (client), kShuttingDown.
// Thread-safety: safe to use from many threads at once.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/topic/topic_service.h"

namespace tessera::grid {

using TopicMessage = topic::Message;  // topic, payload, publisher_id, publish_time_ms
using TopicListener = std::function<void(const TopicMessage& message)>;
using TopicListenerId = std::uint64_t;

inline constexpr std::size_t kListenerQueueCapacity = 10'000;

// What a Topic needs from its instance (the member's or the client's implementation).
class TopicBackend {
 public:
  virtual ~TopicBackend() = default;
  virtual base::Result<void> Publish(const std::string& topic,
                                     std::vector<std::string> payloads) = 0;
  virtual base::Result<TopicListenerId> AddListener(const std::string& topic,
                                                    TopicListener listener) = 0;
  virtual base::Result<bool> RemoveListener(TopicListenerId id) = 0;
  // Messages dropped for listener `id` because its queue was full, and its calls that threw
  // (0 for unknown ids).
  virtual std::int64_t Dropped(TopicListenerId id) const = 0;
  virtual std::int64_t ListenerErrors(TopicListenerId id) const = 0;
};

class Topic {
 public:
  Topic(std::string name, std::shared_ptr<TopicBackend> backend);

  const std::string& name() const { return name_; }

  // Publishes one message; returns once the instance took it (the member it went through
  // has delivered it locally and sent it on to the other members).
  base::Result<void> Publish(std::string payload);
  // Publishes several messages, in order, in one call.
  base::Result<void> PublishAll(std::vector<std::string> payloads);

  // Adds a listener; it is called on its own thread, in order per publisher.
  base::Result<TopicListenerId> AddMessageListener(TopicListener listener);
  // Removes it; true if it existed. No call starts after this returns (one running may end).
  base::Result<bool> RemoveMessageListener(TopicListenerId id);
  // Messages dropped for listener `id` because it fell behind by kListenerQueueCapacity.
  std::int64_t DroppedMessages(TopicListenerId id) const;
  // Calls of listener `id` that threw (each logged; the listener kept receiving).
  std::int64_t ListenerErrors(TopicListenerId id) const;

 private:
  std::string name_;
  std::shared_ptr<TopicBackend> backend_;
};

}  // namespace tessera::grid
