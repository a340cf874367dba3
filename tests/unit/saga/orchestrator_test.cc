// Orchestrated sagas end to end on real members: an orchestrating service ("orders"), a
// participants' service ("shop": inventory, payment, shipping) and a shared member for the
// streams. Every outcome is one status, decided by the scenario.
#include "tessera/saga/orchestrator.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <optional>

#include "../grid/cluster_test_util.h"
#include "saga_test_util.h"
#include "tessera/grid/id_generator.h"
#include "tessera/grid/map.h"
#include "tessera/saga/outbox.h"
#include "tessera/saga/participant.h"

using tessera::base::ErrorCode;
using tessera::base::Fail;
using tessera::base::Result;
using tessera::grid::Member;
using tessera::grid::Transaction;
using tessera::record::GenericRecord;
using namespace tessera::saga;           // NOLINT
using namespace tessera::saga::testing;  // NOLINT

namespace {

struct Shop {
  // How the participants behave.
  std::atomic<bool> decline{false};       // charge: refused, not retryable
  std::atomic<int> charge_glitches{0};    // charge: refused as retryable this many times
  std::atomic<bool> ship_refuses{false};  // ship: refused, not retryable
  std::atomic<bool> refund_fails{false};  // refund: refused every time
  std::atomic<bool> ship_holds{false};    // ship: waits for ship_go before it ships
  std::atomic<bool> ship_entered{false};  // a held ship handler has begun
  std::atomic<bool> ship_go{false};
  std::atomic<int> lines_calls{0};        // ReserveLines handler runs
  std::atomic<bool> lines_refuse{false};  // ReserveLines refuses (the stock is gone now)
  std::mutex mu;
  std::optional<Event> lines_command;  // the last one, guarded by mu
};

struct Fixture {
  Member shared{SharedOptions()};
  std::shared_ptr<tessera::grid::Client> client;
  Member orders{ServiceOptions()};
  Member shop_member{ServiceOptions()};
  std::unique_ptr<Outbox> orders_outbox, shop_outbox;
  std::unique_ptr<Inbox> orders_inbox, shop_inbox;
  std::unique_ptr<Orchestrator> orchestrator;
  std::unique_ptr<SagaParticipant> participant;
  std::vector<std::unique_ptr<Consumer>> consumers;
  Shop shop;

  explicit Fixture(SagaDefinition def, bool shipping_runs = true) {
    REQUIRE(shared.Start());
    client = ConnectShared(shared.native_port());
    OutboxOptions oo;
    oo.service = "orders";
    orders_outbox = std::make_unique<Outbox>(orders, client, oo);
    orders_inbox = std::make_unique<Inbox>(orders);
    OrchestratorOptions opt;
    opt.service = "orders";
    opt.deadlines.poll_ms = 20;
    orchestrator = std::make_unique<Orchestrator>(orders, client, *orders_inbox, opt);
    orchestrator->Define(std::move(def));
    REQUIRE(orders.Start());
    REQUIRE(orchestrator->Start());

    oo.service = "shop";
    shop_outbox = std::make_unique<Outbox>(shop_member, client, oo);
    REQUIRE(shop_member.Start());
    shop_inbox = std::make_unique<Inbox>(shop_member);
    participant = std::make_unique<SagaParticipant>(shop_member, client);
    auto consumer = [&](const std::string& group, const std::string& stream) -> Consumer& {
      ConsumerOptions co;
      co.group = group;
      co.streams = {stream};
      co.subscribe.max_idle_poll_ms = 5;
      consumers.push_back(std::make_unique<Consumer>(client, shop_member, *shop_inbox, co));
      return *consumers.back();
    };
    Consumer& inventory = consumer("inventory", "inventory.commands");
    participant->On(inventory, "ReserveStock",
                    [this](const Event&) { return Count("reserved", 1); });
    participant->On(inventory, "ReleaseStock",
                    [this](const Event&) { return Count("reserved", -1); });
    Consumer& payment = consumer("payment", "payment.commands");
    participant->On(payment, "ChargeCard", [this](const Event&) -> Result<StepWork> {
      if (shop.decline) return Refuse("card declined", false);
      if (shop.charge_glitches.fetch_sub(1) > 0) return Refuse("gateway timeout", true);
      return Count("charged", 1);
    });
    participant->On(payment, "RefundCard", [this](const Event&) -> Result<StepWork> {
      if (shop.refund_fails) return Refuse("refund service down", false);
      return Count("refunded", 1);
    });
    Consumer& shipping = consumer("shipping", "shipping.commands");
    participant->On(shipping, "Ship", [this](const Event&) -> Result<StepWork> {
      if (shop.ship_refuses) return Refuse("address invalid", false);
      if (shop.ship_holds) {
        shop.ship_entered = true;
        WaitFor([this] { return shop.ship_go.load(); }, std::chrono::seconds(10));
      }
      return Count("shipped", 1);
    });
    // Lines of an order: one part per product's partition.
    Consumer& lines = consumer("lines", "lines.commands");
    participant->On(lines, "ReserveLines", [this](const Event& cmd) -> Result<StepWork> {
      {
        std::lock_guard lock(shop.mu);
        shop.lines_command = cmd;
      }
      shop.lines_calls.fetch_add(1);
      if (shop.lines_refuse) return Refuse("out of stock", false);  // as after the first parts
      StepWork work;
      for (const char* sku : {"sku-1", "sku-2"}) {
        Transaction part(sku);
        part.ExecuteOnKey("ledger", std::string("line@") + sku, "incrementRaw",
                          GenericRecord::Build().Int64("delta", 1).Done());
        work.parts.push_back(std::move(part));
      }
      work.reply.result = "2 lines";
      return work;
    });
    for (auto& c : consumers) {
      if (c.get() == &shipping && !shipping_runs) continue;
      REQUIRE(c->Start());
    }
  }
  ~Fixture() {
    for (auto& c : consumers) c->Stop();
    orchestrator->Stop();
  }

