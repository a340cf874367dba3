// Consumer groups over a real "shared" member: routing by type, the inbox absorbing duplicate
// deliveries, per-key order, in-place retries and an open circuit breaker holding events back.
#include "tessera/saga/consumer.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

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
using namespace tessera::saga;  // NOLINT

namespace {

template <typename Pred>
bool WaitFor(Pred done, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return done();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

struct Setup {
  Member shared{[] {
    MemberOptions o;
    o.port = 0;
    o.threads = 1;
    o.cluster_name = "shared";
    return o;
  }()};
  Member service{[] {
    MemberOptions o;
    o.listen = false;
    o.threads = 1;
    return o;
  }()};
  std::shared_ptr<Client> client;
  std::shared_ptr<tessera::grid::Stream> stream;

  Setup() {
    REQUIRE(shared.Start());
    REQUIRE(service.Start());
    tessera::grid::ClientOptions o;
    o.addresses = {"127.0.0.1:" + std::to_string(shared.native_port())};
    o.cluster_name = "shared";
    auto c = Client::Connect(o);
    REQUIRE(c.has_value());
    client = std::shared_ptr<Client>(std::move(*c));
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
  Consumer consumer(s.client, s.service, inbox, Options());
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
