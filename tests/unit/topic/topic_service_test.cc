#include "tessera/topic/topic_service.h"

#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>

using tessera::runtime::ShardSet;
using tessera::topic::ListenerOptions;
using tessera::topic::Message;
using tessera::topic::TopicService;

namespace {

std::shared_ptr<spdlog::logger> NullLogger() {
  return std::make_shared<spdlog::logger>("topic-test",
                                          std::make_shared<spdlog::sinks::null_sink_mt>());
}

// Collects delivered messages; thread-safe.
struct Inbox {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::string> payloads;
  std::vector<std::string> patterns;
  std::vector<std::optional<std::size_t>> shards_seen;

  auto Listener(ShardSet& shards) {
    return [this, &shards](const Message& m, std::string_view pattern) {
      std::lock_guard lock(mutex);
      payloads.push_back(m.payload);
      patterns.emplace_back(pattern);
      shards_seen.push_back(shards.CurrentShard());
      changed.notify_all();
    };
  }
  bool WaitFor(std::size_t n) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, std::chrono::seconds(5), [&] { return payloads.size() >= n; });
  }
};

// Waits until every handler already posted to every shard has run.
void Drain(ShardSet& shards) {
  for (std::size_t s = 0; s < shards.size(); ++s) {
    std::promise<void> done;
    shards.InvokeOn(s, [&done] { done.set_value(); });
    done.get_future().wait();
  }
}

}  // namespace

TEST_CASE("Publish reaches plain subscribers on their shard, in order", "[topic]") {
  ShardSet shards(2);
  shards.Start();
  TopicService topics(shards, NullLogger());
  Inbox inbox;
  topics.Subscribe("news", ListenerOptions{.shard = 1}, inbox.Listener(shards));
  CHECK(topics.Publish("other", "x", "p") == 0);
  for (int i = 0; i < 50; ++i) CHECK(topics.Publish("news", std::to_string(i), "p") == 1);
  REQUIRE(inbox.WaitFor(50));
  for (int i = 0; i < 50; ++i) CHECK(inbox.payloads[i] == std::to_string(i));
  for (const auto& s : inbox.shards_seen) CHECK(s == std::optional<std::size_t>(1));
  CHECK(topics.SubscriberCount("news") == 1);
  shards.Stop();
}

TEST_CASE("Pattern subscribers get the matching pattern", "[topic]") {
  ShardSet shards(2);
  shards.Start();
  TopicService topics(shards, NullLogger());
  Inbox inbox;
  topics.PatternSubscribe("news.*", ListenerOptions{.shard = 0}, inbox.Listener(shards));
  topics.Subscribe("news.sport", ListenerOptions{.shard = 0}, inbox.Listener(shards));
  CHECK(topics.Publish("news.sport", "goal", "p") == 2);  // both subscriptions
  CHECK(topics.Publish("weather", "rain", "p") == 0);
  REQUIRE(inbox.WaitFor(2));
  Drain(shards);
  CHECK(inbox.payloads.size() == 2);
  CHECK(std::count(inbox.patterns.begin(), inbox.patterns.end(), "news.*") == 1);
  CHECK(std::count(inbox.patterns.begin(), inbox.patterns.end(), "") == 1);
  auto stats = topics.Stats();
  CHECK(stats.published == 2);
  CHECK(stats.subscriptions == 1);
  CHECK(stats.pattern_subscriptions == 1);
  shards.Stop();
}

TEST_CASE("Unsubscribe stops delivery, including queued messages", "[topic]") {
  ShardSet shards(1);
  shards.Start();
  TopicService topics(shards, NullLogger());
  Inbox inbox;
  auto id = topics.Subscribe("t", ListenerOptions{.shard = 0}, inbox.Listener(shards));
  // Block the shard so messages queue up, then unsubscribe before they run.
  std::promise<void> release;
  auto released = release.get_future().share();
  shards.InvokeOn(0, [released] { released.wait(); });
  CHECK(topics.Publish("t", "queued", "p") == 1);
  CHECK(topics.Unsubscribe(id));
  CHECK_FALSE(topics.Unsubscribe(id));
  release.set_value();
  Drain(shards);
  CHECK(inbox.payloads.empty());
  CHECK(topics.Publish("t", "after", "p") == 0);
  CHECK(topics.SubscriberCount("t") == 0);
  CHECK(topics.ActiveTopics().empty());
  shards.Stop();
}

