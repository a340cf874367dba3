#include "tessera/saga/consumer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <random>
#include <set>

#include "tessera/base/clock.h"
#include "tessera/base/log.h"
#include "tessera/grid/member.h"
#include "tessera/metrics/metrics_registry.h"

namespace tessera::saga {

struct Consumer::State {
  const grid::Member* member = nullptr;  // whose metrics show this consumer (null: none)
  std::string group;
  std::atomic<std::int64_t> handled{0}, failed{0}, retries{0}, unknown{0}, undecodable{0},
      breaker_waits{0}, unavailable{0}, dead_lettered{0}, parked{0}, replayed{0},
      replay_failures{0}, discarded{0}, expired{0}, replay_requests{0};
  // The group's queue as of the last maintenance round.
  std::atomic<std::int64_t> entries{0}, parked_entries{0}, oldest_failure_ms{0};
};

namespace {

// Every live consumer, so each member's metrics source can show all of its consumers' groups
// in one family (a family is set whole).
std::mutex g_consumers_mu;
std::vector<std::weak_ptr<Consumer::State>> g_consumers;

void Register(const std::shared_ptr<Consumer::State>& state) {
  std::lock_guard lock(g_consumers_mu);
  std::erase_if(g_consumers, [](const auto& w) { return w.expired(); });
  g_consumers.push_back(state);
}

void RenderConsumers(const grid::Member* member, metrics::MetricsRegistry& registry) {
  std::vector<std::shared_ptr<Consumer::State>> states;
  {
    std::lock_guard lock(g_consumers_mu);
    for (const auto& w : g_consumers) {
      if (auto s = w.lock(); s && s->member == member) states.push_back(std::move(s));
    }
  }
  using Field = std::atomic<std::int64_t> Consumer::State::*;
  const struct {
    const char* name;
    const char* help;
    Field field;
  } counters[] = {
      {"tessera_consumer_handled_total", "Events whose handler returned OK",
       &Consumer::State::handled},
      {"tessera_consumer_retries_total", "In-place retries of failing handlers",
       &Consumer::State::retries},
      {"tessera_consumer_failed_total", "Events whose handler failed after its retries",
       &Consumer::State::failed},
      {"tessera_consumer_unknown_total", "Events of a type without a handler",
       &Consumer::State::unknown},
      {"tessera_consumer_breaker_waits_total", "Deliveries held back by an open circuit breaker",
       &Consumer::State::breaker_waits},
      {"tessera_consumer_unavailable_total",
       "Events delivered again because the grid could not answer (not dead-lettered)",
       &Consumer::State::unavailable},
      {"tessera_dlq_dead_lettered_total", "Events that became dead letters (handler failed)",
       &Consumer::State::dead_lettered},
      {"tessera_dlq_parked_total", "Events parked behind a dead letter of their key",
       &Consumer::State::parked},
      {"tessera_dlq_replayed_total", "Dead letters replayed successfully",
       &Consumer::State::replayed},
      {"tessera_dlq_replay_failures_total", "Replays whose handler failed again",
       &Consumer::State::replay_failures},
      {"tessera_dlq_discarded_total", "Dead letters discarded", &Consumer::State::discarded},
      {"tessera_dlq_expired_total", "Dead letters removed by retention", &Consumer::State::expired},
  };
  for (const auto& c : counters) {
    std::vector<std::pair<metrics::Labels, std::int64_t>> values;
    for (const auto& s : states) values.push_back({{{"group", s->group}}, ((*s).*c.field).load()});
    registry.SetCounterFamily(c.name, c.help, std::move(values));
  }
  std::vector<std::pair<metrics::Labels, double>> entries, parked, oldest;
  const std::int64_t now = base::SteadyClock().WallMs();
  for (const auto& s : states) {
    const metrics::Labels labels = {{"group", s->group}};
    entries.push_back({labels, static_cast<double>(s->entries.load())});
    parked.push_back({labels, static_cast<double>(s->parked_entries.load())});
    const std::int64_t first = s->oldest_failure_ms.load();
    oldest.push_back(
        {labels,
         first == 0 ? 0.0 : static_cast<double>(std::max<std::int64_t>(0, now - first)) / 1000});
  }
  registry.SetGaugeFamily("tessera_dlq_entries", "Dead letters in the group's queue",
                          std::move(entries));
  registry.SetGaugeFamily("tessera_dlq_parked_entries",
                          "Dead letters parked behind an earlier one of their key",
                          std::move(parked));
  registry.SetGaugeFamily("tessera_dlq_oldest_seconds",
                          "Age of the oldest dead letter's first failure (0: none)",
                          std::move(oldest));
}

}  // namespace

Consumer::Consumer(std::shared_ptr<grid::Instance> shared, grid::Instance& member, Inbox& inbox,
                   ConsumerOptions options, BreakerRegistry* breakers)
    : shared_(std::move(shared)),
      member_(member),
      inbox_(inbox),
      options_(std::move(options)),
      dlq_(shared_, options_.group),
      state_(std::make_shared<State>()) {
  if (breakers != nullptr && !options_.breaker.empty()) breaker_ = breakers->Get(options_.breaker);
  state_->group = options_.group;
  std::random_device random;
  name_ = fmt::format("{}-{:08x}", options_.group, random());
  if (auto* m = dynamic_cast<grid::Member*>(&member_)) {
    state_->member = m;
    Register(state_);
    m->AddMetricsSource([weak = std::weak_ptr<State>(state_), m](metrics::MetricsRegistry& r) {
      if (weak.expired()) return;  // this consumer is gone; another one's source renders the rest
      RenderConsumers(m, r);
    });
  }
}

Consumer::~Consumer() { Stop(); }

void Consumer::On(std::string type, EventHandler handler) {
  handlers_[std::move(type)] = std::move(handler);
}

base::Result<void> Consumer::Start() {
  if (options_.group.empty() || options_.streams.empty()) {
    return base::Fail(base::ErrorCode::kBadRequest,
                      "a consumer needs a group and at least one stream");
  }
  if (options_.concurrency < 1) {
    return base::Fail(base::ErrorCode::kBadRequest, "consumer concurrency must be at least 1");
  }
  if (auto ok = options_.retry.Validate(); !ok) return ok;
  // In-place retries sleep on the subscription's thread, which renews its leases between
  // events only: their waits must stay well inside the lease.
  std::mt19937_64 no_jitter;
  RetryPolicy worst = options_.retry;
  worst.full_jitter = false;
  base::Millis waits = 0;
  for (int attempt = 2; attempt <= worst.max_attempts; ++attempt) {
    waits += worst.DelayBefore(attempt, no_jitter).value_or(0);
  }
  if (waits * 3 >= options_.subscribe.lease_ttl_ms) {
    return base::Fail(base::ErrorCode::kBadRequest,
                      "the consumer's retry policy waits up to " + std::to_string(waits) +
                          " ms between attempts, a third of the lease (" +
                          std::to_string(options_.subscribe.lease_ttl_ms) +
                          " ms) or more: lower max_attempts or the delays, or lengthen the "
                          "lease; an event that needs longer belongs in the dead letter queue");
  }
  for (const auto& name : options_.streams) {
    auto stream = shared_->GetStream(name, options_.stream_config);
    for (int i = 0; i < options_.concurrency; ++i) {
      auto id = stream->Subscribe(
          options_.group, [this](const grid::StreamEvent& e) { return Deliver(e); },
          options_.subscribe);
      if (!id) {
        Stop();
        return std::unexpected(id.error());
      }
      subscriptions_.emplace_back(stream, *id);
    }
  }
  {
    std::lock_guard lock(maintenance_mu_);
    stopping_ = false;
  }
  if (options_.maintenance_ms > 0 && !maintenance_.joinable()) {
    maintenance_ = std::thread([this] { Maintain(); });
  }
  return {};
}

void Consumer::Stop() {
  {
    std::lock_guard lock(maintenance_mu_);
    stopping_ = true;
  }
  maintenance_cv_.notify_all();
  if (maintenance_.joinable()) maintenance_.join();
  for (auto& [stream, id] : subscriptions_) stream->Unsubscribe(id);
  subscriptions_.clear();
}

void Consumer::Maintain() {
  auto log = base::NamedLogger("consumer");
  std::int64_t next_sweep = 0;
  std::unique_lock lock(maintenance_mu_);
  while (!stopping_) {
    lock.unlock();
    if (auto ran = RunReplayRequests(); !ran) {
      log->debug("group '{}': replay requests not read: {}", options_.group, ran.error().message());
    }
    const std::int64_t now = base::SteadyClock().WallMs();
    if (now >= next_sweep) {  // the whole queue is read: not every round
      next_sweep = now + 10 * options_.maintenance_ms;
      if (auto expired = ExpireDeadLetters(); !expired) {
        log->debug("group '{}': retention sweep failed: {}", options_.group,
                   expired.error().message());
      }
      RefreshGauges();
    }
    lock.lock();
    maintenance_cv_.wait_for(lock, std::chrono::milliseconds(options_.maintenance_ms),
                             [this] { return stopping_; });
  }
}

void Consumer::RefreshGauges() {
  auto letters = dlq_.List();
  if (!letters) return;
  std::int64_t parked = 0, oldest = 0;
  for (const auto& l : *letters) {
    parked += l.parked;
    if (oldest == 0 || l.first_failure_ms < oldest) oldest = l.first_failure_ms;
  }
  state_->entries = static_cast<std::int64_t>(letters->size());
  state_->parked_entries = parked;
  state_->oldest_failure_ms = oldest;
}

base::Result<void> Consumer::RunHandler(const EventHandler& handler, const Event& event,
                                        bool* refused, const grid::StreamEvent* delivery) {
  std::optional<BreakerPermit> permit;
  *refused = false;
  if (breaker_) {
    permit = breaker_->TryAcquire();
    if (!permit) {
      *refused = true;
      return base::Fail(base::ErrorCode::kOverloaded,
                        "circuit breaker '" + breaker_->name() + "' is open; the event waits");
    }
  }
  HandlerContext ctx(inbox_, options_.group, event, member_, delivery);
  const auto start = std::chrono::steady_clock::now();
  base::Result<void> r;
  try {
    r = handler(event, ctx);
  } catch (const std::exception& e) {
    r = base::Fail(base::ErrorCode::kInternal,
                   "the handler of " + event.type + " threw: " + e.what());
  } catch (...) {
    r = base::Fail(base::ErrorCode::kInternal, "the handler of " + event.type + " threw");
  }
  if (permit) {  // a permit taken is always reported; only the dependency's failures count
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - start)
                          .count();
    if (!r && options_.retry.Retryable(r.error()) &&
        r.error().code() != base::ErrorCode::kConflict) {
      breaker_->OnFailure(*permit, took);
    } else {
      breaker_->OnSuccess(*permit, took);
    }
  }
  return r;
}

