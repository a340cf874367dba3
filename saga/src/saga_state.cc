#include "tessera/saga/saga_state.h"

#include <fmt/format.h>

#include <array>

#include "record_fields.h"

namespace tessera::saga {
namespace {

using base::ErrorCode;
using base::Fail;
using record::FieldType;
using record::GenericRecord;
using record::Value;

constexpr std::array<std::string_view, 6> kSagaStatusNames = {
    "STARTED", "COMPLETED", "COMPENSATING", "COMPENSATED", "TIMED_OUT", "FAILED"};
constexpr std::array<std::string_view, 7> kStepStatusNames = {
    "PENDING", "RUNNING", "DONE", "FAILED", "TIMED_OUT", "COMPENSATED", "COMPENSATION_FAILED"};
constexpr std::array<std::string_view, 9> kOpNames = {
    "start",      "step_done",         "step_failed",         "time_out",
    "compensate", "compensation_done", "compensation_failed", "retry",
    "late_done"};

base::Error Bad(const std::string& what) {
  return base::Error(ErrorCode::kBadRequest, "not a valid saga record: " + what);
}

template <std::size_t N>
std::optional<std::size_t> IndexOf(const std::array<std::string_view, N>& names,
                                   std::string_view name) {
  for (std::size_t i = 0; i < N; ++i) {
    if (names[i] == name) return i;
  }
  return std::nullopt;
}

SagaOutcome NotApplied(const std::optional<SagaRecord>& current, std::string reason) {
  return SagaOutcome{false, std::move(reason), current};
}

}  // namespace

std::string_view SagaStatusName(SagaStatus s) { return kSagaStatusNames[static_cast<int>(s)]; }
std::optional<SagaStatus> SagaStatusFromName(std::string_view name) {
  auto i = IndexOf(kSagaStatusNames, name);
  if (!i) return std::nullopt;
  return static_cast<SagaStatus>(*i);
}
std::string_view StepStatusName(StepStatus s) { return kStepStatusNames[static_cast<int>(s)]; }
std::string_view SagaOpName(SagaTransition::Op op) { return kOpNames[static_cast<int>(op)]; }

std::optional<std::int32_t> SagaRecord::NextCompensation() const {
  for (auto i = static_cast<std::int32_t>(steps.size()) - 1; i >= 0; --i) {
    const StepStatus s = steps[static_cast<std::size_t>(i)].status;
    if (s == StepStatus::kDone || s == StepStatus::kTimedOut) return i;
  }
  return std::nullopt;
}

GenericRecord SagaToRecord(const SagaRecord& s) {
  std::vector<Value> steps;
  for (const auto& step : s.steps) {
    steps.emplace_back(GenericRecord::Build("tessera.SagaStep")
                           .String("name", step.name)
                           .String("status", std::string(StepStatusName(step.status)))
                           .Int64("started_ms", step.started_ms)
                           .Int64("finished_ms", step.finished_ms)
                           .Int64("compensated_ms", step.compensated_ms)
                           .String("result", step.result)
                           .Int32("attempts", step.attempts)
                           .Int32("compensation_attempts", step.compensation_attempts)
                           .Int64("armed_ms", step.armed_ms)
                           .Done());
  }
  return GenericRecord::Build("tessera.Saga")
      .String("id", s.id)
      .String("type", s.type)
      .String("status", std::string(SagaStatusName(s.status)))
      .Int32("current_step", s.current_step)
      .List("steps", std::move(steps))
      .Record("data", s.data)
      .Int64("deadline_ms", s.deadline_ms)
      .String("failure_reason", s.failure_reason)
      .Int64("version", s.version)
      .Int64("created_ms", s.created_ms)
      .Int64("updated_ms", s.updated_ms)
      .Done();
}

base::Result<SagaRecord> SagaFromRecord(const GenericRecord& r) {
  if (r.type_name() != "tessera.Saga") {
    return std::unexpected(Bad("a record of type '" + r.type_name() + "'"));
  }
  SagaRecord s;
  std::string status;
  for (auto ok :
       {Into(r.GetString("id"), s.id), Into(r.GetString("type"), s.type),
        Into(r.GetString("status"), status), Into(r.GetInt32("current_step"), s.current_step),
        Into(r.GetRecord("data"), s.data), Into(r.GetInt64("deadline_ms"), s.deadline_ms),
        Into(r.GetString("failure_reason"), s.failure_reason),
        Into(r.GetInt64("version"), s.version), Into(r.GetInt64("created_ms"), s.created_ms),
        Into(r.GetInt64("updated_ms"), s.updated_ms)}) {
    if (!ok) return std::unexpected(ok.error());
  }
  auto parsed = SagaStatusFromName(status);
  if (!parsed) return std::unexpected(Bad("unknown status '" + status + "'"));
  s.status = *parsed;
  const Value* steps = r.Find("steps");
  if (steps == nullptr || steps->type() != FieldType::kList) {
    return std::unexpected(Bad("no list of steps"));
  }
  for (const Value& v : steps->AsList()) {
    if (v.type() != FieldType::kRecord) return std::unexpected(Bad("a step is not a record"));
    const GenericRecord& sr = v.AsRecord();
    StepRecord step;
    std::string step_status;
    for (auto ok :
         {Into(sr.GetString("name"), step.name), Into(sr.GetString("status"), step_status),
          Into(sr.GetInt64("started_ms"), step.started_ms),
          Into(sr.GetInt64("finished_ms"), step.finished_ms),
          Into(sr.GetInt64("compensated_ms"), step.compensated_ms),
          Into(sr.GetString("result"), step.result), Into(sr.GetInt32("attempts"), step.attempts),
          Into(sr.GetInt32("compensation_attempts"), step.compensation_attempts)}) {
      if (!ok) return std::unexpected(ok.error());
    }
    if (auto armed = sr.GetInt64("armed_ms")) step.armed_ms = *armed;  // absent: written before
    auto i = IndexOf(kStepStatusNames, step_status);
    if (!i) return std::unexpected(Bad("unknown step status '" + step_status + "'"));
    step.status = static_cast<StepStatus>(*i);
    s.steps.push_back(std::move(step));
  }
  return s;
}

GenericRecord TransitionToRecord(const SagaTransition& t) {
  std::vector<Value> names(t.step_names.begin(), t.step_names.end());
  return GenericRecord::Build("tessera.SagaTransition")
      .String("op", std::string(SagaOpName(t.op)))
      .Int32("step", t.step)
      .String("result", t.result)
      .Int64("now_ms", t.now_ms)
      .Bool("strict", t.strict)
      .Int64("expected_version", t.expected_version)
      .String("type", t.type)
      .List("step_names", std::move(names))
      .Record("data", t.data)
      .Int64("deadline_ms", t.deadline_ms)
      .Done();
}

base::Result<SagaTransition> TransitionFromRecord(const GenericRecord& r) {
  SagaTransition t;
  std::string op;
  for (auto ok :
       {Into(r.GetString("op"), op), Into(r.GetInt32("step"), t.step),
        Into(r.GetString("result"), t.result), Into(r.GetInt64("now_ms"), t.now_ms),
        Into(r.GetBool("strict"), t.strict),
        Into(r.GetInt64("expected_version"), t.expected_version), Into(r.GetString("type"), t.type),
        Into(r.GetRecord("data"), t.data), Into(r.GetInt64("deadline_ms"), t.deadline_ms)}) {
    if (!ok) return std::unexpected(ok.error());
  }
  auto i = IndexOf(kOpNames, op);
  if (!i) return Fail(ErrorCode::kBadRequest, "unknown saga transition '" + op + "'");
  t.op = static_cast<SagaTransition::Op>(*i);
  const Value* names = r.Find("step_names");
  if (names != nullptr && names->type() == FieldType::kList) {
    for (const Value& v : names->AsList()) {
      if (v.type() != FieldType::kString) {
        return Fail(ErrorCode::kBadRequest, "a saga step name is not a string");
      }
      t.step_names.push_back(v.AsString());
    }
  }
  return t;
}

GenericRecord OutcomeToRecord(const SagaOutcome& o) {
  auto b = GenericRecord::Build("tessera.SagaOutcome")
               .Bool("applied", o.applied)
               .String("reason", o.reason);
  if (o.saga) b.Record("saga", SagaToRecord(*o.saga));
  return b.Done();
}

base::Result<SagaOutcome> OutcomeFromRecord(const GenericRecord& r) {
  SagaOutcome o;
  for (auto ok : {Into(r.GetBool("applied"), o.applied), Into(r.GetString("reason"), o.reason)}) {
    if (!ok) return std::unexpected(ok.error());
  }
  if (r.Find("saga") != nullptr) {
    auto saga_record = r.GetRecord("saga");
    if (!saga_record) return std::unexpected(saga_record.error());
    auto saga = SagaFromRecord(*saga_record);
    if (!saga) return std::unexpected(saga.error());
    o.saga = std::move(*saga);
  }
  return o;
}

base::Result<SagaOutcome> ApplyTransition(const std::optional<SagaRecord>& current,
                                          const SagaTransition& t) {
  using Op = SagaTransition::Op;
  if (t.op == Op::kStart) {
    if (t.step_names.empty()) {
      return Fail(ErrorCode::kBadRequest, "a saga needs at least one step to start");
    }
    if (current) return NotApplied(current, "exists");
    SagaRecord s;
    s.type = t.type;
    s.status = SagaStatus::kStarted;
    s.data = t.data;
    s.deadline_ms = t.deadline_ms;
    s.created_ms = s.updated_ms = t.now_ms;
    s.version = 1;
    for (const auto& name : t.step_names) {
      StepRecord step;
      step.name = name;
      s.steps.push_back(std::move(step));
    }
    s.steps[0].status = StepStatus::kRunning;
    s.steps[0].started_ms = t.now_ms;
    s.steps[0].attempts = 1;
    s.steps[0].armed_ms = t.now_ms;
    return SagaOutcome{true, "", std::move(s)};
  }
  if (!current) return NotApplied(current, "absent");
  if (IsTerminal(current->status)) return NotApplied(current, "terminal");
  if (t.expected_version != 0 && t.expected_version != current->version) {
    return NotApplied(current, "stale");
  }
  const bool step_op = t.op == Op::kStepDone || t.op == Op::kStepFailed ||
                       t.op == Op::kCompensationDone || t.op == Op::kCompensationFailed ||
                       t.op == Op::kRetry || t.op == Op::kLateDone;
  if (step_op && (t.step < 0 || t.step >= static_cast<std::int32_t>(current->steps.size()))) {
    return Fail(ErrorCode::kBadRequest, fmt::format("saga '{}' has no step {} (it has {})",
                                                    current->id, t.step, current->steps.size()));
  }
  SagaRecord s = *current;
  auto step = [&](std::int32_t i) -> StepRecord& { return s.steps[static_cast<std::size_t>(i)]; };
  // Entering or moving on in COMPENSATING: the next compensation's first command goes out.
  auto first_compensation = [&] {
    if (auto next = s.NextCompensation()) {
      step(*next).compensation_attempts = 1;
      step(*next).armed_ms = t.now_ms;
    }
  };
  switch (t.op) {
    case Op::kStepDone:
    case Op::kStepFailed: {
      if (s.status != SagaStatus::kStarted || t.step < s.current_step) {
        return NotApplied(current, "duplicate");  // past: a redelivery or a late reply
      }
      if (t.step > s.current_step) return NotApplied(current, "out_of_order");
      StepRecord& st = step(t.step);
      st.finished_ms = t.now_ms;
      st.result = t.result;
      if (t.op == Op::kStepDone) {
        st.status = StepStatus::kDone;
        if (t.step + 1 == static_cast<std::int32_t>(s.steps.size())) {
          s.status = SagaStatus::kCompleted;
        } else {
          s.current_step = t.step + 1;
          step(s.current_step).status = StepStatus::kRunning;
          step(s.current_step).started_ms = t.now_ms;
          step(s.current_step).attempts = 1;
          step(s.current_step).armed_ms = t.now_ms;
        }
      } else {
        st.status = StepStatus::kFailed;
        s.failure_reason = "step " + st.name + " failed: " + t.result;
        s.status = SagaStatus::kCompensating;
        if (!s.NextCompensation()) s.status = SagaStatus::kCompensated;  // nothing to undo
        first_compensation();
      }
      break;
    }
    case Op::kLateDone: {
      if (s.status != SagaStatus::kCompensating && s.status != SagaStatus::kTimedOut) {
        return NotApplied(current, "not_allowed");
      }
      StepRecord& st = step(t.step);
      if (st.status != StepStatus::kPending && st.status != StepStatus::kRunning &&
          st.status != StepStatus::kFailed) {
        return NotApplied(current, "duplicate");  // done, or already compensated as such
      }
      st.status = StepStatus::kDone;
      st.finished_ms = t.now_ms;
      st.result = t.result;
      if (s.status == SagaStatus::kCompensating && s.NextCompensation() == t.step) {
        step(t.step).compensation_attempts = 1;  // it is next: its compensation goes out
        step(t.step).armed_ms = t.now_ms;
      }
      break;
    }
    case Op::kRetry: {
      if (s.status == SagaStatus::kStarted && t.step == s.current_step) {
        step(t.step).attempts += 1;
        step(t.step).armed_ms = t.now_ms;
      } else if (s.status == SagaStatus::kCompensating && s.NextCompensation() == t.step) {
        step(t.step).compensation_attempts += 1;
        step(t.step).armed_ms = t.now_ms;
      } else {
        return NotApplied(current, "duplicate");  // that step or compensation is over
      }
      break;
    }
    case Op::kTimeOut: {
      if (s.status != SagaStatus::kStarted) return NotApplied(current, "not_allowed");
      StepRecord& st = step(s.current_step);
      st.status = StepStatus::kTimedOut;
      st.finished_ms = t.now_ms;
      s.status = SagaStatus::kTimedOut;
      s.failure_reason = t.result.empty() ? "timed out in step " + st.name : t.result;
      break;
    }
    case Op::kCompensate: {
      if (s.status != SagaStatus::kTimedOut) return NotApplied(current, "not_allowed");
      s.status = s.NextCompensation() ? SagaStatus::kCompensating : SagaStatus::kCompensated;
      first_compensation();
      break;
    }
    case Op::kCompensationDone:
    case Op::kCompensationFailed: {
      if (s.status != SagaStatus::kCompensating) return NotApplied(current, "not_allowed");
      const auto next = s.NextCompensation();
      if (!next || t.step > *next) return NotApplied(current, "duplicate");
      if (t.step < *next) return NotApplied(current, "out_of_order");
      StepRecord& st = step(t.step);
      st.compensated_ms = t.now_ms;
      if (t.op == Op::kCompensationDone) {
        st.status = StepStatus::kCompensated;
      } else {
        st.status = StepStatus::kCompensationFailed;
        st.result = t.result;
      }
      first_compensation();
      if (!s.NextCompensation()) {
        s.status = SagaStatus::kCompensated;
        for (const auto& done : s.steps) {
          if (done.status == StepStatus::kCompensationFailed) {
            s.status = SagaStatus::kFailed;
            s.failure_reason += (s.failure_reason.empty() ? "" : "; ") +
                                ("compensation of step " + done.name + " failed: " + done.result);
          }
        }
      }
      break;
    }
    case Op::kStart:
      break;  // handled above
  }
  s.version += 1;
  s.updated_ms = t.now_ms;
  return SagaOutcome{true, "", std::move(s)};
}

void RegisterSagaProcessor(map::EntryProcessorRegistry& registry) {
  registry.Register(
      kSagaProcessor,
      [](map::MutableEntry& entry, const GenericRecord& argument) -> base::Result<GenericRecord> {
        auto t = TransitionFromRecord(argument);
        if (!t) return std::unexpected(t.error());
        std::optional<SagaRecord> current;
        if (entry.value()) {
          auto r = entry.Record();
          if (!r) return std::unexpected(r.error());
          auto saga = SagaFromRecord(*r);
          if (!saga) return std::unexpected(saga.error());
          current = std::move(*saga);
        }
        auto outcome = ApplyTransition(current, *t);
        if (!outcome) return std::unexpected(outcome.error());
        if (outcome->applied) {
          // The id is the entry's key (its partition key included): the record names itself.
          if (t->op == SagaTransition::Op::kStart) outcome->saga->id = std::string(entry.key());
          entry.SetRecord(SagaToRecord(*outcome->saga));
          // Staged in a transaction: the caller planned the record itself and reads only
          // whether the transaction committed.
          if (t->strict) outcome->saga.reset();
        } else if (t->strict) {
          return Fail(ErrorCode::kConflict,
                      fmt::format("{}saga '{}' {} ({}, {})", kNotApplied, entry.key(),
                                  outcome->reason, SagaOpName(t->op),
                                  outcome->saga ? SagaStatusName(outcome->saga->status) : "absent"),
                      base::ErrorReason::kNotApplied);
        }
        return OutcomeToRecord(*outcome);
      });
}

}  // namespace tessera::saga