TEST_CASE("A full listener queue drops and counts overflow", "[topic]") {
  ShardSet shards(1);
  shards.Start();
  TopicService topics(shards, NullLogger());
  Inbox inbox;
  topics.Subscribe("t", ListenerOptions{.shard = 0, .max_pending = 3}, inbox.Listener(shards));
  std::promise<void> release;
  auto released = release.get_future().share();
  shards.InvokeOn(0, [released] { released.wait(); });
  std::int64_t accepted = 0;
  for (int i = 0; i < 10; ++i) accepted += topics.Publish("t", std::to_string(i), "p");
  CHECK(accepted == 3);
  release.set_value();
  Drain(shards);
  CHECK(inbox.payloads == std::vector<std::string>{"0", "1", "2"});
  CHECK(topics.Stats().dropped == 7);
  // Once drained, the listener accepts messages again.
  CHECK(topics.Publish("t", "later", "p") == 1);
  REQUIRE(inbox.WaitFor(4));
  shards.Stop();
}

TEST_CASE("A throwing listener is counted and keeps receiving", "[topic]") {
  ShardSet shards(1);
  shards.Start();
  TopicService topics(shards, NullLogger());
  std::atomic<int> calls{0};
  topics.Subscribe("t", ListenerOptions{.shard = 0}, [&calls](const Message& m, std::string_view) {
    ++calls;
    if (m.payload == "bad") throw std::runtime_error("boom");
  });
  topics.Publish("t", "bad", "p");
  topics.Publish("t", "good", "p");
  Drain(shards);
  CHECK(calls == 2);
  auto stats = topics.Stats();
  CHECK(stats.listener_errors == 1);
  CHECK(stats.delivered == 1);
  shards.Stop();
}

TEST_CASE("Concurrent publish and subscribe are safe", "[topic]") {
  ShardSet shards(2);
  shards.Start();
  TopicService topics(shards, NullLogger());
  std::atomic<int> received{0};
  auto listener = [&received](const Message&, std::string_view) { ++received; };
  std::thread publisher([&] {
    for (int i = 0; i < 2000; ++i) topics.Publish("c", "m", "p");
  });
  std::vector<tessera::topic::SubscriptionId> ids;
  for (int i = 0; i < 200; ++i) {
    ids.push_back(topics.Subscribe("c", ListenerOptions{.shard = std::size_t(i % 2)}, listener));
    if (i % 3 == 0) topics.Unsubscribe(ids[ids.size() / 2]);
  }
  publisher.join();
  Drain(shards);
  const auto stats = topics.Stats();
  CHECK(stats.delivered == received.load());
  CHECK(stats.published == 2000);
  shards.Stop();
}

TEST_CASE("Message carries topic, publisher and increasing sequence", "[topic]") {
  ShardSet shards(1);
  shards.Start();
  TopicService topics(shards, NullLogger());
  std::mutex mutex;
  std::vector<Message> seen;
  topics.Subscribe("t", ListenerOptions{.shard = 0}, [&](const Message& m, std::string_view) {
    std::lock_guard lock(mutex);
    seen.push_back(m);
  });
  topics.Publish("t", "a", "pub-1");
  topics.Publish("t", "b", "pub-2");
  Drain(shards);
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].topic == "t");
  CHECK(seen[0].publisher_id == "pub-1");
  CHECK(seen[1].publisher_id == "pub-2");
  CHECK(seen[0].sequence < seen[1].sequence);
  shards.Stop();
}

namespace {

// Per-topic published counts, as StatsByTopic reports them.
std::vector<std::pair<std::string, std::int64_t>> PublishedByTopic(const TopicService& topics) {
  std::vector<std::pair<std::string, std::int64_t>> out;
  for (const auto& [name, stats] : topics.StatsByTopic()) out.emplace_back(name, stats.published);
  return out;
}

using Published = std::vector<std::pair<std::string, std::int64_t>>;

}  // namespace