  Result<StepWork> Count(const std::string& what, int delta) {
    Transaction tx("shop");
    tx.ExecuteOnKey("ledger", what + "@shop", "incrementRaw",
                    GenericRecord::Build().Int64("delta", delta).Done());
    return StepWork{std::move(tx), StepReply{true, false, "", what}};
  }
  static Result<StepWork> Refuse(const std::string& why, bool retryable) {
    return StepWork{std::nullopt, StepReply{false, retryable, why, ""}};
  }
  std::int64_t Ledger(const std::string& what) {
    auto v = shop_member.GetMap("ledger")->Get(what + "@shop").value();
    return v ? std::stoll(*v) : 0;
  }
  SagaRecord WaitTerminal(const std::string& id) {
    std::optional<SagaRecord> s;
    const bool ended = WaitFor([&] {
      s = orchestrator->store().Get(id).value();
      return s && IsTerminal(s->status);
    });
    INFO("status " << (s ? std::string(SagaStatusName(s->status)) : "absent") << " reason "
                   << (s ? s->failure_reason : ""));
    REQUIRE(ended);
    return *s;
  }
};

SagaDefinition Fulfillment() {
  SagaDefinition d;
  d.type = "fulfillment";
  auto step = [](std::string name, std::string stream, std::string cmd, std::string comp) {
    SagaStepDef s;
    s.name = std::move(name);
    s.stream = std::move(stream);
    s.command = std::move(cmd);
    s.compensation = std::move(comp);
    s.timeout_ms = 5'000;
    s.retry_delay_ms = 20;
    return s;
  };
  d.steps = {step("reserve", "inventory.commands", "ReserveStock", "ReleaseStock"),
             step("charge", "payment.commands", "ChargeCard", "RefundCard"),
             step("ship", "shipping.commands", "Ship", "")};
  d.compensation_attempts = 3;
  d.compensation_timeout_ms = 5'000;
  return d;
}

const GenericRecord kOrder = GenericRecord::Build("Order").Int64("total", 4200).Done();

}  // namespace

namespace {
// The orchestrator's armed deadlines (timeouts of 5 s and more): those of attempts that are
// over go with the transition that ended them, not by firing later.
bool NoDeadlinesLeft(Fixture& f) {
  return WaitFor([&] { return f.orders.GetMap(kDeadlineMap)->Size().value_or(-1) == 0; },
                 std::chrono::seconds(1));
}
}  // namespace

