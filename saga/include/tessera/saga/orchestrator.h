#pragma once
// Orchestrated sagas. A SagaDefinition lists steps; each step sends an
// action command to a participant's stream and waits for its reply; a step that failed (after
// its retries) or a saga that timed out compensates the steps that were done, in reverse
// order. Everything the orchestrator knows lives in its service's embedded cluster:
//
//   - the saga record (saga_state.h), changed only by guarded transitions;
//   - the commands, staged in the outbox in the same partition transaction as the transition
//     that calls for them, so a transition and its commands commit together or not at all;
//   - the deadlines (deadlines.h) of the running step, of retries and of the whole saga, fired
//     by the owner of the saga's partition only.
//
// Replies come through a consumer group of the orchestrator's reply stream and are handled
// through the inbox (a reply is applied once). Each change is planned from the record as read
// and staged with expected_version: if the saga changed meanwhile, the plan is made again.
// When an instance dies, the member promoted for its partitions has the records, the staged
// commands (its outbox relay publishes them; a command published twice is absorbed by the
// stream's id dedup and the participant's inbox) and the deadlines (its scanners fire them).
//
// The protocol (participant.h implements the other side): a command is an Event with
// correlation_id = saga id, key = saga id, headers saga-type, saga-step, saga-kind ("action"
// or "compensation"), saga-attempt, reply-to (the reply stream) and tessera-stream (where the
// outbox sends it). A reply is an Event of type "tessera.SagaReply" with the same saga headers
// and saga-outcome ("done" or "failed"), saga-retryable ("true"/"false"), saga-reason; its
// payload is the step's result.
//
// Retries: a retryable failure is retried after `retry_delay_ms`, up to max_attempts commands
// (one at a time: the next only after the previous one's failure); then the step fails. A step
// without a reply within `timeout_ms` is not sent again (the first command may still be
// applied): the saga times out and the step is compensated with the others. A reply that
// comes after the saga began compensating marks its step done, so it is compensated too; one
// that comes after the saga ended gets its compensation sent at once. Compensations are sent
// again on a failure or a timeout, up to compensation_attempts (so a compensation handler must
// succeed when there is nothing left to undo); one that still fails is recorded and the
// remaining compensations run (final status FAILED, naming it). A choreographed step's report
// that comes before the previous step's is refused for now and delivered again.
//
// Metrics on the member, label service: tessera_saga_{started,completed,compensated,timed_out,
// failed}_total, tessera_saga_commands_total, tessera_saga_late_total (replies and deadlines
// that changed nothing), tessera_saga_active (started minus ended by this member: sum it over
// the service's members, as a saga started on one may end on another), and the summary
// tessera_saga_duration_seconds{service,type} (start to end).
//
// Thread-safety: Define before Start; Begin and stats from any thread.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tessera/base/clock.h"
#include "tessera/base/error.h"
#include "tessera/grid/id_generator.h"
#include "tessera/grid/member.h"
#include "tessera/saga/consumer.h"
#include "tessera/saga/deadlines.h"
#include "tessera/saga/inbox.h"
#include "tessera/saga/saga_store.h"

namespace tessera::saga {

inline constexpr const char* kSagaReplyType = "tessera.SagaReply";

struct SagaStepDef {
  std::string name;
  std::string stream;                // the participant's command stream
  std::string command;               // the action command's event type
  std::string compensation;          // the compensation command's event type ("" = nothing to undo)
  base::Millis timeout_ms = 10'000;  // for a reply to one command
  int max_attempts = 3;              // commands sent for the step
  base::Millis retry_delay_ms = 200;  // after a retryable failure
  // The command's payload (default: the saga's data).
  std::function<record::GenericRecord(const SagaRecord&)> payload;
};

struct SagaDefinition {
  std::string type;
  std::vector<SagaStepDef> steps;
  base::Millis timeout_ms = 0;  // the whole saga, from its start (0 = none)
  int compensation_attempts = 5;
  base::Millis compensation_timeout_ms = 10'000;
};

struct OrchestratorOptions {
  std::string service = "service";  // replies come on "<service>.saga-replies"
  grid::StreamConfig stream_config;
  int concurrency = 2;  // reply subscriptions
  DeadlinesOptions deadlines;
  // Sagas whose record this orchestrator wrote last, kept to plan their next transition
  // without reading them (0: read every saga before a transition). A record changed elsewhere
  // meanwhile only costs a refused transaction and a read: the transitions carry the version
  // they were planned from.
  std::size_t cached_sagas = 4096;
};

class Orchestrator {
 public:
  struct Stats {
    std::int64_t started = 0, completed = 0, compensated = 0, timed_out = 0, failed = 0;
    std::int64_t commands = 0;  // action and compensation commands staged
    std::int64_t late = 0;      // replies and deadlines that changed nothing (duplicate, late)
    std::int64_t stale = 0;     // plans made again because the saga changed meanwhile
    std::int64_t cached = 0;    // plans made from the record this orchestrator wrote last
  };