base::Result<bool> Consumer::KeyParked(const Event& event, std::uint64_t holding) {
  // The cache holds for a group of one stream only: with several, one key's events come on
  // several sub-streams, held by different consumers.
  if (options_.streams.size() != 1) holding = 0;
  bool known = false;
  std::uint64_t version = 0;
  {
    std::lock_guard lock(parked_mu_);
    version = parked_version_;
    if (holding != 0 && holdings_checked_.count(holding) != 0) {
      if (parked_.count(event.key) == 0) return false;
      known = true;
    }
  }
  if (!known && holding != 0) {  // a new holding: read which keys are parked now
    auto keys = dlq_.ParkedKeys();
    if (!keys) return std::unexpected(keys.error());
    std::lock_guard lock(parked_mu_);
    parked_.insert(keys->begin(), keys->end());
    if (holdings_checked_.size() >= 4096) holdings_checked_.clear();  // re-read: stays bounded
    holdings_checked_.insert(holding);
    if (parked_.count(event.key) == 0) return false;
    version = parked_version_;
  }
  auto parked = dlq_.KeyParked(event);
  if (parked && !*parked) {
    std::lock_guard lock(parked_mu_);
    // Unless this consumer parked a key meanwhile (it may be this one): then keep it.
    if (parked_version_ == version) parked_.erase(event.key);
  }
  return parked;
}

