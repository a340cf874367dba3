// Reliable topics through the Instance API on a listening member and a client (real sockets):
// sequences, listeners starting from the oldest, the next or a stored sequence, loss reports
// and overload policies.
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "cluster_test_util.h"
#include "tessera/grid/client.h"
#include "tessera/grid/member.h"

using namespace tessera;
using grid::Client;
using grid::ClientOptions;
using grid::Member;
using grid::MemberOptions;
using grid::ReliableListenerOptions;
using grid::ReliableMessage;
using grid::ReliableTopicConfig;
using Clock = std::chrono::steady_clock;
using namespace tessera::grid::testing;  // NOLINT

namespace {

MemberOptions Listening() {
  MemberOptions o;
  o.port = 0;
  o.threads = 2;
  return o;
}

struct Seen {
  std::mutex mu;
  std::vector<std::int64_t> sequences;
  std::vector<std::string> payloads;
  void Add(const ReliableMessage& m) {
    std::lock_guard lock(mu);
    sequences.push_back(m.sequence);
    payloads.push_back(m.message.payload);
  }
  std::size_t size() {
    std::lock_guard lock(mu);
    return sequences.size();
  }
};

std::vector<std::int64_t> Range(std::int64_t from, std::int64_t to) {
  std::vector<std::int64_t> out;
  for (auto s = from; s <= to; ++s) out.push_back(s);
  return out;
}

}  // namespace

