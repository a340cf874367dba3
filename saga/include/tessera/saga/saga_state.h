#pragma once
// Saga state: a saga's record and the only ways it may change. The record
// lives in a map of the orchestrating service's embedded cluster and is changed only by the
// entry processor "tessera.saga" (RegisterSagaProcessor), which applies a SagaTransition
// atomically on the partition's shard: no get-modify-set, so two instances of a service never
// race on one saga. The transition table:
//
//   (absent)      --start------------------> STARTED
//   STARTED       --step_done (current)----> STARTED, next step (COMPLETED after the last)
//   STARTED       --step_failed (current)--> COMPENSATING (compensates the done steps)
//   STARTED       --time_out---------------> TIMED_OUT (the running step counts as done: its
//                                            action may have happened, so it is compensated)
//   TIMED_OUT     --compensate-------------> COMPENSATING
//   COMPENSATING  --compensation_done/failed (the next step to compensate)
//                                         -> COMPENSATING, then COMPENSATED when every one is
//                                            done, FAILED if one finally failed (named)
//   STARTED / COMPENSATING --retry (the running step / the next compensation)
//                                         -> the same status, one more attempt recorded
//   TIMED_OUT / COMPENSATING --late_done (a step that was not done: pending, running or
//                                            failed) -> the same status, the step DONE: its
//                                            action happened after all, so it is compensated
//
// With expected_version set, a transition applies only to that version of the record ("stale"
// otherwise): a caller that planned its side effects from the record it read (the commands it
// stages with the transition) gets them applied only if nothing changed in between.
//
// COMPLETED, COMPENSATED and FAILED are terminal: nothing changes them. A step event for a
// step that is already past (a duplicate, or late after a timeout) is a no-op; a step cannot
// go backwards or be skipped. A second start of the same id creates nothing. Not applied, a
// transition leaves the record as it was and says why (SagaOutcome::reason); run inside a
// partition transaction with `strict`, it fails instead (kConflict, message starting with
// kNotApplied), so the transaction's other writes (outbox events, inbox marker) are not
// applied either.
//
// Thread-safety: values and pure functions.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/map/entry_processor.h"
#include "tessera/record/generic_record.h"

namespace tessera::saga {

enum class SagaStatus : std::uint8_t {
  kStarted = 0,
  kCompleted = 1,
  kCompensating = 2,
  kCompensated = 3,
  kTimedOut = 4,
  kFailed = 5,
};
std::string_view SagaStatusName(SagaStatus status);  // "STARTED", "COMPLETED", ...
std::optional<SagaStatus> SagaStatusFromName(std::string_view name);
inline bool IsTerminal(SagaStatus s) {
  return s == SagaStatus::kCompleted || s == SagaStatus::kCompensated || s == SagaStatus::kFailed;
}

enum class StepStatus : std::uint8_t {
  kPending = 0,
  kRunning = 1,
  kDone = 2,
  kFailed = 3,
  kTimedOut = 4,  // it was running when the saga timed out: compensated like a done step
  kCompensated = 5,
  kCompensationFailed = 6,
};
std::string_view StepStatusName(StepStatus status);  // "PENDING", "RUNNING", ...

struct StepRecord {
  std::string name;
  StepStatus status = StepStatus::kPending;
  std::int64_t started_ms = 0;
  std::int64_t finished_ms = 0;            // done, failed or timed out
  std::int64_t compensated_ms = 0;         // compensated or compensation failed
  std::string result;                      // the step's result, or its failure
  std::int32_t attempts = 0;               // action commands sent
  std::int32_t compensation_attempts = 0;  // compensation commands sent
  // When the step's latest attempt began (an action's, or once compensating its
  // compensation's): the orchestrator arms that attempt's deadline at armed_ms + its timeout,
  // so it can clear it by key once the attempt is over. 0 in records written before it existed.
  std::int64_t armed_ms = 0;
  friend bool operator==(const StepRecord&, const StepRecord&) = default;
};

struct SagaRecord {
  std::string id;
  std::string type;
  SagaStatus status = SagaStatus::kStarted;
  std::int32_t current_step = 0;  // the running step while STARTED
  std::vector<StepRecord> steps;
  record::GenericRecord data;    // the saga's own data (the order, ...)
  std::int64_t deadline_ms = 0;  // wall clock; 0 = none
  std::string failure_reason;
  std::int64_t version = 0;  // transitions applied
  std::int64_t created_ms = 0;
  std::int64_t updated_ms = 0;
  friend bool operator==(const SagaRecord&, const SagaRecord&) = default;

  // The next step to compensate (COMPENSATING): the highest done or timed-out step not yet
  // compensated; nullopt when none is left.
  std::optional<std::int32_t> NextCompensation() const;
};

record::GenericRecord SagaToRecord(const SagaRecord& saga);  // type "tessera.Saga"
base::Result<SagaRecord> SagaFromRecord(const record::GenericRecord& record);

struct SagaTransition {
  enum class Op : std::uint8_t {
    kStart = 0,
    kStepDone = 1,
    kStepFailed = 2,
    kTimeOut = 3,
    kCompensate = 4,
    kCompensationDone = 5,
    kCompensationFailed = 6,
    kRetry = 7,
    kLateDone = 8,
  };
  Op op = Op::kStart;
  std::int32_t step = 0;              // step ops: the step the event is about
  std::string result;                 // step_done: its result; failures: the reason
  std::int64_t now_ms = 0;            // wall clock of the caller (records' times)
  bool strict = false;                // not applied -> kConflict (inside a transaction)
  std::int64_t expected_version = 0;  // 0: any; else applies only to that version
  // start only:
  std::string type;
  std::vector<std::string> step_names;
  record::GenericRecord data;
  std::int64_t deadline_ms = 0;
};
std::string_view SagaOpName(SagaTransition::Op op);  // "start", "step_done", ...

record::GenericRecord TransitionToRecord(const SagaTransition& t);
base::Result<SagaTransition> TransitionFromRecord(const record::GenericRecord& record);

// What a transition did: applied (the record after it), or not (the record as it is, and why:
// "exists", "terminal", "duplicate", "out_of_order", "not_allowed", "absent", "stale").
struct SagaOutcome {
  bool applied = false;
  std::string reason;
  std::optional<SagaRecord> saga;  // absent only when the saga does not exist
};
record::GenericRecord OutcomeToRecord(const SagaOutcome& outcome);
base::Result<SagaOutcome> OutcomeFromRecord(const record::GenericRecord& record);

// Applies `t` to `current` (nullopt: no saga yet) by the table above. Errors: kBadRequest for
// a malformed transition (a start without steps, a step index out of range).
base::Result<SagaOutcome> ApplyTransition(const std::optional<SagaRecord>& current,
                                          const SagaTransition& t);

inline constexpr const char* kSagaProcessor = "tessera.saga";
inline constexpr std::string_view kNotApplied = "saga transition not applied: ";
// Registers "tessera.saga": argument a SagaTransition record; returns the SagaOutcome record
// (a strict transition that applied returns it without the saga: its caller planned it).
// REQUIRES: before the member starts (on every member of the cluster that holds sagas).
void RegisterSagaProcessor(map::EntryProcessorRegistry& registry);

}  // namespace tessera::saga
