// The registry of subscriptions is changed under a mutex by subscribe/unsubscribe, which then
// publish an immutable copy; a publish reads that copy through runtime::ShardSnapshot (on a
// shard: its cached copy, no lock and no shared write) and counts in per-shard slots, so two
// shards publishing to one topic share no cache line they write. Each delivery is one
// post to the listener's shard carrying shared pointers to the message, the subscription and the
// counters, so nothing dangles if the subscription or the service goes away while deliveries are
// queued. The per-listener bound is an atomic in-flight count taken before posting and released
// when the delivery runs.
#include "tessera/topic/topic_service.h"

#include <spdlog/logger.h>
#include <algorithm>
#include <chrono>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <unordered_map>

#include "tessera/base/check.h"
#include "tessera/base/string_hash.h"
#include "tessera/runtime/shard_snapshot.h"
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

// A count written by one shard only (its own cache line), read by anyone.
struct alignas(64) ShardCount {
  std::atomic<std::int64_t> value{0};
};

struct Counters {
  // Publishes counted off the shards; on shard s, in published_on[s] (see Published()).
  std::atomic<std::int64_t> published{0};
  std::unique_ptr<ShardCount[]> published_on;
  std::size_t shard_count = 0;
  std::atomic<std::int64_t> delivered{0};
  std::atomic<std::int64_t> dropped{0};
  std::atomic<std::int64_t> listener_errors{0};
  std::shared_ptr<spdlog::logger> log;

  explicit Counters(std::size_t shards)
      : published_on(std::make_unique<ShardCount[]>(shards)), shard_count(shards) {}

