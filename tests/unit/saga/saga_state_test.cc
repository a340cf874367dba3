// Saga state: the transition table applied to records (deterministic), then the store on a
// real member, where the "tessera.saga" processor makes racing starts and step events safe.
#include "tessera/saga/saga_state.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "saga_test_util.h"
#include "tessera/grid/map.h"
#include "tessera/grid/member.h"
#include "tessera/saga/saga_store.h"

using tessera::base::ErrorCode;
using tessera::grid::Member;
using tessera::grid::Transaction;
using tessera::record::GenericRecord;
using namespace tessera::saga;           // NOLINT
using namespace tessera::saga::testing;  // NOLINT

namespace {

using Op = SagaTransition::Op;

SagaTransition T(Op op, std::int32_t step = 0, std::string result = {}) {
  SagaTransition t;
  t.op = op;
  t.step = step;
  t.result = std::move(result);
  t.now_ms = 1000 + step;
  return t;
}

SagaTransition StartOf(int steps) {
  SagaTransition start = T(Op::kStart);
  start.type = "fulfillment";
  for (int i = 0; i < steps; ++i) start.step_names.push_back("s" + std::to_string(i));
  return start;
}

SagaRecord Started(int steps = 3) {
  auto o = ApplyTransition(std::nullopt, StartOf(steps));
  REQUIRE(o.has_value());
  REQUIRE(o->applied);
  return *o->saga;
}

// Applies `t`, requiring it to apply; returns the new record.
SagaRecord Must(const SagaRecord& s, const SagaTransition& t) {
  auto o = ApplyTransition(s, t);
  REQUIRE(o.has_value());
  INFO(SagaOpName(t.op) << " step " << t.step << ": " << o->reason);
  REQUIRE(o->applied);
  return *o->saga;
}

std::string Refused(const SagaRecord& s, const SagaTransition& t) {
  auto o = ApplyTransition(s, t);
  REQUIRE(o.has_value());
  REQUIRE(!o->applied);
  CHECK(*o->saga == s);  // unchanged
  return o->reason;
}

}  // namespace

TEST_CASE("A saga runs its steps in order to COMPLETED, and nothing changes it after",
          "[saga][state]") {
  SagaRecord s = Started();
  CHECK(s.status == SagaStatus::kStarted);
  CHECK(s.version == 1);
  CHECK(s.steps[0].status == StepStatus::kRunning);
  CHECK(Refused(s, StartOf(3)) == "exists");
  CHECK(Refused(s, T(Op::kStepDone, 1)) == "out_of_order");  // a step cannot be skipped
  s = Must(s, T(Op::kStepDone, 0, "reserved"));
  CHECK(s.current_step == 1);
  CHECK(s.steps[0].status == StepStatus::kDone);
  CHECK(s.steps[0].result == "reserved");
  CHECK(s.steps[1].status == StepStatus::kRunning);
  CHECK(Refused(s, T(Op::kStepDone, 0)) == "duplicate");  // redelivered: no-op
  CHECK(Refused(s, T(Op::kCompensationDone, 0)) == "not_allowed");
  s = Must(s, T(Op::kStepDone, 1));
  s = Must(s, T(Op::kStepDone, 2));
  CHECK(s.status == SagaStatus::kCompleted);
  CHECK(s.version == 4);
  for (auto op :
       {Op::kStepDone, Op::kStepFailed, Op::kTimeOut, Op::kCompensate, Op::kCompensationDone}) {
    CHECK(Refused(s, T(op, 2)) == "terminal");
  }
  CHECK(Refused(s, T(Op::kStepDone, 7)) == "terminal");  // whatever the step
  SagaRecord fresh = Started();
  auto bad = ApplyTransition(fresh, T(Op::kStepDone, 7));
  REQUIRE(!bad);
  CHECK(bad.error().code() == ErrorCode::kBadRequest);
  auto empty = ApplyTransition(std::nullopt, T(Op::kStart));
  REQUIRE(!empty);
  CHECK(empty.error().message() == "a saga needs at least one step to start");
  CHECK(Refused(fresh, T(Op::kCompensate)) == "not_allowed");
}

