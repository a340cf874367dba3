#pragma once
// SagaParticipant: the participant's side of orchestrated sagas (orchestrator.h has the
// protocol). A service registers a handler per command type; the handler says what the
// command changes (a partition transaction of its own member) and whether it succeeded. The
// participant then commits, in one transaction, the changes, the reply (staged in the
// participant's outbox, to the orchestrator's reply stream) and a marker of (saga, step,
// action or compensation), so:
//   - a command delivered twice, or sent again by the orchestrator after a timeout, is
//     applied once; the copy gets a "done" reply again (its result is not repeated);
//   - a refusal (StepWork::reply.ok false) applies nothing and marks nothing: the reply says
//     "failed" (retryable or not), and a later attempt runs the handler again;
//   - a handler error (not a refusal) is the consumer's: retried, then the dead letter queue.
// Compensation handlers get the action's saga id and step in the command's headers and must
// tolerate an action that never happened (a timed-out step is compensated too).
//
// Several partitions (StepWork::parts): the plan (the parts' transactions and the reply) is
// stored first, in map "__saga.plans" of the participant's member, then each part commits
// with its own marker and the reply goes with the last one. A redelivery after a crash
// part-way finishes the stored plan whatever the handler answers now (the state it decides
// on has changed: the first parts are in; a refusal then is not sent), and parts already in
// are not applied twice. Plans are kept 7 days, like the inbox's markers. Handlers only
// build transactions: asking one again has no effect. A stored part is applied as it was
// planned, so its preconditions must hold whenever it runs: a precondition on state others
// change (a stock level read by the handler) that fails on a redelivery fails it on every
// redelivery, and the command ends as a dead letter. Use entry processors or one-way state
// per (saga, part) instead; examples/order-fulfillment's inventory holds each line that way.
//
// Thread-safety: On before the consumer starts; handlers run on the consumer's threads.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/grid/id_generator.h"
#include "tessera/grid/member.h"
#include "tessera/grid/transaction.h"
#include "tessera/saga/consumer.h"

namespace tessera::saga {

struct StepReply {
  bool ok = true;
  bool retryable = false;  // a failure worth another attempt (a timeout of a dependency)
  std::string reason;      // why it failed
  std::string result;      // what it did (recorded in the saga's step)
};

struct StepWork {
  StepWork() = default;
  StepWork(std::optional<grid::Transaction> c, StepReply r)
      : changes(std::move(c)), reply(std::move(r)) {}

  std::optional<grid::Transaction> changes;  // nullopt: nothing to change
  StepReply reply;
  // A step whose changes span several partitions (an order of several products): one
  // transaction per partition, instead of `changes`. See SagaParticipant.
  std::vector<grid::Transaction> parts;
};

using StepHandler = std::function<base::Result<StepWork>(const Event& command)>;

inline constexpr const char* kPlanMap = "__saga.plans";

class SagaParticipant {
 public:
  // `member` commits the changes; replies go out through its Outbox (the caller makes one);
  // `shared` provides the reply ids. All outlive the participant.
  SagaParticipant(grid::Member& member, std::shared_ptr<grid::Instance> shared);

  // Registers `handler` for `command_type` on `consumer` (a group of the participant's
  // command stream). REQUIRES: before consumer.Start().
  void On(Consumer& consumer, const std::string& command_type, StepHandler handler);

  // Choreography: reports step `step` of saga `saga_id` (done or failed, as `reply` says) to
  // the orchestrator's `reply_stream`, staged in `tx`, the participant's own transaction with
  // the step's changes (so both commit or neither). Errors: the reply id's.
  base::Result<void> Report(grid::Transaction& tx, const std::string& saga_id, int step,
                            const StepReply& reply, const std::string& reply_stream);

  // The saga fields of a command.
  static std::string SagaId(const Event& command) { return command.correlation_id; }
  static int Step(const Event& command);
  static bool IsCompensation(const Event& command);

  struct Stats {
    std::int64_t applied = 0, refused = 0, duplicates = 0;
  };
  Stats stats() const;

 private:
  base::Result<void> Handle(const StepHandler& handler, const Event& command, HandlerContext& ctx);
  base::Result<void> ApplyParts(const Event& command, std::vector<grid::Transaction> parts,
                                const StepReply& reply, HandlerContext& ctx);
  base::Result<Event> Reply(const Event& command, const StepReply& reply,
                            const std::string& partition_key);

  grid::Member& member_;
  std::shared_ptr<grid::Instance> shared_;
  std::mutex ids_mu_;
  std::unique_ptr<grid::IdGenerator> ids_;  // made on first use (needs the shared cluster)
  std::atomic<std::int64_t> applied_{0}, refused_{0}, duplicates_{0};
};

}  // namespace tessera::saga
