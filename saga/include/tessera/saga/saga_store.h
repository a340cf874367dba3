#pragma once
// SagaStore: sagas in the orchestrating service's embedded cluster. A saga
// is the entry `id` of map "__sagas" (value: the tessera.Saga record of saga_state.h); its
// partition is its id's partition key (the part after '@', else the whole id), so a saga's
// record, its deadline and the events it stages in the outbox can share one partition
// transaction. Every change goes through the "tessera.saga" entry processor (saga_state.h),
// so it is atomic on the partition's owner and replicated like any write.
//
//   SagaStore sagas(member);                      // member: RegisterSagaProcessor was called
//   sagas.Start("order-17@cust-9", "fulfillment", {"reserve", "charge", "ship"}, order, 0);
//   sagas.Apply("order-17@cust-9", StepDone(0, "reserved"));
//
// Inside a transaction with other writes (an outbox event, an inbox marker) use Stage: a
// transition that does not apply fails the transaction (kConflict, "saga transition not
// applied: ..."), so nothing else is applied either.
//
// Thread-safety: every method is safe from any thread (blocking calls).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/grid/instance.h"
#include "tessera/grid/transaction.h"
#include "tessera/map/predicate.h"
#include "tessera/saga/saga_state.h"

namespace tessera::saga {

inline constexpr const char* kSagaMap = "__sagas";

// Transitions, with now_ms the wall clock.
SagaTransition StepDone(std::int32_t step, std::string result = {});
SagaTransition StepFailed(std::int32_t step, std::string reason);
SagaTransition TimeOut(std::string reason = {});
SagaTransition Compensate();
SagaTransition CompensationDone(std::int32_t step);
SagaTransition CompensationFailed(std::int32_t step, std::string reason);
SagaTransition RetryStep(std::int32_t step);
SagaTransition LateDone(
    std::int32_t step, std::string result = {});  // one more command for the step (or compensation)

class SagaStore {
 public:
  explicit SagaStore(grid::Instance& instance) : instance_(instance) {}

  // Creates saga `id` (STARTED, step 0 running) unless it exists: a second start of the same
  // id applies nothing (reason "exists") and returns the saga as it is. deadline_ms: wall
  // clock, 0 = none. Errors: kBadRequest (no steps, empty id), the map's errors,
  // kUnknownProcessor when the member lacks RegisterSagaProcessor.
  base::Result<SagaOutcome> Start(const std::string& id, const std::string& type,
                                  const std::vector<std::string>& steps,
                                  const record::GenericRecord& data, std::int64_t deadline_ms);
  // Applies `t` (not strict): the outcome says whether it applied and why not.
  base::Result<SagaOutcome> Apply(const std::string& id, SagaTransition t);
  // Adds `t` to `tx` (strict). REQUIRES: tx's partition key is id's.
  static void Stage(grid::Transaction& tx, const std::string& id, SagaTransition t);
  static SagaTransition StartTransition(const std::string& type,
                                        const std::vector<std::string>& steps,
                                        const record::GenericRecord& data,
                                        std::int64_t deadline_ms);

  base::Result<std::optional<SagaRecord>> Get(const std::string& id);
  // Sagas matching `filter` over the tessera.Saga record ("status", "type", "created_ms",
  // "data.<field>", ...), by id.
  base::Result<std::vector<SagaRecord>> List(const map::Predicate& filter = map::Predicate());

 private:
  grid::Instance& instance_;
};

}  // namespace tessera::saga
