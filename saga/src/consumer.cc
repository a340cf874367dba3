#include "tessera/saga/consumer.h"

#include <exception>
#include <random>

namespace tessera::saga {

Consumer::Consumer(std::shared_ptr<grid::Instance> shared, grid::Instance& member, Inbox& inbox,
                   ConsumerOptions options, BreakerRegistry* breakers)
    : shared_(std::move(shared)), member_(member), inbox_(inbox), options_(std::move(options)) {
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
  if (breaker_ && !breaker_->TryAcquire()) {
    breaker_waits_.fetch_add(1);
    return base::Fail(base::ErrorCode::kOverloaded,
                      "circuit breaker '" + breaker_->name() + "' is open; the event waits");
  }
  HandlerContext ctx(inbox_, options_.group, *event, member_);
  std::function<base::Result<void>()> call = [&]() -> base::Result<void> {
    const auto start = std::chrono::steady_clock::now();
    base::Result<void> r;
    try {
      r = handler->second(*event, ctx);
    } catch (const std::exception& e) {
      r = base::Fail(base::ErrorCode::kInternal,
                     "the handler of " + event->type + " threw: " + e.what());
    } catch (...) {
      r = base::Fail(base::ErrorCode::kInternal, "the handler of " + event->type + " threw");
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
  };
  bool first = true;
  auto result = Retry<void>(
      options_.retry,
      [&]() -> base::Result<void> {
        if (!first && breaker_ && !breaker_->TryAcquire()) {
          return base::Fail(base::ErrorCode::kOverloaded,
                            "circuit breaker '" + breaker_->name() + "' opened");
        }
        first = false;
        return call();
      },
      [this](int, const base::Error&, base::Millis) { retries_.fetch_add(1); });
  if (result) {
    handled_.fetch_add(1);
  } else {
    failed_.fetch_add(1);
  }
  return result;
}

Consumer::Stats Consumer::stats() const {
  return {handled_.load(), failed_.load(),      retries_.load(),
          unknown_.load(), undecodable_.load(), breaker_waits_.load()};
}

}  // namespace tessera::saga
