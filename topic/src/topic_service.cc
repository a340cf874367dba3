// Registry under a shared_mutex (publish takes it shared, subscribe/unsubscribe exclusive);
// each delivery is one post to the listener's shard carrying shared pointers to the message,
// the subscription and the counters, so nothing dangles if the subscription or the service
// goes away while deliveries are queued. The per-listener bound is an atomic in-flight count
// taken before posting and released when the delivery runs.
#include "tessera/topic/topic_service.h"

#include <spdlog/logger.h>
#include <algorithm>
#include <chrono>
#include <exception>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "tessera/base/check.h"
#include "tessera/topic/glob.h"

namespace tessera::topic {

namespace {

struct Subscription {
  SubscriptionId id = 0;
  std::string name;  // topic or pattern
  bool is_pattern = false;
  ListenerOptions options;
  MessageListener listener;
  std::atomic<std::size_t> pending{0};
  std::atomic<bool> active{true};
};

struct Counters {
  std::atomic<std::int64_t> published{0};
  std::atomic<std::int64_t> delivered{0};
  std::atomic<std::int64_t> dropped{0};
  std::atomic<std::int64_t> listener_errors{0};
  std::shared_ptr<spdlog::logger> log;
};

// A delivery carries the service's counters and its topic's.
struct CounterPair {
  std::shared_ptr<Counters> all;
  std::shared_ptr<Counters> topic;
};

using SubscriptionPtr = std::shared_ptr<Subscription>;

void Deliver(const SubscriptionPtr& sub, const Message& message, const CounterPair& counters) {
  sub->pending.fetch_sub(1, std::memory_order_acq_rel);
  if (!sub->active.load(std::memory_order_acquire)) return;
  const std::string_view pattern = sub->is_pattern ? std::string_view(sub->name) : "";
  try {
    sub->listener(message, pattern);
    counters.all->delivered.fetch_add(1, std::memory_order_relaxed);
    counters.topic->delivered.fetch_add(1, std::memory_order_relaxed);
  } catch (const std::exception& e) {
    counters.all->listener_errors.fetch_add(1, std::memory_order_relaxed);
    counters.topic->listener_errors.fetch_add(1, std::memory_order_relaxed);
    counters.all->log->warn("topic listener {} on '{}' threw: {}; it keeps receiving", sub->id,
                            message.topic, e.what());
  } catch (...) {
    counters.all->listener_errors.fetch_add(1, std::memory_order_relaxed);
    counters.topic->listener_errors.fetch_add(1, std::memory_order_relaxed);
    counters.all->log->warn("topic listener {} on '{}' threw a non-exception; it keeps receiving",
                            sub->id, message.topic);
  }
}

std::int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct TopicService::Impl {
  runtime::ShardSet& shards;
  std::shared_ptr<Counters> counters = std::make_shared<Counters>();
  mutable std::shared_mutex mutex;
  std::unordered_map<std::string, std::vector<SubscriptionPtr>> by_topic;
  std::vector<SubscriptionPtr> patterns;
  std::unordered_map<SubscriptionId, SubscriptionPtr> by_id;
  SubscriptionId next_id = 1;
  std::atomic<std::int64_t> next_sequence{1};
  std::function<std::int64_t(Message)> cluster_publisher;
  mutable std::mutex by_name_mu;
  std::unordered_map<std::string, std::shared_ptr<Counters>> by_name;  // guarded by by_name_mu
  // Per shard, the by_name entries that shard has used: a publish on a shard thread finds its
  // topic's counters without the mutex (by_name never drops an entry, so they stay valid).
  struct alignas(64) ShardCounterCache {
    std::unordered_map<std::string, Counters*> by_name;
  };
  std::vector<ShardCounterCache> caches;  // caches[s] is touched only on shard s

  explicit Impl(runtime::ShardSet& s) : shards(s), caches(s.size()) {}

  std::shared_ptr<Counters> CountersOf(const std::string& topic) {
    std::lock_guard lock(by_name_mu);
    auto& c = by_name[topic];
    if (!c) c = std::make_shared<Counters>();
    return c;
  }

  // The same without the shared pointer, and without the mutex once this shard has seen the
  // topic.
  Counters& CountersHere(const std::string& topic) {
    const auto shard = shards.CurrentShard();
    if (!shard) return *CountersOf(topic);
    auto& cache = caches[*shard].by_name;
    if (auto it = cache.find(topic); it != cache.end()) return *it->second;
    Counters* counters = CountersOf(topic).get();
    cache.emplace(topic, counters);
    return *counters;
  }

  // Queues one delivery; false if the listener's queue is full.
  bool Enqueue(const SubscriptionPtr& sub, const std::shared_ptr<const Message>& message,
               const CounterPair& pair) {
    if (sub->pending.fetch_add(1, std::memory_order_acq_rel) >= sub->options.max_pending) {
      sub->pending.fetch_sub(1, std::memory_order_acq_rel);
      pair.all->dropped.fetch_add(1, std::memory_order_relaxed);
      pair.topic->dropped.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    shards.InvokeOn(sub->options.shard, [sub, message, pair] { Deliver(sub, *message, pair); });
    return true;
  }

  SubscriptionId Add(std::string name, bool is_pattern, ListenerOptions options,
                     MessageListener listener) {
    TESSERA_CHECK(options.shard < shards.size(), "listener shard out of range");
    auto sub = std::make_shared<Subscription>();
    sub->name = std::move(name);
    sub->is_pattern = is_pattern;
    sub->options = options;
    sub->listener = std::move(listener);
    std::unique_lock lock(mutex);
    sub->id = next_id++;
    by_id.emplace(sub->id, sub);
    if (is_pattern) {
      patterns.push_back(sub);
    } else {
      by_topic[sub->name].push_back(sub);
    }
    return sub->id;
  }
};

TopicService::TopicService(runtime::ShardSet& shards, std::shared_ptr<spdlog::logger> log)
    : impl_(std::make_unique<Impl>(shards)) {
  impl_->counters->log = std::move(log);
}

TopicService::~TopicService() = default;

std::int64_t TopicService::Publish(std::string_view topic, std::string payload,
                                   std::string_view publisher_id) {
  return Publish(Message{std::string(topic), std::move(payload), std::string(publisher_id)});
}

std::int64_t TopicService::Publish(Message message) {
  impl_->counters->published.fetch_add(1, std::memory_order_relaxed);
  impl_->CountersHere(message.topic).published.fetch_add(1, std::memory_order_relaxed);
  if (message.publish_time_ms == 0) message.publish_time_ms = WallMs();
  if (impl_->cluster_publisher) return impl_->cluster_publisher(std::move(message));
  return PublishLocal(std::move(message));
}

void TopicService::SetClusterPublisher(std::function<std::int64_t(Message)> publisher) {
  impl_->cluster_publisher = std::move(publisher);
}

std::int64_t TopicService::PublishLocal(Message in) {
  std::shared_ptr<const Message> message;
  std::int64_t receivers = 0;
  CounterPair pair;  // looked up with the first receiver: a message nobody hears needs none
  std::shared_lock lock(impl_->mutex);
  auto make_message = [&] {
    if (message) return;
    pair = {impl_->counters, impl_->CountersOf(in.topic)};
    in.sequence = impl_->next_sequence.fetch_add(1, std::memory_order_relaxed);
    message = std::make_shared<const Message>(std::move(in));
  };
  const std::string& topic = in.topic;
  if (auto it = impl_->by_topic.find(topic); it != impl_->by_topic.end()) {
    for (const auto& sub : it->second) {
      make_message();
      receivers += impl_->Enqueue(sub, message, pair) ? 1 : 0;
    }
  }
  for (const auto& sub : impl_->patterns) {
    if (!GlobMatch(sub->name, message ? std::string_view(message->topic) : topic)) continue;
    make_message();
    receivers += impl_->Enqueue(sub, message, pair) ? 1 : 0;
  }
  return receivers;
}

SubscriptionId TopicService::Subscribe(std::string topic, ListenerOptions options,
                                       MessageListener listener) {
  return impl_->Add(std::move(topic), false, options, std::move(listener));
}

SubscriptionId TopicService::PatternSubscribe(std::string pattern, ListenerOptions options,
                                              MessageListener listener) {
  return impl_->Add(std::move(pattern), true, options, std::move(listener));
}

bool TopicService::Unsubscribe(SubscriptionId id) {
  std::unique_lock lock(impl_->mutex);
  auto it = impl_->by_id.find(id);
  if (it == impl_->by_id.end()) return false;
  SubscriptionPtr sub = std::move(it->second);
  impl_->by_id.erase(it);
  sub->active.store(false, std::memory_order_release);
  auto remove_from = [&sub](std::vector<SubscriptionPtr>& list) {
    std::erase_if(list, [&sub](const SubscriptionPtr& s) { return s == sub; });
  };
  if (sub->is_pattern) {
    remove_from(impl_->patterns);
  } else if (auto t = impl_->by_topic.find(sub->name); t != impl_->by_topic.end()) {
    remove_from(t->second);
    if (t->second.empty()) impl_->by_topic.erase(t);
  }
  return true;
}

std::int64_t TopicService::SubscriberCount(std::string_view topic) const {
  std::shared_lock lock(impl_->mutex);
  auto it = impl_->by_topic.find(std::string(topic));
  return it == impl_->by_topic.end() ? 0 : static_cast<std::int64_t>(it->second.size());
}

std::vector<std::string> TopicService::ActiveTopics(std::string_view glob) const {
  std::vector<std::string> topics;
  std::shared_lock lock(impl_->mutex);
  for (const auto& [name, subs] : impl_->by_topic) {
    if (glob.empty() || GlobMatch(glob, name)) topics.push_back(name);
  }
  return topics;
}

TopicStats TopicService::Stats() const {
  TopicStats stats;
  const Counters& c = *impl_->counters;
  stats.published = c.published.load(std::memory_order_relaxed);
  stats.delivered = c.delivered.load(std::memory_order_relaxed);
  stats.dropped = c.dropped.load(std::memory_order_relaxed);
  stats.listener_errors = c.listener_errors.load(std::memory_order_relaxed);
  std::shared_lock lock(impl_->mutex);
  stats.pattern_subscriptions = static_cast<std::int64_t>(impl_->patterns.size());
  stats.subscriptions =
      static_cast<std::int64_t>(impl_->by_id.size()) - stats.pattern_subscriptions;
  return stats;
}

void TopicService::CountDropped(std::string_view topic) {
  impl_->counters->dropped.fetch_add(1, std::memory_order_relaxed);
  impl_->CountersOf(std::string(topic))->dropped.fetch_add(1, std::memory_order_relaxed);
}

void TopicService::CountListenerError(std::string_view topic) {
  impl_->counters->listener_errors.fetch_add(1, std::memory_order_relaxed);
  impl_->CountersOf(std::string(topic))->listener_errors.fetch_add(1, std::memory_order_relaxed);
}

std::vector<std::pair<std::string, TopicStats>> TopicService::StatsByTopic() const {
  std::map<std::string, TopicStats> out;
  {
    std::lock_guard lock(impl_->by_name_mu);
    for (const auto& [name, c] : impl_->by_name) {
      TopicStats& s = out[name];
      s.published = c->published.load(std::memory_order_relaxed);
      s.delivered = c->delivered.load(std::memory_order_relaxed);
      s.dropped = c->dropped.load(std::memory_order_relaxed);
      s.listener_errors = c->listener_errors.load(std::memory_order_relaxed);
    }
  }
  std::shared_lock lock(impl_->mutex);
  for (const auto& [name, subs] : impl_->by_topic) {
    out[name].subscriptions = static_cast<std::int64_t>(subs.size());
  }
  return {out.begin(), out.end()};
}

}  // namespace tessera::topic
