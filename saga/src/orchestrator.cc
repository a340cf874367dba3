#include "tessera/saga/orchestrator.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <unordered_map>

#include "tessera/base/clock.h"
#include "tessera/base/log.h"
#include "tessera/metrics/latency_histogram.h"
#include "tessera/metrics/metrics_registry.h"
#include "tessera/partition/partitioner.h"
#include "tessera/saga/outbox.h"

namespace tessera::saga {
namespace {

using Op = SagaTransition::Op;

std::string PartitionKeyOf(const std::string& id) {
  return std::string(partition::Partitioner::PartitionKey(id));
}

int HeaderInt(const Event& e, std::string_view name) {
  const std::string v = e.Header(name);
  return v.empty() ? -1 : std::atoi(v.c_str());
}

// The text stands for the reason when the member that ran the transition predates error
// reasons on the wire.
bool NotApplied(const base::Error& e) {
  return e.code() == base::ErrorCode::kConflict &&
         (e.reason() == base::ErrorReason::kNotApplied ||
          e.message().find(kNotApplied) != std::string::npos);
}

}  // namespace

struct Orchestrator::Counters {
  std::string service;
  metrics::MetricsRegistry* registry = nullptr;
  std::atomic<std::int64_t> started{0}, completed{0}, compensated{0}, timed_out{0}, failed{0},
      commands{0}, late{0}, stale{0}, cached{0};
  std::mutex mu;
  std::map<std::string, metrics::LatencyHistogram*> durations;  // by saga type; guarded by mu

  void Ended(const SagaRecord& s) {
    metrics::LatencyHistogram* h = nullptr;
    {
      std::lock_guard lock(mu);
      auto& slot = durations[s.type];
      if (slot == nullptr) {
        slot = &registry->RegisterHistogram("tessera_saga_duration_seconds",
                                            {{"service", service}, {"type", s.type}},
                                            "Time from a saga's start to its end");
      }
      h = slot;
    }
    h->Record(std::chrono::milliseconds(std::max<std::int64_t>(0, s.updated_ms - s.created_ms)));
  }
};

// Bounded: a saga that never hears back stays until pushed out by newer ones. The records are
// only hints; a stale one is caught by its version on the shard.
class Orchestrator::Recent {
 public:
  explicit Recent(std::size_t capacity) : capacity_(capacity) {}

  void Put(const SagaRecord& saga) {
    if (capacity_ == 0) return;
    std::lock_guard lock(mu_);
    if (IsTerminal(saga.status)) {
      records_.erase(saga.id);
      return;
    }
    if (records_.size() >= capacity_ && records_.count(saga.id) == 0) {
      records_.erase(records_.begin());
    }
    records_.insert_or_assign(saga.id, saga);
  }
  // Takes the record out: two transitions of one saga at once plan from one read each.
  std::optional<SagaRecord> Take(const std::string& id) {
    if (capacity_ == 0) return std::nullopt;
    std::lock_guard lock(mu_);
    auto it = records_.find(id);
    if (it == records_.end()) return std::nullopt;
    std::optional<SagaRecord> out(std::move(it->second));
    records_.erase(it);
    return out;
  }

