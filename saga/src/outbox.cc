// The outbox relay: one Relay per owned partition (partition work, on the partition's shard)
// finds the partition's entries and hands them to the Outbox's publisher thread, which appends
// them to the shared stream (blocking calls never run on a shard); the relay then removes
// what was appended, on its shard.
//
// Fewer hand-offs between threads per event (each is a wake-up of a sleeping thread): the
// entry listener that wakes a relay runs on the shard (MapService's listener, not the
// member's, which hops through an event thread); the publisher takes every batch handed over
// meanwhile, up to max_batch events, and appends them with one AppendAll per stream (one
// round trip for many partitions); the removal runs on the relay's shard without a wait.
#include "tessera/saga/outbox.h"
#include "tessera/base/clock.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <condition_variable>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "serial_worker.h"
#include "tessera/base/log.h"
#include "tessera/metrics/metrics_registry.h"

namespace tessera::saga {
namespace {

std::string EntryKey(std::int64_t id, const std::string& partition_key) {
  return fmt::format("{:016x}@{}", static_cast<std::uint64_t>(id), partition_key);
}

}  // namespace

base::Result<void> Outbox::Stage(grid::Transaction& tx, const Event& event) {
  if (auto ok = ValidateEvent(event); !ok) return ok;
  // One key's events must go through one partition's relay to keep their order.
  const auto at = event.key.rfind('@');
  const std::string_view key_partition = at == std::string::npos
                                             ? std::string_view(event.key)
                                             : std::string_view(event.key).substr(at + 1);
  if (key_partition != tx.request().key) {
    return base::Fail(base::ErrorCode::kBadRequest,
                      "event " + std::to_string(event.id) + " has key '" + event.key +
                          "', whose partition key '" + std::string(key_partition) +
                          "' is not the transaction's ('" + tx.request().key +
                          "'): stage an event in the transaction of its key's partition key");
  }
  tx.Set(kOutboxMap, EntryKey(event.id, tx.request().key), EncodeEvent(event));
  return {};
}

struct Outbox::State {
  grid::Member* member = nullptr;
  std::shared_ptr<grid::Instance> shared;
  OutboxOptions options;
  std::shared_ptr<spdlog::logger> log = base::NamedLogger("outbox");
  std::map<std::string, std::shared_ptr<grid::Stream>> streams;  // publisher thread only

  std::mutex mu;
  Stats stats;  // guarded by mu (pending/oldest: from `seen`)
  std::map<std::uint32_t, std::pair<std::int64_t, std::int64_t>> seen;  // p -> count, oldest
  bool outage = false;                                                  // guarded by mu
  std::unique_ptr<SerialWorker> publisher;                              // the appends

  using Entry = std::pair<std::string, std::string>;  // an outbox entry: key, encoded event
  // What became of a handed-over batch's entries: appended (to remove), refused for good by
  // their stream (to move to the rejected map), or kept (to try again), and the first error.
  enum class Fate : char { kKeep, kRemove, kReject };
  struct Outcome {
    std::vector<Fate> fates;  // per entry
    std::optional<base::Error> error;
  };
  // One relay's batch (one partition's entries, in id order) and where its outcome goes.
  struct Handover {
    std::vector<Entry> entries;
    std::function<void(std::vector<Entry> entries, Outcome outcome)> done;
  };
  std::mutex handover_mu;
  std::deque<Handover> handovers;  // guarded by handover_mu
  bool drain_queued = false;       // guarded by handover_mu: a Drain job is posted

  // Relays are woken by the entry listener when an entry is staged in their partition, so an
  // idle relay does not wait for its poll (poll_ms is then only a fallback).
  std::mutex relays_mu;
  std::map<std::uint32_t, std::pair<const void*, std::function<void()>>> wakers;  // relays_mu
  bool listening = false;  // publisher thread only
  grid::ListenerId listener = 0;

  void Wake(std::uint32_t partition) {
    std::lock_guard lock(relays_mu);
    if (auto it = wakers.find(partition); it != wakers.end()) it->second.second();
  }
  // On the publisher thread: registers the listener once. It runs on the shard that staged
  // the entry, where the relay lives: the wake is a post to the shard's own loop.
  void Listen(const std::weak_ptr<State>& self) {
    if (listening) return;
    map::ListenerOptions o;
    o.include_values = false;
    o.types = {map::EntryEventType::kAdded};
    listener =
        member->map_service().AddEntryListener(kOutboxMap, o, [self](const map::EntryEvent& e) {
          if (auto state = self.lock()) {
            state->Wake(e.partition_id);
          }
        });
    listening = true;
  }

