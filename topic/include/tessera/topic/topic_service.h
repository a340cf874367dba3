#pragma once
// TopicService: publish/subscribe on one member. A message published to a topic is handed to
// every listener subscribed to that topic and to every pattern listener whose glob matches
// the topic name (see glob.h); a listener subscribed both ways gets it twice, as in Redis.
//
// Delivery: each listener names the shard it wants to be called on; the message is posted to
// that shard, so a connection living on shard s receives its messages on its own thread.
// Messages from one publisher thread reach one listener in publish order.
// Delivery is at-most-once: each listener has a bound on messages queued for it
// (ListenerOptions::max_pending); a message beyond it is dropped and counted. A listener that
// throws is logged and counted, and keeps receiving.
//
// Cluster: a member installs a cluster publisher (SetClusterPublisher); Publish then hands
// every message to it, and it delivers here (PublishLocal) and on the other members, which
// deliver what they receive with PublishLocal. Front-ends (RESP, the native protocol, the
// embedded API) call Publish and get cluster-wide delivery without knowing.
//
// Statistics: totals over every topic, and per topic for a bounded set of names, so
// publishing to ever new names (per-user channels, say) costs no memory per name: a topic
// with a plain subscription here always has its own counters; other names get them while
// fewer than `stats_limit` names are kept. When the set is full, a sweep at most once per
// `stats_limit` untracked publishes drops the names without a subscription that saw no
// activity since the previous sweep (their counters start again from 0 if they come back).
// Messages on a topic without counters count in the totals only.
//
// Thread-safety: every method is safe to call from any thread, including from a listener.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/runtime/shard_set.h"

namespace spdlog {
class logger;
}

namespace tessera::topic {

using SubscriptionId = std::uint64_t;

// One published message as a listener sees it.
struct Message {
  std::string topic;                 // the topic it was published to
  std::string payload;               // the message bytes
  std::string publisher_id;          // who published it (free text, e.g. "resp:12" or a member id)
  std::int64_t sequence = 0;         // member-local publish order (1, 2, ...)
  std::int64_t publish_time_ms = 0;  // wall clock of the publishing member, ms since epoch
};

// Called on the listener's shard. `pattern` is the glob that matched for pattern
// subscriptions, empty for plain ones. Must not block.
using MessageListener = std::function<void(const Message& message, std::string_view pattern)>;

// Per-topic configuration of a cluster (the same on every member).
struct TopicConfig {
  // Every message of the topic goes through the member owning the topic name's partition,
  // which delivers it everywhere in one order: all listeners see the same sequence. Costs a
  // hop for publishers on other members.
  bool global_ordering = false;
};

struct ListenerOptions {
  std::size_t shard = 0;           // shard to deliver on; REQUIRES: < shards.size()
  std::size_t max_pending = 4096;  // messages queued for this listener before drops begin
};

// Counters since the service started (monotonic).
struct TopicStats {
  std::int64_t published = 0;              // Publish calls
  std::int64_t delivered = 0;              // listener invocations that returned normally
  std::int64_t dropped = 0;                // messages dropped because a listener's queue was full
  std::int64_t listener_errors = 0;        // listener invocations that threw
  std::int64_t subscriptions = 0;          // current plain subscriptions
  std::int64_t pattern_subscriptions = 0;  // current pattern subscriptions
};

class TopicService {
 public:
  static constexpr std::size_t kDefaultStatsLimit = 1000;

  // `shards` must outlive the service and every delivery it posted. `stats_limit`: topic
  // names kept with counters of their own besides those with a subscription (see above).
  TopicService(runtime::ShardSet& shards, std::shared_ptr<spdlog::logger> log,
               std::size_t stats_limit = kDefaultStatsLimit);
  ~TopicService();
  TopicService(const TopicService&) = delete;
  TopicService& operator=(const TopicService&) = delete;

  // Hands `payload` to every matching listener (posted to each listener's shard). Returns the
  // number of listeners it was queued for (listeners whose queue was full are not counted).
  // A message nobody can hear (no subscription here to the topic, no pattern subscription
  // here, and the cluster publisher reaches no other member) is counted as published and
  // returns 0 without being copied.
  std::int64_t Publish(std::string_view topic, std::string_view payload,
                       std::string_view publisher_id);
  // The same for a message built elsewhere (publisher id and publish time kept, a sequence and
  // a missing publish time filled in; one nobody can hear is counted and dropped alike).
  std::int64_t Publish(Message message);
  // Delivers `message` to this member's listeners only, as Publish does without a cluster
  // publisher. Returns the number of listeners it was queued for.
  std::int64_t PublishLocal(Message message);
  // Installs the cluster publisher (see above); it returns what Publish returns.
  // `reaches_others` says whether a message published now could leave this member (there are
  // other members); without it, every message is handed to the publisher. Call before
  // publishing starts; REQUIRES: not called concurrently with Publish.
  void SetClusterPublisher(std::function<std::int64_t(Message)> publisher,
                           std::function<bool()> reaches_others = {});

  // Subscribes `listener` to the exact topic name. Returns an id for Unsubscribe.
  SubscriptionId Subscribe(std::string topic, ListenerOptions options, MessageListener listener);

  // Subscribes `listener` to every topic matching the Redis glob `pattern`.
  SubscriptionId PatternSubscribe(std::string pattern, ListenerOptions options,
                                  MessageListener listener);

  // Removes a subscription; returns whether it existed. Messages still queued for it are
  // discarded: after Unsubscribe returns, the listener is not called again, except by an
  // invocation already running on its shard.
  bool Unsubscribe(SubscriptionId id);

  // Number of plain subscriptions to exactly `topic` (PUBSUB NUMSUB).
  std::int64_t SubscriberCount(std::string_view topic) const;
  // Topics with at least one plain subscription, optionally filtered by a glob (PUBSUB
  // CHANNELS); "" = all.
  std::vector<std::string> ActiveTopics(std::string_view glob = "") const;

  TopicStats Stats() const;
  // Counts, for `topic`, a message a listener outside this service dropped (its own queue was
  // full) or a listener invocation that threw (the grid's per-listener queues report here).
  void CountDropped(std::string_view topic);
  void CountListenerError(std::string_view topic);
  // Per topic with counters of its own (see Statistics above), sorted by name: published
  // here, delivered, dropped, listener errors, current plain subscriptions.
  std::vector<std::pair<std::string, TopicStats>> StatsByTopic() const;

 private:
  // Stamps and hands on a counted message: to the cluster publisher, or PublishLocal.
  std::int64_t Send(Message message);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::topic