void Consumer::NoteParked(const std::string& key) {
  std::lock_guard lock(parked_mu_);
  parked_.insert(key);
  ++parked_version_;
}

base::Result<void> Consumer::AddDeadLetter(const Event& event, const base::Error* error,
                                           int attempts, std::int64_t first_failure_ms,
                                           bool parked) {
  DeadLetter letter;
  letter.event = event;
  letter.group = options_.group;
  letter.handler = event.type;
  letter.parked = parked;
  if (error != nullptr) {
    letter.error_code = static_cast<std::int32_t>(error->code());
    letter.error = error->message();
  }
  letter.attempts = attempts;
  letter.first_failure_ms = first_failure_ms;
  letter.last_failure_ms = base::SteadyClock().WallMs();
  NoteParked(event.key);    // before: a failed Add leaves at worst a key checked in vain
  return dlq_.Add(letter);  // not stored: the caller's event comes again
}

base::Result<void> Consumer::Deliver(const grid::StreamEvent& delivered) {
  auto event = DecodeEvent(delivered.payload);
  if (!event) {
    state_->undecodable.fetch_add(1);
    return {};  // not ours to handle: skip it rather than block its sub-stream
  }
  event->attempt = delivered.attempt;
  auto handler = handlers_.find(event->type);
  const bool unknown = handler == handlers_.end();
  if (unknown && !(options_.dead_letters && options_.unknown_to_dlq)) {
    state_->unknown.fetch_add(1);
    return {};
  }
  if (options_.dead_letters && options_.park_keys) {
    auto parked = KeyParked(*event, delivered.holding);
    if (!parked) return std::unexpected(parked.error());  // comes again
    if (*parked) {
      if (auto ok = AddDeadLetter(*event, nullptr, 0, base::SteadyClock().WallMs(), true); !ok)
        return ok;
      state_->parked.fetch_add(1);
      return {};
    }
  }
  if (unknown) {
    const auto error =
        base::Error(base::ErrorCode::kNotFound, "group '" + options_.group +
                                                    "' has no handler for event type '" +
                                                    event->type + "'; register one, then replay");
    if (auto ok = AddDeadLetter(*event, &error, 0, base::SteadyClock().WallMs(), false); !ok)
      return ok;
    state_->unknown.fetch_add(1);
    state_->dead_lettered.fetch_add(1);
    return {};
  }
  bool refused = false;  // the breaker is open: the event waits, it is not a failure
  int attempts = 0;
  const std::int64_t first_failure = base::SteadyClock().WallMs();
  auto result = Retry<void>(
      options_.retry,
      [&]() -> base::Result<void> {
        auto r = RunHandler(handler->second, *event, &refused, &delivered);
        attempts += refused ? 0 : 1;
        return r;
      },
      [this](int, const base::Error&, base::Millis) { state_->retries.fetch_add(1); },
      [&refused] { return refused; });  // no retries against an open breaker
  if (result) {
    state_->handled.fetch_add(1);
    return result;
  }
  if (refused) {
    state_->breaker_waits.fetch_add(1);
    return result;
  }
  state_->failed.fetch_add(1);
  if (!options_.dead_letters) return result;
  const bool too_old =
      options_.unavailable_dead_letter_ms > 0 &&
      base::SteadyClock().WallMs() - delivered.time_ms > options_.unavailable_dead_letter_ms;
  // Too early (a reply before the one it follows): not poison either.
  const bool early = result.error().reason() == base::ErrorReason::kRetryLater;
  if (!too_old && (early || std::find(options_.unavailable.begin(), options_.unavailable.end(),
                                      result.error().code()) != options_.unavailable.end())) {
    state_->unavailable.fetch_add(1);
    if (delivered.attempt == 1 || delivered.attempt % 50 == 0) {  // not a line per retry
      base::NamedLogger("consumer")
          ->warn("group '{}': event {} ({} {}) not handled, {} ({}); it comes again (delivery {})",
                 options_.group, event->id, event->type, event->key,
                 early ? "it came too early" : "the grid cannot answer now",
                 result.error().ToString(), delivered.attempt);
    }
    return result;  // delivered again after the stream's retry delay
  }
  if (auto ok = AddDeadLetter(*event, &result.error(), attempts, first_failure, false); !ok) {
    return ok;
  }
  state_->dead_lettered.fetch_add(1);
  base::NamedLogger("consumer")
      ->warn("group '{}': event {} ({} {}) is a dead letter after {} attempts: {}", options_.group,
             event->id, event->type, event->key, attempts, result.error().ToString());
  return {};
}

