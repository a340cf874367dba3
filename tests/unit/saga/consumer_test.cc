// Consumer groups over a real "shared" member: routing by type, the inbox absorbing duplicate
// deliveries, per-key order, in-place retries and an open circuit breaker holding events back.
#include "tessera/saga/consumer.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "saga_test_util.h"
#include "tessera/grid/client.h"
#include "tessera/grid/map.h"
#include "tessera/grid/member.h"

using tessera::base::ErrorCode;
using tessera::base::Fail;
using tessera::base::Result;
using tessera::grid::Client;
using tessera::grid::Member;
using tessera::grid::MemberOptions;
using tessera::grid::Transaction;
using tessera::record::GenericRecord;
using namespace tessera::saga;           // NOLINT
using namespace tessera::saga::testing;  // NOLINT

namespace {

struct Setup {
  Member shared{SharedOptions()};
  Member service{ServiceOptions()};
  std::shared_ptr<Client> client;
  std::shared_ptr<tessera::grid::Stream> stream;

  Setup() {
    REQUIRE(shared.Start());
    REQUIRE(service.Start());
    client = ConnectShared(shared.native_port());
    stream = client->GetStream("orders", Config());
  }
  static tessera::grid::StreamConfig Config() {
    tessera::grid::StreamConfig c;
    c.sub_streams = 4;
    return c;
  }
  void Append(const Event& e, const std::string& stream_id) {
    REQUIRE(stream->Append(e.key, EncodeEvent(e), stream_id).has_value());
  }
};

Event Placed(std::int64_t id, const std::string& key, int n, const std::string& type = "Placed") {
  Event e;
  e.id = id;
  e.type = type;
  e.key = key;
  e.payload = GenericRecord::Build().Int64("n", n).Done();
  return e;
}

ConsumerOptions Options() {
  ConsumerOptions o;
  o.group = "billing";
  o.streams = {"orders"};
  o.stream_config = Setup::Config();
  o.concurrency = 2;
  o.retry.initial_delay_ms = 1;
  o.retry.max_attempts = 3;
  o.subscribe.retry_delay_ms = 20;
  return o;
}

// The handler's effect: count the event in "billed" under its key (one partition per key).
Result<void> Bill(const Event& e, HandlerContext& ctx) {
  const std::string pk = e.key.substr(e.key.find('@') + 1);
  Transaction tx(pk);
  tx.ExecuteOnKey("billed", "count@" + pk, "incrementRaw",
                  GenericRecord::Build().Int64("delta", 1).Done());
  auto r = ctx.Commit(tx);
  if (!r) return std::unexpected(r.error());
  return {};
}

std::int64_t Billed(Member& m, const std::string& pk) {
  auto r = m.GetMap("billed")->ExecuteOnKey("count@" + pk, "incrementRaw",
                                            GenericRecord::Build().Int64("delta", 0).Done());
  REQUIRE(r.has_value());
  return r->GetInt64("value").value();
}

}  // namespace

TEST_CASE(
    "A consumer routes by type, applies each event once despite duplicate deliveries, "
    "in per-key order, and skips unknown types",
    "[saga][consumer]") {
  Setup s;
  Inbox inbox(s.service);
  Consumer consumer(s.client, s.service, inbox, Options());
  std::mutex mu;
  std::map<std::string, std::vector<std::int64_t>> order;  // per key, n as handled
  consumer.On("Placed", [&](const Event& e, HandlerContext& ctx) -> Result<void> {
    auto r = Bill(e, ctx);
    if (r) {
      std::lock_guard lock(mu);
      order[e.key].push_back(e.payload.GetInt64("n").value());
    }
    return r;
  });
  REQUIRE(consumer.Start());
  for (int n = 0; n < 30; ++n) {
    const Event e = Placed(1000 + n, "order@cust-" + std::to_string(n % 3), n);
    s.Append(e, std::to_string(e.id));
    if (n % 10 == 0) s.Append(e, "again-" + std::to_string(e.id));  // delivered twice
  }
  s.Append(Placed(2000, "order@cust-0", 0, "Refunded"), "2000");  // nobody handles it
  REQUIRE(s.stream->Append("order@cust-1", "not an event", "junk").has_value());

  REQUIRE(WaitFor([&] {
    const auto st = consumer.stats();
    return st.handled == 33 && st.unknown_skipped == 1 && st.undecodable == 1;
  }));
  for (int c = 0; c < 3; ++c) CHECK(Billed(s.service, "cust-" + std::to_string(c)) == 10);
  CHECK(inbox.stats().duplicates == 3);
  for (const auto& [key, list] : order) {
    INFO(key);
    CHECK(std::is_sorted(list.begin(), list.end()));
  }
  consumer.Stop();
}