TEST_CASE("An orchestrated saga runs its steps through the participants to COMPLETED, once",
          "[saga][orchestrator]") {
  SagaDefinition def = Fulfillment();
  def.timeout_ms = 60'000;  // the saga's own deadline, cleared when it completes
  Fixture f(def);
  auto begun = f.orchestrator->Begin("order-1@cust-1", "fulfillment", kOrder);
  REQUIRE(begun.has_value());
  CHECK(begun->applied);
  auto again = f.orchestrator->Begin("order-1@cust-1", "fulfillment", kOrder);
  REQUIRE(again.has_value());
  CHECK(!again->applied);
  CHECK(again->reason == "exists");
  const SagaRecord s = f.WaitTerminal("order-1@cust-1");
  CHECK(s.status == SagaStatus::kCompleted);
  CHECK(s.steps[0].result == "reserved");
  CHECK(s.steps[1].result == "charged");
  CHECK(f.Ledger("reserved") == 1);
  CHECK(f.Ledger("charged") == 1);
  CHECK(f.Ledger("shipped") == 1);
  CHECK(NoDeadlinesLeft(f));
  // Counted just after the commit the record shows: wait for it.
  CHECK(WaitFor([&] { return f.orchestrator->stats().completed == 1; }));
  // Each of the 3 replies was planned from the record the orchestrator had written, unread.
  CHECK(f.orchestrator->stats().cached == 3);
  CHECK(f.orchestrator->stats().stale == 0);
  const std::string metrics = f.orders.MetricsText();
  CHECK(metrics.find("tessera_saga_started_total{service=\"orders\"} 1\n") != std::string::npos);
  CHECK(metrics.find("tessera_saga_completed_total{service=\"orders\"} 1\n") != std::string::npos);
  CHECK(metrics.find("tessera_saga_active{service=\"orders\"} 0\n") != std::string::npos);
  CHECK(metrics.find("tessera_saga_duration_seconds_count{service=\"orders\",type=\"fulfillment\"} "
                     "1\n") != std::string::npos);
  auto unknown = f.orchestrator->Begin("x@y", "nope", kOrder);
  REQUIRE(!unknown);
  CHECK(unknown.error().code() == ErrorCode::kNotFound);
}

TEST_CASE(
    "A saga changed behind the orchestrator's back is read again: the record it wrote last "
    "never decides a transition once the saga moved on",
    "[saga][orchestrator]") {
  Fixture f(Fulfillment());
  f.shop.ship_holds = true;
  REQUIRE(f.orchestrator->Begin("order-7@cust-7", "fulfillment", kOrder));
  REQUIRE(WaitFor([&] { return f.shop.ship_entered.load(); }));
  // While the ship command is being handled, someone else ends the step (an operator's tool).
  auto by_hand = f.orchestrator->store().Apply("order-7@cust-7", StepDone(2, "shipped by hand"));
  REQUIRE(by_hand.has_value());
  REQUIRE(by_hand->applied);
  REQUIRE(by_hand->saga->status == SagaStatus::kCompleted);
  const std::int64_t late_before = f.orchestrator->stats().late;
  f.shop.ship_go = true;
  // The ship reply is planned from the cached record (step 2 running), refused on the shard as
  // stale, read again, and found late.
  REQUIRE(WaitFor([&] { return f.orchestrator->stats().late > late_before; }));
  CHECK(f.orchestrator->stats().stale == 1);
  CHECK(f.orchestrator->stats().cached == 2);  // the reserve and charge replies
  const SagaRecord s = f.WaitTerminal("order-7@cust-7");
  CHECK(s.status == SagaStatus::kCompleted);
  CHECK(s.steps[2].result == "shipped by hand");
  CHECK(s.version == by_hand->saga->version);
  CHECK(f.Ledger("shipped") == 1);
}

TEST_CASE("A declined payment compensates the reserved stock in reverse and ends COMPENSATED",
          "[saga][orchestrator]") {
  Fixture f(Fulfillment());
  f.shop.decline = true;
  REQUIRE(f.orchestrator->Begin("order-2@cust-2", "fulfillment", kOrder));
  const SagaRecord s = f.WaitTerminal("order-2@cust-2");
  CHECK(s.status == SagaStatus::kCompensated);
  CHECK(s.failure_reason == "step charge failed: card declined");
  CHECK(s.steps[0].status == StepStatus::kCompensated);
  CHECK(s.steps[1].status == StepStatus::kFailed);
  CHECK(f.Ledger("reserved") == 0);  // reserved, then released once
  CHECK(f.Ledger("charged") == 0);
  CHECK(f.Ledger("refunded") == 0);  // nothing was charged: nothing refunded
  CHECK(NoDeadlinesLeft(f));         // the compensation's too
  // Counted just after the commit the record shows: wait for it.
  CHECK(WaitFor([&] { return f.orchestrator->stats().compensated == 1; }));
}

