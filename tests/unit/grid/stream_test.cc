// Event streams through the Instance API on listening members and a client (real sockets):
// offsets and idempotent appends, consumer groups sharing sub-streams, redelivery after a
// handler error, a consumer taking over from one that stopped, backpressure, info, bad input.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "cluster_test_util.h"
#include "tessera/grid/client.h"
#include "tessera/grid/member.h"

using namespace tessera;
using base::ErrorCode;
using grid::Client;
using grid::ClientOptions;
using grid::Member;
using grid::StreamConfig;
using grid::StreamEvent;
using grid::SubscribeOptions;
using Clock = std::chrono::steady_clock;
using namespace tessera::grid::testing;  // NOLINT

namespace {

// What one group received: per key the payloads in delivery order, and per consumer a count.
struct Received {
  std::mutex mu;
  std::map<std::string, std::vector<std::string>> by_key;
  std::map<std::string, int> by_consumer;
  std::set<std::pair<std::uint32_t, std::int64_t>> positions;
  int total = 0;
  int duplicates = 0;

  grid::StreamHandler Handler(const std::string& consumer) {
    return [this, consumer](const StreamEvent& e) -> base::Result<void> {
      std::lock_guard lock(mu);
      if (!positions.insert({e.sub_stream, e.offset}).second) {
        ++duplicates;
        return {};
      }
      by_key[e.key].push_back(e.payload);
      ++by_consumer[consumer];
      ++total;
      return {};
    };
  }
  int Total() {
    std::lock_guard lock(mu);
    return total;
  }
};

SubscribeOptions Fast(std::string consumer = "") {
  SubscribeOptions o;
  o.lease_ttl_ms = 600;
  o.max_idle_poll_ms = 5;
  o.consumer_id = std::move(consumer);
  return o;
}

// key k<i % keys>, payload "<key>:<seq within key>".
std::vector<grid::StreamAppend> Events(int count, int keys, int from = 0) {
  std::vector<grid::StreamAppend> out;
  for (int i = from; i < from + count; ++i) {
    const std::string key = "k" + std::to_string(i % keys);
    out.push_back({key, key + ":" + std::to_string(i / keys), "e" + std::to_string(i)});
  }
  return out;
}

// One sub-stream (one key's events in order in one place), the default limits.
StreamConfig OneSubStream() {
  StreamConfig config;
  config.sub_streams = 1;
  return config;
}

// One sub-stream of at most `max_events` events, whose appends retry for `block_ms` when full.
StreamConfig Bounded(std::int64_t max_events, base::Millis block_ms) {
  StreamConfig config = OneSubStream();
  config.max_events = max_events;
  config.block_timeout_ms = block_ms;
  return config;
}

// One series of the members' metrics (Member::MetricsText) summed over them; 0 when absent.
double MetricSum(std::initializer_list<Member*> members, const std::string& series) {
  double total = 0;
  for (Member* m : members) {
    const std::string text = m->MetricsText();
    for (auto at = text.find("\n" + series + " "); at != std::string::npos;
         at = text.find("\n" + series + " ", at + 1)) {
      total += std::stod(text.substr(at + series.size() + 2));
    }
  }
  return total;
}

bool InOrder(const std::vector<std::string>& payloads) {
  for (std::size_t i = 0; i < payloads.size(); ++i) {
    const auto colon = payloads[i].find(':');
    if (std::stoul(payloads[i].substr(colon + 1)) != i) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("Stream appends get per-sub-stream offsets, an event id is stored once",
          "[grid][stream]") {
  Member member(ClusterMember());
  REQUIRE(member.Start());
  ClientOptions options;
  options.addresses = {AddressOf(member)};
  auto client = Client::Connect(options);
  REQUIRE(client);
  StreamConfig config;
  config.sub_streams = 4;
  auto via_client = (*client)->GetStream("orders", config);
  auto via_member = member.GetStream("orders", config);

  auto first = via_client->Append("order-1@cust-9", "created", "evt-1");
  REQUIRE(first);
  CHECK(first->offset == 1);
  CHECK_FALSE(first->duplicate);
  CHECK(first->sub_stream == via_client->SubStreamOf("cust-9"));  // the partition key decides
  auto second = via_member->Append("order-2@cust-9", "created", "evt-2");
  REQUIRE(second);
  CHECK(second->sub_stream == first->sub_stream);
  CHECK(second->offset == 2);

  auto again = via_member->Append("order-1@cust-9", "created", "evt-1");
  REQUIRE(again);
  CHECK(again->duplicate);
  CHECK(again->offset == 1);

  auto batch = via_client->AppendAll(Events(100, 10));
  REQUIRE(batch);
  auto batch_again = via_member->AppendAll(Events(100, 10));
  REQUIRE(batch_again);
  CHECK(*batch_again != *batch);  // differs only in the duplicate flags
  for (std::size_t i = 0; i < batch->size(); ++i) {
    CHECK((*batch_again)[i].duplicate);
    CHECK((*batch_again)[i].offset == (*batch)[i].offset);
  }
  auto info = via_client->Info();
  REQUIRE(info);
  std::int64_t stored = 0;
  for (const auto& sub : info->sub_streams) stored += sub.tail - sub.head + 1;
  CHECK(stored == 102);

  // One batch may mix events with and without an id (the member refused it before): those
  // without are never duplicates, through a client and through the member alike.
  for (auto* stream : {via_client.get(), via_member.get()}) {
    auto mixed = stream->AppendAll(
        {{"m@cust-9", "a", "evt-1"}, {"m@cust-9", "b", ""}, {"m@cust-9", "c", ""}});
    REQUIRE(mixed);
    CHECK((*mixed)[0].duplicate);  // evt-1 was appended above
    CHECK((*mixed)[0].offset == 1);
    CHECK_FALSE((*mixed)[1].duplicate);
    CHECK_FALSE((*mixed)[2].duplicate);
    CHECK((*mixed)[2].offset == (*mixed)[1].offset + 1);
  }
  // The owner counts what it stored and what it answered from the dedup window: 2 + 100 + 2 × 2
  // stored, 1 + 100 + 2 × 1 duplicates.
  CHECK(MetricSum({&member}, "tessera_stream_appended_total{stream=\"orders\"}") == 106);
  CHECK(MetricSum({&member}, "tessera_stream_duplicates_total{stream=\"orders\"}") == 103);

  SECTION("a later proxy with another configuration uses the stored one") {
    StreamConfig other;
    other.sub_streams = 8;
    auto late = (*client)->GetStream("orders", other);
    CHECK(late->SubStreamOf("cust-9") == first->sub_stream);
    auto late_info = late->Info();
    REQUIRE(late_info);
    CHECK(late_info->config.sub_streams == 4);
  }
  SECTION("bad names and events are refused with the reason") {
    auto bad = (*client)->GetStream("a stream");
    auto r = bad->Append("k", "v");
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == ErrorCode::kBadRequest);
    CHECK(r.error().message().find("stream name") != std::string::npos);
    auto no_key = via_client->Append("", "v");
    REQUIRE_FALSE(no_key);
    CHECK(no_key.error().message().find("needs a key") != std::string::npos);
    auto bad_group =
        via_client->Subscribe("g@1", [](const StreamEvent&) -> base::Result<void> { return {}; });
    REQUIRE_FALSE(bad_group);
    CHECK(bad_group.error().code() == ErrorCode::kBadRequest);
  }
  (*client)->Shutdown();
  member.Shutdown();
}

TEST_CASE(
    "Two groups each get every event in key order, a group's consumers share the "
    "sub-streams",
    "[grid][stream]") {
  Member a(ClusterMember());
  REQUIRE(a.Start());
  Member b(ClusterMember({AddressOf(a)}));
  REQUIRE(b.Start());
  REQUIRE(WaitUntil([&] { return AllList({&a, &b}, 2); }));
  ClientOptions options;
  options.addresses = {AddressOf(a)};
  auto client = Client::Connect(options);
  REQUIRE(client);

  auto producer = (*client)->GetStream("orders");
  auto on_a = a.GetStream("orders");
  auto on_b = b.GetStream("orders");
  Received billing, shipping;
  REQUIRE(on_a->Subscribe("billing", billing.Handler("a"), Fast("a")));
  REQUIRE(on_b->Subscribe("billing", billing.Handler("b"), Fast("b")));
  auto via_client = (*client)->GetStream("orders");
  REQUIRE(via_client->Subscribe("billing", billing.Handler("c"), Fast("c")));
  REQUIRE(on_a->Subscribe("shipping", shipping.Handler("s"), Fast("s")));
  // The first consumer takes all 16 sub-streams and gives up its surplus as the others join
  // (at its next rebalance): wait until the three split them, or a fast producer's events may
  // all be handled before the split.
  REQUIRE(WaitUntil([&] {
    auto info = producer->Info();
    if (!info) return false;
    std::set<std::string> holders;
    int held = 0;
    for (const auto& sub : info->sub_streams) {
      for (const auto& g : sub.groups) {
        if (g.group == "billing" && !g.holder.empty()) {
          holders.insert(g.holder);
          ++held;
        }
      }
    }
    return held == 16 && holders.size() == 3;
  }));

  constexpr int kEvents = 3'000, kKeys = 60;
  for (int from = 0; from < kEvents; from += 500)
    REQUIRE(producer->AppendAll(Events(500, kKeys, from)));
  REQUIRE(WaitUntil([&] { return billing.Total() == kEvents && shipping.Total() == kEvents; },
                    std::chrono::seconds(30)));
  for (auto* r : {&billing, &shipping}) {
    std::lock_guard lock(r->mu);
    CHECK(r->by_key.size() == kKeys);
    for (const auto& [key, payloads] : r->by_key) {
      CHECK(payloads.size() == kEvents / kKeys);
      CHECK(InOrder(payloads));
    }
    CHECK(r->duplicates == 0);
  }
  {
    std::lock_guard lock(billing.mu);
    CHECK(billing.by_consumer.size() == 3);  // 16 sub-streams over 3 consumers: all get some
  }
  // Handled events are committed after their batch: the lag drops to 0 right after.
  REQUIRE(WaitUntil([&] {
    auto info = producer->Info();
    return info && info->groups.size() == 2 && info->groups[0].lag == 0 && info->groups[1].lag == 0;
  }));

  // The owners' metrics add up over the two members.
  auto sum = [&](const std::string& series) { return MetricSum({&a, &b}, series); };
  CHECK(sum("tessera_stream_appended_total{stream=\"orders\"}") == kEvents);
  CHECK(sum("tessera_stream_committed_total{group=\"billing\",stream=\"orders\"}") == kEvents);
  CHECK(sum("tessera_stream_delivered_total{group=\"shipping\",stream=\"orders\"}") >= kEvents);
  CHECK(sum("tessera_stream_lag_events{group=\"billing\",stream=\"orders\"}") == 0);
  // Every sub-stream leased by a consumer of the group; a lease moving between two of them
  // (the group rebalancing as its consumers come and renew) is briefly held by neither: 14 was
  // read once in a full run, so the gauge is read until it shows all 16 (bounded).
  const std::string leases = "tessera_stream_leases_held{group=\"billing\",stream=\"orders\"}";
  WaitUntil([&] { return sum(leases) == 16; });
  CHECK(sum(leases) == 16);
  CHECK(sum("tessera_stream_events{stream=\"orders\"}") == 0);  // both groups committed all
  (*client)->Shutdown();
  b.Shutdown();
  a.Shutdown();
}

TEST_CASE(
    "A failed handler gets its event again, later ones wait, a stopped consumer's "
    "sub-streams move to the others",
    "[grid][stream]") {
  Member member(ClusterMember());
  REQUIRE(member.Start());
  StreamConfig config;
  config.sub_streams = 2;
  auto stream = member.GetStream("jobs", config);
  REQUIRE(stream->AppendAll(Events(20, 1)));  // one key: one sub-stream, in order

  std::mutex mu;
  std::vector<std::string> seen;
  std::vector<int> attempts;
  bool failed_once = false;
  auto options = Fast("only");
  options.retry_delay_ms = 50;
  auto id = stream->Subscribe(
      "workers",
      [&](const StreamEvent& e) -> base::Result<void> {
        std::lock_guard lock(mu);
        seen.push_back(e.payload);
        attempts.push_back(e.attempt);
        if (e.payload == "k0:5" && !failed_once) {
          failed_once = true;
          return base::Fail(ErrorCode::kInternal, "payment service down");
        }
        return {};
      },
      options);
  REQUIRE(id);
  REQUIRE(WaitUntil([&] {
    std::lock_guard lock(mu);
    return seen.size() == 21;
  }));
  {
    std::lock_guard lock(mu);
    CHECK(seen[5] == "k0:5");
    CHECK(seen[6] == "k0:5");  // again, before anything later
    CHECK(attempts[6] == 2);
    CHECK(seen[7] == "k0:6");
  }
  REQUIRE(WaitUntil([&] { return stream->Stats(*id)->committed == 20; }));  // after the batch
  auto stats = stream->Stats(*id);
  REQUIRE(stats);
  CHECK(stats->handler_errors == 1);
  CHECK(stats->redelivered == 1);
  // The owner counts the events it served the group again: the failed one and the 14 that came
  // with it in the same read, which the consumer dropped when the handler failed (the
  // consumer's own count above is of handler calls).
  CHECK(MetricSum({&member},
                  "tessera_stream_redelivered_total{group=\"workers\",stream=\"jobs\"}") == 15);
  CHECK(stats->delivered == 21);

  // A second consumer; then the first stops: the second ends up with both sub-streams and
  // continues after the committed cursor.
  Received second;
  auto id2 = stream->Subscribe("workers", second.Handler("two"), Fast("two"));
  REQUIRE(id2);
  REQUIRE(stream->Unsubscribe(*id));
  REQUIRE(WaitUntil([&] { return stream->Stats(*id2)->leases_held == 2; }));
  REQUIRE(stream->AppendAll(Events(30, 1, 20)));
  REQUIRE(WaitUntil([&] { return second.Total() == 30; }));
  {
    std::lock_guard lock(second.mu);
    CHECK(second.duplicates == 0);
    CHECK(second.by_key["k0"].front() == "k0:20");  // nothing of the first 20 again
  }
  member.Shutdown();
}

TEST_CASE("A full stream blocks, then fails naming the slowest group, and never overwrites",
          "[grid][stream]") {
  Member member(ClusterMember());
  REQUIRE(member.Start());
  StreamConfig config = Bounded(10, 300);
  config.groups = {"audit"};
  auto stream = member.GetStream("ledger", config);
  REQUIRE(stream->AppendAll(Events(10, 3)));
  const auto start = Clock::now();
  auto full = stream->Append("k1", "one too many");
  const auto waited = Clock::now() - start;
  REQUIRE_FALSE(full);
  CHECK(full.error().code() == ErrorCode::kOverloaded);
  CHECK(full.error().message().find("'audit'") != std::string::npos);
  CHECK(waited >= std::chrono::milliseconds(250));  // it retried before giving up
  auto info = stream->Info();
  REQUIRE(info);
  CHECK(info->sub_streams[0].head == 1);
  CHECK(info->sub_streams[0].tail == 10);
  CHECK(info->groups[0].lag == 10);
  CHECK(info->groups[0].oldest_uncommitted_ms > 0);
  // The owner's gauges say the same: ten events behind, the oldest appended before the wait.
  CHECK(MetricSum({&member}, "tessera_stream_lag_events{group=\"audit\",stream=\"ledger\"}") == 10);
  CHECK(MetricSum({&member}, "tessera_stream_lag_seconds{group=\"audit\",stream=\"ledger\"}") >=
        0.25);

  // Appenders blocked on the full stream get through once the group catches up, on the member
  // and through a client (which sends the same request again until it fits).
  grid::StreamConfig patient = config;
  patient.block_timeout_ms = 10'000;
  std::thread appender([&] { CHECK(member.GetStream("ledger", patient)->Append("k1", "after")); });
  ClientOptions options;
  options.addresses = {AddressOf(member)};
  auto client = Client::Connect(options);
  REQUIRE(client);
  std::thread remote([&] {
    CHECK((*client)->GetStream("ledger", patient)->Append("k1", "after-remote", "evt-r"));
  });
  Received audit;
  REQUIRE(stream->Subscribe("audit", audit.Handler("x"), Fast()));
  appender.join();
  remote.join();
  REQUIRE(WaitUntil([&] { return audit.Total() == 12; }));
  {
    std::lock_guard lock(audit.mu);
    const auto& k1 = audit.by_key["k1"];
    CHECK(std::count(k1.begin(), k1.end(), "after") == 1);
    CHECK(std::count(k1.begin(), k1.end(), "after-remote") == 1);
  }
  (*client)->Shutdown();
  member.Shutdown();
}

TEST_CASE("Deleting a group through a client drops its cursors and its hold on the events",
          "[grid][stream]") {
  Member member(ClusterMember());
  REQUIRE(member.Start());
  const StreamConfig config = Bounded(10, 100);
  auto stream = member.GetStream("ledger", config);
  REQUIRE(stream->CreateGroup("audit"));
  REQUIRE(stream->CreateGroup("billing"));
  REQUIRE(stream->AppendAll(Events(10, 3)));
  Received billing;
  auto id = stream->Subscribe("billing", billing.Handler("b"), Fast());
  REQUIRE(id);
  auto lag_of = [&](const std::string& group) -> std::int64_t {
    auto info = stream->Info();
    if (!info) return -1;
    for (const auto& g : info->groups) {
      if (g.group == group) return g.lag;
    }
    return -1;
  };
  REQUIRE(WaitUntil([&] { return lag_of("billing") == 0; }));
  REQUIRE(stream->Unsubscribe(*id));
  // Full: "audit" has committed nothing, so the ten events stay for it.
  auto full = stream->Append("k1", "eleventh");
  REQUIRE_FALSE(full);
  CHECK(full.error().code() == ErrorCode::kOverloaded);
  CHECK(full.error().message().find("'audit'") != std::string::npos);

  ClientOptions options;
  options.addresses = {AddressOf(member)};
  auto client = Client::Connect(options);
  REQUIRE(client);
  REQUIRE((*client)->GetStream("ledger", config)->DeleteGroup("audit"));
  auto info = stream->Info();
  REQUIRE(info);
  REQUIRE(info->groups.size() == 1);
  CHECK(info->groups[0].group == "billing");
  REQUIRE(info->sub_streams[0].groups.size() == 1);
  // Its hold went with it: what "billing" committed is gone, and there is room again.
  CHECK(info->sub_streams[0].head == 11);
  auto appended = stream->Append("k1", "eleventh");
  REQUIRE(appended);
  CHECK(appended->offset == 11);

  // Deleting a group that is not there changes nothing; bad names and unknown streams fail.
  CHECK(stream->DeleteGroup("audit"));
  auto bad = stream->DeleteGroup("has space");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code() == ErrorCode::kBadRequest);
  auto unknown = member.GetStream("no-such-stream", config)->DeleteGroup("audit");
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().code() == ErrorCode::kNotFound);

