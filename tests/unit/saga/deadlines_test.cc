// Saga deadlines on a real two-member service cluster: each fires once, on the member that
// owns its saga's partition, and a completion that committed first wins over the timeout.
#include "tessera/saga/deadlines.h"

#include <catch2/catch.hpp>

#include <map>
#include <mutex>

#include "../grid/cluster_test_util.h"
#include "tessera/grid/map.h"
#include "tessera/saga/saga_store.h"

using tessera::base::ErrorCode;
using tessera::base::Result;
using tessera::grid::Member;
using tessera::grid::Transaction;
using tessera::record::GenericRecord;
using namespace tessera::saga;           // NOLINT
using namespace tessera::grid::testing;  // NOLINT

namespace {

std::int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Fires on one member: the saga times out (strict) and its deadline goes, in one transaction;
// a saga that finished first only loses its deadline.
struct Firing {
  std::mutex mu;
  std::map<std::string, std::vector<std::string>> fired;  // saga -> members that fired it
  std::map<std::string, int> timed_out, too_late;

  std::function<Result<void>(const Deadline&)> On(Member& member, std::string name) {
    return [this, &member, name](const Deadline& d) -> Result<void> {
      const std::string pk(tessera::partition::Partitioner::PartitionKey(d.saga_id));
      Transaction tx(pk);
      SagaStore::Stage(tx, d.saga_id, TimeOut("no reply within the deadline"));
      Deadlines::Clear(tx, d);
      auto r = member.Transact(tx);
      bool applied = r.has_value() && r->committed;
      if (!r) {
        if (r.error().code() != ErrorCode::kConflict) return std::unexpected(r.error());
        Transaction clear(pk);  // terminal already: the deadline has nothing left to do
        Deadlines::Clear(clear, d);
        if (auto c = member.Transact(clear); !c) return std::unexpected(c.error());
      }
      std::lock_guard lock(mu);
      fired[d.saga_id].push_back(name);
      (applied ? timed_out : too_late)[d.saga_id]++;
      return {};
    };
  }
};

}  // namespace

TEST_CASE(
    "Saga deadlines fire once each, on the owner of the saga's partition, and a completion "
    "that committed first wins",
    "[saga][deadlines][cluster]") {
  Firing firing;
  auto a = std::make_unique<Member>(ClusterMember());
  RegisterSagaProcessor(a->processors());
  auto a_deadlines = std::make_unique<Deadlines>(*a, firing.On(*a, "a"), DeadlinesOptions{50});
  REQUIRE(a->Start());
  auto b = std::make_unique<Member>(ClusterMember({AddressOf(*a)}));
  RegisterSagaProcessor(b->processors());
  auto b_deadlines = std::make_unique<Deadlines>(*b, firing.On(*b, "b"), DeadlinesOptions{50});
  REQUIRE(b->Start());
  REQUIRE(WaitUntil([&] { return AllList({a.get(), b.get()}, 2); }));
  REQUIRE(WaitUntil([&] { return b->map_service().AwaitingPartitionCount() == 0; }));

  SagaStore sagas(*a);
  const auto order = GenericRecord::Build("Order").Int64("total", 10).Done();
  auto start = [&](const std::string& id, std::int64_t due_ms) {
    Transaction tx(std::string(tessera::partition::Partitioner::PartitionKey(id)));
    SagaStore::Stage(tx, id, SagaStore::StartTransition("fulfillment", {"ship"}, order, due_ms));
    Deadlines::Set(tx, Deadline{id, "saga", 0, 0, due_ms});
    REQUIRE(a->Transact(tx).value().committed);
  };
  const std::int64_t due = WallMs() + 2'000;  // the 10 completions come well before
  for (int i = 0; i < 60; ++i)
    start("order-" + std::to_string(i) + "@cust-" + std::to_string(i), due);
  for (int i = 0; i < 10; ++i) {  // these finish before their deadline
    auto done = sagas.Apply("order-" + std::to_string(i) + "@cust-" + std::to_string(i),
                            StepDone(0, "shipped"));
    REQUIRE(done.value().applied);
  }
  // A fire records itself just after the transaction that clears its deadline: wait for both.
  auto fired_count = [&] {
    std::lock_guard lock(firing.mu);
    return firing.fired.size();
  };
  REQUIRE(WaitUntil([&] { return fired_count() >= 60; }));
  REQUIRE(WaitUntil([&] { return a->GetMap(kDeadlineMap)->Size().value_or(-1) == 0; }));
  {
    std::lock_guard lock(firing.mu);
    CHECK(firing.fired.size() == 60);
    std::map<std::string, int> by_member;
    for (const auto& [id, who] : firing.fired) {
      INFO(id);
      CHECK(who.size() == 1);  // exactly once, by one member
      by_member[who.front()]++;
    }
    CHECK(by_member["a"] > 0);  // each fired its own partitions' deadlines
    CHECK(by_member["b"] > 0);
    CHECK(firing.timed_out.size() == 50);
    CHECK(firing.too_late.size() == 10);
  }
  CHECK(sagas.List(tessera::map::Predicate::Equal("status", tessera::record::Value("TIMED_OUT")))
            .value()
            .size() == 50);
  CHECK(sagas.List(tessera::map::Predicate::Equal("status", tessera::record::Value("COMPLETED")))
            .value()
            .size() == 10);
  // A late reply to a timed-out saga changes nothing.
  auto late = sagas.Apply("order-20@cust-20", StepDone(0, "shipped after all"));
  REQUIRE(late.has_value());
  CHECK(!late->applied);
  CHECK(late->reason == "duplicate");

  // Member b leaves before its deadlines are due: member a, the new owner, fires them.
  const std::int64_t later = WallMs() + 2'500;  // after b has left
  for (int i = 100; i < 140; ++i) {
    start("order-" + std::to_string(i) + "@cust-" + std::to_string(i), later);
  }
  b_deadlines.reset();
  b->Shutdown();
  REQUIRE(WaitUntil([&] { return fired_count() >= 100; }));
  REQUIRE(WaitUntil([&] { return a->GetMap(kDeadlineMap)->Size().value_or(-1) == 0; }));
  {
    std::lock_guard lock(firing.mu);
    for (int i = 100; i < 140; ++i) {
      const auto& who = firing.fired["order-" + std::to_string(i) + "@cust-" + std::to_string(i)];
      REQUIRE(who.size() == 1);
      CHECK(who.front() == "a");
    }
  }
  CHECK(a_deadlines->stats().failed == 0);
  a_deadlines.reset();
  a->Shutdown();
}