TEST_CASE("A retryable failure is retried until the step succeeds within its attempts",
          "[saga][orchestrator]") {
  Fixture f(Fulfillment());
  f.shop.charge_glitches = 2;
  REQUIRE(f.orchestrator->Begin("order-3@cust-3", "fulfillment", kOrder));
  const SagaRecord s = f.WaitTerminal("order-3@cust-3");
  CHECK(s.status == SagaStatus::kCompleted);
  CHECK(s.steps[1].attempts == 3);
  CHECK(f.Ledger("charged") == 1);
  CHECK(NoDeadlinesLeft(f));  // each attempt's deadline went with the attempt
}

TEST_CASE(
    "A step without a reply times out (its command is not sent again): TIMED_OUT, then it and "
    "the done steps are compensated and the saga ends COMPENSATED",
    "[saga][orchestrator]") {
  SagaDefinition d = Fulfillment();
  d.steps[2].timeout_ms = 300;
  d.steps[2].max_attempts = 2;
  Fixture f(d, /*shipping_runs=*/false);
  REQUIRE(f.orchestrator->Begin("order-4@cust-4", "fulfillment", kOrder));
  const SagaRecord s = f.WaitTerminal("order-4@cust-4");
  CHECK(s.status == SagaStatus::kCompensated);
  CHECK(s.failure_reason == "step ship got no reply within 300 ms");
  CHECK(s.steps[2].status == StepStatus::kCompensated);  // nothing to undo, marked at once
  CHECK(s.steps[2].attempts == 1);  // the first command may still be applied: not sent again
  CHECK(f.Ledger("refunded") == 1);
  CHECK(f.Ledger("reserved") == 0);
  // Counted just after the commit the record shows: wait for it.
  CHECK(WaitFor([&] { return f.orchestrator->stats().timed_out == 1; }));
}

TEST_CASE("The saga's deadline fires while a step hangs: one status, TIMED_OUT then COMPENSATED",
          "[saga][orchestrator]") {
  SagaDefinition d = Fulfillment();
  d.timeout_ms = 1'500;  // the ship step alone would wait 5 s
  Fixture f(d, /*shipping_runs=*/false);
  REQUIRE(f.orchestrator->Begin("order-5@cust-5", "fulfillment", kOrder));
  const SagaRecord s = f.WaitTerminal("order-5@cust-5");
  CHECK(s.status == SagaStatus::kCompensated);
  CHECK(s.failure_reason == "the saga's deadline passed in step ship");
  CHECK(f.Ledger("refunded") == 1);
  CHECK(f.Ledger("reserved") == 0);
}

TEST_CASE(
    "A compensation that keeps failing is recorded, the others still run, and the saga ends "
    "FAILED naming it",
    "[saga][orchestrator]") {
  Fixture f(Fulfillment());
  f.shop.ship_refuses = true;
  f.shop.refund_fails = true;
  REQUIRE(f.orchestrator->Begin("order-6@cust-6", "fulfillment", kOrder));
  const SagaRecord s = f.WaitTerminal("order-6@cust-6");
  CHECK(s.status == SagaStatus::kFailed);
  CHECK(s.failure_reason ==
        "step ship failed: address invalid; compensation of step charge failed: refund service "
        "down");
  CHECK(s.steps[1].status == StepStatus::kCompensationFailed);
  CHECK(s.steps[1].compensation_attempts == 3);
  CHECK(s.steps[0].status == StepStatus::kCompensated);  // still ran
  CHECK(f.Ledger("reserved") == 0);
  CHECK(f.Ledger("charged") == 1);
  CHECK(f.Ledger("refunded") == 0);
  // Counted just after the commit the record shows: wait for it.
  CHECK(WaitFor([&] { return f.orchestrator->stats().failed == 1; }));
}

