// The transactional outbox with real members on loopback: a service's embedded member stages
// events in its partition transactions, and its relay publishes them to a stream of a
// separate "shared" member through a client.
#include "tessera/saga/outbox.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "saga_test_util.h"
#include "tessera/grid/client.h"
#include "tessera/grid/id_generator.h"
#include "tessera/grid/map.h"

using tessera::grid::Client;
using tessera::grid::ClientOptions;
using tessera::grid::Member;
using tessera::grid::MemberOptions;
using tessera::grid::Transaction;
using tessera::record::GenericRecord;
using namespace tessera::saga;           // NOLINT
using namespace tessera::saga::testing;  // NOLINT

namespace {

OutboxOptions Options() {
  OutboxOptions o;
  o.service = "orders";
  o.stream = "order-events";
  o.stream_config.sub_streams = 4;
  o.backoff.initial_delay_ms = 20;
  o.backoff.max_delay_ms = 200;
  return o;
}

Event OrderEvent(std::int64_t id, const std::string& customer, int n) {
  Event e;
  e.id = id;
  e.type = "OrderCreated";
  e.key = "order-" + std::to_string(n) + "@" + customer;
  e.source = "orders";
  e.time_ms = 1'795'600'000'000 + n;
  e.payload = GenericRecord::Build("Order").Int64("n", n).Done();
  return e;
}

// Commits order n for `customer` with its event; returns whether it committed.
bool PlaceOrder(Member& service, const Event& event, const std::string& customer, int n,
                bool if_absent = false) {
  Transaction tx(customer);
  tx.Set("orders", "order-" + std::to_string(n) + "@" + customer, "placed");
  if (if_absent) tx.IfAbsent();
  REQUIRE(Outbox::Stage(tx, event));
  auto r = service.Transact(tx);
  REQUIRE(r.has_value());
  return r->committed;
}

// Every event in the shared stream, by sub-stream in offset order.
std::vector<Event> StreamEvents(Member& shared) {
  auto stream = shared.GetStream("order-events", Options().stream_config);
  std::vector<Event> out;
  for (std::uint32_t sub = 0; sub < 4; ++sub) {
    auto slice = stream->Read(sub, 1, 10'000);
    if (!slice) continue;  // the stream does not exist yet
    for (const auto& e : slice->events) {
      auto event = DecodeEvent(e.payload);
      REQUIRE(event.has_value());
      CHECK(std::to_string(event->id) == e.id);
      out.push_back(*event);
    }
  }
  return out;
}

}  // namespace

TEST_CASE(
    "Staged events commit with the business write, are published in order, once, and "
    "leave the outbox",
    "[saga][outbox]") {
  Member shared(SharedOptions());
  REQUIRE(shared.Start());
  auto client = ConnectShared(shared.native_port());
  Member service(ServiceOptions());
  Outbox outbox(service, client, Options());
  REQUIRE(service.Start());
  tessera::grid::IdGenerator ids(1);

  std::vector<std::int64_t> staged;
  for (int n = 0; n < 40; ++n) {
    const std::string customer = "cust-" + std::to_string(n % 5);
    const Event e = OrderEvent(ids.Next(), customer, n);
    REQUIRE(PlaceOrder(service, e, customer, n));
    staged.push_back(e.id);
  }
  // An event goes through its key's partition: staging it elsewhere is refused.
  Transaction elsewhere("cust-0");
  auto refused = Outbox::Stage(elsewhere, OrderEvent(ids.Next(), "cust-1", 0));
  REQUIRE(!refused);
  CHECK(refused.error().message().find("whose partition key 'cust-1' is not the transaction's "
                                       "('cust-0')") != std::string::npos);
  // A write whose precondition fails stages nothing.
  const Event lost = OrderEvent(ids.Next(), "cust-0", 0);
  CHECK(!PlaceOrder(service, lost, "cust-0", 0, /*if_absent=*/true));
  // The same event committed twice is one stream event.
  const Event twice = OrderEvent(ids.Next(), "cust-1", 100);
  REQUIRE(PlaceOrder(service, twice, "cust-1", 100));
  REQUIRE(PlaceOrder(service, twice, "cust-1", 100));
  staged.push_back(twice.id);

  REQUIRE(WaitFor([&] { return StreamEvents(shared).size() >= staged.size(); }));
  REQUIRE(WaitFor([&] { return service.GetMap(kOutboxMap)->Size().value_or(-1) == 0; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // nothing more comes
  const auto events = StreamEvents(shared);
  std::map<std::int64_t, int> count;
  std::map<std::string, std::vector<std::int64_t>> by_customer;
  for (const auto& e : events) {
    ++count[e.id];
    by_customer[e.key.substr(e.key.find('@') + 1)].push_back(e.id);
  }
  CHECK(events.size() == staged.size());
  for (auto id : staged) CHECK(count[id] == 1);
  CHECK(count.count(lost.id) == 0);
  for (const auto& [customer, list] : by_customer) {  // one producer's order, per key
    INFO(customer);
    CHECK(std::is_sorted(list.begin(), list.end()));
  }
  const auto stats = outbox.stats();
  CHECK(stats.published >= static_cast<std::int64_t>(staged.size()));
  CHECK(stats.staged >= static_cast<std::int64_t>(staged.size()));
  CHECK(stats.pending == 0);
  const std::string metrics = service.MetricsText();
  CHECK(metrics.find("tessera_outbox_pending{service=\"orders\"} 0\n") != std::string::npos);
  CHECK(metrics.find("tessera_outbox_oldest_pending_seconds{service=\"orders\"} 0\n") !=
        std::string::npos);
  CHECK(metrics.find("tessera_outbox_published_total{service=\"orders\"} " +
                     std::to_string(stats.published) + "\n") != std::string::npos);
  service.Shutdown();
}

TEST_CASE(
    "While the shared cluster is down, staged events stay in the outbox and are all "
    "published once it is back",
    "[saga][outbox]") {
  auto shared = std::make_unique<Member>(SharedOptions());
  REQUIRE(shared->Start());
  const std::uint16_t port = shared->native_port();
  auto client = ConnectShared(port);
  Member service(ServiceOptions());
  Outbox outbox(service, client, Options());
  REQUIRE(service.Start());
  tessera::grid::IdGenerator ids(2);

  shared->Shutdown();  // the outage
  shared.reset();
  std::vector<std::int64_t> staged;
  for (int n = 0; n < 20; ++n) {
    const Event e = OrderEvent(ids.Next(), "cust-" + std::to_string(n % 3), n);
    REQUIRE(PlaceOrder(service, e, "cust-" + std::to_string(n % 3), n));
    staged.push_back(e.id);
  }
  REQUIRE(WaitFor(
      [&] { return outbox.stats().publish_failures >= 2 && outbox.stats().pending == 20; }));
  CHECK(outbox.stats().staged == 20);
  CHECK(outbox.stats().oldest_pending_ms == 1'795'600'000'000);
  const std::string metrics = service.MetricsText();
  CHECK(metrics.find("tessera_outbox_pending{service=\"orders\"} 20\n") != std::string::npos);
  CHECK(metrics.find("tessera_outbox_publish_failures_total{service=\"orders\"} 0\n") ==
        std::string::npos);
  CHECK(service.GetMap(kOutboxMap)->Size().value() == 20);  // nothing expired or evicted

  MemberOptions back = SharedOptions(port);
  Member restarted(back);
  REQUIRE(restarted.Start());
  REQUIRE(WaitFor([&] { return StreamEvents(restarted).size() == staged.size(); },
                  std::chrono::seconds(30)));
  REQUIRE(WaitFor([&] { return outbox.stats().pending == 0; }));
  std::set<std::int64_t> got;
  for (const auto& e : StreamEvents(restarted)) got.insert(e.id);
  CHECK(got == std::set<std::int64_t>(staged.begin(), staged.end()));
  service.Shutdown();
}

TEST_CASE(
    "A staged event wakes its partition's relay: it is published at once, not at the next "
    "poll, and only once",
    "[saga][outbox]") {
  Member shared(SharedOptions());
  REQUIRE(shared.Start());
  auto client = ConnectShared(shared.native_port());
  Member service(ServiceOptions());
  OutboxOptions o = Options();
  o.poll_ms = 600'000;  // the poll alone would publish nothing within this test
  Outbox outbox(service, client, o);
  REQUIRE(service.Start());
  tessera::grid::IdGenerator ids(2);
  // Let the relays do their first scans (empty) and go idle.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::vector<std::int64_t> staged;
  for (int n = 0; n < 20; ++n) {
    const std::string customer = "cust-" + std::to_string(n % 3);
    const Event e = OrderEvent(ids.Next(), customer, n);
    REQUIRE(PlaceOrder(service, e, customer, n));
    staged.push_back(e.id);
    std::this_thread::sleep_for(std::chrono::milliseconds(n % 2));  // some idle, some busy
  }
  REQUIRE(WaitFor([&] { return StreamEvents(shared).size() >= staged.size(); },
                  std::chrono::seconds(10)));
  REQUIRE(WaitFor([&] { return service.GetMap(kOutboxMap)->Size().value_or(-1) == 0; },
                  std::chrono::seconds(10)));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(StreamEvents(shared).size() == staged.size());
  CHECK(outbox.stats().published == static_cast<std::int64_t>(staged.size()));  // no re-sends
  service.Shutdown();
}

TEST_CASE(
    "An event names its stream in a header, one no stream will take is set aside, and the "
    "partition's other events go on",
    "[saga][outbox]") {
  Member shared(SharedOptions());
  REQUIRE(shared.Start());
  auto client = ConnectShared(shared.native_port());
  Member service(ServiceOptions());
  Outbox outbox(service, client, Options());
  REQUIRE(service.Start());
  tessera::grid::IdGenerator ids(4);
  Event first = OrderEvent(ids.Next(), "cust-1", 1);
  Event elsewhere = OrderEvent(ids.Next(), "cust-1", 2);
  elsewhere.headers = {{kStreamHeader, "billing-events"}};
  Event bad = OrderEvent(ids.Next(), "cust-1", 3);
  bad.headers = {{kStreamHeader, "no such stream"}};  // spaces: never a stream's name
  Event last = OrderEvent(ids.Next(), "cust-1", 4);
  for (const auto& [e, n] : {std::pair{first, 1}, {elsewhere, 2}, {bad, 3}, {last, 4}}) {
    REQUIRE(PlaceOrder(service, e, "cust-1", n));
  }
  REQUIRE(WaitFor([&] { return StreamEvents(shared).size() == 2; }));
  REQUIRE(WaitFor([&] { return service.GetMap(kOutboxMap)->Size().value_or(-1) == 0; }));
  auto main_stream = StreamEvents(shared);
  CHECK(main_stream[0].id == first.id);
  CHECK(main_stream[1].id == last.id);
  auto billing = shared.GetStream("billing-events", Options().stream_config);
  std::vector<std::int64_t> billed;
  for (std::uint32_t sub = 0; sub < 4; ++sub) {
    auto slice = billing->Read(sub, 1, 100);
    if (!slice) continue;
    for (const auto& e : slice->events) billed.push_back(DecodeEvent(e.payload).value().id);
  }
  CHECK(billed == std::vector<std::int64_t>{elsewhere.id});
  auto rejected = service.GetMap(kRejectedOutboxMap)->EntrySet().value();
  REQUIRE(rejected.size() == 1);
  CHECK(DecodeEvent(rejected.front().second).value().id == bad.id);
  service.Shutdown();
}