TEST_CASE(
    "A failed step compensates the done steps in reverse order, and a failed compensation "
    "still lets the others run and ends FAILED naming it",
    "[saga][state]") {
  SagaRecord s = Started(4);
  s = Must(s, T(Op::kStepDone, 0));
  s = Must(s, T(Op::kStepDone, 1));
  s = Must(s, T(Op::kStepFailed, 2, "card declined"));
  CHECK(s.status == SagaStatus::kCompensating);
  CHECK(s.failure_reason == "step s2 failed: card declined");
  CHECK(s.steps[2].status == StepStatus::kFailed);
  CHECK(s.NextCompensation() == 1);  // the failed step did nothing: s1 first
  CHECK(Refused(s, T(Op::kCompensationDone, 0)) == "out_of_order");
  CHECK(Refused(s, T(Op::kStepDone, 2)) == "duplicate");  // a late reply
  s = Must(s, T(Op::kCompensationFailed, 1, "refund service gone"));
  CHECK(s.status == SagaStatus::kCompensating);  // the next one still runs
  CHECK(s.NextCompensation() == 0);
  CHECK(Refused(s, T(Op::kCompensationDone, 1)) == "duplicate");
  s = Must(s, T(Op::kCompensationDone, 0));
  CHECK(s.status == SagaStatus::kFailed);
  CHECK(s.failure_reason ==
        "step s2 failed: card declined; compensation of step s1 failed: refund service gone");
  CHECK(s.steps[0].status == StepStatus::kCompensated);
  CHECK(s.steps[1].status == StepStatus::kCompensationFailed);

  SagaRecord first = Started();
  first = Must(first, T(Op::kStepFailed, 0, "out of stock"));
  CHECK(first.status == SagaStatus::kCompensated);  // nothing was done: nothing to undo
}

TEST_CASE(
    "A timed-out saga compensates the step that was running too, and a late reply changes "
    "nothing",
    "[saga][state]") {
  SagaRecord s = Started();
  s = Must(s, T(Op::kStepDone, 0));
  s = Must(s, T(Op::kTimeOut));
  CHECK(s.status == SagaStatus::kTimedOut);
  CHECK(s.steps[1].status == StepStatus::kTimedOut);
  CHECK(s.failure_reason == "timed out in step s1");
  CHECK(Refused(s, T(Op::kStepDone, 1)) == "duplicate");  // the reply came too late
  CHECK(Refused(s, T(Op::kTimeOut)) == "not_allowed");    // fires once
  s = Must(s, T(Op::kCompensate));
  CHECK(s.status == SagaStatus::kCompensating);
  CHECK(s.NextCompensation() == 1);  // its action may have happened
  s = Must(s, T(Op::kCompensationDone, 1));
  s = Must(s, T(Op::kCompensationDone, 0));
  CHECK(s.status == SagaStatus::kCompensated);
  CHECK(s.failure_reason == "timed out in step s1");
}

TEST_CASE("A saga record survives its encoding", "[saga][state]") {
  SagaRecord s = Started();
  s.id = "order-1@cust-1";
  s.data = GenericRecord::Build("Order").Int64("total", 1250).Done();
  s.deadline_ms = 99;
  s = Must(s, T(Op::kStepDone, 0, "ok"));
  auto back = SagaFromRecord(SagaToRecord(s));
  REQUIRE(back.has_value());
  CHECK(*back == s);
  auto t = T(Op::kStart);
  t.step_names = {"a", "b"};
  t.data = s.data;
  auto tb = TransitionFromRecord(TransitionToRecord(t));
  REQUIRE(tb.has_value());
  CHECK(tb->step_names == t.step_names);
  CHECK(tb->data == t.data);
  auto junk = SagaFromRecord(GenericRecord::Build("Other").Done());
  REQUIRE(!junk);
  CHECK(junk.error().message() == "not a valid saga record: a record of type 'Other'");
}

