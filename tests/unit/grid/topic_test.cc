// Topics through the Instance API: embedded members of one cluster and clients (real sockets on
// loopback) publish and listen; every listener hears every message, in order per publisher.
// Slow and throwing listeners are isolated.
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "cluster_test_util.h"
#include "tessera/grid/client.h"
#include "tessera/grid/member.h"

using namespace tessera;
using grid::Client;
using grid::ClientOptions;
using grid::Member;
using grid::MemberOptions;
using grid::TopicMessage;
using Clock = std::chrono::steady_clock;
using namespace tessera::grid::testing;  // NOLINT

namespace {

MemberOptions OrderedLedger(std::vector<std::string> join = {}) {
  MemberOptions o = ClusterMember(std::move(join));
  o.topics["ledger"].global_ordering = true;
  return o;
}

// What one listener heard: payloads in arrival order.
struct Heard {
  std::mutex mu;
  std::vector<TopicMessage> messages;
  void Add(const TopicMessage& m) {
    std::lock_guard lock(mu);
    messages.push_back(m);
  }
  std::size_t size() {
    std::lock_guard lock(mu);
    return messages.size();
  }
};

}  // namespace

TEST_CASE("Every topic listener on every member and client hears every message in order",
          "[grid][topic][cluster]") {
  Member a(OrderedLedger());
  REQUIRE(a.Start());
  Member b(OrderedLedger({AddressOf(a)}));
  REQUIRE(b.Start());
  Member c(OrderedLedger({AddressOf(a)}));
  REQUIRE(c.Start());
  REQUIRE(WaitUntil([&] { return AllList({&a, &b, &c}, 3); }));
  ClientOptions to_a, to_c;
  to_a.addresses = {AddressOf(a)};
  to_c.addresses = {AddressOf(c)};
  auto client_a = Client::Connect(to_a);
  auto client_c = Client::Connect(to_c);
  REQUIRE(client_a);
  REQUIRE(client_c);

  std::vector<grid::Instance*> instances = {&a, &b, &c, client_a->get(), client_c->get()};
  std::vector<std::unique_ptr<Heard>> heard;
  for (auto* instance : instances) {
    heard.push_back(std::make_unique<Heard>());
    auto* h = heard.back().get();
    REQUIRE(instance->GetTopic("orders")->AddMessageListener(
        [h](const TopicMessage& m) { h->Add(m); }));
  }
  // Four publishers (two members, two clients) publish concurrently.
  constexpr int kEach = 200;
  std::vector<grid::Instance*> publishers = {&a, &b, client_a->get(), client_c->get()};
  std::vector<std::thread> threads;
  for (std::size_t p = 0; p < publishers.size(); ++p) {
    threads.emplace_back([&, p] {
      auto topic = publishers[p]->GetTopic("orders");
      for (int n = 0; n < kEach; n += 10) {
        std::vector<std::string> batch;
        for (int k = n; k < n + 10; ++k)
          batch.push_back(std::to_string(p) + ":" + std::to_string(k));
        REQUIRE(topic->PublishAll(std::move(batch)));
      }
    });
  }
  for (auto& t : threads) t.join();
  const std::size_t total = kEach * publishers.size();
  for (std::size_t l = 0; l < heard.size(); ++l) {
    INFO("listener " << l);
    REQUIRE(WaitUntil([&] { return heard[l]->size() >= total; }, std::chrono::seconds(10)));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::lock_guard lock(heard[l]->mu);
    CHECK(heard[l]->messages.size() == total);  // and no duplicates
    // Per publisher (its id), payload numbers arrive in publish order.
    std::map<std::string, int> next;
    std::map<std::string, std::string> payload_prefix;
    int out_of_order = 0;
    for (const auto& m : heard[l]->messages) {
      auto colon = m.payload.find(':');
      const int n = std::stoi(m.payload.substr(colon + 1));
      out_of_order += n != next[m.publisher_id]++;
      CHECK(m.topic == "orders");
      CHECK(m.publish_time_ms > 0);
      // One publisher id per publishing instance.
      auto [it, fresh] = payload_prefix.try_emplace(m.publisher_id, m.payload.substr(0, colon));
      if (!fresh) CHECK(it->second == m.payload.substr(0, colon));
    }
    CHECK(out_of_order == 0);
    CHECK(next.size() == publishers.size());
  }
}