  // Created again, the group starts afresh at the oldest stored event, not at its old cursor.
  REQUIRE(stream->CreateGroup("audit"));
  CHECK(lag_of("audit") == 1);
  (*client)->Shutdown();
  member.Shutdown();
}

TEST_CASE("With commit_every a consumer commits after that many handled events", "[grid][stream]") {
  Member member(ClusterMember());
  REQUIRE(member.Start());
  auto stream = member.GetStream("steps", OneSubStream());
  REQUIRE(stream->AppendAll(Events(20, 1)));
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> handled{0};
  SubscribeOptions options;
  options.commit_every = 5;
  options.max_idle_poll_ms = 5;
  auto id = stream->Subscribe(
      "steps",
      [&](const StreamEvent&) -> base::Result<void> {
        if (handled.load() == 7) {  // the eighth waits: seven handled, one read of 20 in hand
          std::unique_lock lock(mu);
          cv.wait_for(lock, std::chrono::seconds(10), [&] { return release; });  // bounded
        }
        ++handled;
        return {};
      },
      options);
  REQUIRE(id);
  auto cursor = [&]() -> std::int64_t {
    auto info = stream->Info();
    if (!info || info->sub_streams[0].groups.empty()) return -1;
    return info->sub_streams[0].groups[0].cursor;
  };
  // Five handled: committed, though the read's batch is not done; the next two are not.
  REQUIRE(WaitUntil([&] { return cursor() == 5; }));
  REQUIRE(WaitUntil([&] { return handled.load() == 7; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // time for a wrong commit
  CHECK(cursor() == 5);
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  REQUIRE(WaitUntil([&] { return cursor() == 20; }));
  CHECK(handled.load() == 20);
  REQUIRE(stream->Unsubscribe(*id));
  member.Shutdown();
}

TEST_CASE("A consumer whose handler is slower than its lease keeps it and makes progress",
          "[grid][stream]") {
  Member member(ClusterMember());
  REQUIRE(member.Start());
  auto stream = member.GetStream("slow", OneSubStream());
  REQUIRE(stream->AppendAll(Events(24, 1)));
  // 24 events x 50 ms = 1.2 s in one batch, twice the 600 ms lease: the consumer must stop
  // before its lease lapses, commit (which renews it) and go on, never losing it.
  Received seen;
  auto handler = seen.Handler("slow");
  auto id = stream->Subscribe(
      "g",
      [&](const StreamEvent& e) -> base::Result<void> {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return handler(e);
      },
      Fast("slow"));
  REQUIRE(id);
  REQUIRE(WaitUntil([&] { return seen.Total() == 24; }, std::chrono::seconds(20)));
  auto stats = stream->Stats(*id);
  REQUIRE(stats);
  CHECK(stats->leases_lost == 0);
  CHECK(stats->redelivered == 0);
  {
    std::lock_guard lock(seen.mu);
    CHECK(seen.duplicates == 0);
    CHECK(InOrder(seen.by_key["k0"]));
  }
  member.Shutdown();
}

TEST_CASE("An idle consumer waits on the owners and gets a new event at once, not at its next poll",
          "[grid][stream][wait]") {
  Member a(ClusterMember());
  REQUIRE(a.Start());
  Member b(ClusterMember({AddressOf(a)}));
  REQUIRE(b.Start());
  REQUIRE(WaitUntil([&] { return AllList({&a, &b}, 2); }));
  ClientOptions options;
  options.addresses = {AddressOf(a)};
  auto client = Client::Connect(options);
  REQUIRE(client);
  auto producer = a.GetStream("quiet");
  // A poll would back off to a minute here, and a round of waits lasts 10 s: only the owners'
  // answers can be this quick.
  SubscribeOptions slow_poll;
  slow_poll.max_idle_poll_ms = 60'000;
  slow_poll.max_wait_ms = 10'000;
  slow_poll.lease_ttl_ms = 60'000;  // no rebalance (every 20 s), whose reads read everything
  struct Seen {
    std::mutex mu;
    std::vector<std::pair<std::string, Clock::time_point>> events;
  };
  Seen via_client, via_member;
  auto record = [](Seen& seen) {
    return [&seen](const StreamEvent& e) -> base::Result<void> {
      std::lock_guard lock(seen.mu);
      seen.events.emplace_back(e.payload, Clock::now());
      return {};
    };
  };
  auto client_stream = (*client)->GetStream("quiet");
  auto member_stream = b.GetStream("quiet");
  auto c = client_stream->Subscribe("billing", record(via_client), slow_poll);
  auto m = member_stream->Subscribe("audit", record(via_member), slow_poll);
  REQUIRE(c);
  REQUIRE(m);
  REQUIRE(WaitUntil([&] {
    return client_stream->Stats(*c)->leases_held == 16 &&
           member_stream->Stats(*m)->leases_held == 16;
  }));
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // idle: polls would be ~2 s apart
  for (int i = 0; i < 3; ++i) {
    const auto appended = Clock::now();
    REQUIRE(producer->Append("key-" + std::to_string(i), "e" + std::to_string(i)));
    for (Seen* seen : {&via_client, &via_member}) {
      REQUIRE(WaitUntil([&] {
        std::lock_guard lock(seen->mu);
        return seen->events.size() == static_cast<std::size_t>(i + 1);
      }));
      std::lock_guard lock(seen->mu);
      CHECK(seen->events.back().first == "e" + std::to_string(i));
      CHECK(seen->events.back().second - appended < std::chrono::milliseconds(1000));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // past one whole wait
  }
  // Each event came with the answer of the wait it ended, not from a read after it.
  CHECK(client_stream->Stats(*c)->carried == 3);
  CHECK(member_stream->Stats(*m)->carried == 3);
  client_stream->Unsubscribe(*c);
  member_stream->Unsubscribe(*m);
  (*client)->Shutdown();
  b.Shutdown();
  a.Shutdown();
}

TEST_CASE(
    "With commit_interval_ms a consumer commits a sub-stream at most once per interval, and "
    "commits what it handled once idle within the interval",
    "[grid][stream][wait]") {
  Member member(ClusterMember());
  REQUIRE(member.Start());
  auto stream = member.GetStream("paced", OneSubStream());
  SubscribeOptions every_batch;
  every_batch.lease_ttl_ms = 60'000;  // no rebalance (every 20 s), whose round commits too
  SubscribeOptions paced = every_batch;
  paced.commit_interval_ms = 200;
  std::atomic<int> seen_paced{0}, seen_every{0};
  auto count = [](std::atomic<int>& seen) {
    return [&seen](const StreamEvent&) -> base::Result<void> {
      ++seen;
      return {};
    };
  };
  auto p = stream->Subscribe("paced", count(seen_paced), paced);
  auto e = stream->Subscribe("every", count(seen_every), every_batch);
  REQUIRE(p);
  REQUIRE(e);
  REQUIRE(WaitUntil(
      [&] { return stream->Stats(*p)->leases_held == 1 && stream->Stats(*e)->leases_held == 1; }));
  const auto start = Clock::now();
  constexpr int kEvents = 50;
  for (int i = 0; i < kEvents; ++i) {  // one at a time: each wakes the consumers alone
    REQUIRE(stream->Append("k", "e" + std::to_string(i)));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(WaitUntil([&] { return seen_paced == kEvents && seen_every == kEvents; }));
  // Idle now: what the interval held back is committed within it.
  auto cursor = [&](const std::string& group) -> std::int64_t {
    auto info = stream->Info();
    if (!info) return -1;
    for (const auto& g : info->sub_streams[0].groups) {
      if (g.group == group) return g.cursor;
    }
    return -1;
  };
  const auto idle = Clock::now();
  REQUIRE(WaitUntil([&] { return cursor("paced") == kEvents; }));
  CHECK(Clock::now() - idle < std::chrono::milliseconds(1000));
  const auto elapsed_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  const std::int64_t paced_commits = stream->Stats(*p)->commits;
  INFO("paced commits " << paced_commits << " in " << elapsed_ms << " ms, every-batch commits "
                        << stream->Stats(*e)->commits);
  CHECK(paced_commits <= elapsed_ms / 200 + 2);
  CHECK(stream->Stats(*e)->commits > 2 * paced_commits);  // the same events, a commit a batch
  CHECK(WaitUntil([&] { return cursor("every") == kEvents; }));
  stream->Unsubscribe(*p);
  stream->Unsubscribe(*e);
  member.Shutdown();
}

TEST_CASE(
    "A backlog over one read's byte limit is delivered whole and in order, read after read "
    "without waiting in between",
    "[grid][stream]") {
  Member member(ClusterMember());
  REQUIRE(member.Start());
  auto stream = member.GetStream("bulky", OneSubStream());
  constexpr int kEvents = 100;  // 64 KiB each: 6.4 MB, over a read's 4 MiB
  const std::string filler(64 * 1024, 'x');
  for (int i = 0; i < kEvents; ++i) {
    REQUIRE(stream->Append("k", "k:" + std::to_string(i) + ":" + filler));
  }
  std::mutex mu;
  std::vector<std::string> seen;
  SubscribeOptions options;
  options.lease_ttl_ms = 60'000;  // no rebalance (every 20 s), whose round reads everything
  auto id = stream->Subscribe(
      "g",
      [&](const StreamEvent& e) -> base::Result<void> {
        std::lock_guard lock(mu);
        seen.push_back(e.payload.substr(0, e.payload.find(':', 2)));
        return {};
      },
      options);
  REQUIRE(id);
  REQUIRE(WaitUntil([&] {
    std::lock_guard lock(mu);
    return seen.size() == kEvents;
  }));
  {
    std::lock_guard lock(mu);
    CHECK(InOrder(seen));
  }
  // A read cut short by its byte limit leaves events past it: the consumer reads again
  // rather than parks a wait (which would answer at once, carrying them).
  CHECK(stream->Stats(*id)->carried == 0);
  CHECK(stream->Stats(*id)->delivered == kEvents);
  stream->Unsubscribe(*id);
  member.Shutdown();
}

TEST_CASE("A quiet sub-stream's event is read at once while the consumer is busy with another",
          "[grid][stream][wait]") {
  Member member(ClusterMember());
  REQUIRE(member.Start());
  StreamConfig config;
  config.sub_streams = 2;
  auto stream = member.GetStream("busy", config);
  std::string busy_key, quiet_key;
  for (int i = 0; busy_key.empty() || quiet_key.empty(); ++i) {
    const std::string key = "key-" + std::to_string(i);
    (stream->SubStreamOf(key) == 0 ? busy_key : quiet_key) = key;
  }
  SubscribeOptions options;
  options.max_idle_poll_ms = 60'000;
  options.max_wait_ms = 10'000;
  options.lease_ttl_ms = 60'000;  // no rebalance (every 20 s) during the test
  std::mutex mu;
  std::optional<Clock::time_point> quiet_seen;
  int busy_seen = 0;
  auto id = stream->Subscribe(
      "g",
      [&](const StreamEvent& e) -> base::Result<void> {
        std::lock_guard lock(mu);
        if (e.key == quiet_key) {
          quiet_seen = Clock::now();
        } else {
          ++busy_seen;
        }
        return {};
      },
      options);
  REQUIRE(id);
  REQUIRE(WaitUntil([&] { return stream->Stats(*id)->leases_held == 2; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // idle: waits parked on both
  // The busy sub-stream gets events back to back for 5 s; past the owner's 2 s cap on the
  // first waits, one event on the quiet one.
  std::atomic<bool> append_failed{false};  // Catch2 asserts on the test's thread only
  std::thread producer([&] {
    const auto end = Clock::now() + std::chrono::seconds(5);
    for (int i = 0; i < 100'000 && Clock::now() < end; ++i) {
      if (!stream->Append(busy_key, "b" + std::to_string(i))) {
        append_failed = true;
        break;
      }
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  const auto appended = Clock::now();
  REQUIRE(stream->Append(quiet_key, "q"));
  const bool seen = WaitUntil([&] {
    std::lock_guard lock(mu);
    return quiet_seen.has_value();
  });
  producer.join();
  CHECK_FALSE(append_failed.load());
  REQUIRE(seen);
  {
    std::lock_guard lock(mu);  // not across Unsubscribe: the handler may still be running
    CHECK(*quiet_seen - appended < std::chrono::milliseconds(1000));
    CHECK(busy_seen > 0);
  }
  stream->Unsubscribe(*id);
  member.Shutdown();
}