TEST_CASE("Per-topic statistics stay bounded while publishing to ever new names", "[topic]") {
  ShardSet shards(1);
  shards.Start();
  TopicService topics(shards, NullLogger(), /*stats_limit=*/10);
  Inbox inbox;
  topics.Subscribe("kept", ListenerOptions{.shard = 0}, inbox.Listener(shards));
  for (int i = 0; i < 3000; ++i) topics.Publish("user:" + std::to_string(i), "m", "p");
  std::promise<void> done;  // the same from a shard thread (its own cache of counters)
  shards.InvokeOn(0, [&] {
    for (int i = 3000; i < 6000; ++i) topics.Publish("user:" + std::to_string(i), "m", "p");
    done.set_value();
  });
  done.get_future().wait();
  for (int i = 0; i < 5; ++i) topics.Publish("kept", "m", "p");
  REQUIRE(inbox.WaitFor(5));
  Drain(shards);  // a delivery is counted after its listener returns
  const auto by_topic = topics.StatsByTopic();
  CHECK(by_topic.size() <= 11);  // the limit, plus the subscribed topic
  auto kept = std::find_if(by_topic.begin(), by_topic.end(),
                           [](const auto& entry) { return entry.first == "kept"; });
  REQUIRE(kept != by_topic.end());
  CHECK(kept->second.published == 5);
  CHECK(kept->second.delivered == 5);
  CHECK(kept->second.subscriptions == 1);
  CHECK(topics.Stats().published == 6005);  // the totals count every topic
  CHECK(topics.Stats().delivered == 5);
  shards.Stop();
}

TEST_CASE("Idle topic names give their statistics' place to new ones at the next sweep",
          "[topic]") {
  ShardSet shards(1);
  shards.Start();
  TopicService topics(shards, NullLogger(), /*stats_limit=*/3);
  for (const char* name : {"a", "b", "c"}) topics.Publish(name, "m", "p");
  // Full: "x" is counted in the totals only; its third publish sweeps, but every name has
  // been active since the (first) sweep.
  for (int i = 0; i < 3; ++i) topics.Publish("x", "m", "p");
  CHECK(PublishedByTopic(topics) == Published{{"a", 1}, {"b", 1}, {"c", 1}});
  topics.Publish("b", "m", "p");
  // The next sweep drops "a" and "c", idle since the last one, and "x" takes a place.
  for (int i = 0; i < 3; ++i) topics.Publish("x", "m", "p");
  CHECK(PublishedByTopic(topics) == Published{{"b", 2}, {"x", 1}});
  CHECK(topics.Stats().published == 10);
  shards.Stop();
}

TEST_CASE("A topic whose statistics were dropped counts afresh on a shard that cached them",
          "[topic]") {
  ShardSet shards(1);
  shards.Start();
  TopicService topics(shards, NullLogger(), /*stats_limit=*/2);
  auto publish_on_shard = [&](const std::string& name) {
    std::promise<void> done;
    shards.InvokeOn(0, [&] {
      topics.Publish(name, "m", "p");
      done.set_value();
    });
    done.get_future().wait();
  };
  publish_on_shard("a");  // the shard caches "a"'s counters
  topics.Publish("b", "m", "p");
  for (int i = 0; i < 4; ++i) topics.Publish("y", "m", "p");  // two sweeps: a and b dropped
  CHECK(PublishedByTopic(topics) == Published{{"y", 1}});
  publish_on_shard("a");  // not into the dropped counters: "a" is back, from 0
  CHECK(PublishedByTopic(topics) == Published{{"a", 1}, {"y", 1}});
  shards.Stop();
}