TEST_CASE("A slow topic listener drops only its own messages, a throwing one keeps receiving",
          "[grid][topic]") {
  MemberOptions options;
  options.listen = false;
  options.threads = 2;
  std::ostringstream log_text;
  auto log = std::make_shared<spdlog::logger>(
      "topic-test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log_text));
  Member member(options, log);
  REQUIRE(member.Start());
  auto topic = member.GetTopic("events");

  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> slow_heard{0}, fast_heard{0}, throwing_heard{0};
  auto slow = topic->AddMessageListener([&](const TopicMessage&) {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return release; });
    slow_heard.fetch_add(1);
  });
  REQUIRE(slow);
  REQUIRE(topic->AddMessageListener([&](const TopicMessage&) { fast_heard.fetch_add(1); }));
  auto throwing = topic->AddMessageListener([&](const TopicMessage& m) {
    throwing_heard.fetch_add(1);
    if (std::stoi(m.payload) % 2 == 0) throw std::runtime_error("even payloads upset me");
  });
  REQUIRE(throwing);

  // The slow listener holds its first message; its queue then fills and the rest is dropped,
  // while the publisher and the other listeners carry on. Published in rounds the fast
  // listener keeps up with, so only the slow listener's own queue bounds what it gets.
  constexpr int kTotal = static_cast<int>(grid::kListenerQueueCapacity) + 500;
  for (int n = 0; n < kTotal;) {
    for (int end = std::min(kTotal, n + 1000); n < end; ++n)
      REQUIRE(topic->Publish(std::to_string(n)));
    REQUIRE(WaitUntil([&] { return fast_heard.load() == n; }, std::chrono::seconds(10)));
  }
  CHECK(fast_heard.load() == kTotal);
  REQUIRE(WaitUntil([&] { return throwing_heard.load() == kTotal; }, std::chrono::seconds(10)));
  CHECK(WaitUntil([&] { return topic->ListenerErrors(*throwing) == kTotal / 2; }));
  CHECK(topic->DroppedMessages(*slow) ==
        kTotal - 1 - static_cast<int>(grid::kListenerQueueCapacity));
  CHECK(log_text.str().find("a listener of topic 'events' is 10000 messages behind") !=
        std::string::npos);
  CHECK(log_text.str().find("threw: even payloads upset me; it keeps receiving") !=
        std::string::npos);
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  REQUIRE(WaitUntil(
      [&] { return slow_heard.load() == 1 + static_cast<int>(grid::kListenerQueueCapacity); }));
  CHECK(topic->RemoveMessageListener(*slow).value());
  CHECK_FALSE(topic->RemoveMessageListener(*slow).value());
  CHECK(member.GetTopic("")->Publish("x").error().code() == base::ErrorCode::kBadRequest);
}

TEST_CASE("With global ordering every listener sees one sequence of a topic's messages",
          "[grid][topic][cluster]") {
  Member a(OrderedLedger());
  REQUIRE(a.Start());
  Member b(OrderedLedger({AddressOf(a)}));
  REQUIRE(b.Start());
  Member c(OrderedLedger({AddressOf(a)}));
  REQUIRE(c.Start());
  REQUIRE(WaitUntil([&] { return AllList({&a, &b, &c}, 3); }));
  ClientOptions to_b;
  to_b.addresses = {AddressOf(b)};
  auto client = Client::Connect(to_b);
  REQUIRE(client);
  std::vector<grid::Instance*> instances = {&a, &b, &c, client->get()};
  std::vector<std::unique_ptr<Heard>> heard;
  for (auto* instance : instances) {
    heard.push_back(std::make_unique<Heard>());
    auto* h = heard.back().get();
    REQUIRE(instance->GetTopic("ledger")->AddMessageListener(
        [h](const TopicMessage& m) { h->Add(m); }));
  }
  // Publishers on every member and the client race; without one ordering member, listeners on
  // different members would see their messages interleaved differently.
  constexpr int kEach = 300;
  std::vector<std::thread> threads;
  for (std::size_t p = 0; p < instances.size(); ++p) {
    threads.emplace_back([&, p] {
      auto topic = instances[p]->GetTopic("ledger");
      for (int n = 0; n < kEach; ++n) {
        REQUIRE(topic->Publish(std::to_string(p) + ":" + std::to_string(n)));
      }
    });
  }
  for (auto& t : threads) t.join();
  const std::size_t total = kEach * instances.size();
  std::vector<std::string> first;
  for (std::size_t l = 0; l < heard.size(); ++l) {
    INFO("listener " << l);
    REQUIRE(WaitUntil([&] { return heard[l]->size() >= total; }, std::chrono::seconds(10)));
    std::lock_guard lock(heard[l]->mu);
    std::vector<std::string> sequence;
    for (const auto& m : heard[l]->messages) sequence.push_back(m.payload);
    CHECK(sequence.size() == total);
    if (l == 0) {
      first = sequence;
    } else {
      std::size_t i = 0;
      while (i < sequence.size() && i < first.size() && sequence[i] == first[i]) ++i;
      INFO("first difference at " << i << ": " << (i < first.size() ? first[i] : "") << " vs "
                                  << (i < sequence.size() ? sequence[i] : ""));
      CHECK(i == total);
    }
  }
}
