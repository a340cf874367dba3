#include "tessera/saga/circuit_breaker.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>

namespace tessera::saga {
namespace {

using base::ErrorCode;
using base::Fail;

bool AtThreshold(int part, int calls, double threshold_percent) {
  return calls > 0 && 100.0 * part / calls >= threshold_percent;
}

}  // namespace

base::Result<void> BreakerConfig::Validate() const {
  auto bad = [](const std::string& what) {
    return Fail(ErrorCode::kBadRequest, "circuit breaker: " + what);
  };
  if (window_size < 1) return bad("window_size must be at least 1");
  if (minimum_calls < 1) return bad("minimum_calls must be at least 1");
  if (window == Window::kCount && minimum_calls > window_size) {
    return bad("minimum_calls is above window_size: a count window that small never opens");
  }
  if (failure_rate_threshold <= 0 || failure_rate_threshold > 100) {
    return bad("failure_rate_threshold is a percentage in (0, 100]");
  }
  if (slow_call_rate_threshold <= 0 || slow_call_rate_threshold > 100) {
    return bad("slow_call_rate_threshold is a percentage in (0, 100]");
  }
  if (slow_call_ms < 1) return bad("slow_call_ms must be at least 1");
  if (open_ms < 1) return bad("open_ms must be at least 1");
  if (half_open_calls < 1) return bad("half_open_calls must be at least 1");
  return {};
}

std::string_view BreakerStateName(BreakerState state) {
  switch (state) {
    case BreakerState::kClosed:
      return "closed";
    case BreakerState::kOpen:
      return "open";
    case BreakerState::kHalfOpen:
      return "half_open";
  }
  return "unknown";
}

CircuitBreaker::CircuitBreaker(std::string name, BreakerConfig config, const base::Clock& clock,
                               std::shared_ptr<spdlog::logger> log)
    : name_(std::move(name)), config_(config), clock_(clock), log_(std::move(log)) {
  ResetWindow();
}

void CircuitBreaker::ResetWindow() {
  ring_.assign(config_.window == BreakerConfig::Window::kCount ? config_.window_size : 0, {});
  ring_next_ = ring_filled_ = 0;
  buckets_.assign(config_.window == BreakerConfig::Window::kTime ? config_.window_size : 0, {});
}

void CircuitBreaker::RefreshLocked() {
  if (state_ == BreakerState::kOpen && clock_.NowMs() - opened_at_ms_ >= config_.open_ms) {
    MoveTo(BreakerState::kHalfOpen, fmt::format("open for {} ms; letting {} trial call(s) through",
                                                config_.open_ms, config_.half_open_calls));
  }
}

std::optional<BreakerPermit> CircuitBreaker::TryAcquire() {
  std::lock_guard lock(mu_);
  RefreshLocked();
  if (state_ == BreakerState::kClosed) return BreakerPermit{generation_};
  if (state_ == BreakerState::kHalfOpen && trial_permits_ < config_.half_open_calls) {
    ++trial_permits_;
    return BreakerPermit{generation_};
  }
  ++stats_.not_permitted;
  return std::nullopt;
}

base::Result<void> CircuitBreaker::Refused() const {
  std::lock_guard lock(mu_);
  const base::Millis left =
      std::max<base::Millis>(0, config_.open_ms - (clock_.NowMs() - opened_at_ms_));
  return Fail(ErrorCode::kOverloaded,
              state_ == BreakerState::kOpen
                  ? fmt::format("circuit breaker '{}' is open (its dependency kept failing); "
                                "it lets trial calls through in {} ms",
                                name_, left)
                  : fmt::format("circuit breaker '{}' is half-open and its {} trial call(s) "
                                "are under way; retry shortly",
                                name_, config_.half_open_calls));
}

void CircuitBreaker::OnSuccess(const BreakerPermit& permit, base::Millis duration_ms) {
  Report(false, duration_ms, permit.generation);
}
void CircuitBreaker::OnFailure(const BreakerPermit& permit, base::Millis duration_ms) {
  Report(true, duration_ms, permit.generation);
}
void CircuitBreaker::OnSuccess(base::Millis duration_ms) {
  Report(false, duration_ms, std::nullopt);
}
void CircuitBreaker::OnFailure(base::Millis duration_ms) {
  Report(true, duration_ms, std::nullopt);
}

void CircuitBreaker::Report(bool failure, base::Millis duration_ms,
                            std::optional<std::uint64_t> generation) {
  std::lock_guard lock(mu_);
  const Outcome outcome{failure, duration_ms >= config_.slow_call_ms};
  (failure ? stats_.failures : stats_.successes)++;
  stats_.slow += outcome.slow;
  RefreshLocked();
  // A call permitted in an earlier state (closed before it opened, or an earlier half-open
  // round) says nothing about this state's trial calls or window.
  if (generation && *generation != generation_) return;
  // Half-open, only the trial calls (permits of this state) decide.
  if (!generation && state_ == BreakerState::kHalfOpen) return;
  Record(outcome);
}

void CircuitBreaker::Rates(int& calls, int& failures, int& slow) {
  calls = failures = slow = 0;
  if (config_.window == BreakerConfig::Window::kCount) {
    for (std::size_t i = 0; i < ring_filled_; ++i) {
      ++calls;
      failures += ring_[i].failure;
      slow += ring_[i].slow;
    }
    return;
  }
  const std::int64_t now_s = clock_.NowMs() / 1000;
  for (const auto& b : buckets_) {
    if (b.second < 0 || now_s - b.second >= config_.window_size) continue;
    calls += b.calls;
    failures += b.failures;
    slow += b.slow;
  }
}

void CircuitBreaker::Record(const Outcome& outcome) {
  if (state_ == BreakerState::kOpen) return;  // a late outcome of a call made before it opened
  if (state_ == BreakerState::kHalfOpen) {
    ++trial_calls_;
    trial_failures_ += outcome.failure;
    trial_slow_ += outcome.slow;
    if (trial_calls_ < config_.half_open_calls) return;
    if (AtThreshold(trial_failures_, trial_calls_, config_.failure_rate_threshold) ||
        AtThreshold(trial_slow_, trial_calls_, config_.slow_call_rate_threshold)) {
      MoveTo(BreakerState::kOpen, fmt::format("{} of {} trial calls failed and {} were slow",
                                              trial_failures_, trial_calls_, trial_slow_));
    } else {
      MoveTo(BreakerState::kClosed,
             fmt::format("{} of {} trial calls failed", trial_failures_, trial_calls_));
    }
    return;
  }
  if (config_.window == BreakerConfig::Window::kCount) {
    ring_[ring_next_] = outcome;
    ring_next_ = (ring_next_ + 1) % ring_.size();
    ring_filled_ = std::min(ring_filled_ + 1, ring_.size());
  } else {
    const std::int64_t now_s = clock_.NowMs() / 1000;
    Bucket& b = buckets_[static_cast<std::size_t>(now_s % config_.window_size)];
    if (b.second != now_s) b = Bucket{now_s, 0, 0, 0};
    ++b.calls;
    b.failures += outcome.failure;
    b.slow += outcome.slow;
  }
  int calls = 0, failures = 0, slow = 0;
  Rates(calls, failures, slow);
  if (calls < config_.minimum_calls) return;
  if (AtThreshold(failures, calls, config_.failure_rate_threshold) ||
      AtThreshold(slow, calls, config_.slow_call_rate_threshold)) {
    MoveTo(BreakerState::kOpen,
           fmt::format("{} of the last {} calls failed ({:.0f}%, threshold {:.0f}%) and {} were "
                       "slow (>= {} ms)",
                       failures, calls, 100.0 * failures / calls, config_.failure_rate_threshold,
                       slow, config_.slow_call_ms));
  }
}

void CircuitBreaker::MoveTo(BreakerState next, const std::string& why) {
  const BreakerState was = state_;
  state_ = next;
  ++generation_;
  trial_permits_ = trial_calls_ = trial_failures_ = trial_slow_ = 0;
  if (next == BreakerState::kOpen) {
    opened_at_ms_ = clock_.NowMs();
    ++stats_.opened;
  } else if (next == BreakerState::kHalfOpen) {
    ++stats_.half_opened;
  } else {
    ++stats_.closed;
  }
  ResetWindow();
  if (log_) {
    log_->warn("circuit breaker '{}': {} -> {}: {}", name_, BreakerStateName(was),
               BreakerStateName(next), why);
  }
}

BreakerState CircuitBreaker::state() const {
  std::lock_guard lock(mu_);
  if (state_ == BreakerState::kOpen && clock_.NowMs() - opened_at_ms_ >= config_.open_ms) {
    return BreakerState::kHalfOpen;  // what the next call finds (it makes the move)
  }
  return state_;
}

CircuitBreaker::Stats CircuitBreaker::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

BreakerRegistry::BreakerRegistry(const base::Clock& clock, std::shared_ptr<spdlog::logger> log,
                                 BreakerConfig default_config)
    : clock_(clock), log_(std::move(log)), default_(default_config) {}

namespace {

base::Result<void> ApplyKey(const std::string& breaker, const std::string& key,
                            const std::string& text, BreakerConfig& c) {
  auto bad = [&](const std::string& why) {
    return Fail(ErrorCode::kBadRequest,
                "breakers." + breaker + "." + key + " is '" + text + "': " + why);
  };
  if (key == "window") {
    if (text != "count" && text != "time") return bad("use count or time");
    c.window = text == "count" ? BreakerConfig::Window::kCount : BreakerConfig::Window::kTime;
    return {};
  }
  double number = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec != std::errc() || end != text.data() + text.size()) return bad("expected a number");
  if (number < -1e9 || number > 1e12) return bad("out of range");
  const auto whole = static_cast<std::int64_t>(number);
  if (key == "window_size") {
    c.window_size = static_cast<int>(whole);
  } else if (key == "minimum_calls") {
    c.minimum_calls = static_cast<int>(whole);
  } else if (key == "failure_rate_threshold") {
    c.failure_rate_threshold = number;
  } else if (key == "slow_call_rate_threshold") {
    c.slow_call_rate_threshold = number;
  } else if (key == "slow_call_ms") {
    c.slow_call_ms = whole;
  } else if (key == "open_ms") {
    c.open_ms = whole;
  } else if (key == "half_open_calls") {
    c.half_open_calls = static_cast<int>(whole);
  } else {
    return Fail(ErrorCode::kBadRequest,
                "unknown key breakers." + breaker + "." + key +
                    ": use window, window_size, minimum_calls, failure_rate_threshold, "
                    "slow_call_rate_threshold, slow_call_ms, open_ms, half_open_calls");
  }
  return {};
}

base::Result<BreakerConfig> ParseOne(const std::string& name, const YAML::Node& node,
                                     BreakerConfig base) {
  if (!node.IsMap()) {
    return Fail(ErrorCode::kBadRequest, "breakers." + name + " must be a mapping of settings");
  }
  for (const auto& item : node) {
    if (!item.first.IsScalar()) {
      return Fail(ErrorCode::kBadRequest, "breakers." + name + " has a key that is not a name");
    }
    const auto key = item.first.as<std::string>();
    if (!item.second.IsScalar()) {
      return Fail(ErrorCode::kBadRequest, "breakers." + name + "." + key + " must be a value");
    }
    if (auto ok = ApplyKey(name, key, item.second.as<std::string>(), base); !ok) {
      return std::unexpected(ok.error());
    }
  }
  if (auto ok = base.Validate(); !ok) {
    return Fail(ErrorCode::kBadRequest, "breakers." + name + ": " + ok.error().message());
  }
  return base;
}

}  // namespace