TEST_CASE(
    "Choreography on a two-member service: participants report their steps, the saga's "
    "deadline fires on one member only, and the compensation commands are consumed once",
    "[saga][orchestrator][choreography]") {
  using tessera::grid::testing::AddressOf;
  using tessera::grid::testing::AllList;
  using tessera::grid::testing::ClusterMember;
  using tessera::grid::testing::WaitUntil;
  Member shared(SharedOptions());
  REQUIRE(shared.Start());
  auto client = ConnectShared(shared.native_port());
  SagaDefinition d;
  d.type = "choreo";
  SagaStepDef reserve;
  reserve.name = "reserve";
  reserve.stream = "inventory.commands";
  reserve.compensation = "ReleaseStock";
  SagaStepDef pay;
  pay.name = "pay";
  pay.stream = "payment.commands";
  d.steps = {reserve, pay};
  // Payment never reports; inventory's report must come before the deadline. It crosses five
  // hops (a's relay, the inventory consumer, shop's relay, an orchestrator's reply consumer,
  // the transition), each a poll or a lease away: in one full ASan run (2026-11-28, ctest -j2)
  // 15 of 20 reports took longer than the 2.5 s this deadline was, and those sagas timed out in
  // step reserve. The test is about what follows the deadline, so it leaves the reports time.
  d.timeout_ms = 8'000;
  struct Service {
    std::unique_ptr<Member> member;
    std::unique_ptr<Outbox> outbox;
    std::unique_ptr<Inbox> inbox;
    std::unique_ptr<Orchestrator> orchestrator;
  };
  auto make = [&](std::vector<std::string> join) {
    Service s;
    s.member = std::make_unique<Member>(ClusterMember(std::move(join)));
    OutboxOptions oo;
    oo.service = "orders";
    oo.stream = "orders.events";
    s.outbox = std::make_unique<Outbox>(*s.member, client, oo);
    s.inbox = std::make_unique<Inbox>(*s.member);
    OrchestratorOptions opt;
    opt.service = "orders";
    opt.deadlines.poll_ms = 20;
    s.orchestrator = std::make_unique<Orchestrator>(*s.member, client, *s.inbox, opt);
    s.orchestrator->Define(d);
    REQUIRE(s.member->Start());
    return s;
  };
  Service a = make({});
  Service b = make({AddressOf(*a.member)});
  REQUIRE(WaitUntil([&] { return AllList({a.member.get(), b.member.get()}, 2); }));
  REQUIRE(WaitUntil([&] { return b.member->map_service().AwaitingPartitionCount() == 0; }));
  REQUIRE(a.orchestrator->Start());
  REQUIRE(b.orchestrator->Start());

  Member shop(ServiceOptions());
  OutboxOptions so;
  so.service = "shop";
  Outbox shop_outbox(shop, client, so);
  REQUIRE(shop.Start());
  Inbox shop_inbox(shop);
  SagaParticipant participant(shop, client);
  ConsumerOptions co;
  co.group = "inventory";
  co.streams = {"orders.events"};
  co.subscribe.max_idle_poll_ms = 5;
  Consumer inventory(client, shop, shop_inbox, co);
  inventory.On("OrderPlaced", [&](const Event& e, HandlerContext& ctx) -> Result<void> {
    Transaction tx("shop");
    tx.ExecuteOnKey("ledger", "reserved@shop", "incrementRaw",
                    GenericRecord::Build().Int64("delta", 1).Done());
    if (auto ok = participant.Report(tx, e.correlation_id, 0, StepReply{true, false, "", "held"},
                                     "orders.saga-replies");
        !ok) {
      return ok;
    }
    auto r = ctx.Commit(tx);
    if (!r) return std::unexpected(r.error());
    return {};
  });
  co.group = "inventory-commands";
  co.streams = {"inventory.commands"};
  Consumer commands(client, shop, shop_inbox, co);
  participant.On(commands, "ReleaseStock", [&](const Event&) -> Result<StepWork> {
    Transaction tx("shop");
    tx.ExecuteOnKey("ledger", "reserved@shop", "incrementRaw",
                    GenericRecord::Build().Int64("delta", -1).Done());
    tx.ExecuteOnKey("ledger", "released@shop", "incrementRaw",
                    GenericRecord::Build().Int64("delta", 1).Done());
    return StepWork{std::move(tx), StepReply{true, false, "", "released"}};
  });
  REQUIRE(inventory.Start());
  REQUIRE(commands.Start());
  tessera::grid::IdGenerator ids(7);

  const int sagas = 20;
  for (int i = 0; i < sagas; ++i) {
    const std::string id = "order-" + std::to_string(i) + "@cust-" + std::to_string(i);
    Transaction tx("cust-" + std::to_string(i));
    REQUIRE(a.orchestrator->Stage(tx, id, "choreo", kOrder));
    Event placed;
    placed.id = ids.Next();
    placed.type = "OrderPlaced";
    placed.key = id;
    placed.correlation_id = id;
    REQUIRE(Outbox::Stage(tx, placed));
    REQUIRE(a.member->Transact(tx).value().committed);
    a.orchestrator->Started();
  }
  SagaStore store(*a.member);
  for (int i = 0; i < sagas; ++i) {
    const std::string id = "order-" + std::to_string(i) + "@cust-" + std::to_string(i);
    std::optional<SagaRecord> s;
    REQUIRE(WaitFor([&] {
      s = store.Get(id).value();
      return s && IsTerminal(s->status);
    }));
    INFO(id);
    CHECK(s->status == SagaStatus::kCompensated);
    CHECK(s->failure_reason == "the saga's deadline passed in step pay");
    CHECK(s->steps[0].result == "held");
  }
  CHECK(WaitFor([&] {  // counted just after their commits
    return a.orchestrator->stats().compensated + b.orchestrator->stats().compensated == sagas;
  }));
  const auto sa = a.orchestrator->stats();
  const auto sb = b.orchestrator->stats();
  CHECK(sa.timed_out + sb.timed_out == sagas);  // each deadline fired once, by one member
  CHECK(sa.timed_out > 0);
  CHECK(sb.timed_out > 0);
  CHECK(sa.commands + sb.commands == sagas);  // one ReleaseStock per saga
  auto ledger = [&](const std::string& k) {
    auto v = shop.GetMap("ledger")->Get(k + "@shop").value();
    return v ? std::stoll(*v) : 0;
  };
  CHECK(ledger("released") == sagas);
  CHECK(ledger("reserved") == 0);
  inventory.Stop();
  commands.Stop();
  a.orchestrator->Stop();
  b.orchestrator->Stop();
}