TEST_CASE("Unsubscribe releases the listener at once, though a shard still caches the registry",
          "[topic]") {
  ShardSet shards(2);
  shards.Start();
  TopicService topics(shards, NullLogger());
  auto token = std::make_shared<int>(1);  // what a listener holds (an embedded queue, say)
  std::weak_ptr<int> watch = token;
  auto id = topics.Subscribe("held", ListenerOptions{.shard = 1},
                             [token](const Message&, std::string_view) {});
  token.reset();
  // Publish on both shards, so each caches the registry that lists the subscription.
  for (std::size_t s = 0; s < 2; ++s) {
    std::promise<std::int64_t> receivers;
    shards.InvokeOn(s, [&] { receivers.set_value(topics.Publish("held", "x", "p")); });
    CHECK(receivers.get_future().get() == 1);
  }
  Drain(shards);
  CHECK_FALSE(watch.expired());
  CHECK(topics.Unsubscribe(id));
  Drain(shards);           // deliveries already posted have run
  CHECK(watch.expired());  // no shard published since: their cached copies must not hold it
  std::promise<std::int64_t> after;
  shards.InvokeOn(0, [&] { after.set_value(topics.Publish("held", "y", "p")); });
  CHECK(after.get_future().get() == 0);
  shards.Stop();
}

TEST_CASE("A publish nobody can hear is counted but skips no sequence and no cluster publisher",
          "[topic]") {
  ShardSet shards(2);
  shards.Start();
  TopicService topics(shards, NullLogger());
  std::atomic<bool> others{false};
  std::vector<Message> sent;  // what reached the cluster publisher (called on this thread)
  topics.SetClusterPublisher(
      [&](Message m) {
        sent.push_back(m);
        return topics.PublishLocal(std::move(m));
      },
      [&] { return others.load(); });
  // On a shard and off one alike: nobody here, no other member: 0, counted, not handed on.
  CHECK(topics.Publish("t", "unheard-1", "p") == 0);
  std::promise<std::int64_t> on_shard;
  shards.InvokeOn(1, [&] { on_shard.set_value(topics.Publish("t", "unheard-2", "p")); });
  CHECK(on_shard.get_future().get() == 0);
  CHECK(topics.Publish(Message{"t", "unheard-3", "p"}) == 0);  // a message built elsewhere too
  CHECK(sent.empty());
  CHECK(topics.Stats().published == 3);
  auto by_topic = topics.StatsByTopic();
  REQUIRE(by_topic.size() == 1);
  CHECK(by_topic[0].first == "t");
  CHECK(by_topic[0].second.published == 3);

  // A subscriber: heard, stamped, and its sequence is the first (the unheard took none).
  Inbox inbox;
  std::vector<Message> got;
  topics.Subscribe("t", ListenerOptions{.shard = 0}, [&](const Message& m, std::string_view) {
    std::lock_guard lock(inbox.mutex);
    got.push_back(m);
    inbox.payloads.push_back(m.payload);
    inbox.changed.notify_all();
  });
  CHECK(topics.Publish("t", "heard", "pub-9") == 1);
  REQUIRE(inbox.WaitFor(1));
  CHECK(got[0].payload == "heard");
  CHECK(got[0].publisher_id == "pub-9");
  CHECK(got[0].sequence == 1);
  CHECK(got[0].publish_time_ms > 0);
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].payload == "heard");

  // A pattern subscription may match any name: a publish to another topic goes through.
  topics.PatternSubscribe("u*", ListenerOptions{.shard = 1}, inbox.Listener(shards));
  CHECK(topics.Publish("u1", "by-pattern", "p") == 1);
  CHECK(topics.Publish("v1", "no-match", "p") == 0);
  REQUIRE(inbox.WaitFor(2));
  CHECK(sent.size() == 3);  // both went to the cluster publisher: a pattern is listening

  // Other members: every message goes to the cluster publisher, heard here or not.
  TopicService lonely(shards, NullLogger());
  std::vector<std::string> handed;
  lonely.SetClusterPublisher([&](Message m) {
    handed.push_back(m.payload);
    return std::int64_t{7};  // what the cluster publisher says is what Publish returns
  });                        // no reaches_others: assumed to reach others
  CHECK(lonely.Publish("x", "m1", "p") == 7);
  others = true;
  CHECK(topics.Publish("w", "to-others", "p") == 0);
  CHECK(handed == std::vector<std::string>{"m1"});
  REQUIRE(sent.size() == 4);
  CHECK(sent[3].payload == "to-others");
  CHECK(sent[3].topic == "w");
  Drain(shards);
}