base::Result<void> BreakerRegistry::Configure(const std::string& yaml_text) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return Fail(ErrorCode::kBadRequest,
                std::string("breaker configuration is not valid YAML: ") + e.what());
  }
  if (!root.IsMap() || !root["breakers"]) return {};
  const YAML::Node breakers = root["breakers"];
  if (!breakers.IsMap()) {
    return Fail(ErrorCode::kBadRequest, "breakers must be a mapping of breaker names");
  }
  std::lock_guard lock(mu_);
  BreakerConfig defaults = default_;
  if (breakers["default"]) {
    auto parsed = ParseOne("default", breakers["default"], defaults);
    if (!parsed) return std::unexpected(parsed.error());
    defaults = *parsed;
  }
  std::map<std::string, BreakerConfig> named;
  for (const auto& item : breakers) {
    if (!item.first.IsScalar()) {
      return Fail(ErrorCode::kBadRequest, "breakers has a key that is not a name");
    }
    const auto name = item.first.as<std::string>();
    if (name == "default") continue;
    auto parsed = ParseOne(name, item.second, defaults);
    if (!parsed) return std::unexpected(parsed.error());
    named[name] = *parsed;
  }
  default_ = defaults;
  configs_ = std::move(named);
  return {};
}

std::shared_ptr<CircuitBreaker> BreakerRegistry::Get(const std::string& name) {
  std::lock_guard lock(mu_);
  auto& made = made_[name];
  if (!made) {
    auto it = configs_.find(name);
    made = std::make_shared<CircuitBreaker>(name, it == configs_.end() ? default_ : it->second,
                                            clock_, log_);
  }
  return made;
}