  void AddPublished(std::optional<std::size_t> shard) {
    if (shard && *shard < shard_count) {
      auto& count = published_on[*shard].value;  // only this shard writes it: no read-modify-write
      count.store(count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    } else {
      published.fetch_add(1, std::memory_order_relaxed);
    }
  }
  std::int64_t Published() const {
    std::int64_t sum = published.load(std::memory_order_relaxed);
    for (std::size_t s = 0; s < shard_count; ++s) {
      sum += published_on[s].value.load(std::memory_order_relaxed);
    }
    return sum;
  }

  std::int64_t Activity() const {
    return Published() + delivered.load(std::memory_order_relaxed) +
           dropped.load(std::memory_order_relaxed) +
           listener_errors.load(std::memory_order_relaxed);
  }
};

// A delivery carries the service's counters and its topic's (null: a topic without counters
// of its own).
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
    if (counters.topic) counters.topic->delivered.fetch_add(1, std::memory_order_relaxed);
  } catch (const std::exception& e) {
    counters.all->listener_errors.fetch_add(1, std::memory_order_relaxed);
    if (counters.topic) counters.topic->listener_errors.fetch_add(1, std::memory_order_relaxed);
    counters.all->log->warn("topic listener {} on '{}' threw: {}; it keeps receiving", sub->id,
                            message.topic, e.what());
  } catch (...) {
    counters.all->listener_errors.fetch_add(1, std::memory_order_relaxed);
    if (counters.topic) counters.topic->listener_errors.fetch_add(1, std::memory_order_relaxed);
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

// What a publish reads: the subscriptions by topic and the pattern subscriptions. Weak: a
// shard's cached copy lives until that shard's next publish, and must not keep an unsubscribed
// listener (and what it holds, e.g. an embedded listener's queue thread) alive until then.
struct Registry {
  std::unordered_map<std::string, std::vector<std::weak_ptr<Subscription>>, base::StringHash,
                     std::equal_to<>>
      by_topic;
  std::vector<std::weak_ptr<Subscription>> patterns;
};

struct TopicService::Impl {
  runtime::ShardSet& shards;
  std::shared_ptr<Counters> counters = std::make_shared<Counters>(shards.size());
  mutable std::shared_mutex mutex;  // the registry below; writers publish `snapshot` after
  std::unordered_map<std::string, std::vector<SubscriptionPtr>> by_topic;
  std::vector<SubscriptionPtr> patterns;
  std::unordered_map<SubscriptionId, SubscriptionPtr> by_id;
  runtime::ShardSnapshot<Registry> snapshot{shards, std::make_shared<const Registry>()};
  SubscriptionId next_id = 1;
  std::atomic<std::int64_t> next_sequence{1};
  std::function<std::int64_t(Message)> cluster_publisher;
  std::function<bool()> reaches_others;  // null with a cluster publisher: assume it does
  // Per-topic counters (see "Statistics" in the header), guarded by by_name_mu.
  struct Tracked {
    std::shared_ptr<Counters> counters;
    std::int64_t activity_at_sweep = -1;  // Activity() at the last sweep; -1: none since added
    std::int64_t subscriptions = 0;       // plain subscriptions here: kept while > 0
  };
  mutable std::mutex by_name_mu;
  std::unordered_map<std::string, Tracked, base::StringHash, std::equal_to<>> by_name;
  const std::size_t stats_limit;
  std::size_t untracked_since_sweep = 0;
  // Bumped whenever names are dropped: shards then empty their caches.
  std::atomic<std::uint64_t> generation{0};
  // Per shard, the counters of names that shard has used, so a publish on a shard thread finds
  // its topic's counters without the mutex. Only names with counters are cached.
  struct alignas(64) ShardCounterCache {
    std::uint64_t generation = 0;
    std::unordered_map<std::string, std::shared_ptr<Counters>, base::StringHash, std::equal_to<>>
        by_name;
  };
  std::vector<ShardCounterCache> caches;  // caches[s] is touched only on shard s

  Impl(runtime::ShardSet& s, std::size_t limit) : shards(s), stats_limit(limit), caches(s.size()) {}

  // The counters of `topic`, or null if it has none and none can be made now. REQUIRES:
  // by_name_mu held.
  Tracked* FindOrAddLocked(std::string_view topic) {
    if (auto it = by_name.find(topic); it != by_name.end()) return &it->second;
    if (by_name.size() >= stats_limit) {
      if (++untracked_since_sweep < std::max<std::size_t>(stats_limit, 1)) return nullptr;
      untracked_since_sweep = 0;
      SweepLocked();
      if (by_name.size() >= stats_limit) return nullptr;
    }
    Tracked& added = by_name[std::string(topic)];
    added.counters = std::make_shared<Counters>(shards.size());
    return &added;
  }

  // Drops the names without a subscription that saw no activity since the last sweep.
  void SweepLocked() {
    bool dropped = false;
    for (auto it = by_name.begin(); it != by_name.end();) {
      Tracked& t = it->second;
      const std::int64_t activity = t.counters->Activity();
      if (t.subscriptions == 0 && activity == t.activity_at_sweep) {
        it = by_name.erase(it);
        dropped = true;
      } else {
        t.activity_at_sweep = activity;
        ++it;
      }
    }
    if (dropped) generation.fetch_add(1, std::memory_order_acq_rel);
  }

  std::shared_ptr<Counters> CountersOf(std::string_view topic) {
    std::lock_guard lock(by_name_mu);
    Tracked* tracked = FindOrAddLocked(topic);
    return tracked ? tracked->counters : nullptr;
  }

  // Counts a publish of `topic`: on a shard thread without the mutex once that shard has seen
  // the topic.
  void CountPublished(std::string_view topic) {
    const auto shard = shards.CurrentShard();
    counters->AddPublished(shard);
    if (!shard) {
      if (auto c = CountersOf(topic)) c->AddPublished(shard);
      return;
    }
    if (Counters* c = CachedCounters(caches[*shard], topic)) c->AddPublished(shard);
  }

  // `topic`'s counters through a shard's cache (null: none). REQUIRES: on that shard.
  Counters* CachedCounters(ShardCounterCache& cache, std::string_view topic) {
    const auto current = generation.load(std::memory_order_acquire);
    if (cache.generation != current) {
      cache.by_name.clear();
      cache.generation = current;
    }
    if (auto it = cache.by_name.find(topic); it != cache.by_name.end()) return it->second.get();
    auto counters = CountersOf(topic);
    if (!counters) return nullptr;
    return cache.by_name.emplace(std::string(topic), std::move(counters)).first->second.get();
  }

  // Whether a message on `topic` could reach a listener: one here subscribed to it (or a
  // pattern subscription, which may match), or another member through the cluster publisher.
  bool MayBeHeard(std::string_view topic) const {
    const bool here = snapshot.Read(
        [&](const Registry& r) { return !r.patterns.empty() || r.by_topic.contains(topic); });
    return here || (cluster_publisher && (!reaches_others || reaches_others()));
  }

  // Plain subscriptions keep their topic's counters.
  void Pin(const std::string& topic, std::int64_t delta) {
    std::lock_guard lock(by_name_mu);
    auto it = by_name.find(topic);
    if (it == by_name.end()) {
      if (delta < 0) return;
      it = by_name.emplace(topic, Tracked{std::make_shared<Counters>(shards.size())}).first;
    }
    it->second.subscriptions += delta;
  }

  // Queues one delivery; false if the listener's queue is full.
  bool Enqueue(const SubscriptionPtr& sub, const std::shared_ptr<const Message>& message,
               const CounterPair& pair) {
    if (sub->pending.fetch_add(1, std::memory_order_acq_rel) >= sub->options.max_pending) {
      sub->pending.fetch_sub(1, std::memory_order_acq_rel);
      pair.all->dropped.fetch_add(1, std::memory_order_relaxed);
      if (pair.topic) pair.topic->dropped.fetch_add(1, std::memory_order_relaxed);
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
      Pin(sub->name, 1);
    }
    PublishSnapshotLocked();
    return sub->id;
  }

  // After a change of the registry. REQUIRES: mutex held exclusively.
  void PublishSnapshotLocked() {
    auto registry = std::make_shared<Registry>();
    for (const auto& [name, subs] : by_topic) {
      registry->by_topic.emplace(
          name, std::vector<std::weak_ptr<Subscription>>(subs.begin(), subs.end()));
    }
    registry->patterns.assign(patterns.begin(), patterns.end());
    snapshot.Set(std::move(registry));
  }
};

TopicService::TopicService(runtime::ShardSet& shards, std::shared_ptr<spdlog::logger> log,
                           std::size_t stats_limit)
    : impl_(std::make_unique<Impl>(shards, stats_limit)) {
  impl_->counters->log = std::move(log);
}

TopicService::~TopicService() = default;

std::int64_t TopicService::Publish(std::string_view topic, std::string_view payload,
                                   std::string_view publisher_id) {
  impl_->CountPublished(topic);
  // Nobody to hear it: counted, and neither copied nor stamped (a sequence is taken only by a
  // message that reaches a listener, in PublishLocal, so none is skipped).
  if (!impl_->MayBeHeard(topic)) return 0;
  return Send(Message{std::string(topic), std::string(payload), std::string(publisher_id)});
}

std::int64_t TopicService::Publish(Message message) {
  impl_->CountPublished(message.topic);
  if (!impl_->MayBeHeard(message.topic)) return 0;
  return Send(std::move(message));
}

std::int64_t TopicService::Send(Message message) {
  if (message.publish_time_ms == 0) message.publish_time_ms = WallMs();
  if (impl_->cluster_publisher) return impl_->cluster_publisher(std::move(message));
  return PublishLocal(std::move(message));
}

void TopicService::SetClusterPublisher(std::function<std::int64_t(Message)> publisher,
                                       std::function<bool()> reaches_others) {
  impl_->cluster_publisher = std::move(publisher);
  impl_->reaches_others = std::move(reaches_others);
}

std::int64_t TopicService::PublishLocal(Message in) {
  return impl_->snapshot.Read([&](const Registry& registry) {
    std::shared_ptr<const Message> message;
    std::int64_t receivers = 0;
    CounterPair pair;  // looked up with the first receiver: a message nobody hears needs none
    auto make_message = [&] {
      if (message) return;
      pair = {impl_->counters, impl_->CountersOf(in.topic)};
      in.sequence = impl_->next_sequence.fetch_add(1, std::memory_order_relaxed);
      message = std::make_shared<const Message>(std::move(in));
    };
    const std::string& topic = in.topic;
    if (auto it = registry.by_topic.find(topic); it != registry.by_topic.end()) {
      for (const auto& weak : it->second) {
        SubscriptionPtr sub = weak.lock();
        if (!sub) continue;  // unsubscribed since this copy was made
        make_message();
        receivers += impl_->Enqueue(sub, message, pair) ? 1 : 0;
      }
    }
    for (const auto& weak : registry.patterns) {
      SubscriptionPtr sub = weak.lock();
      if (!sub) continue;
      if (!GlobMatch(sub->name, message ? std::string_view(message->topic) : topic)) continue;
      make_message();
      receivers += impl_->Enqueue(sub, message, pair) ? 1 : 0;
    }
    return receivers;
  });
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
    impl_->Pin(sub->name, -1);
  }
  impl_->PublishSnapshotLocked();
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
  stats.published = c.Published();
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
  if (auto c = impl_->CountersOf(std::string(topic))) {
    c->dropped.fetch_add(1, std::memory_order_relaxed);
  }
}

void TopicService::CountListenerError(std::string_view topic) {
  impl_->counters->listener_errors.fetch_add(1, std::memory_order_relaxed);
  if (auto c = impl_->CountersOf(std::string(topic))) {
    c->listener_errors.fetch_add(1, std::memory_order_relaxed);
  }
}

std::vector<std::pair<std::string, TopicStats>> TopicService::StatsByTopic() const {
  std::map<std::string, TopicStats> out;
  {
    std::lock_guard lock(impl_->by_name_mu);
    for (const auto& [name, tracked] : impl_->by_name) {
      const Counters* c = tracked.counters.get();
      TopicStats& s = out[name];
      s.published = c->Published();
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
