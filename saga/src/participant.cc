#include "tessera/saga/participant.h"

#include <xxhash.h>
#include <chrono>
#include <cstdlib>
#include <functional>

#include "tessera/partition/partitioner.h"
#include "tessera/saga/orchestrator.h"
#include "tessera/saga/outbox.h"

namespace tessera::saga {
namespace {

std::int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The marker id of (saga, step, kind): the same for every attempt, so an action or a
// compensation that succeeded is applied once however often it is sent.
std::int64_t MarkerId(const Event& command) {
  const std::size_t h =
      std::hash<std::string>{}(command.correlation_id + "|" + command.Header("saga-step") + "|" +
                               command.Header("saga-kind"));
  const auto id = static_cast<std::int64_t>(h & 0x7fffffffffffffffULL);
  return id == 0 ? 1 : id;
}

}  // namespace

SagaParticipant::SagaParticipant(grid::Member& member, std::shared_ptr<grid::Instance> shared)
    : member_(member), shared_(std::move(shared)) {}

int SagaParticipant::Step(const Event& command) {
  const std::string v = command.Header("saga-step");
  return v.empty() ? -1 : std::atoi(v.c_str());
}

bool SagaParticipant::IsCompensation(const Event& command) {
  return command.Header("saga-kind") == "compensation";
}

void SagaParticipant::On(Consumer& consumer, const std::string& command_type, StepHandler handler) {
  consumer.On(command_type,
              [this, handler = std::move(handler)](const Event& command, HandlerContext& ctx) {
                return Handle(handler, command, ctx);
              });
}

base::Result<Event> SagaParticipant::Reply(const Event& command, const StepReply& reply,
                                           const std::string& partition_key) {
  {
    std::lock_guard lock(ids_mu_);
    if (!ids_) {
      auto ids = grid::IdGenerator::Create(*shared_);
      if (!ids) return std::unexpected(ids.error());
      ids_ = std::move(*ids);
    }
  }
  Event r;
  r.id = ids_->Next();
  r.type = kSagaReplyType;
  // The reply is staged in the changes' partition; its key names the saga for people.
  r.key = command.correlation_id + "@" + partition_key;
  // r.source: left empty; the participant is the consumer group that handled the command.
  r.correlation_id = command.correlation_id;
  r.causation_id = std::to_string(command.id);
  r.time_ms = WallMs();
  r.headers = {{kStreamHeader, command.Header("reply-to")},
               {"saga-type", command.Header("saga-type")},
               {"saga-step", command.Header("saga-step")},
               {"saga-kind", command.Header("saga-kind")},
               {"saga-attempt", command.Header("saga-attempt")},
               {"saga-outcome", reply.ok ? "done" : "failed"},
               {"saga-retryable", reply.retryable ? "true" : "false"},
               {"saga-reason", reply.reason}};
  r.payload =
      record::GenericRecord::Build("tessera.SagaResult").String("result", reply.result).Done();
  return r;
}

base::Result<void> SagaParticipant::Handle(const StepHandler& handler, const Event& command,
                                           HandlerContext& ctx) {
  if (command.correlation_id.empty() || command.Header("reply-to").empty()) {
    return base::Fail(base::ErrorCode::kBadRequest,
                      "event " + std::to_string(command.id) + " of type " + command.type +
                          " is not a saga command (no saga id or reply-to header)");
  }
  auto work = handler(command);
  if (!work) return std::unexpected(work.error());
  const std::string saga_pk(partition::Partitioner::PartitionKey(command.correlation_id));
  auto send_alone = [&](const StepReply& reply) -> base::Result<void> {
    grid::Transaction tx(saga_pk);
    auto r = Reply(command, reply, saga_pk);
    if (!r) return std::unexpected(r.error());
    if (auto ok = Outbox::Stage(tx, *r); !ok) return ok;
    auto committed = member_.Transact(tx);
    if (!committed) return std::unexpected(committed.error());
    return {};
  };
  if (!work->reply.ok) {  // refused: nothing applied, nothing marked, the reply says why
    refused_.fetch_add(1);
    return send_alone(work->reply);
  }
  grid::Transaction tx = work->changes ? std::move(*work->changes) : grid::Transaction(saga_pk);
  const std::string pk = tx.request().key;
  auto r = Reply(command, work->reply, pk);
  if (!r) return std::unexpected(r.error());
  if (auto ok = Outbox::Stage(tx, *r); !ok) return ok;
  Event marker = command;
  marker.id = MarkerId(command);
  auto outcome = ctx.inbox().Commit(ctx.group(), marker, tx);
  if (!outcome) return std::unexpected(outcome.error());
  if (*outcome == InboxOutcome::kDuplicate) {  // applied before: answer again
    duplicates_.fetch_add(1);
    StepReply again = work->reply;
    again.result = "(applied before)";
    return send_alone(again);
  }
  applied_.fetch_add(1);
  return {};
}

base::Result<void> SagaParticipant::Report(grid::Transaction& tx, const std::string& saga_id,
                                           int step, const StepReply& reply,
                                           const std::string& reply_stream) {
  Event as_if;  // the command a choreographed step never got
  as_if.correlation_id = saga_id;
  as_if.headers = {{"saga-step", std::to_string(step)},
                   {"saga-kind", "action"},
                   {"saga-attempt", "1"},
                   {"reply-to", reply_stream}};
  auto r = Reply(as_if, reply, tx.request().key);
  if (!r) return std::unexpected(r.error());
  return Outbox::Stage(tx, *r);
}

SagaParticipant::Stats SagaParticipant::stats() const {
  return {applied_.load(), refused_.load(), duplicates_.load()};
}

}  // namespace tessera::saga