void BreakerRegistry::ExportMetrics(metrics::MetricsRegistry& registry) const {
  std::vector<std::pair<metrics::Labels, double>> states;
  std::vector<std::pair<metrics::Labels, std::int64_t>> calls, slow, refused, transitions;
  for (const auto& b : All()) {
    const auto s = b->stats();
    const std::string& n = b->name();
    states.emplace_back(metrics::Labels{{"breaker", n}}, static_cast<double>(b->state()));
    calls.emplace_back(metrics::Labels{{"breaker", n}, {"outcome", "success"}}, s.successes);
    calls.emplace_back(metrics::Labels{{"breaker", n}, {"outcome", "failure"}}, s.failures);
    slow.emplace_back(metrics::Labels{{"breaker", n}}, s.slow);
    refused.emplace_back(metrics::Labels{{"breaker", n}}, s.not_permitted);
    transitions.emplace_back(metrics::Labels{{"breaker", n}, {"to", "open"}}, s.opened);
    transitions.emplace_back(metrics::Labels{{"breaker", n}, {"to", "half_open"}}, s.half_opened);
    transitions.emplace_back(metrics::Labels{{"breaker", n}, {"to", "closed"}}, s.closed);
  }
  registry.SetGaugeFamily("tessera_breaker_state",
                          "Circuit breaker state: 0 closed, 1 open, 2 half-open",
                          std::move(states));
  registry.SetCounterFamily("tessera_breaker_calls_total",
                            "Calls whose outcome the breaker recorded", std::move(calls));
  registry.SetCounterFamily("tessera_breaker_slow_calls_total",
                            "Recorded calls at least slow_call_ms long", std::move(slow));
  registry.SetCounterFamily("tessera_breaker_not_permitted_total",
                            "Calls the breaker refused (open, or half-open with its trial "
                            "calls under way)",
                            std::move(refused));
  registry.SetCounterFamily("tessera_breaker_transitions_total",
                            "State changes of the breaker, by the state entered",
                            std::move(transitions));
}

std::vector<std::shared_ptr<CircuitBreaker>> BreakerRegistry::All() const {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<CircuitBreaker>> out;
  for (const auto& [name, breaker] : made_) out.push_back(breaker);
  return out;
}

}  // namespace tessera::saga
