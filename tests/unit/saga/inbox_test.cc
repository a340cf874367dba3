// The inbox on an embedded member whose TTLs run on a manual clock.
#include "tessera/saga/inbox.h"

#include <catch2/catch.hpp>

#include "saga_test_util.h"
#include "tessera/grid/map.h"
#include "tessera/grid/member.h"

using tessera::base::ErrorCode;
using tessera::base::ManualClock;
using tessera::grid::Member;
using tessera::grid::MemberOptions;
using tessera::grid::Transaction;
using tessera::record::GenericRecord;
using namespace tessera::saga;           // NOLINT
using namespace tessera::saga::testing;  // NOLINT

namespace {

Event Reserved(std::int64_t id) {
  Event e;
  e.id = id;
  e.type = "OrderPlaced";
  e.key = "order-1@wh-1";
  return e;
}

// The handler's changes: take one item-1 from warehouse wh-1's stock.
Transaction TakeOne(const std::string& warehouse = "wh-1") {
  Transaction tx(warehouse);
  tx.ExecuteOnKey("stock", "item-1@" + warehouse, "incrementRaw",
                  GenericRecord::Build().Int64("delta", -1).Done());
  return tx;
}

std::int64_t Stock(Member& m, const std::string& warehouse = "wh-1") {
  auto r = m.GetMap("stock")->ExecuteOnKey("item-1@" + warehouse, "incrementRaw",
                                           GenericRecord::Build().Int64("delta", 0).Done());
  REQUIRE(r.has_value());
  return r->GetInt64("value").value();
}

}  // namespace

TEST_CASE("An event delivered twice to a group applies its changes once, two groups once each",
          "[saga][inbox]") {
  ManualClock clock;
  Member member(ServiceOptions(), nullptr, &clock);
  REQUIRE(member.Start());
  Inbox inbox(member);
  const Event e = Reserved(101);
  CHECK(inbox.Commit("billing", e, TakeOne()) == InboxOutcome::kApplied);
  CHECK(inbox.Commit("billing", e, TakeOne()) == InboxOutcome::kDuplicate);
  CHECK(Stock(member) == -1);
  CHECK(inbox.Commit("shipping", e, TakeOne()) == InboxOutcome::kApplied);
  CHECK(inbox.Commit("shipping", e, TakeOne()) == InboxOutcome::kDuplicate);
  CHECK(Stock(member) == -2);
  CHECK(inbox.stats().applied == 2);
  CHECK(inbox.stats().duplicates == 2);
  CHECK(inbox.Seen("billing", e, "wh-1").value());
  CHECK(!inbox.Seen("billing", Reserved(102), "wh-1").value());

  // After the retention a marker is gone: a duplicate that late is applied again (documented).
  clock.Advance(InboxOptions{}.retention_ms);
  CHECK(inbox.Commit("billing", e, TakeOne()) == InboxOutcome::kApplied);
  member.Shutdown();
}

TEST_CASE("A handler writing to two partitions commits each part once across a retry",
          "[saga][inbox]") {
  Member member(ServiceOptions());
  REQUIRE(member.Start());
  Inbox inbox(member);
  const Event e = Reserved(201);
  // First delivery: the handler committed its wh-1 part, then its process died.
  CHECK(inbox.Commit("stock", e, TakeOne("wh-1")) == InboxOutcome::kApplied);
  // Redelivery: the handler runs again, both parts.
  CHECK(inbox.Commit("stock", e, TakeOne("wh-1")) == InboxOutcome::kDuplicate);
  CHECK(inbox.Commit("stock", e, TakeOne("wh-2")) == InboxOutcome::kApplied);
  CHECK(Stock(member, "wh-1") == -1);
  CHECK(Stock(member, "wh-2") == -1);
  member.Shutdown();
}

TEST_CASE("A handler's own failed precondition applies nothing and leaves the event unmarked",
          "[saga][inbox]") {
  Member member(ServiceOptions());
  REQUIRE(member.Start());
  Inbox inbox(member);
  const Event e = Reserved(301);
  Transaction needs_order("cust-1");
  needs_order.Set("payments", "pay-1@cust-1", "captured");
  needs_order.Get("orders", "order-1@cust-1").IfPresent();
  auto r = inbox.Commit("payments", e, needs_order);
  REQUIRE(!r);
  CHECK(r.error().code() == ErrorCode::kConflict);
  CHECK(r.error().message() ==
        "the handler's operation 1 (map 'orders', key 'order-1@cust-1') found absent; nothing "
        "was applied and the event is not marked handled");
  CHECK(!inbox.Seen("payments", e, "cust-1").value());
  CHECK(!member.GetMap("payments")->Get("pay-1@cust-1").value());
  // Once the order exists, the redelivered event is handled.
  REQUIRE(member.GetMap("orders")->Set("order-1@cust-1", "placed"));
  CHECK(inbox.Commit("payments", e, needs_order) == InboxOutcome::kApplied);
  CHECK(member.GetMap("payments")->Get("pay-1@cust-1").value() == "captured");
  member.Shutdown();
}

TEST_CASE("Side effects: a lease is held, released on failure, completed on success, and lapses",
          "[saga][inbox]") {
  ManualClock clock;
  Member member(ServiceOptions(), nullptr, &clock);
  REQUIRE(member.Start());
  InboxOptions options;
  options.lease_ms = 1000;
  Inbox inbox(member, options);
  const Event e = Reserved(401);
  auto lease = inbox.Lease("mail", e, "order-1").value();
  REQUIRE(lease.has_value());
  CHECK(!inbox.Lease("mail", e, "order-1").value());       // another delivery: held
  REQUIRE(inbox.Release("mail", e, "order-1", *lease));    // the email failed
  auto again = inbox.Lease("mail", e, "order-1").value();  // redelivery runs it again
  REQUIRE(again.has_value());
  REQUIRE(inbox.Complete("mail", e, "order-1"));         // sent
  REQUIRE(inbox.Release("mail", e, "order-1", *again));  // a late release: still done
  CHECK(!inbox.Lease("mail", e, "order-1").value());
  CHECK(inbox.stats().duplicates == 1);
  clock.Advance(5000);  // a completed marker outlives the lease time
  CHECK(!inbox.Lease("mail", e, "order-1").value());
  // A holder that stalled: its lease lapses, the next delivery takes it, and the stalled
  // holder's late release does not free the new holder's lease.
  const Event other = Reserved(402);
  auto stalled = inbox.Lease("mail", other, "order-1").value();
  REQUIRE(stalled.has_value());
  clock.Advance(1000);
  auto next = inbox.Lease("mail", other, "order-1").value();
  REQUIRE(next.has_value());
  REQUIRE(inbox.Release("mail", other, "order-1", *stalled));
  CHECK(!inbox.Lease("mail", other, "order-1").value());  // still held by the next one
  member.Shutdown();
}