TEST_CASE("Reliable topic listeners start from the oldest, the next or a stored sequence",
          "[grid][reliable]") {
  Member member(Listening());
  REQUIRE(member.Start());
  ClientOptions options;
  options.addresses = {"127.0.0.1:" + std::to_string(member.native_port())};
  auto client = Client::Connect(options);
  REQUIRE(client);
  auto via_client = (*client)->GetReliableTopic("orders");
  auto via_member = member.GetReliableTopic("orders");
  for (int i = 1; i <= 100; ++i) {
    auto seq = via_client->Publish("m" + std::to_string(i));
    REQUIRE(seq);
    CHECK(*seq == i);
  }
  Seen oldest, next, stored;
  ReliableListenerOptions from_oldest;
  from_oldest.from = ReliableListenerOptions::From::kOldest;
  REQUIRE(via_client->AddMessageListener([&](const ReliableMessage& m) { oldest.Add(m); },
                                         from_oldest));
  REQUIRE(via_member->AddMessageListener([&](const ReliableMessage& m) { next.Add(m); }));
  ReliableListenerOptions from_120;
  from_120.from = ReliableListenerOptions::From::kSequence;
  from_120.sequence = 120;
  REQUIRE(
      via_member->AddMessageListener([&](const ReliableMessage& m) { stored.Add(m); }, from_120));
  std::vector<std::string> batch;
  for (int i = 101; i <= 150; ++i) batch.push_back("m" + std::to_string(i));
  CHECK(via_member->PublishAll(batch).value() == 101);
  REQUIRE(
      WaitUntil([&] { return oldest.size() >= 150 && next.size() >= 50 && stored.size() >= 31; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // nothing more arrives
  CHECK(oldest.sequences == Range(1, 150));
  CHECK(oldest.payloads.front() == "m1");
  CHECK(oldest.payloads.back() == "m150");
  CHECK(next.sequences == Range(101, 150));
  CHECK(stored.sequences == Range(120, 150));
  CHECK(via_client->Range().value() == std::make_pair<std::int64_t, std::int64_t>(1, 150));
  CHECK(member.MetricsText().find("tessera_reliable_topic_published_total{topic=\"orders\"} 150") !=
        std::string::npos);
  ReliableListenerOptions bad;
  bad.from = ReliableListenerOptions::From::kSequence;
  bad.sequence = 0;
  CHECK(via_member->AddMessageListener([](const ReliableMessage&) {}, bad).error().code() ==
        base::ErrorCode::kBadRequest);
}

TEST_CASE("A reliable listener that falls behind the ring is told how many it lost",
          "[grid][reliable]") {
  MemberOptions o;
  o.listen = false;
  o.threads = 2;
  Member member(o);
  REQUIRE(member.Start());
  ReliableTopicConfig config;
  config.capacity = 50;
  config.overload = ReliableTopicConfig::Overload::kDiscardOldest;
  auto topic = member.GetReliableTopic("events", config);
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<std::int64_t> lost{0}, delivered{0};
  ReliableListenerOptions tolerant;
  tolerant.on_loss = [&](std::int64_t n) { lost += n; };
  auto slow = topic->AddMessageListener(
      [&](const ReliableMessage&) {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return release; });
        ++delivered;
      },
      tolerant);
  REQUIRE(slow);
  std::atomic<bool> intolerant_lost{false};
  ReliableListenerOptions strict;
  strict.loss_tolerant = false;
  strict.on_loss = [&](std::int64_t) { intolerant_lost = true; };
  std::atomic<bool> strict_blocked{true};
  auto stopped = topic->AddMessageListener(
      [&](const ReliableMessage&) {
        while (strict_blocked.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      },
      strict);
  REQUIRE(stopped);
  REQUIRE(topic->Publish("first").value() == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // both hold message 1
  for (int i = 2; i <= 200; ++i) REQUIRE(topic->Publish(std::to_string(i)));
  CHECK(topic->Range().value() == std::make_pair<std::int64_t, std::int64_t>(151, 200));
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  strict_blocked = false;
  REQUIRE(WaitUntil([&] { return delivered.load() + lost.load() == 200; }));
  CHECK(lost.load() > 0);
  CHECK(delivered.load() >= 51);  // the first, plus the 50 the ring still held
  REQUIRE(WaitUntil([&] { return !topic->Running(*stopped); }));
  CHECK(intolerant_lost.load());
  CHECK(topic->Running(*slow));
}

TEST_CASE("A full reliable topic blocks, discards or refuses as configured", "[grid][reliable]") {
  MemberOptions o;
  o.listen = false;
  o.threads = 1;
  Member member(o);
  REQUIRE(member.Start());
  auto make = [&](const std::string& name, ReliableTopicConfig::Overload overload) {
    ReliableTopicConfig config;
    config.capacity = 3;
    config.ttl_ms = 60'000;  // the overload policy applies to unexpired messages
    config.overload = overload;
    config.block_timeout_ms = 100;
    auto topic = member.GetReliableTopic(name, config);
    REQUIRE(topic->PublishAll({"1", "2", "3"}).value() == 1);
    return topic;
  };
  auto error = make("e", ReliableTopicConfig::Overload::kError);
  CHECK(error->Publish("4").error().code() == base::ErrorCode::kOverloaded);
  auto block = make("b", ReliableTopicConfig::Overload::kBlock);
  auto start = Clock::now();
  auto blocked = block->Publish("4");
  REQUIRE_FALSE(blocked);
  CHECK(blocked.error().code() == base::ErrorCode::kTimeout);
  CHECK(Clock::now() - start >= std::chrono::milliseconds(100));
  auto newest = make("n", ReliableTopicConfig::Overload::kDiscardNewest);
  CHECK(newest->Publish("4").value() == 0);
  CHECK(newest->Range().value() == std::make_pair<std::int64_t, std::int64_t>(1, 3));
  auto oldest = make("o", ReliableTopicConfig::Overload::kDiscardOldest);
  CHECK(oldest->Publish("4").value() == 4);
  CHECK(oldest->Range().value() == std::make_pair<std::int64_t, std::int64_t>(2, 4));
  // Without a TTL nothing expires, so a full ring overwrites its oldest message whatever the
  // policy (as Hazelcast's ringbuffer does).
  ReliableTopicConfig no_ttl;
  no_ttl.capacity = 3;
  no_ttl.overload = ReliableTopicConfig::Overload::kError;
  auto overwriting = member.GetReliableTopic("w", no_ttl);
  REQUIRE(overwriting->PublishAll({"1", "2", "3"}));
  CHECK(overwriting->Publish("4").value() == 4);
  CHECK(overwriting->Range().value() == std::make_pair<std::int64_t, std::int64_t>(2, 4));
  CHECK(member.GetReliableTopic("")->Publish("x").error().code() == base::ErrorCode::kBadRequest);
}