  // Registers the saga processor and the deadline scanners on `member` and the reply consumer;
  // events go out through the member's Outbox (the caller creates one). REQUIRES: before
  // member.Start(); destroy the Orchestrator before the member.
  Orchestrator(grid::Member& member, std::shared_ptr<grid::Instance> shared, Inbox& inbox,
               OrchestratorOptions options = {});
  ~Orchestrator();

  // REQUIRES: before Start. A definition's type names it in Begin.
  void Define(SagaDefinition definition);
  // After member.Start(): reserves an id generator and subscribes to the replies.
  base::Result<void> Start();
  void Stop();

  // Starts saga `id` of `type` with `data`: the record, the first command and the deadlines,
  // in one transaction. A second Begin of the same id changes nothing (applied false).
  // Errors: kNotFound (no such definition), kBadRequest, the member's errors.
  base::Result<SagaOutcome> Begin(const std::string& id, const std::string& type,
                                  const record::GenericRecord& data);
  // Stages the same start in `tx`, the caller's transaction in the saga's partition (with its
  // own writes: the order, the event that starts a choreography), all or nothing; a second
  // start of the id fails the transaction (kConflict). Call Started(saga) with what Stage
  // returned once it committed (the metrics, and the record the first reply is planned from).
  // Errors: kNotFound, kBadRequest (the transaction is in another partition).
  base::Result<SagaRecord> Stage(grid::Transaction& tx, const std::string& id,
                                 const std::string& type, const record::GenericRecord& data);
  void Started(const SagaRecord& saga);
  void Started();  // the metrics only: the first reply reads the saga

  SagaStore& store() { return store_; }
  Stats stats() const;
  const std::string& reply_stream() const { return reply_stream_; }

 private:
  struct Plan;
  using Decide = std::function<std::vector<SagaTransition>(const SagaRecord&)>;
  // Reads the saga (or takes the record this orchestrator wrote last), asks `decide` what to
  // do, stages the transitions and their effects, and commits (through `ctx` when a reply is
  // being handled). Replans from a fresh read on "stale", and when a cached record calls for
  // nothing.
  base::Result<void> Drive(const std::string& id, const Decide& decide, HandlerContext* ctx);
  base::Result<void> OnReply(const Event& reply, HandlerContext& ctx);
  base::Result<void> OnDeadline(const Deadline& d);
  // Stages the commands and deadlines that moving from `before` to `after` calls for.
  base::Result<void> StageEffects(grid::Transaction& tx, const std::optional<SagaRecord>& before,
                                  const SagaRecord& after, const SagaDefinition& def);
  // Stages one command (and its reply deadline when `with_deadline`).
  base::Result<void> StageCommand(grid::Transaction& tx, const SagaRecord& saga, std::int32_t step,
                                  bool compensation, std::int32_t attempt,
                                  const SagaDefinition& def, bool with_deadline);
  // Stages the removal of the deadlines `before` had armed that moving to `after` made moot
  // (the attempt they guard is over, or the saga left STARTED for the saga's own deadline).
  void ClearMoot(grid::Transaction& tx, const SagaRecord& before, const SagaRecord& after,
                 const SagaDefinition& def);
  void Count(const std::optional<SagaRecord>& before, const SagaRecord& after);

  grid::Member& member_;
  std::shared_ptr<grid::Instance> shared_;
  Inbox& inbox_;
  OrchestratorOptions options_;
  std::string reply_stream_;
  SagaStore store_;
  std::map<std::string, SagaDefinition> definitions_;
  std::unique_ptr<grid::IdGenerator> ids_;
  std::atomic<bool> ready_{false};  // ids_ is set (Start); the deadline worker reads it
  std::unique_ptr<Consumer> replies_;
  std::unique_ptr<Deadlines> deadlines_;
  struct Counters;  // shared with the metrics source
  std::shared_ptr<Counters> counters_;
  class Recent;  // the records this orchestrator wrote last (OrchestratorOptions::cached_sagas)
  std::unique_ptr<Recent> recent_;
};

}  // namespace tessera::saga
