#pragma once
// ReliableTopic: a topic whose messages are stored, numbered and replicated (Hazelcast's
// ReliableTopic over a ringbuffer). Obtained from Instance::GetReliableTopic; the same class
// serves the embedded member and the client.
//
// Storage: a ring of `capacity` messages kept in the partition of the topic's name, as
// entries of the internal map "__reliable_topics" (so written with the map's synchronous
// backups, moved with migrations, and promoted with the partition when its owner dies).
// Each message gets the next sequence number (1, 2, ...). A publish that returns OK is on
// the owner and its backups; one that fails may or may not have been stored.
//
// Listeners read from a sequence (the oldest stored, the next to be published, or a given
// one) on their own thread, in sequence order, each message once. A listener that fell
// behind the ring (its next message was overwritten or expired) is told how many it lost
// (on_loss) and continues from the oldest stored message, or is stopped if it is not
// loss-tolerant. Across a failover it resumes where it was: nothing acknowledged is lost and
// nothing is delivered twice.
//
// Overload (the ring holds `capacity` unexpired messages): block (retry until
// block_timeout_ms, then kTimeout), discard the oldest, discard the newest, or fail with
// kOverloaded. As in Hazelcast, this applies only with a TTL: without one messages never
// expire, so a full ring always overwrites its oldest message (listeners that had not read
// it are told they lost it). Publishers of one topic should use the same configuration.
//
// Thread-safety: safe to use from many threads at once.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/grid/invoker.h"
#include "tessera/grid/topic.h"
#include "tessera/map/map_request.h"

namespace spdlog {
class logger;
}

namespace tessera::grid {

inline constexpr const char* kReliableTopicMap = map::kRingMap;

struct ReliableTopicConfig {
  enum class Overload { kBlock, kDiscardOldest, kDiscardNewest, kError };
  std::int64_t capacity = 10'000;
  base::Millis ttl_ms = 0;                // messages expire after this long (0 = only overwritten)
  Overload overload = Overload::kBlock;   // applies only with ttl_ms > 0 (see above)
  base::Millis block_timeout_ms = 5'000;  // kBlock: give up (kTimeout) after this long
};

struct ReliableMessage {
  std::int64_t sequence = 0;
  TopicMessage message;  // topic, payload, publisher_id, publish_time_ms
};

struct ReliableListenerOptions {
  enum class From { kOldest, kNext, kSequence };
  From from = From::kNext;
  std::int64_t sequence = 1;  // with kSequence: the first sequence to deliver
  bool loss_tolerant = true;  // false: a listener that lost messages is stopped
  // Called on the listener's thread with the number of messages it lost (they were
  // overwritten or expired before it read them).
  std::function<void(std::int64_t lost)> on_loss;
};

class ReliableTopic {
 public:
  ReliableTopic(std::string name, ReliableTopicConfig config, std::shared_ptr<Invoker> invoker,
                std::string publisher_id, std::shared_ptr<spdlog::logger> log);
  ~ReliableTopic();  // stops this proxy's listeners

  const std::string& name() const { return name_; }

  // Stores the message; returns its sequence (0 if kDiscardNewest dropped it).
  base::Result<std::int64_t> Publish(std::string payload);
  // Stores the messages in order; returns the first one's sequence (0 if none was stored).
  base::Result<std::int64_t> PublishAll(std::vector<std::string> payloads);

  // Starts a listener (its own thread). Errors: kBadRequest for a sequence below 1.
  base::Result<TopicListenerId> AddMessageListener(
      std::function<void(const ReliableMessage&)> listener, ReliableListenerOptions options = {});
  // Stops it; true if it existed. No call starts after this returns.
  bool RemoveMessageListener(TopicListenerId id);
  // The next sequence listener `id` will deliver (0 for unknown ids): store it to resume later
  // with From::kSequence.
  std::int64_t NextSequence(TopicListenerId id) const;
  // Whether listener `id` is still running (a loss-intolerant one stops after a loss).
  bool Running(TopicListenerId id) const;

  // The sequences stored now: {oldest readable, last assigned} ({1, 0} when empty).
  base::Result<std::pair<std::int64_t, std::int64_t>> Range();

 private:
  struct Listener;
  void Poll(const std::shared_ptr<Listener>& listener);

  const std::string name_;
  const ReliableTopicConfig config_;
  std::shared_ptr<Invoker> invoker_;
  const std::string publisher_id_;
  std::shared_ptr<spdlog::logger> log_;
  mutable std::mutex mu_;
  std::vector<std::pair<TopicListenerId, std::shared_ptr<Listener>>> listeners_;  // by mu_
  TopicListenerId next_id_ = 1;                                                   // by mu_
};

}  // namespace tessera::grid