TEST_CASE(
    "A failing handler is retried in place, a non-retryable error is not, and the event "
    "comes again",
    "[saga][consumer]") {
  Setup s;
  Inbox inbox(s.service);
  ConsumerOptions redeliver = Options();
  redeliver.dead_letters = false;  // a failed event comes again from the stream
  Consumer consumer(s.client, s.service, inbox, redeliver);
  std::atomic<int> calls{0};
  consumer.On("Placed", [&](const Event& e, HandlerContext& ctx) -> Result<void> {
    const int call = ++calls;
    if (call <= 2) return Fail(ErrorCode::kTimeout, "dependency slow");  // retried in place
    if (call == 3) return Fail(ErrorCode::kBadRequest, "bad data");      // not retried
    if (call == 4) throw std::runtime_error("bug");                      // a failure, retried
    return Bill(e, ctx);                                                 // then: ok
  });
  ConsumerOptions slow = Options();
  slow.retry.initial_delay_ms = 4000;  // 3 x 4 s waited is more than the 10 s lease
  Consumer too_slow(s.client, s.service, inbox, slow);
  auto refused = too_slow.Start();
  REQUIRE(!refused);
  CHECK(refused.error().message().find("a third of the lease") != std::string::npos);
  REQUIRE(consumer.Start());
  s.Append(Placed(1, "order@cust-9", 0), "1");
  REQUIRE(WaitFor([&] { return consumer.stats().handled == 1; }));
  const auto st = consumer.stats();
  CHECK(st.retries == 3);  // the two timeouts, the throw
  CHECK(st.failed == 1);   // the bad-request attempt: given back to the stream
  CHECK(calls == 5);
  CHECK(Billed(s.service, "cust-9") == 1);
  consumer.Stop();
}

TEST_CASE(
    "While the dependency's breaker is open the handler is not called, the events wait "
    "and are all handled once it closes",
    "[saga][consumer]") {
  Setup s;
  Inbox inbox(s.service);
  tessera::base::SteadyClock clock;
  BreakerRegistry breakers(clock, nullptr);
  REQUIRE(breakers.Configure(
      "breakers:\n  payments: {minimum_calls: 2, failure_rate_threshold: 50, open_ms: 300, "
      "half_open_calls: 1}\n"));
  ConsumerOptions o = Options();
  o.breaker = "payments";
  o.retry.max_attempts = 1;
  o.dead_letters = false;  // failures come again: the breaker is what holds them back
  Consumer consumer(s.client, s.service, inbox, o, &breakers);
  std::atomic<bool> down{true};
  std::atomic<int> calls_while_open{0};
  auto breaker = breakers.Get("payments");
  consumer.On("Placed", [&](const Event& e, HandlerContext& ctx) -> Result<void> {
    if (breaker->stats().opened > 0 && breaker->state() == BreakerState::kOpen) ++calls_while_open;
    if (down) return Fail(ErrorCode::kConnectionFailed, "payments is down");
    return Bill(e, ctx);
  });
  REQUIRE(consumer.Start());
  for (int n = 0; n < 10; ++n) s.Append(Placed(100 + n, "order@cust-5", n), std::to_string(n));
  REQUIRE(WaitFor([&] { return breaker->stats().opened >= 1; }));
  REQUIRE(WaitFor([&] { return consumer.stats().breaker_waits >= 3; }));
  down = false;
  REQUIRE(WaitFor([&] { return consumer.stats().handled == 10; }));
  CHECK(Billed(s.service, "cust-5") == 10);
  CHECK(calls_while_open == 0);
  CHECK(breaker->state() == BreakerState::kClosed);
  consumer.Stop();
}