TEST_CASE(
    "A participant step over several partitions applies each part once and replies once, and a "
    "redelivered command finishes the stored plan even if the handler now refuses",
    "[saga][orchestrator]") {
  SagaDefinition d;
  d.type = "lines";
  SagaStepDef step;
  step.name = "reserve-lines";
  step.stream = "lines.commands";
  step.command = "ReserveLines";
  d.steps = {step};
  Fixture f(d);
  REQUIRE(f.orchestrator->Begin("order-7@cust-7", "lines", kOrder));
  const SagaRecord s = f.WaitTerminal("order-7@cust-7");
  CHECK(s.status == SagaStatus::kCompleted);
  CHECK(s.steps[0].result == "2 lines");
  auto line = [&](const std::string& sku) {
    auto v = f.shop_member.GetMap("ledger")->Get("line@" + sku).value();
    return v ? std::stoll(*v) : 0;
  };
  CHECK(line("sku-1") == 1);
  CHECK(line("sku-2") == 1);
  CHECK(f.shop.lines_calls == 1);

  // The same command again (as after a crash before the cursor moved), the handler now
  // refusing (its first parts took the stock): the stored plan wins, no refusal goes out.
  f.shop.lines_refuse = true;
  std::optional<Event> command;
  {
    std::lock_guard lock(f.shop.mu);
    command = f.shop.lines_command;
  }
  REQUIRE(command.has_value());
  auto stream = f.client->GetStream("lines.commands", tessera::grid::StreamConfig{});
  REQUIRE(stream->Append(command->key, EncodeEvent(*command), "again"));
  REQUIRE(WaitFor([&] { return f.participant->stats().duplicates == 1; }));
  CHECK(f.shop.lines_calls == 2);
  CHECK(f.participant->stats().refused == 0);
  CHECK(line("sku-1") == 1);
  CHECK(line("sku-2") == 1);
  CHECK(WaitFor([&] { return f.orchestrator->stats().late >= 1; }));  // its reply: a duplicate
  CHECK(f.orchestrator->store().Get("order-7@cust-7").value()->status == SagaStatus::kCompleted);
}