TEST_CASE(
    "On a member: racing starts of one saga id create one saga, racing replies apply once, "
    "and a transition that does not apply fails its transaction",
    "[saga][state]") {
  Member member(ServiceOptions());
  RegisterSagaProcessor(member.processors());
  REQUIRE(member.Start());
  SagaStore sagas(member);
  const std::string id = "order-9@cust-9";
  const auto order = GenericRecord::Build("Order").Int64("total", 500).Done();
  std::atomic<int> created{0}, replies{0};
  std::vector<std::thread> racers;
  for (int i = 0; i < 8; ++i) {
    racers.emplace_back([&] {
      auto o = sagas.Start(id, "fulfillment", {"reserve", "charge"}, order, 0);
      REQUIRE(o.has_value());
      created += o->applied;
    });
  }
  for (auto& t : racers) t.join();
  racers.clear();
  CHECK(created == 1);
  for (int i = 0; i < 8; ++i) {
    racers.emplace_back([&] {
      auto o = sagas.Apply(id, StepDone(0, "reserved"));  // one reply, delivered 8 times
      REQUIRE(o.has_value());
      replies += o->applied;
    });
  }
  for (auto& t : racers) t.join();
  CHECK(replies == 1);
  auto saga = sagas.Get(id).value();
  REQUIRE(saga.has_value());
  CHECK(saga->id == id);
  CHECK(saga->version == 2);
  CHECK(saga->current_step == 1);
  CHECK(saga->data == order);

  // Strict inside a transaction: a duplicate reply applies nothing, not even its other writes.
  Transaction tx("cust-9");
  SagaStore::Stage(tx, id, StepDone(0, "again"));
  tx.Set("notes", "n@cust-9", "should not exist");
  auto r = member.Transact(tx);
  REQUIRE(!r);
  CHECK(r.error().code() == ErrorCode::kConflict);
  CHECK(r.error().message().find("saga transition not applied: saga 'order-9@cust-9' duplicate "
                                 "(step_done, STARTED)") != std::string::npos);
  CHECK(!member.GetMap("notes")->Get("n@cust-9").value().has_value());
  Transaction next("cust-9");
  SagaStore::Stage(next, id, StepDone(1, "charged"));
  next.Set("notes", "n@cust-9", "charged");
  REQUIRE(member.Transact(next).value().committed);
  CHECK(sagas.Get(id).value()->status == SagaStatus::kCompleted);

  REQUIRE(sagas.Start("order-10@cust-3", "fulfillment", {"reserve"}, order, 0).value().applied);
  auto started =
      sagas.List(tessera::map::Predicate::Equal("status", tessera::record::Value("STARTED")));
  REQUIRE(started.has_value());
  REQUIRE(started->size() == 1);
  CHECK(started->front().id == "order-10@cust-3");
  CHECK(sagas.List().value().size() == 2);
  member.Shutdown();
}

TEST_CASE(
    "Retries are counted on the running step or compensation, and a stale version applies "
    "nothing",
    "[saga][state]") {
  SagaRecord s = Started();
  CHECK(s.steps[0].attempts == 1);
  s = Must(s, T(Op::kRetry, 0));
  CHECK(s.steps[0].attempts == 2);
  CHECK(Refused(s, T(Op::kRetry, 1)) == "duplicate");  // not the running step
  SagaTransition stale = T(Op::kStepDone, 0);
  stale.expected_version = s.version - 1;
  CHECK(Refused(s, stale) == "stale");
  stale.expected_version = s.version;
  s = Must(s, stale);
  CHECK(s.steps[1].attempts == 1);
  s = Must(s, T(Op::kStepFailed, 1, "declined"));
  CHECK(s.steps[0].compensation_attempts == 1);  // its compensation goes out
  s = Must(s, T(Op::kRetry, 0));
  CHECK(s.steps[0].compensation_attempts == 2);
  s = Must(s, T(Op::kCompensationDone, 0));
  CHECK(s.status == SagaStatus::kCompensated);
  CHECK(Refused(s, T(Op::kRetry, 0)) == "terminal");
}

TEST_CASE("A step reported done after compensation began is compensated too", "[saga][state]") {
  SagaRecord s = Started();
  s = Must(s, T(Op::kStepDone, 0));
  s = Must(s, T(Op::kTimeOut));                           // step 1 was running: TIMED_OUT
  CHECK(Refused(s, T(Op::kLateDone, 1)) == "duplicate");  // already compensated as timed out
  s = Must(s, T(Op::kCompensate));
  CHECK(s.NextCompensation() == 1);
  CHECK(Refused(s, T(Op::kLateDone, 0)) == "duplicate");
  SagaRecord c = Started();  // a choreography: step 2 happened, its report late
  c = Must(c, T(Op::kStepDone, 0));
  c = Must(c, T(Op::kStepFailed, 1, "declined"));
  CHECK(c.NextCompensation() == 0);
  c = Must(c, T(Op::kLateDone, 2, "shipped anyway"));
  CHECK(c.steps[2].status == StepStatus::kDone);
  CHECK(c.NextCompensation() == 2);  // undone first, then step 0
  CHECK(c.steps[2].compensation_attempts == 1);
  c = Must(c, T(Op::kCompensationDone, 2));
  c = Must(c, T(Op::kCompensationDone, 0));
  CHECK(c.status == SagaStatus::kCompensated);
  CHECK(Refused(c, T(Op::kLateDone, 1)) == "terminal");
  CHECK(Refused(Started(), T(Op::kLateDone, 0)) == "not_allowed");
}
