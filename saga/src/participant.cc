#include "tessera/saga/participant.h"

#include <xxhash.h>
#include <chrono>
#include <cstdlib>
#include <functional>

#include "tessera/base/clock.h"
#include "tessera/map/map_codec.h"
#include "tessera/partition/partitioner.h"
#include "tessera/saga/orchestrator.h"
#include "tessera/saga/outbox.h"

namespace tessera::saga {
namespace {

// The marker id of (saga, step, kind): the same for every attempt, so an action or a
// compensation that succeeded is applied once however often it is sent. XXH3, not std::hash:
// the same in every process and build of the participant, across upgrades. `part`: 0 for a
// step in one partition, the part's index for one of several, -1 for the plan.
std::int64_t MarkerId(const Event& command, int part) {
  std::string text = "tessera.saga|" + command.correlation_id + "|" + command.Header("saga-step") +
                     "|" + command.Header("saga-kind");
  if (part != 0) text += "|" + std::to_string(part);
  const auto id =
      static_cast<std::int64_t>(XXH3_64bits(text.data(), text.size()) & 0x7fffffffffffffffULL);
  return id == 0 ? 1 : id;
}

constexpr base::Millis kPlanTtlMs = 7LL * 24 * 3'600'000;  // like the inbox's markers

// A plan: each part's transaction (its request, encoded) and the reply to send at the end.
std::string EncodePlan(const std::vector<grid::Transaction>& parts, const StepReply& reply) {
  std::vector<record::Value> encoded;
  for (const auto& p : parts) encoded.emplace_back(record::Bytes{map::EncodeRequest(p.request())});
  return record::GenericRecord::Build("tessera.SagaPlan")
      .List("parts", std::move(encoded))
      .String("result", reply.result)
      .Done()
      .Encode();
}

base::Result<std::pair<std::vector<grid::Transaction>, StepReply>> DecodePlan(
    std::string_view bytes) {
  auto r = record::GenericRecord::Decode(bytes);
  if (!r) return std::unexpected(r.error());
  const record::Value* parts = r->Find("parts");
  if (parts == nullptr || parts->type() != record::FieldType::kList) {
    return base::Fail(base::ErrorCode::kBadRequest, "a saga step plan without parts");
  }
  std::vector<grid::Transaction> out;
  for (const auto& v : parts->AsList()) {
    if (v.type() != record::FieldType::kBytes) {
      return base::Fail(base::ErrorCode::kBadRequest, "a saga step plan's part is not bytes");
    }
    auto request = map::DecodeRequest(v.AsBytes().data);
    if (!request) return std::unexpected(request.error());
    grid::Transaction tx(request->key);
    for (auto& op : request->transaction) tx.Append(std::move(op));
    out.push_back(std::move(tx));
  }
  StepReply reply;
  if (auto result = r->GetString("result")) reply.result = *result;
  return std::pair{std::move(out), reply};
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
  r.time_ms = base::SteadyClock().WallMs();
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
  // A step over several partitions stores its plan before its first part. A redelivery (after
  // a crash part-way) finishes that plan whatever the handler answers now: the state it
  // decides on has changed, the first parts being in. Only a refusal or parts need the look:
  // a step in one partition is guarded by its marker.
  const std::string plan_key =
      ctx.group() + "|" + std::to_string(MarkerId(command, -1)) + "@" + saga_pk;
  auto stored_plan = [&]() -> base::Result<std::optional<std::string>> {
    return member_.GetMap(kPlanMap)->Get(plan_key);
  };
  auto finish = [&](const std::string& bytes) -> base::Result<void> {
    auto plan = DecodePlan(bytes);
    if (!plan) return std::unexpected(plan.error());
    return ApplyParts(command, std::move(plan->first), plan->second, ctx);
  };
  auto work = handler(command);
  if (!work) return std::unexpected(work.error());
  if (!work->reply.ok) {  // refused: nothing applied, nothing marked, the reply says why
    auto stored = stored_plan();
    if (!stored) return std::unexpected(stored.error());
    if (stored->has_value()) return finish(**stored);
    refused_.fetch_add(1);
    return send_alone(work->reply);
  }
  if (!work->parts.empty()) {
    if (work->changes) {
      return base::Fail(base::ErrorCode::kBadRequest,
                        "a step's work has changes or parts, not both (" + command.type + ")");
    }
    // Plan once (kept with the markers' retention), then apply part by part.
    auto put = member_.GetMap(kPlanMap)->PutIfAbsent(plan_key, EncodePlan(work->parts, work->reply),
                                                     grid::WithTtl(kPlanTtlMs));
    if (!put) return std::unexpected(put.error());
    if (put->has_value()) return finish(**put);  // planned before: that plan goes on
    return ApplyParts(command, std::move(work->parts), work->reply, ctx);
  }
  std::vector<grid::Transaction> one;
  one.push_back(work->changes ? std::move(*work->changes) : grid::Transaction(saga_pk));
  return ApplyParts(command, std::move(one), work->reply, ctx);
}

base::Result<void> SagaParticipant::ApplyParts(const Event& command,
                                               std::vector<grid::Transaction> parts,
                                               const StepReply& reply, HandlerContext& ctx) {
  const bool several = parts.size() > 1;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    grid::Transaction& tx = parts[i];
    const bool last = i + 1 == parts.size();
    if (last) {  // the reply goes with the last part: sent once every part is in
      auto r = Reply(command, reply, tx.request().key);
      if (!r) return std::unexpected(r.error());
      if (auto ok = Outbox::Stage(tx, *r); !ok) return ok;
    }
    Event marker = command;
    marker.id = MarkerId(command, several ? static_cast<int>(i) : 0);
    auto outcome = ctx.inbox().Commit(ctx.group(), marker, tx);
    if (!outcome) return std::unexpected(outcome.error());
    if (!last) continue;
    if (*outcome == InboxOutcome::kDuplicate) {  // applied before: answer again
      duplicates_.fetch_add(1);
      const std::string saga_pk(partition::Partitioner::PartitionKey(command.correlation_id));
      grid::Transaction again_tx(saga_pk);
      StepReply again = reply;
      again.result = "(applied before)";
      auto r = Reply(command, again, saga_pk);
      if (!r) return std::unexpected(r.error());
      if (auto ok = Outbox::Stage(again_tx, *r); !ok) return ok;
      auto committed = member_.Transact(again_tx);
      if (!committed) return std::unexpected(committed.error());
      return {};
    }
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