base::Result<int> Consumer::Replay(const Event& event) {
  // One replay of a key at a time in the whole group (two consumers, or a request and a call,
  // would run the same handlers twice): a lease on the key, given back at the end, lapsing
  // on its own if this process dies.
  auto lease = dlq_.LeaseReplay(event.key, name_, kReplayLeaseMs);
  if (!lease) return std::unexpected(lease.error());
  if (!lease->empty()) {
    return base::Fail(base::ErrorCode::kConflict, "a replay of key '" + event.key +
                                                      "' is running on " + *lease +
                                                      "; try again when it is done");
  }
  auto result = ReplayLeased(event);
  (void)dlq_.ReleaseReplay(event.key, name_);  // else it lapses
  return result;
}

base::Result<int> Consumer::ReplayLeased(const Event& event) {
  auto letter = dlq_.Get(event);
  if (!letter) return std::unexpected(letter.error());
  if (!letter->has_value()) {
    return base::Fail(
        base::ErrorCode::kNotFound,
        "group '" + options_.group + "' has no dead letter of event " + std::to_string(event.id));
  }
  // Parked keys replay from their oldest dead letter on, in order; otherwise each alone.
  auto of_key = options_.park_keys
                    ? dlq_.List(map::Predicate::Equal("event.key", event.key))
                    : base::Result<std::vector<DeadLetter>>(std::vector<DeadLetter>{**letter});
  if (!of_key) return std::unexpected(of_key.error());
  if (!of_key->empty() && of_key->front().event.id != event.id) {
    return base::Fail(base::ErrorCode::kConflict,
                      "dead letter " + std::to_string(of_key->front().event.id) + " of key '" +
                          event.key + "' comes before " + std::to_string(event.id) +
                          ": replay (or discard) it first");
  }
  int succeeded = 0;
  for (auto& next : *of_key) {
    auto handler = handlers_.find(next.event.type);
    if (next.replays >= options_.max_replays) {
      return base::Fail(base::ErrorCode::kOverloaded,
                        "dead letter " + std::to_string(next.event.id) + " was replayed " +
                            std::to_string(next.replays) +
                            " times (max_replays): fix its handler and discard it, or raise "
                            "the limit");
    }
    bool refused = false;
    base::Result<void> run =
        handler == handlers_.end()
            ? base::Fail(base::ErrorCode::kNotFound, "group '" + options_.group +
                                                         "' has no handler for event type '" +
                                                         next.event.type + "'")
            : RunHandler(handler->second, next.event, &refused);
    if (!run && refused) return std::unexpected(run.error());  // not a replay: try later
    if (!run) {
      next.replays += 1;
      next.parked = false;
      next.error_code = static_cast<std::int32_t>(run.error().code());
      next.error = run.error().message();
      next.last_failure_ms = base::SteadyClock().WallMs();
      next.attempts += 1;
      state_->replay_failures.fetch_add(1);
      if (auto saved = dlq_.Update(next); !saved) return std::unexpected(saved.error());
      return std::unexpected(run.error());
    }
    if (auto removed = dlq_.Remove(next); !removed) return std::unexpected(removed.error());
    state_->replayed.fetch_add(1);
    ++succeeded;
  }
  return succeeded;
}