  // From a relay (its shard): queues its batch for the publisher.
  void Hand(const std::shared_ptr<State>& self, Handover batch) {
    {
      std::lock_guard lock(handover_mu);
      handovers.push_back(std::move(batch));
      if (drain_queued) return;
      drain_queued = true;
    }
    Post([self] { self->Drain(self); });
  }

  // On the publisher thread: publishes the batches handed over so far, up to max_batch events
  // (at least one batch), and hands each relay its outcome.
  void Drain(const std::shared_ptr<State>& self) {
    std::vector<Handover> taken;
    bool more = false;
    {
      std::lock_guard lock(handover_mu);
      std::size_t events = 0;
      while (!handovers.empty() &&
             (taken.empty() || events + handovers.front().entries.size() <= options.max_batch)) {
        events += handovers.front().entries.size();
        taken.push_back(std::move(handovers.front()));
        handovers.pop_front();
      }
      more = !handovers.empty();
      drain_queued = more;
    }
    if (more) Post([self] { self->Drain(self); });
    std::vector<Outcome> outcomes = Publish(taken);
    for (std::size_t i = 0; i < taken.size(); ++i) {
      Count(taken[i].entries.size(), outcomes[i].error);
      taken[i].done(std::move(taken[i].entries), std::move(outcomes[i]));
    }
  }

  void Count(std::size_t entries, const std::optional<base::Error>& error) {
    std::lock_guard lock(mu);
    if (!error) {
      stats.published += static_cast<std::int64_t>(entries);
      if (outage) {
        outage = false;
        log->info("publishing to stream '{}' again", options.stream);
      }
      return;
    }
    ++stats.publish_failures;
    if (!outage) {
      outage = true;
      log->warn(
          "cannot publish outbox events to stream '{}': {}; they stay in the outbox and are "
          "retried (logged again when publishing works)",
          options.stream, error->ToString());
    }
  }

  Stats Snapshot() {
    std::lock_guard lock(mu);
    Stats s = stats;
    for (const auto& [p, partition] : seen) {
      s.pending += partition.first;
      if (partition.second > 0 &&
          (s.oldest_pending_ms == 0 || partition.second < s.oldest_pending_ms)) {
        s.oldest_pending_ms = partition.second;
      }
    }
    return s;
  }

  void Post(std::function<void()> job) { publisher->Post(std::move(job)); }

  // On the publisher thread: appends the batches' entries, one AppendAll per stream over all
  // of them (a stream keeps each key's events in the order given: one partition's, in id
  // order). Returns each batch's outcome. Each stream's entries are done once that stream has
  // them, so a failing stream does not make the others' events be appended again and again.
  std::vector<Outcome> Publish(const std::vector<Handover>& batches) {
    struct ForStream {
      std::vector<grid::StreamAppend> events;
      std::vector<std::pair<std::size_t, std::size_t>> at;  // (batch, entry) per event
    };
    std::map<std::string, ForStream> by_stream;
    std::vector<Outcome> out(batches.size());
    for (std::size_t b = 0; b < batches.size(); ++b) {
      const auto& entries = batches[b].entries;
      out[b].fates.assign(entries.size(), Fate::kKeep);
      for (std::size_t e = 0; e < entries.size(); ++e) {
        auto event = DecodeEvent(entries[e].second);
        if (!event) {
          log->error("outbox entry {} is not an event ({}); it stays for an operator to inspect",
                     entries[e].first, event.error().message());
          continue;
        }
        std::string destination = event->Header(kStreamHeader);
        if (destination.empty()) destination = options.stream;
        ForStream& f = by_stream[destination];
        f.events.push_back({event->key, entries[e].second, std::to_string(event->id)});
        f.at.emplace_back(b, e);
      }
    }
    for (auto& [name, f] : by_stream) {
      auto& target = streams[name];
      if (!target) {
        grid::StreamConfig config = options.stream_config;
        if (name != options.stream) config.groups.clear();  // not ours to declare there
        target = shared->GetStream(name, config);
      }
      auto appended = target->AppendAll(std::move(f.events));
      Fate fate = Fate::kRemove;
      if (!appended && appended.error().code() == base::ErrorCode::kBadRequest) {
        // It will never be taken (a bad stream name in the header): set the entries aside so
        // they do not hold back their partitions' other events.
        log->error("outbox: stream '{}' refuses {} event(s) ({}); they are moved to '{}'", name,
                   f.at.size(), appended.error().message(), kRejectedOutboxMap);
        fate = Fate::kReject;
      } else if (!appended) {  // they stay; appending them again stores nothing twice
        for (const auto& [b, e] : f.at) {
          if (!out[b].error) out[b].error = appended.error();
        }
        continue;
      }
      for (const auto& [b, e] : f.at) out[b].fates[e] = fate;
    }
    return out;
  }
};

namespace {

// One partition's relay, on its shard.
class Relay final : public grid::PartitionWork {
 public:
  Relay(grid::PartitionWorkContext& context, std::shared_ptr<Outbox::State> state)
      : context_(context), state_(std::move(state)), timer_(context.shard_context()) {
    std::lock_guard lock(state_->relays_mu);
    state_->wakers[context_.partition()] = {
        this, [this, &io = context_.shard_context(), alive = context_.lifetime()] {
          boost::asio::post(io, [this, alive] {
            if (!alive.expired()) Wake();
          });
        }};
  }
  ~Relay() override {
    {
      std::lock_guard lock(state_->relays_mu);
      auto it = state_->wakers.find(context_.partition());
      if (it != state_->wakers.end() && it->second.first == this) state_->wakers.erase(it);
    }
    std::lock_guard lock(state_->mu);
    state_->seen.erase(context_.partition());
  }