TEST_CASE(
    "A poison event becomes a dead letter and parks its key, other keys go on, replay "
    "runs it and the parked events in order for that group only",
    "[saga][consumer][dlq]") {
  Setup s;
  Inbox inbox(s.service);
  ConsumerOptions o = Options();
  o.max_replays = 2;
  Consumer billing(s.client, s.service, inbox, o);
  ConsumerOptions other = Options();
  other.group = "audit";
  Consumer audit(s.client, s.service, inbox, other);
  std::atomic<bool> broken{true};
  std::mutex mu;
  std::vector<std::int64_t> order;  // cust-1's events as billing handled them
  billing.On("Placed", [&](const Event& e, HandlerContext& ctx) -> Result<void> {
    if (e.key == "order@cust-1" && broken && e.payload.GetInt64("n").value() == 1) {
      return Fail(ErrorCode::kBadRequest, "cannot bill order 1");  // poison: not retried
    }
    auto r = Bill(e, ctx);
    if (r && e.key == "order@cust-1") {
      std::lock_guard lock(mu);
      order.push_back(e.payload.GetInt64("n").value());
    }
    return r;
  });
  audit.On("Placed", [&](const Event&, HandlerContext& ctx) -> Result<void> {
    Transaction tx("audit");
    tx.ExecuteOnKey("audited", "count@audit", "incrementRaw",
                    GenericRecord::Build().Int64("delta", 1).Done());
    auto r = ctx.Commit(tx);
    if (!r) return std::unexpected(r.error());
    return {};
  });
  REQUIRE(billing.Start());
  REQUIRE(audit.Start());
  std::vector<Event> cust1;
  for (int n = 0; n < 4; ++n) {
    cust1.push_back(Placed(500 + n, "order@cust-1", n));
    s.Append(cust1.back(), std::to_string(500 + n));
    s.Append(Placed(600 + n, "order@cust-2", n), std::to_string(600 + n));
  }
  const bool settled = WaitFor([&] {
    const auto st = billing.stats();
    return st.handled == 5 && st.dead_lettered == 1 && st.parked == 2;
  });
  {
    const auto st = billing.stats();
    INFO("handled " << st.handled << " dead " << st.dead_lettered << " parked " << st.parked
                    << " failed " << st.failed << " retries " << st.retries);
    REQUIRE(settled);
  }
  CHECK(Billed(s.service, "cust-2") == 4);  // another key goes on
  CHECK(Billed(s.service, "cust-1") == 1);  // order 0; 1 is dead, 2 and 3 parked
  auto letters = billing.dead_letters().List().value();
  REQUIRE(letters.size() == 3);
  CHECK(letters[0].event.id == 501);
  CHECK(!letters[0].parked);
  CHECK(letters[0].error == "cannot bill order 1");
  CHECK(letters[0].error_code == static_cast<int>(ErrorCode::kBadRequest));
  CHECK(letters[0].attempts == 1);
  CHECK(letters[1].parked);
  CHECK(letters[2].parked);
  CHECK(billing.dead_letters().Count().value() == 3);
  // A filter over the stored records.
  CHECK(
      billing.dead_letters().List(tessera::map::Predicate::Equal("parked", true)).value().size() ==
      2);
  // The parked ones cannot jump the queue.
  auto early = billing.Replay(cust1[2]);
  REQUIRE(!early);
  CHECK(early.error().code() == ErrorCode::kConflict);
  // Still broken: a replay fails and is counted, up to the limit.
  auto failed = billing.Replay(cust1[1]);
  REQUIRE(!failed);
  CHECK(billing.dead_letters().Get(cust1[1]).value()->replays == 1);
  CHECK(!billing.Replay(cust1[1]));
  auto limit = billing.Replay(cust1[1]);
  REQUIRE(!limit);
  CHECK(limit.error().code() == ErrorCode::kOverloaded);
  // The audit group never failed: its DLQ is empty and it saw every event.
  CHECK(audit.dead_letters().Count().value() == 0);
  REQUIRE(WaitFor([&] { return audit.stats().handled == 8; }));

  // Fixed, and the limit raised (a consumer configured with a higher one): the replay runs it
  // and the events parked behind it, in order.
  broken = false;
  o.max_replays = 5;
  billing.Stop();
  Consumer fixed(s.client, s.service, inbox, o);
  fixed.On("Placed", [&](const Event& e, HandlerContext& ctx) -> Result<void> {
    auto r = Bill(e, ctx);
    if (r && e.key == "order@cust-1") {
      std::lock_guard lock(mu);
      order.push_back(e.payload.GetInt64("n").value());
    }
    return r;
  });
  CHECK(fixed.Replay(cust1[1]) == 3);
  CHECK(Billed(s.service, "cust-1") == 4);
  CHECK(order == std::vector<std::int64_t>{0, 1, 2, 3});
  CHECK(fixed.dead_letters().Count().value() == 0);
  CHECK(!fixed.dead_letters().KeyParked(cust1[0]).value());
  // Later events of the key flow again.
  REQUIRE(fixed.Start());
  s.Append(Placed(504, "order@cust-1", 4), "504");
  REQUIRE(WaitFor([&] { return Billed(s.service, "cust-1") == 5; }));
  fixed.Stop();
}