base::Result<ReplaySummary> Consumer::ReplayMatching(const map::Predicate& filter) {
  auto letters = dlq_.List(filter);
  if (!letters) return std::unexpected(letters.error());
  ReplaySummary summary;
  std::set<std::string> keys_done;
  for (const auto& letter : *letters) {  // by event id: each key's oldest match comes first
    if (options_.park_keys && !keys_done.insert(letter.event.key).second) continue;
    auto ran = Replay(letter.event);
    if (ran) {
      summary.replayed += *ran;
      continue;
    }
    if (ran.error().code() == base::ErrorCode::kNotFound) continue;  // replayed meanwhile
    ++summary.failed;
    if (summary.first_error.empty()) summary.first_error = ran.error().message();
  }
  return summary;
}

base::Result<int> Consumer::RunReplayRequests() {
  auto pending = dlq_.PendingReplays();
  if (!pending) return std::unexpected(pending.error());
  int ran = 0;
  for (auto& request : *pending) {
    auto claimed = dlq_.ClaimReplay(request, name_);
    if (!claimed) return std::unexpected(claimed.error());
    if (!*claimed) continue;  // another consumer of the group took it, or it was cancelled
    ReplaySummary summary;
    if (request.event_id != 0) {
      Event event;
      event.id = request.event_id;
      auto letter = dlq_.List(map::Predicate::Equal("event.id", record::Value(request.event_id)));
      if (letter && !letter->empty()) event = letter->front().event;
      auto replayed =
          letter ? (letter->empty()
                        ? base::Result<int>(base::Fail(base::ErrorCode::kNotFound,
                                                       "group '" + options_.group +
                                                           "' has no dead letter of event " +
                                                           std::to_string(request.event_id)))
                        : Replay(event))
                 : base::Result<int>(std::unexpected(letter.error()));
      if (replayed) {
        summary.replayed = *replayed;
      } else {
        summary.failed = 1;
        summary.first_error = replayed.error().message();
      }
    } else {
      std::vector<map::Predicate> filters;
      if (!request.type.empty()) {
        filters.push_back(map::Predicate::Equal("event.type", record::Value(request.type)));
      }
      if (!request.key.empty()) {
        filters.push_back(map::Predicate::Equal("event.key", record::Value(request.key)));
      }
      auto matched = ReplayMatching(filters.empty() ? map::Predicate()
                                                    : map::Predicate::And(std::move(filters)));
      if (matched) {
        summary = *matched;
      } else {
        summary.failed = 1;
        summary.first_error = matched.error().message();
      }
    }
    request.status = summary.failed == 0 ? "done" : "failed";
    request.replayed = summary.replayed;
    request.failed = summary.failed;
    request.error = summary.first_error;
    request.finished_ms = base::SteadyClock().WallMs();
    if (auto saved = dlq_.FinishReplay(request); !saved) return std::unexpected(saved.error());
    state_->replay_requests.fetch_add(1);
    base::NamedLogger("consumer")
        ->info("group '{}' ran replay request {}: {} replayed, {} failed{}", options_.group,
               request.id, summary.replayed, summary.failed,
               summary.first_error.empty() ? "" : " (" + summary.first_error + ")");
    ++ran;
  }
  return ran;
}