  // An entry was staged: an idle relay scans now (one publishing or backing off goes on).
  void Wake() {
    if (!idle_) return;
    idle_ = false;
    Arm(0);
  }

  void Arm(base::Millis delay) {
    // A wait that already completed cannot be cancelled: its handler may still be queued. The
    // generation makes sure only the latest Arm ticks (one scan chain per relay).
    const std::uint64_t generation = ++armed_;
    if (delay <= 0) {  // a post: cheaper than re-arming the timer (its wait then ticks nothing)
      boost::asio::post(context_.shard_context(), [this, alive = context_.lifetime(), generation] {
        if (!alive.expired() && generation == armed_) Tick();
      });
      return;
    }
    timer_.expires_after(std::chrono::milliseconds(delay));
    timer_.async_wait(
        [this, alive = context_.lifetime(), generation](const boost::system::error_code& ec) {
          if (ec || alive.expired() || generation != armed_) return;
          Tick();
        });
  }

 private:
  void Tick() {
    idle_ = false;
    std::vector<std::pair<std::string, std::string>> entries;
    context_.ScanLocal(kOutboxMap, [&](std::string_view key, std::string_view value) {
      entries.emplace_back(std::string(key), std::string(value));
    });
    std::sort(entries.begin(), entries.end());
    // Staged: entries not seen before (the keys of the last scan, less those published).
    std::set<std::string> now_seen;
    std::int64_t fresh = 0;
    for (const auto& [key, value] : entries) {
      fresh += known_.count(key) == 0;
      now_seen.insert(key);
    }
    known_ = std::move(now_seen);
    std::int64_t oldest = 0;
    if (!entries.empty()) {
      if (auto e = DecodeEvent(entries.front().second)) oldest = e->time_ms;
    }
    {
      std::lock_guard lock(state_->mu);
      state_->seen[context_.partition()] = {static_cast<std::int64_t>(entries.size()), oldest};
      state_->stats.staged += fresh;
    }
    if (entries.empty()) {
      idle_ = true;
      return Arm(state_->options.poll_ms);
    }
    if (entries.size() > state_->options.max_batch) entries.resize(state_->options.max_batch);
    auto& io = context_.shard_context();
    state_->Hand(state_, Outbox::State::Handover{
                             std::move(entries), [&io, this, alive = context_.lifetime()](
                                                     std::vector<Outbox::State::Entry> entries,
                                                     Outbox::State::Outcome outcome) {
                               boost::asio::post(io, [this, alive, entries = std::move(entries),
                                                      outcome = std::move(outcome)] {
                                 // The partition moved: its new owner's relay goes on.
                                 if (alive.expired()) return;
                                 Remove(entries, outcome);
                               });
                             }});
  }

