// The outbox relay: one Relay per owned partition (partition work, on the partition's shard)
// finds the partition's entries; one publisher thread per Outbox appends them to the shared
// stream and removes them (blocking calls never run on a shard).
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
  std::unique_ptr<SerialWorker> publisher;                              // the appends and removals

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
  // On the publisher thread: registers the listener once (a blocking call: never on a shard).
  void Listen(const std::weak_ptr<State>& self) {
    if (listening) return;
    map::ListenerOptions o;
    o.include_values = false;
    o.types = {map::EntryEventType::kAdded};
    auto id = member->GetMap(kOutboxMap)
                  ->AddEntryListener(
                      [self](const map::EntryEvent& e) {
                        if (auto state = self.lock()) state->Wake(e.partition_id);
                      },
                      o);
    if (id) {
      listening = true;
      listener = *id;
    } else {
      log->warn("outbox relays poll every {} ms: no entry listener ({})", options.poll_ms,
                id.error().ToString());
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

  // On the publisher thread: appends `entries` (one partition's, in id order) and removes
  // them. Returns the error of the append or the removal.
  base::Result<void> Publish(const std::vector<std::pair<std::string, std::string>>& entries) {
    using Entry = std::pair<std::string, std::string>;
    struct Batch {
      std::vector<grid::StreamAppend> events;  // in id order
      std::vector<const Entry*> entries;
    };
    std::map<std::string, Batch> by_stream;
    for (const auto& entry : entries) {
      auto event = DecodeEvent(entry.second);
      if (!event) {
        log->error("outbox entry {} is not an event ({}); it stays for an operator to inspect",
                   entry.first, event.error().message());
        continue;
      }
      std::string destination = event->Header(kStreamHeader);
      if (destination.empty()) destination = options.stream;
      Batch& b = by_stream[destination];
      b.events.push_back({event->key, entry.second, std::to_string(event->id)});
      b.entries.push_back(&entry);
    }
    // Each stream's entries leave the outbox once that stream has them, so a failing stream
    // does not make the others' events be appended again and again.
    for (auto& [name, batch] : by_stream) {
      auto& target = streams[name];
      if (!target) {
        grid::StreamConfig config = options.stream_config;
        if (name != options.stream) config.groups.clear();  // not ours to declare there
        target = shared->GetStream(name, config);
      }
      auto appended = target->AppendAll(std::move(batch.events));
      if (!appended && appended.error().code() == base::ErrorCode::kBadRequest) {
        // It will never be taken (a bad stream name in the header): set the entries aside so
        // they do not hold back the partition's other events.
        log->error("outbox: stream '{}' refuses {} event(s) ({}); they are moved to '{}'", name,
                   batch.entries.size(), appended.error().message(), kRejectedOutboxMap);
        if (auto moved = Remove(batch.entries, true); !moved) return moved;
        continue;
      }
      if (!appended) return std::unexpected(appended.error());  // they stay; re-appends dedup
      if (auto removed = Remove(batch.entries, false); !removed) return removed;
    }
    return {};
  }

  // Removes published entries (one partition's: one transaction), or moves them to the
  // rejected map.
  base::Result<void> Remove(const std::vector<const std::pair<std::string, std::string>*>& done,
                            bool reject) {
    if (done.empty()) return {};
    const std::string& first = done.front()->first;
    grid::Transaction tx(first.substr(first.find('@') + 1));
    for (const auto* entry : done) {
      tx.RemoveIfSame(kOutboxMap, entry->first, entry->second);
      if (reject) tx.Set(kRejectedOutboxMap, entry->first, entry->second);
    }
    auto removed = member->Transact(tx);
    if (!removed) return std::unexpected(removed.error());
    return {};
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
    state_->Post(
        [state = state_, entries = std::move(entries), &io, this, alive = context_.lifetime()] {
          auto published = state->Publish(entries);
          {
            std::lock_guard lock(state->mu);
            if (published) {
              state->stats.published += static_cast<std::int64_t>(entries.size());
              if (state->outage) {
                state->outage = false;
                state->log->info("publishing to stream '{}' again", state->options.stream);
              }
            } else {
              ++state->stats.publish_failures;
              if (!state->outage) {
                state->outage = true;
                state->log->warn(
                    "cannot publish outbox events to stream '{}': {}; they stay in the "
                    "outbox and are retried (logged again when publishing works)",
                    state->options.stream, published.error().ToString());
              }
            }
          }
          boost::asio::post(io, [this, alive, ok = published.has_value()] {
            if (alive.expired()) return;  // the partition moved: its new owner's relay goes on
            OnPublished(ok);
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
  if (state_->listening) state_->member->GetMap(kOutboxMap)->RemoveEntryListener(state_->listener);
}

Outbox::Stats Outbox::stats() const { return state_->Snapshot(); }

}  // namespace tessera::saga