base::Result<int> Consumer::ExpireDeadLetters() {
  if (options_.dlq_retention_ms <= 0) return 0;
  auto old = dlq_.List(map::Predicate::Less(
      "last_failure_ms", record::Value(base::SteadyClock().WallMs() - options_.dlq_retention_ms)));
  if (!old) return std::unexpected(old.error());
  int removed = 0;
  for (const auto& letter : *old) {
    if (auto ok = dlq_.Remove(letter); !ok) return std::unexpected(ok.error());
    state_->expired.fetch_add(1);
    ++removed;
    base::NamedLogger("consumer")
        ->warn(
            "group '{}' removed dead letter {} ({} of key '{}'): older than the retention of "
            "{} ms",
            options_.group, letter.event.id, letter.handler, letter.event.key,
            options_.dlq_retention_ms);
  }
  return removed;
}

base::Result<void> Consumer::Discard(const Event& event, const std::string& reason) {
  auto letter = dlq_.Get(event);
  if (!letter) return std::unexpected(letter.error());
  if (!letter->has_value()) {
    return base::Fail(
        base::ErrorCode::kNotFound,
        "group '" + options_.group + "' has no dead letter of event " + std::to_string(event.id));
  }
  if (auto removed = dlq_.Remove(**letter); !removed) return removed;
  state_->discarded.fetch_add(1);
  base::NamedLogger("consumer")
      ->warn("group '{}' discarded dead letter {} ({} of key '{}'): {}", options_.group, event.id,
             (*letter)->handler, event.key, reason);
  return {};
}

std::vector<std::int64_t> Consumer::leases_held() const {
  std::vector<std::int64_t> held;
  for (const auto& [stream, id] : subscriptions_) {
    auto st = stream->Stats(id);
    held.push_back(st ? st->leases_held : 0);
  }
  return held;
}

Consumer::Stats Consumer::stats() const {
  const State& st = *state_;
  Stats s;
  s.handled = st.handled.load();
  s.failed = st.failed.load();
  s.retries = st.retries.load();
  s.unknown_skipped = st.unknown.load();
  s.undecodable = st.undecodable.load();
  s.breaker_waits = st.breaker_waits.load();
  s.unavailable = st.unavailable.load();
  s.dead_lettered = st.dead_lettered.load();
  s.parked = st.parked.load();
  s.replayed = st.replayed.load();
  s.replay_failures = st.replay_failures.load();
  s.discarded = st.discarded.load();
  s.expired = st.expired.load();
  s.replay_requests = st.replay_requests.load();
  return s;
}

}  // namespace tessera::saga