TEST_CASE(
    "Replay requests left by a tool run on the group's consumer, unknown types become dead "
    "letters, old dead letters expire, and the DLQ has metrics",
    "[saga][consumer][dlq]") {
  Setup s;
  Inbox inbox(s.service);
  ConsumerOptions o = Options();
  o.unknown_to_dlq = true;
  o.maintenance_ms = 50;
  Consumer billing(s.client, s.service, inbox, o);
  ConsumerOptions other = Options();
  other.group = "audit";
  Consumer audit(s.client, s.service, inbox, other);  // skips unknown types (the default)
  std::atomic<bool> broken{true};
  billing.On("Placed", [&](const Event& e, HandlerContext& ctx) -> Result<void> {
    if (broken && e.payload.GetInt64("n").value() == 1) {
      return Fail(ErrorCode::kBadRequest, "cannot bill order 1");
    }
    return Bill(e, ctx);
  });
  audit.On("Placed", [&](const Event&, HandlerContext&) -> Result<void> { return {}; });
  REQUIRE(billing.Start());
  REQUIRE(audit.Start());
  for (int n = 0; n < 3; ++n) s.Append(Placed(700 + n, "order@cust-1", n), std::to_string(700 + n));
  const Event shipped = Placed(710, "order@cust-3", 0, "Shipped");
  s.Append(shipped, "710");
  REQUIRE(WaitFor([&] {
    const auto st = billing.stats();
    return st.handled == 1 && st.dead_lettered == 2 && st.parked == 1;
  }));
  REQUIRE(
      WaitFor([&] { return audit.stats().handled == 3 && audit.stats().unknown_skipped == 1; }));
  CHECK(audit.dead_letters().Count().value() == 0);
  auto unknown = billing.dead_letters().Get(shipped).value();
  REQUIRE(unknown.has_value());
  CHECK(!unknown->parked);
  CHECK(unknown->error_code == static_cast<int>(ErrorCode::kNotFound));
  CHECK(unknown->error ==
        "group 'billing' has no handler for event type 'Shipped'; register one, then replay");
  CHECK(billing.stats().unknown_skipped == 1);

  // The member's metrics show both groups; the gauges follow the queue.
  REQUIRE(WaitFor([&] {
    const std::string text = s.service.MetricsText();
    return text.find("tessera_dlq_entries{group=\"billing\"} 3") != std::string::npos &&
           text.find("tessera_dlq_parked_entries{group=\"billing\"} 1") != std::string::npos;
  }));
  {
    const std::string text = s.service.MetricsText();
    CHECK(text.find("tessera_dlq_dead_lettered_total{group=\"billing\"} 2") != std::string::npos);
    CHECK(text.find("tessera_dlq_parked_total{group=\"billing\"} 1") != std::string::npos);
    CHECK(text.find("tessera_consumer_handled_total{group=\"audit\"} 3") != std::string::npos);
    CHECK(text.find("tessera_consumer_handled_total{group=\"billing\"} 1") != std::string::npos);
    CHECK(text.find("tessera_dlq_entries{group=\"audit\"} 0") != std::string::npos);
    CHECK(text.find("# TYPE tessera_dlq_oldest_seconds gauge") != std::string::npos);
  }

  // A tool asks for every Placed dead letter to be replayed; the running consumer does it.
  broken = false;
  DeadLetterQueue tool(s.client, "billing");
  ReplayRequest placed;
  placed.id = "r1";
  placed.type = "Placed";
  REQUIRE(tool.RequestReplay(placed));
  auto taken = tool.RequestReplay(placed);
  REQUIRE(!taken);
  CHECK(taken.error().code() == ErrorCode::kConflict);
  std::optional<ReplayRequest> outcome;
  REQUIRE(WaitFor([&] {
    outcome = tool.GetReplay("r1").value();
    return outcome && outcome->status != "pending" && outcome->status != "running";
  }));
  CHECK(outcome->status == "done");
  CHECK(outcome->replayed == 2);  // the failed one and the one parked behind it
  CHECK(outcome->failed == 0);
  CHECK(outcome->by.rfind("billing-", 0) == 0);
  CHECK(Billed(s.service, "cust-1") == 3);
  CHECK(billing.stats().replay_requests == 1);
  // One event by id, whose type has no handler: the request fails, naming why.
  ReplayRequest one;
  one.id = "r2";
  one.event_id = shipped.id;
  REQUIRE(tool.RequestReplay(one));
  REQUIRE(WaitFor([&] {
    outcome = tool.GetReplay("r2").value();
    return outcome && outcome->status == "failed";
  }));
  CHECK(outcome->failed == 1);
  CHECK(outcome->error == "group 'billing' has no handler for event type 'Shipped'");
  CHECK(billing.dead_letters().Get(shipped).value()->replays == 1);
  // A request claimed by a consumer that died long ago is claimed again.
  ReplayRequest abandoned;
  abandoned.id = "r-stale";
  abandoned.event_id = shipped.id;
  abandoned.status = "running";
  abandoned.by = "billing-dead";
  abandoned.claimed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count() -
                         DeadLetterQueue::kStaleClaimMs - 1'000;
  REQUIRE(tool.RequestReplay(abandoned));
  INFO("pending: " << tool.PendingReplays().value().size());
  const bool reclaimed = WaitFor([&] {
    outcome = tool.GetReplay("r-stale").value();
    return outcome && outcome->status == "failed";
  });
  INFO("status " << (outcome ? outcome->status + " by " + outcome->by : "absent"));
  REQUIRE(reclaimed);
  CHECK(outcome->by.rfind("billing-", 0) == 0);
  CHECK(outcome->by != "billing-dead");
  // One replay of a key at a time in the whole group.
  REQUIRE(tool.LeaseReplay(shipped.key, "elsewhere", 60'000).value().empty());
  auto busy = billing.Replay(shipped);
  REQUIRE(!busy);
  CHECK(busy.error().code() == ErrorCode::kConflict);
  CHECK(busy.error().message() ==
        "a replay of key 'order@cust-3' is running on elsewhere; try again when it is done");
  REQUIRE(tool.ReleaseReplay(shipped.key, "elsewhere"));
  // A request nobody ran can be withdrawn.
  billing.Stop();
  ReplayRequest late;
  late.id = "r3";
  late.event_id = shipped.id;
  REQUIRE(tool.RequestReplay(late));
  CHECK(tool.CancelReplay(late).value());
  CHECK(!tool.GetReplay("r3").value().has_value());

  // Retention: dead letters whose last failure is older than it go (counted, logged).
  ConsumerOptions short_lived = o;
  short_lived.dlq_retention_ms = 1;
  Consumer sweeper(s.client, s.service, inbox, short_lived);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(sweeper.ExpireDeadLetters().value() == 1);
  CHECK(sweeper.stats().expired == 1);
  CHECK(sweeper.dead_letters().Count().value() == 0);
  CHECK(!sweeper.dead_letters().KeyParked(shipped).value());
  CHECK(sweeper.ExpireDeadLetters().value() == 0);
  audit.Stop();
}

TEST_CASE(
    "A key parked by another consumer of the group (before this one took its sub-stream) "
    "parks this consumer's events of that key too",
    "[saga][consumer][dlq]") {
  Setup s;
  Inbox inbox(s.service);
  ConsumerOptions o = Options();
  // Another process of the group dead-lettered an event of cust-7 and went away.
  DeadLetterQueue elsewhere(s.client, "billing");
  DeadLetter earlier;
  earlier.event = Placed(900, "order@cust-7", 0);
  earlier.group = "billing";
  earlier.handler = "Placed";
  earlier.error = "cannot bill";
  earlier.first_failure_ms = earlier.last_failure_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count();  // else retention removes it at once
  REQUIRE(elsewhere.Add(earlier));
  CHECK(elsewhere.ParkedKeys().value() == std::vector<std::string>{"order@cust-7"});
  CHECK(elsewhere.KeyParked(earlier.event).value());
  Consumer billing(s.client, s.service, inbox, o);
  billing.On("Placed", Bill);
  REQUIRE(billing.Start());
  for (int n = 1; n < 4; ++n) {
    s.Append(Placed(900 + n, "order@cust-7", n), std::to_string(900 + n));
    s.Append(Placed(950 + n, "order@cust-8", n), std::to_string(950 + n));
  }
  const bool settled =
      WaitFor([&] { return billing.stats().parked == 3 && billing.stats().handled == 3; });
  INFO("parked " << billing.stats().parked << " handled " << billing.stats().handled);
  REQUIRE(settled);
  CHECK(Billed(s.service, "cust-8") == 3);
  CHECK(billing.dead_letters().Count().value() == 4);
  // Discarded elsewhere (the cached "parked" is checked again): the parked ones replay in order
  // and the key's next event is handled, not parked.
  REQUIRE(billing.Discard(earlier.event, "test"));
  CHECK(billing.Replay(Placed(901, "order@cust-7", 1)).value() == 3);
  s.Append(Placed(904, "order@cust-7", 4), "904");
  REQUIRE(WaitFor([&] { return Billed(s.service, "cust-7") == 4; }));
  CHECK(billing.stats().parked == 3);
  CHECK(billing.dead_letters().Count().value() == 0);
  CHECK(billing.dead_letters().ParkedKeys().value().empty());  // emptied counts are dropped
  billing.Stop();
}

TEST_CASE(
    "A group configured not to park keys dead-letters the poison event and handles its "
    "key's later events, and each dead letter replays alone",
    "[saga][consumer][dlq]") {
  Setup s;
  Inbox inbox(s.service);
  ConsumerOptions o = Options();
  o.park_keys = false;
  Consumer billing(s.client, s.service, inbox, o);
  std::atomic<bool> broken{true};
  billing.On("Placed", [&](const Event& e, HandlerContext& ctx) -> Result<void> {
    const auto n = e.payload.GetInt64("n").value();
    if (broken && (n == 1 || n == 3)) return Fail(ErrorCode::kBadRequest, "cannot bill");
    return Bill(e, ctx);
  });
  REQUIRE(billing.Start());
  std::vector<Event> events;
  for (int n = 0; n < 5; ++n) {
    events.push_back(Placed(960 + n, "order@cust-6", n));
    s.Append(events.back(), std::to_string(960 + n));
  }
  REQUIRE(WaitFor([&] { return billing.stats().handled == 3; }));
  CHECK(billing.stats().dead_lettered == 2);
  CHECK(billing.stats().parked == 0);
  CHECK(Billed(s.service, "cust-6") == 3);
  broken = false;
  CHECK(billing.Replay(events[3]).value() == 1);  // not the key's oldest: fine without parking
  CHECK(billing.dead_letters().Count().value() == 1);
  CHECK(billing.ReplayMatching(tessera::map::Predicate()).value().replayed == 1);
  CHECK(Billed(s.service, "cust-6") == 5);
  CHECK(billing.dead_letters().Count().value() == 0);
  billing.Stop();
}

TEST_CASE(
    "An event whose handler finds the grid unavailable is delivered again, in its key's "
    "order, and never becomes a dead letter, but another error after the retries does",
    "[saga][consumer][dlq]") {
  Setup s;
  Inbox inbox(s.service);
  Consumer billing(s.client, s.service, inbox, Options());  // 3 attempts in place
  std::atomic<int> outage{7};  // calls that find the grid gone: more than one delivery's retries
  std::mutex mu;
  std::vector<std::int64_t> order;  // cust-1's events as handled
  billing.On("Placed", [&](const Event& e, HandlerContext& ctx) -> Result<void> {
    if (e.key == "order@cust-1" && outage.fetch_sub(1) > 0) {
      return Fail(ErrorCode::kMemberLeft, "the member owning the partition left");
    }
    if (e.key == "order@cust-2") return Fail(ErrorCode::kInternal, "the handler has a bug");
    auto r = Bill(e, ctx);
    if (r) {
      std::lock_guard lock(mu);
      order.push_back(e.payload.GetInt64("n").value());
    }
    return r;
  });
  REQUIRE(billing.Start());
  for (int n = 0; n < 3; ++n) s.Append(Placed(700 + n, "order@cust-1", n), std::to_string(700 + n));
  s.Append(Placed(800, "order@cust-2", 0), "800");
  REQUIRE(WaitFor([&] {
    const auto st = billing.stats();
    return st.handled == 3 && st.dead_lettered == 1;
  }));
  const auto st = billing.stats();
  CHECK(st.unavailable >= 2);  // 7 failing calls: at least two deliveries spent their retries
  CHECK(Billed(s.service, "cust-1") == 3);
  {
    std::lock_guard lock(mu);
    CHECK(order == std::vector<std::int64_t>{0, 1, 2});
  }
  auto letters = billing.dead_letters().List().value();
  REQUIRE(letters.size() == 1);  // only the bug; the outage left nothing behind
  CHECK(letters[0].event.id == 800);
  CHECK(letters[0].error.find("has a bug") != std::string::npos);
  billing.Stop();
}

TEST_CASE(
    "An event its handler finds too early (reason RetryLater) is delivered again and never "
    "becomes a dead letter, where the same code without the reason does",
    "[saga][consumer][dlq]") {
  Setup s;
  Inbox inbox(s.service);
  Consumer billing(s.client, s.service, inbox, Options());  // 3 attempts in place
  std::atomic<int> early{5};  // more calls than one delivery's attempts
  billing.On("Placed", [&](const Event& e, HandlerContext& ctx) -> Result<void> {
    if (e.key == "order@cust-3" && early.fetch_sub(1) > 0) {
      return Fail(ErrorCode::kOverloaded, "the reply it follows has not come yet",
                  tessera::base::ErrorReason::kRetryLater);
    }
    if (e.key == "order@cust-4") return Fail(ErrorCode::kOverloaded, "a queue is full");
    return Bill(e, ctx);
  });
  REQUIRE(billing.Start());
  s.Append(Placed(950, "order@cust-3", 0), "950");
  s.Append(Placed(960, "order@cust-4", 0), "960");
  REQUIRE(WaitFor([&] {
    const auto st = billing.stats();
    return st.handled == 1 && st.dead_lettered == 1;
  }));
  CHECK(billing.stats().unavailable >= 1);
  CHECK(Billed(s.service, "cust-3") == 1);
  auto letters = billing.dead_letters().List().value();
  REQUIRE(letters.size() == 1);
  CHECK(letters[0].event.id == 960);
  billing.Stop();
}

TEST_CASE(
    "An event that finds the grid unavailable for longer than the limit becomes a dead letter "
    "after all",
    "[saga][consumer][dlq]") {
  Setup s;
  Inbox inbox(s.service);
  ConsumerOptions o = Options();
  o.unavailable_dead_letter_ms = 400;
  Consumer billing(s.client, s.service, inbox, o);
  billing.On("Placed", [&](const Event&, HandlerContext&) -> Result<void> {
    return Fail(ErrorCode::kTimeout, "the tax service never answers for this order");
  });
  REQUIRE(billing.Start());
  s.Append(Placed(900, "order@cust-9", 0), "900");
  REQUIRE(WaitFor([&] { return billing.stats().dead_lettered == 1; }));
  CHECK(billing.stats().unavailable >= 1);  // delivered again first, while younger than 400 ms
  auto letters = billing.dead_letters().List().value();
  REQUIRE(letters.size() == 1);
  CHECK(letters[0].event.id == 900);
  CHECK(letters[0].error.find("never answers") != std::string::npos);
  billing.Stop();
}
