#include "tessera/saga/saga_store.h"

#include <algorithm>
#include <chrono>

#include "tessera/base/clock.h"
#include "tessera/grid/map.h"

namespace tessera::saga {
namespace {

SagaTransition Make(SagaTransition::Op op, std::int32_t step, std::string result) {
  SagaTransition t;
  t.op = op;
  t.step = step;
  t.result = std::move(result);
  t.now_ms = base::SteadyClock().WallMs();
  return t;
}

base::Result<SagaOutcome> Decode(const base::Result<record::GenericRecord>& r) {
  if (!r) return std::unexpected(r.error());
  return OutcomeFromRecord(*r);
}

}  // namespace

SagaTransition StepDone(std::int32_t step, std::string result) {
  return Make(SagaTransition::Op::kStepDone, step, std::move(result));
}
SagaTransition StepFailed(std::int32_t step, std::string reason) {
  return Make(SagaTransition::Op::kStepFailed, step, std::move(reason));
}
SagaTransition TimeOut(std::string reason) {
  return Make(SagaTransition::Op::kTimeOut, 0, std::move(reason));
}
SagaTransition Compensate() { return Make(SagaTransition::Op::kCompensate, 0, {}); }
SagaTransition CompensationDone(std::int32_t step) {
  return Make(SagaTransition::Op::kCompensationDone, step, {});
}
SagaTransition CompensationFailed(std::int32_t step, std::string reason) {
  return Make(SagaTransition::Op::kCompensationFailed, step, std::move(reason));
}

SagaTransition LateDone(std::int32_t step, std::string result) {
  return Make(SagaTransition::Op::kLateDone, step, std::move(result));
}
SagaTransition RetryStep(std::int32_t step) { return Make(SagaTransition::Op::kRetry, step, {}); }

SagaTransition SagaStore::StartTransition(const std::string& type,
                                          const std::vector<std::string>& steps,
                                          const record::GenericRecord& data,
                                          std::int64_t deadline_ms) {
  SagaTransition t = Make(SagaTransition::Op::kStart, 0, {});
  t.type = type;
  t.step_names = steps;
  t.data = data;
  t.deadline_ms = deadline_ms;
  return t;
}

base::Result<SagaOutcome> SagaStore::Start(const std::string& id, const std::string& type,
                                           const std::vector<std::string>& steps,
                                           const record::GenericRecord& data,
                                           std::int64_t deadline_ms) {
  if (id.empty()) return base::Fail(base::ErrorCode::kBadRequest, "a saga needs an id");
  return Apply(id, StartTransition(type, steps, data, deadline_ms));
}

base::Result<SagaOutcome> SagaStore::Apply(const std::string& id, SagaTransition t) {
  t.strict = false;
  return Decode(
      instance_.GetMap(kSagaMap)->ExecuteOnKey(id, kSagaProcessor, TransitionToRecord(t)));
}

void SagaStore::Stage(grid::Transaction& tx, const std::string& id, SagaTransition t) {
  t.strict = true;
  tx.ExecuteOnKey(kSagaMap, id, kSagaProcessor, TransitionToRecord(t));
}

base::Result<std::optional<SagaRecord>> SagaStore::Get(const std::string& id) {
  auto bytes = instance_.GetMap(kSagaMap)->Get(id);
  if (!bytes) return std::unexpected(bytes.error());
  if (!bytes->has_value()) return std::optional<SagaRecord>();
  auto r = record::GenericRecord::Decode(**bytes);
  if (!r) return std::unexpected(r.error());
  auto saga = SagaFromRecord(*r);
  if (!saga) return std::unexpected(saga.error());
  return std::optional<SagaRecord>(std::move(*saga));
}

base::Result<std::vector<SagaRecord>> SagaStore::List(const map::Predicate& filter) {
  auto entries = instance_.GetMap(kSagaMap)->EntrySet(filter);
  if (!entries) return std::unexpected(entries.error());
  std::vector<SagaRecord> out;
  for (const auto& [key, bytes] : *entries) {
    auto r = record::GenericRecord::Decode(bytes);
    if (!r) continue;
    auto saga = SagaFromRecord(*r);
    if (saga) out.push_back(std::move(*saga));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return out;
}

}  // namespace tessera::saga
