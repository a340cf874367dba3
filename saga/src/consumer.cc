#include "tessera/saga/consumer.h"

#include <spdlog/spdlog.h>

#include <exception>
#include <random>

#include "tessera/base/log.h"

namespace tessera::saga {

Consumer::Consumer(std::shared_ptr<grid::Instance> shared, grid::Instance& member, Inbox& inbox,
                   ConsumerOptions options, BreakerRegistry* breakers)
    : shared_(std::move(shared)),
      member_(member),
      inbox_(inbox),
      options_(std::move(options)),
      dlq_(shared_, options_.group) {
  if (breakers != nullptr && !options_.breaker.empty()) breaker_ = breakers->Get(options_.breaker);
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
  return {};
}

void Consumer::Stop() {
  for (auto& [stream, id] : subscriptions_) stream->Unsubscribe(id);
  subscriptions_.clear();
}

base::Result<void> Consumer::RunHandler(const EventHandler& handler, const Event& event) {
  HandlerContext ctx(inbox_, options_.group, event, member_);
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
  if (breaker_) {  // a permit taken is always reported; only the dependency's failures count
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - start)
                          .count();
    if (!r && options_.retry.Retryable(r.error()) &&
        r.error().code() != base::ErrorCode::kConflict) {
      breaker_->OnFailure(took);
    } else {
      breaker_->OnSuccess(took);
    }
  }
  return r;
}

namespace {
std::int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

base::Result<void> Consumer::Deliver(const grid::StreamEvent& delivered) {
  auto event = DecodeEvent(delivered.payload);
  if (!event) {
    undecodable_.fetch_add(1);
    return {};  // not ours to handle: skip it rather than block its sub-stream
  }
  event->attempt = delivered.attempt;
  auto handler = handlers_.find(event->type);
  if (handler == handlers_.end()) {
    unknown_.fetch_add(1);
    return {};
  }
  if (options_.dead_letters) {
    auto parked = dlq_.KeyParked(*event);
    if (!parked) return std::unexpected(parked.error());  // comes again
    if (*parked) {
      DeadLetter letter;
      letter.event = *event;
      letter.group = options_.group;
      letter.handler = event->type;
      letter.parked = true;
      letter.first_failure_ms = letter.last_failure_ms = WallMs();
      if (auto ok = dlq_.Add(letter); !ok) return ok;
      parked_.fetch_add(1);
      return {};
    }
  }
  if (breaker_ && !breaker_->TryAcquire()) {
    breaker_waits_.fetch_add(1);
    return base::Fail(base::ErrorCode::kOverloaded,
                      "circuit breaker '" + breaker_->name() + "' is open; the event waits");
  }
  bool first = true;
  bool refused = false;  // the breaker opened between attempts: the event waits, not a failure
  int attempts = 0;
  const std::int64_t first_failure = WallMs();
  auto result = Retry<void>(
      options_.retry,
      [&]() -> base::Result<void> {
        if (!first && breaker_ && !breaker_->TryAcquire()) {
          refused = true;
          return base::Fail(base::ErrorCode::kOverloaded,
                            "circuit breaker '" + breaker_->name() + "' opened");
        }
        first = false;
        ++attempts;
        return RunHandler(handler->second, *event);
      },
      [this](int, const base::Error&, base::Millis) { retries_.fetch_add(1); });
  if (result) {
    handled_.fetch_add(1);
    return result;
  }
  failed_.fetch_add(1);
  if (refused) {
    breaker_waits_.fetch_add(1);
    return result;
  }
  if (!options_.dead_letters) return result;
  DeadLetter letter;
  letter.event = *event;
  letter.group = options_.group;
  letter.handler = event->type;
  letter.error_code = static_cast<std::int32_t>(result.error().code());
  letter.error = result.error().message();
  letter.attempts = attempts;
  letter.first_failure_ms = first_failure;
  letter.last_failure_ms = WallMs();
  if (auto ok = dlq_.Add(letter); !ok) return ok;  // not stored: the event comes again
  dead_lettered_.fetch_add(1);
  return {};
}

base::Result<int> Consumer::Replay(const Event& event) {
  auto letter = dlq_.Get(event);
  if (!letter) return std::unexpected(letter.error());
  if (!letter->has_value()) {
    return base::Fail(
        base::ErrorCode::kNotFound,
        "group '" + options_.group + "' has no dead letter of event " + std::to_string(event.id));
  }
  auto of_key = dlq_.List(map::Predicate::Equal("event.key", event.key));
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
    base::Result<void> run =
        handler == handlers_.end()
            ? base::Fail(base::ErrorCode::kNotFound,
                         "no handler for event type " + next.event.type + " in this consumer")
            : RunHandler(handler->second, next.event);
    if (!run) {
      next.replays += 1;
      next.parked = false;
      next.error_code = static_cast<std::int32_t>(run.error().code());
      next.error = run.error().message();
      next.last_failure_ms = WallMs();
      next.attempts += 1;
      if (auto saved = dlq_.Update(next); !saved) return std::unexpected(saved.error());
      return std::unexpected(run.error());
    }
    if (auto removed = dlq_.Remove(next); !removed) return std::unexpected(removed.error());
    replayed_.fetch_add(1);
    ++succeeded;
  }
  return succeeded;
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
  base::NamedLogger("consumer")
      ->warn("group '{}' discarded dead letter {} ({} of key '{}'): {}", options_.group, event.id,
             (*letter)->handler, event.key, reason);
  return {};
}

Consumer::Stats Consumer::stats() const {
  Stats s;
  s.handled = handled_.load();
  s.failed = failed_.load();
  s.retries = retries_.load();
  s.unknown_skipped = unknown_.load();
  s.undecodable = undecodable_.load();
  s.breaker_waits = breaker_waits_.load();
  s.dead_lettered = dead_lettered_.load();
  s.parked = parked_.load();
  s.replayed = replayed_.load();
  return s;
}

}  // namespace tessera::saga