  // On the shard: removes the entries their streams took (one transaction), and moves those
  // refused for good to the rejected map, without waiting; then goes on.
  void Remove(const std::vector<Outbox::State::Entry>& entries,
              const Outbox::State::Outcome& outcome) {
    using Fate = Outbox::State::Fate;
    const bool ok = !outcome.error;
    grid::Transaction tx(entries.front().first.substr(entries.front().first.find('@') + 1));
    bool any = false;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (outcome.fates[i] == Fate::kKeep) continue;
      any = true;
      tx.RemoveIfSame(kOutboxMap, entries[i].first, entries[i].second);
      if (outcome.fates[i] == Fate::kReject) {
        tx.Set(kRejectedOutboxMap, entries[i].first, entries[i].second);
      }
    }
    if (!any) return OnPublished(ok);
    auto& io = context_.shard_context();
    // The answer may come after this relay is gone (its partition moved while a backup did
    // not answer): nothing of `this` is touched before `alive` is checked on the shard.
    state_->member->map_service().Execute(
        tx.request(), [this, &io, alive = context_.lifetime(), log = state_->log,
                       ok](base::Result<map::MapResult> removed) {
          if (!removed) {
            log->warn(
                "outbox: removing published entries failed ({}); they are appended "
                "again (the stream stores nothing twice)",
                removed.error().ToString());
          }
          // Inline when the partition is still here; on another thread if it moved meanwhile.
          boost::asio::post(io, [this, alive, ok = ok && removed.has_value()] {
            if (!alive.expired()) OnPublished(ok);
          });
        });
  }

  void OnPublished(bool ok) {
    if (ok) {
      failures_ = 0;
      return Arm(0);
    }
    ++failures_;
    // Attempt numbers never run out here: the outbox keeps trying.
    RetryPolicy backoff = state_->options.backoff;
    backoff.max_attempts = failures_ + 1;
    Arm(backoff.DelayBefore(failures_ + 1, random_).value_or(backoff.max_delay_ms));
  }

  grid::PartitionWorkContext& context_;
  std::shared_ptr<Outbox::State> state_;
  boost::asio::steady_timer timer_;
  int failures_ = 0;
  bool idle_ = false;            // waiting for the poll with nothing to publish
  std::uint64_t armed_ = 0;      // Arm calls so far
  std::set<std::string> known_;  // entry keys the last scan found
  std::mt19937_64 random_{std::random_device{}()};
};

}  // namespace

Outbox::Outbox(grid::Member& member, std::shared_ptr<grid::Instance> shared, OutboxOptions options)
    : state_(std::make_shared<State>()) {
  state_->member = &member;
  state_->shared = std::move(shared);
  state_->options = std::move(options);
  // One removal transaction per batch: within the member's limit on operations.
  state_->options.max_batch = std::clamp<std::size_t>(state_->options.max_batch, 1, 1000);
  state_->publisher = std::make_unique<SerialWorker>();
  member.AddMetricsSource([weak =
                               std::weak_ptr<State>(state_)](metrics::MetricsRegistry& registry) {
    auto state = weak.lock();
    if (!state) return;
    const Stats s = state->Snapshot();
    const metrics::Labels labels = {{"service", state->options.service}};
    const auto now_ms = base::SteadyClock().WallMs();
    registry.SetCounterFamily("tessera_outbox_staged_total",
                              "Outbox entries committed (found by the relays)",
                              {{labels, s.staged}});
    registry.SetCounterFamily("tessera_outbox_published_total",
                              "Outbox events appended to the shared stream",
                              {{labels, s.published}});
    registry.SetCounterFamily("tessera_outbox_publish_failures_total",
                              "Appends of outbox events that failed (each is retried)",
                              {{labels, s.publish_failures}});
    registry.SetGaugeFamily("tessera_outbox_pending", "Outbox entries not published yet",
                            {{labels, static_cast<double>(s.pending)}});
    const double age_s =
        s.oldest_pending_ms == 0
            ? 0.0
            : static_cast<double>(std::max<std::int64_t>(0, now_ms - s.oldest_pending_ms)) / 1000;
    registry.SetGaugeFamily("tessera_outbox_oldest_pending_seconds",
                            "Age of the oldest outbox event not published yet (0: none)",
                            {{labels, age_s}});
  });
  member.RegisterPartitionWork(
      "saga.outbox",
      [state =
           state_](grid::PartitionWorkContext& context) -> std::unique_ptr<grid::PartitionWork> {
        state->Post(
            [state = state.get(), weak = std::weak_ptr<State>(state)] { state->Listen(weak); });
        auto relay = std::make_unique<Relay>(context, state);
        relay->Arm(0);
        return relay;
      });
}

Outbox::~Outbox() {
  state_->publisher->Stop();
  if (state_->listening) state_->member->map_service().RemoveEntryListener(state_->listener);
}

Outbox::Stats Outbox::stats() const { return state_->Snapshot(); }

}  // namespace tessera::saga