 private:
  const std::size_t capacity_;
  std::mutex mu_;
  std::unordered_map<std::string, SagaRecord> records_;  // guarded by mu_
};

Orchestrator::Orchestrator(grid::Member& member, std::shared_ptr<grid::Instance> shared,
                           Inbox& inbox, OrchestratorOptions options)
    : member_(member),
      shared_(std::move(shared)),
      inbox_(inbox),
      options_(std::move(options)),
      reply_stream_(options_.service + ".saga-replies"),
      store_(member),
      counters_(std::make_shared<Counters>()),
      recent_(std::make_unique<Recent>(options_.cached_sagas)) {
  counters_->service = options_.service;
  counters_->registry = &member_.metrics_registry();
  member_.AddMetricsSource(
      [weak = std::weak_ptr<Counters>(counters_)](metrics::MetricsRegistry& registry) {
        auto c = weak.lock();
        if (!c) return;
        const metrics::Labels labels = {{"service", c->service}};
        const struct {
          const char* name;
          const char* help;
          std::int64_t value;
        } counters[] = {
            {"tessera_saga_started_total", "Sagas started", c->started.load()},
            {"tessera_saga_completed_total", "Sagas completed", c->completed.load()},
            {"tessera_saga_compensated_total", "Sagas compensated", c->compensated.load()},
            {"tessera_saga_timed_out_total", "Sagas that timed out", c->timed_out.load()},
            {"tessera_saga_failed_total", "Sagas failed (a compensation failed)", c->failed.load()},
            {"tessera_saga_commands_total", "Action and compensation commands sent",
             c->commands.load()},
            {"tessera_saga_late_total",
             "Replies and deadlines that changed nothing (duplicate, late)", c->late.load()},
        };
        for (const auto& m : counters)
          registry.SetCounterFamily(m.name, m.help, {{labels, m.value}});
        const std::int64_t active =
            c->started.load() - c->completed.load() - c->compensated.load() - c->failed.load();
        registry.SetGaugeFamily("tessera_saga_active",
                                "Sagas started minus ended on this member (sum over the service)",
                                {{labels, static_cast<double>(active)}});
      });
  RegisterSagaProcessor(member_.processors());
  deadlines_ = std::make_unique<Deadlines>(
      member_, [this](const Deadline& d) { return OnDeadline(d); }, options_.deadlines);
}

Orchestrator::~Orchestrator() {
  Stop();
  deadlines_.reset();
}

void Orchestrator::Define(SagaDefinition definition) {
  std::string type = definition.type;
  definitions_[type] = std::move(definition);
}

base::Result<void> Orchestrator::Start() {
  if (!ids_) {
    auto ids = grid::IdGenerator::Create(*shared_);
    if (!ids) return std::unexpected(ids.error());
    ids_ = std::move(*ids);
    ready_.store(true);  // the deadline worker may use ids_ from now on
  }
  ConsumerOptions co;
  co.group = options_.service + ".saga";
  co.streams = {reply_stream_};
  co.stream_config = options_.stream_config;
  co.concurrency = options_.concurrency;
  co.dead_letters = false;  // a reply that cannot be applied now comes again
  replies_ = std::make_unique<Consumer>(shared_, member_, inbox_, co);
  replies_->On(kSagaReplyType,
               [this](const Event& e, HandlerContext& ctx) { return OnReply(e, ctx); });
  return replies_->Start();
}

void Orchestrator::Stop() {
  if (replies_) replies_->Stop();
}

base::Result<SagaRecord> Orchestrator::Stage(grid::Transaction& tx, const std::string& id,
                                             const std::string& type,
                                             const record::GenericRecord& data) {
  auto def = definitions_.find(type);
  if (def == definitions_.end()) {
    return base::Fail(base::ErrorCode::kNotFound, "no saga definition of type '" + type + "'");
  }
  if (id.empty()) return base::Fail(base::ErrorCode::kBadRequest, "a saga needs an id");
  if (tx.request().key != PartitionKeyOf(id)) {
    return base::Fail(base::ErrorCode::kBadRequest,
                      "saga '" + id + "' belongs to partition key '" + PartitionKeyOf(id) +
                          "', not the transaction's ('" + tx.request().key + "')");
  }
  if (!ready_.load()) {
    return base::Fail(base::ErrorCode::kShuttingDown, "the orchestrator is not started");
  }
  std::vector<std::string> steps;
  for (const auto& s : def->second.steps) steps.push_back(s.name);
  const std::int64_t now = base::SteadyClock().WallMs();
  SagaTransition start = SagaStore::StartTransition(
      type, steps, data, def->second.timeout_ms > 0 ? now + def->second.timeout_ms : 0);
  auto outcome = ApplyTransition(std::nullopt, start);
  if (!outcome) return std::unexpected(outcome.error());
  outcome->saga->id = id;
  SagaStore::Stage(tx, id, start);
  if (auto ok = StageEffects(tx, std::nullopt, *outcome->saga, def->second); !ok) {
    return std::unexpected(ok.error());
  }
  return *outcome->saga;
}

void Orchestrator::Started() { counters_->started.fetch_add(1); }

void Orchestrator::Started(const SagaRecord& saga) {
  recent_->Put(saga);
  Started();
}

base::Result<SagaOutcome> Orchestrator::Begin(const std::string& id, const std::string& type,
                                              const record::GenericRecord& data) {
  grid::Transaction tx(PartitionKeyOf(id));
  auto saga = Stage(tx, id, type, data);
  if (!saga) return std::unexpected(saga.error());
  auto committed = member_.Transact(tx);
  if (!committed) {
    if (NotApplied(committed.error())) {  // started before: say so, with the saga as it is
      auto existing = store_.Get(id);
      if (!existing) return std::unexpected(existing.error());
      return SagaOutcome{false, "exists", *existing};
    }
    return std::unexpected(committed.error());
  }
  if (!committed->committed) {
    return base::Fail(base::ErrorCode::kConflict, "saga '" + id +
                                                      "' was not started: a "
                                                      "precondition of its transaction failed");
  }
  Started(*saga);
  return SagaOutcome{true, "", *saga};
}

base::Result<void> Orchestrator::StageCommand(grid::Transaction& tx, const SagaRecord& after,
                                              std::int32_t step, bool compensation,
                                              std::int32_t attempt, const SagaDefinition& def,
                                              bool with_deadline) {
  // The deadline is due at the attempt's armed_ms + its timeout: ClearMoot finds it by that key
  // once the attempt is over.
  const std::int64_t now = base::SteadyClock().WallMs();
  const std::int64_t armed = after.steps[static_cast<std::size_t>(step)].armed_ms;
  const std::int64_t from = armed > 0 ? armed : now;
  {
    const SagaStepDef& sd = def.steps[static_cast<std::size_t>(step)];
    const base::Millis wait = compensation ? def.compensation_timeout_ms : sd.timeout_ms;
    if (!compensation && sd.command.empty()) {  // choreographed: the participant reports
      if (wait > 0) Deadlines::Set(tx, Deadline{after.id, "step", step, attempt, from + wait});
      return {};
    }
    Event cmd;
    cmd.id = ids_->Next();
    cmd.type = compensation ? sd.compensation : sd.command;
    cmd.key = after.id;
    cmd.source = options_.service;
    cmd.correlation_id = after.id;
    cmd.time_ms = now;
    cmd.headers = {{kStreamHeader, sd.stream},
                   {"saga-type", after.type},
                   {"saga-step", std::to_string(step)},
                   {"saga-kind", compensation ? "compensation" : "action"},
                   {"saga-attempt", std::to_string(attempt)},
                   {"reply-to", reply_stream_}};
    cmd.payload = sd.payload ? sd.payload(after) : after.data;
    if (auto ok = Outbox::Stage(tx, cmd); !ok) return ok;
    counters_->commands.fetch_add(1);
    if (with_deadline) {
      Deadlines::Set(tx, Deadline{after.id, compensation ? "compensation" : "step", step, attempt,
                                  from + wait});
    }
  }
  return {};
}

base::Result<void> Orchestrator::StageEffects(grid::Transaction& tx,
                                              const std::optional<SagaRecord>& before,
                                              const SagaRecord& after, const SagaDefinition& def) {
  auto send = [&](std::int32_t step, bool compensation, std::int32_t attempt) {
    return StageCommand(tx, after, step, compensation, attempt, def, true);
  };
  if (before) ClearMoot(tx, *before, after, def);
  if (!before && after.deadline_ms > 0) {
    Deadlines::Set(tx, Deadline{after.id, "saga", 0, 0, after.deadline_ms});
  }
  if (after.status == SagaStatus::kStarted) {
    const auto& step = after.steps[static_cast<std::size_t>(after.current_step)];
    const bool moved =
        !before || before->current_step != after.current_step ||
        before->steps[static_cast<std::size_t>(after.current_step)].attempts != step.attempts;
    if (moved) return send(after.current_step, false, step.attempts);
  } else if (after.status == SagaStatus::kCompensating) {
    const auto next = after.NextCompensation();
    if (!next) return {};
    const auto& step = after.steps[static_cast<std::size_t>(*next)];
    const bool moved = !before || before->status != SagaStatus::kCompensating ||
                       before->NextCompensation() != next ||
                       before->steps[static_cast<std::size_t>(*next)].compensation_attempts !=
                           step.compensation_attempts;
    if (moved) return send(*next, true, step.compensation_attempts);
  }
  return {};
}

void Orchestrator::ClearMoot(grid::Transaction& tx, const SagaRecord& before,
                             const SagaRecord& after, const SagaDefinition& def) {
  // Left to fire, a deadline whose attempt is over would only read the saga and change nothing
  // (at 1,000 sagas/s that was about 1,000 reads and removals a second).
  if (before.status == SagaStatus::kStarted) {
    const std::int32_t i = before.current_step;
    const StepRecord& b = before.steps[static_cast<std::size_t>(i)];
    const bool same = after.status == SagaStatus::kStarted && after.current_step == i &&
                      after.steps[static_cast<std::size_t>(i)].attempts == b.attempts;
    if (!same && b.armed_ms > 0) {
      Deadlines::Clear(tx,
                       Deadline{after.id, "step", i, b.attempts,
                                b.armed_ms + def.steps[static_cast<std::size_t>(i)].timeout_ms});
    }
    if (after.status != SagaStatus::kStarted && before.deadline_ms > 0) {
      Deadlines::Clear(tx, Deadline{after.id, "saga", 0, 0, before.deadline_ms});
    }
  }
  if (before.status == SagaStatus::kCompensating) {
    if (const auto next = before.NextCompensation()) {
      const StepRecord& b = before.steps[static_cast<std::size_t>(*next)];
      const bool same = after.status == SagaStatus::kCompensating &&
                        after.NextCompensation() == next &&
                        after.steps[static_cast<std::size_t>(*next)].compensation_attempts ==
                            b.compensation_attempts;
      if (!same && b.armed_ms > 0) {
        Deadlines::Clear(tx, Deadline{after.id, "compensation", *next, b.compensation_attempts,
                                      b.armed_ms + def.compensation_timeout_ms});
      }
    }
  }
}

void Orchestrator::Count(const std::optional<SagaRecord>& before, const SagaRecord& after) {
  const auto was = before ? std::optional<SagaStatus>(before->status) : std::nullopt;
  if (was == after.status) return;
  std::atomic<std::int64_t>* counter = nullptr;
  switch (after.status) {
    case SagaStatus::kCompleted:
      counter = &counters_->completed;
      break;
    case SagaStatus::kCompensated:
      counter = &counters_->compensated;
      break;
    case SagaStatus::kFailed:
      counter = &counters_->failed;
      break;
    default:
      return;
  }
  counters_->Ended(after);  // the duration first: a reader of the counter finds it recorded
  counter->fetch_add(1);
}

base::Result<void> Orchestrator::Drive(const std::string& id, const Decide& decide,
                                       HandlerContext* ctx) {
  std::optional<SagaRecord> cached = recent_->Take(id);
  for (int round = 0; round < 10; ++round) {
    const bool from_cache = cached.has_value();
    std::optional<SagaRecord> read;
    if (from_cache) {
      read = std::move(cached);
      cached.reset();
    } else {
      auto got = store_.Get(id);
      if (!got) return std::unexpected(got.error());
      read = std::move(*got);
    }
    if (!read) {
      counters_->late.fetch_add(1);
      return {};
    }
    const SagaRecord before = std::move(*read);
    auto def = definitions_.find(before.type);
    if (def == definitions_.end()) {
      return base::Fail(base::ErrorCode::kNotFound,
                        "saga '" + id + "' is of type '" + before.type +
                            "', which this orchestrator does not define");
    }
    std::vector<SagaTransition> plan = decide(before);
    // What follows on its own: a timed-out saga compensates; a step with nothing to undo is
    // compensated at once.
    SagaRecord after = before;
    std::vector<SagaTransition> staged;
    bool timed_out = false;
    for (std::size_t i = 0; i < plan.size(); ++i) {
      SagaTransition t = plan[i];
      t.expected_version = after.version;
      auto o = ApplyTransition(after, t);
      if (!o) return std::unexpected(o.error());
      if (!o->applied) break;
      timed_out = timed_out || t.op == Op::kTimeOut;
      after = *o->saga;
      staged.push_back(t);
      if (after.status == SagaStatus::kTimedOut) plan.push_back(Compensate());
      if (after.status == SagaStatus::kCompensating) {
        if (auto next = after.NextCompensation();
            next && def->second.steps[static_cast<std::size_t>(*next)].compensation.empty()) {
          plan.push_back(CompensationDone(*next));
        }
      }
    }
    if (staged.empty()) {
      if (from_cache) continue;  // the record may be behind what calls for a transition
      counters_->late.fetch_add(1);
      return {};
    }
    grid::Transaction tx(PartitionKeyOf(id));
    for (const auto& t : staged) SagaStore::Stage(tx, id, t);
    if (auto ok = StageEffects(tx, before, after, def->second); !ok) return ok;
    base::Result<void> committed;
    if (ctx != nullptr) {
      auto r = ctx->Commit(tx);
      if (!r) {
        committed = std::unexpected(r.error());
      } else if (*r == InboxOutcome::kDuplicate) {
        counters_->late.fetch_add(1);  // this reply was applied before
        return {};
      }
    } else {
      auto r = member_.Transact(tx);
      if (!r) {
        committed = std::unexpected(r.error());
      } else if (!r->committed) {
        committed = base::Fail(base::ErrorCode::kConflict, "saga '" + id + "' transaction refused");
      }
    }
    if (!committed) {
      if (NotApplied(committed.error())) {  // the saga changed since it was read: plan again
        counters_->stale.fetch_add(1);
        continue;
      }
      return committed;
    }
    if (from_cache) counters_->cached.fetch_add(1);
    if (timed_out) counters_->timed_out.fetch_add(1);
    recent_->Put(after);
    Count(before, after);
    return {};
  }
  return base::Fail(base::ErrorCode::kConflict,
                    "saga '" + id + "' kept changing while a transition was planned");
}

base::Result<void> Orchestrator::OnReply(const Event& reply, HandlerContext& ctx) {
  const std::string& id = reply.correlation_id;
  const int step = HeaderInt(reply, "saga-step");
  const int attempt = HeaderInt(reply, "saga-attempt");
  const bool compensation = reply.Header("saga-kind") == "compensation";
  const bool done = reply.Header("saga-outcome") == "done";
  const bool retryable = reply.Header("saga-retryable") == "true";
  const std::string reason = reply.Header("saga-reason");
  if (id.empty() || step < 0) {
    counters_->late.fetch_add(1);
    return {};  // not a reply of ours to act on
  }
  std::string result;
  if (auto r = reply.payload.GetString("result")) result = *r;
  bool out_of_order = false;  // a step's reply before the previous step's (choreography)
  bool orphan = false;        // an action done after its saga ended without undoing it
  auto driven = Drive(
      id,
      [&](const SagaRecord& s) -> std::vector<SagaTransition> {
        // Decided afresh on each read: a plan made from a stale record is made again, and what
        // that read suggested must not outlive it.
        out_of_order = false;
        orphan = false;
        const auto& def = definitions_.at(s.type);
        if (step >= static_cast<int>(s.steps.size())) return {};
        const auto& st = s.steps[static_cast<std::size_t>(step)];
        const bool not_done = st.status == StepStatus::kPending ||
                              st.status == StepStatus::kRunning || st.status == StepStatus::kFailed;
        if (!compensation) {
          if (s.status == SagaStatus::kStarted) {
            if (step > s.current_step) {
              out_of_order = true;
              return {};
            }
            if (step < s.current_step) return {};  // a duplicate
            if (done) return {StepDone(step, result)};
            if (attempt != st.attempts) return {};  // an earlier attempt's failure
            if (retryable && st.attempts < def.steps[static_cast<std::size_t>(step)].max_attempts) {
              return {};  // retried by the "retry" deadline set below
            }
            return {StepFailed(step, reason)};
          }
          // Done after the saga timed out or began compensating: undo it too.
          if (done && not_done &&
              (s.status == SagaStatus::kCompensating || s.status == SagaStatus::kTimedOut)) {
            return {LateDone(step, result)};
          }
          orphan = done && not_done && IsTerminal(s.status) && s.status != SagaStatus::kCompleted;
          return {};
        }
        if (s.status != SagaStatus::kCompensating || s.NextCompensation() != step) return {};
        if (done) return {CompensationDone(step)};
        if (attempt != st.compensation_attempts) return {};
        if (st.compensation_attempts < def.compensation_attempts) return {};
        return {CompensationFailed(step, reason)};
      },
      &ctx);
  if (driven && out_of_order) {
    return base::Fail(base::ErrorCode::kOverloaded,
                      "saga '" + id + "': the reply of step " + std::to_string(step) +
                          " came before the previous step's; it comes again",
                      base::ErrorReason::kRetryLater);
  }
  if (driven && orphan) {
    // The saga ended (compensated or failed) before this action's reply: the action happened
    // and nothing undid it. Its compensation goes out now, once (through the inbox).
    auto saga = store_.Get(id);
    if (!saga) return std::unexpected(saga.error());
    if (saga->has_value()) {
      const auto& def = definitions_.at((*saga)->type);
      if (!def.steps[static_cast<std::size_t>(step)].compensation.empty()) {
        grid::Transaction tx(PartitionKeyOf(id));
        if (auto ok = StageCommand(tx, **saga, step, true, 1, def, false); !ok) return ok;
        auto r = ctx.Commit(tx);
        if (!r) return std::unexpected(r.error());
        base::NamedLogger("saga")->warn(
            "saga '{}' ended {} before step {} reported done: its compensation was sent", id,
            SagaStatusName((*saga)->status), step);
      }
    }
    return {};
  }
  if (!driven || done) return driven;
  // A failure that is retried: the next command goes out after the step's delay, if the saga
  // is still there then (the deadline checks the attempt).
  auto saga = store_.Get(id);
  if (!saga) return std::unexpected(saga.error());
  if (!saga->has_value()) return {};
  const SagaRecord& s = **saga;
  if (IsTerminal(s.status) || step >= static_cast<int>(s.steps.size())) return {};
  const auto& st = s.steps[static_cast<std::size_t>(step)];
  const bool retry_action = !compensation && s.status == SagaStatus::kStarted &&
                            s.current_step == step && attempt == st.attempts;
  const bool retry_compensation = compensation && s.status == SagaStatus::kCompensating &&
                                  s.NextCompensation() == step &&
                                  attempt == st.compensation_attempts;
  if (!retry_action && !retry_compensation) return {};
  const auto& def = definitions_.at(s.type);
  grid::Transaction tx(PartitionKeyOf(id));
  Deadlines::Set(tx, Deadline{id, compensation ? "compensation-retry" : "retry", step, attempt,
                              base::SteadyClock().WallMs() +
                                  def.steps[static_cast<std::size_t>(step)].retry_delay_ms});
  auto r = member_.Transact(tx);
  if (!r) return std::unexpected(r.error());
  return {};
}

base::Result<void> Orchestrator::OnDeadline(const Deadline& d) {
  if (!ready_.load()) {
    return base::Fail(base::ErrorCode::kShuttingDown, "the orchestrator is not started yet");
  }
  return Drive(
      d.saga_id,
      [&](const SagaRecord& s) -> std::vector<SagaTransition> {
        const auto& def = definitions_.at(s.type);
        if (d.kind == "saga") {
          if (s.status != SagaStatus::kStarted) return {};
          return {TimeOut("the saga's deadline passed in step " +
                          s.steps[static_cast<std::size_t>(s.current_step)].name)};
        }
        if (d.step >= static_cast<std::int32_t>(s.steps.size())) return {};
        const auto& st = s.steps[static_cast<std::size_t>(d.step)];
        const auto& sd = def.steps[static_cast<std::size_t>(d.step)];
        if (d.kind == "step" || d.kind == "retry") {
          if (s.status != SagaStatus::kStarted || s.current_step != d.step ||
              st.attempts != d.attempt) {
            return {};  // that step or attempt is over
          }
          // A retryable failure's delay is over: the next attempt.
          if (d.kind == "retry") return {RetryStep(d.step)};
          // No reply: the action may still happen (a slow participant), so it is not sent
          // again but compensated, with the saga timed out.
          return {
              TimeOut(fmt::format("step {} got no reply within {} ms", sd.name, sd.timeout_ms))};
        }
        if (s.status != SagaStatus::kCompensating || s.NextCompensation() != d.step ||
            st.compensation_attempts != d.attempt) {
          return {};
        }
        if (st.compensation_attempts < def.compensation_attempts) return {RetryStep(d.step)};
        return {CompensationFailed(d.step, fmt::format("no reply to {} compensation command(s)",
                                                       st.compensation_attempts))};
      },
      nullptr);
}

Orchestrator::Stats Orchestrator::stats() const {
  Stats s;
  s.started = counters_->started.load();
  s.completed = counters_->completed.load();
  s.compensated = counters_->compensated.load();
  s.timed_out = counters_->timed_out.load();
  s.failed = counters_->failed.load();
  s.commands = counters_->commands.load();
  s.late = counters_->late.load();
  s.stale = counters_->stale.load();
  s.cached = counters_->cached.load();
  return s;
}

}  // namespace tessera::saga
