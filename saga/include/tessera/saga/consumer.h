#pragma once
// Consumer: a consumer group of the shared cluster's event streams, routing each event by its
// type to the handler registered for it. A handler gets the event and a
// context bound to the service's embedded member: it commits its state changes through
// HandlerContext::Commit (the inbox), so a redelivered event changes nothing twice. The
// group's cursor is committed only after the handler returned OK (the stream consumer commits
// what its handler accepted).
//
//   - Order: each stream's sub-streams are split among the group's consumers; `concurrency`
//     subscriptions per stream run in parallel, each delivering its sub-streams in order, so
//     one key's events (one sub-stream) are handled in order.
//   - Retries: a failing handler is retried in place by the retry policy (a non-retryable
//     error is not); when the retries are spent the event becomes a dead letter of the group
//     (dead_letter.h) and later events of its key park behind it, until Replay or Discard.
//     Other keys go on.
//   - Circuit breaker: with `breaker` set, an open breaker means the handler is not called:
//     the event waits and comes again (it is not a failure), until trial calls go through.
//   - Unknown types are skipped (committed) and counted, or, with unknown_to_dlq, become dead
//     letters (replayable once a handler for the type is registered).
//   - Dead letters: see dead_letter.h; Replay, ReplayMatching and Discard below. A maintenance
//     thread (every maintenance_ms while started) runs the replay requests tools left for the
//     group (grid-cli dlq replay), removes dead letters older than dlq_retention_ms, and
//     refreshes the DLQ gauges.
//   - Metrics, on the embedded member's MetricsText when `member` is a grid::Member, labelled
//     group=...: tessera_consumer_{handled,retries,failed,unknown,breaker_waits,unavailable}_total;
//     tessera_dlq_{dead_lettered,parked,replayed,replay_failures,discarded,expired}_total
//     (this process's counts); tessera_dlq_entries, tessera_dlq_parked_entries and
//     tessera_dlq_oldest_seconds (the group's queue, as of the last maintenance round).
//
// Thread-safety: On before Start; the rest from any thread. Handlers run on the stream
// consumers' threads, several at once with concurrency > 1, and on the maintenance thread
// (replays).

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/grid/instance.h"
#include "tessera/grid/stream.h"
#include "tessera/saga/circuit_breaker.h"
#include "tessera/saga/dead_letter.h"
#include "tessera/saga/event.h"
#include "tessera/saga/inbox.h"
#include "tessera/saga/retry.h"

namespace tessera::saga {

// The framework's subscriptions commit at most every 100 ms per sub-stream: the inbox makes
// the wider window of events delivered again after a crash harmless, and a busy consumer then
// sends one commit per interval instead of one per wake-up.
inline grid::SubscribeOptions FrameworkSubscribeOptions() {
  grid::SubscribeOptions o;
  o.commit_interval_ms = 100;
  return o;
}

struct ConsumerOptions {
  std::string group;                 // the consumer group (one per service and purpose)
  std::vector<std::string> streams;  // the shared streams it reads
  grid::StreamConfig stream_config;
  grid::SubscribeOptions subscribe = FrameworkSubscribeOptions();
  int concurrency = 1;  // subscriptions per stream (handlers running at once, per stream)
  RetryPolicy retry;    // in-place retries of a failing handler
  std::string breaker;  // the dependency's breaker in the BreakerRegistry ("" = none)
  // Dead letters (dead_letter.h): an event whose handler failed for good goes to the group's
  // DLQ and the group moves on; later events of its key park behind it. false: the event
  // comes again after the stream's retry delay, holding back its sub-stream.
  bool dead_letters = true;
  // With dead letters: true parks a dead letter's key (its later events wait behind it, in
  // order, as dead letters too); false lets the key's later events go on (for groups whose
  // events of one key do not depend on each other), each dead letter then replays alone.
  bool park_keys = true;
  int max_replays = 5;  // Replay runs of one dead letter before it refuses
  // Events of a type without a handler: false skips (and counts) them; true makes them dead
  // letters, so nothing is lost when a deployment forgot a handler.
  bool unknown_to_dlq = false;
  // Dead letters whose last failure is older than this are removed (logged, counted as
  // expired). 0 keeps them until replayed or discarded.
  base::Millis dlq_retention_ms = 14LL * 24 * 3'600'000;
  base::Millis maintenance_ms = 500;  // replay requests, retention, DLQ gauges
  // Errors that say the grid cannot answer now (a member died and its partitions are moving,
  // a frozen cluster, a shutdown, a restart of every member, a member's disk short of its
  // free space reserve or failed): the event is not poison. Once the in-place retries are
  // spent, such an event is delivered again after the stream's retry delay (holding back its
  // sub-stream, so its key's order holds) instead of becoming a dead letter; counted as
  // `unavailable`. A handler whose own dependency fails for one event only should answer with
  // another code (kInternal) to have that event dead-lettered.
  std::vector<base::ErrorCode> unavailable = {
      base::ErrorCode::kTimeout,      base::ErrorCode::kMemberLeft,
      base::ErrorCode::kNotOwner,     base::ErrorCode::kConnectionFailed,
      base::ErrorCode::kShuttingDown, base::ErrorCode::kNoQuorum,
      base::ErrorCode::kRecovering,   base::ErrorCode::kStorage};
  // ...but not for good: an event appended longer ago than this that still finds the grid
  // unavailable becomes a dead letter after all (a dependency that always times out for this
  // one event must not hold its sub-stream forever). 0 = no limit.
  base::Millis unavailable_dead_letter_ms = 15 * 60'000;
};

// The outcome of replaying several dead letters (ReplayMatching, a replay request).
struct ReplaySummary {
  int replayed = 0;  // handler runs that succeeded (parked events included)
  int failed = 0;    // dead letters whose replay failed (they stay, with the new error)
  std::string first_error;
};

class HandlerContext {
 public:
  HandlerContext(Inbox& inbox, std::string group, const Event& event, grid::Instance& member,
                 const grid::StreamEvent* delivery = nullptr)
      : inbox_(inbox),
        group_(std::move(group)),
        event_(event),
        member_(member),
        delivery_(delivery) {}
  // Commits the handler's changes (a transaction in one partition) with the event's marker:
  // kApplied, or kDuplicate when this group handled the event already (nothing applied).
  base::Result<InboxOutcome> Commit(const grid::Transaction& changes) {
    return inbox_.Commit(group_, event_, changes);
  }
  Inbox& inbox() { return inbox_; }
  const std::string& group() const { return group_; }
  grid::Instance& member() { return member_; }
  // Where the event came from (sub-stream, offset, append time), or null when it is a replay
  // of a dead letter.
  const grid::StreamEvent* delivery() const { return delivery_; }

 private:
  Inbox& inbox_;
  std::string group_;
  const Event& event_;
  grid::Instance& member_;
  const grid::StreamEvent* delivery_;
};

using EventHandler = std::function<base::Result<void>(const Event& event, HandlerContext& ctx)>;

class Consumer {
 public:
  struct Stats {
    std::int64_t handled = 0;          // handler calls that returned OK
    std::int64_t failed = 0;           // events whose retries were spent (delivered again)
    std::int64_t retries = 0;          // in-place retries
    std::int64_t unknown_skipped = 0;  // events of a type without a handler
    std::int64_t undecodable = 0;      // stream events that are not Events (skipped)
    std::int64_t breaker_waits = 0;    // deliveries held back by an open breaker
    std::int64_t unavailable = 0;      // events delivered again: the grid could not answer
    std::int64_t dead_lettered = 0;    // events that became dead letters (failed)
    std::int64_t parked = 0;           // events parked behind a dead letter of their key
    std::int64_t replayed = 0;         // dead letters replayed successfully
    std::int64_t replay_failures = 0;  // replays whose handler failed again
    std::int64_t discarded = 0;        // dead letters discarded (Discard)
    std::int64_t expired = 0;          // dead letters removed by retention
    std::int64_t replay_requests = 0;  // replay requests this consumer ran
  };

  // `shared` holds the streams; `member` is the service's embedded member (the inbox's).
  // `breakers` (may be null) supplies options.breaker. All outlive the Consumer.
  Consumer(std::shared_ptr<grid::Instance> shared, grid::Instance& member, Inbox& inbox,
           ConsumerOptions options, BreakerRegistry* breakers = nullptr);
  ~Consumer();  // Stop()

  // Registers the handler of event type `type` (a later one replaces it). REQUIRES: before
  // Start.
  void On(std::string type, EventHandler handler);
  // Subscribes. Errors: kBadRequest (no group or streams, bad options), the streams' errors.
  base::Result<void> Start();
  // Stops every subscription after the event in hand. Idempotent.
  void Stop();

  // Runs the handler of dead letter `event` again, for this group only (through the inbox),
  // then, if it succeeded and park_keys is set, the events of its key parked behind it, in
  // order, stopping at the first that fails (it becomes the key's dead letter). Returns how
  // many ran and succeeded.
  // Errors: kNotFound (no such dead letter), kConflict (an older dead letter of its key comes
  // first: replay that), kOverloaded (this dead letter was replayed max_replays times: fix
  // the handler and discard it, or raise the limit), the handler's error when it fails again
  // (its replay count and error are saved).
  // kConflict too when a replay of the same key runs elsewhere in the group (one at a time:
  // a lease on the key, lapsing after kReplayLeaseMs if its holder dies).
  base::Result<int> Replay(const Event& event);
  static constexpr base::Millis kReplayLeaseMs = 120'000;
  // Replays every dead letter matching `filter` (see DeadLetterQueue::List), key by key: each
  // key's oldest matching dead letter, then the events parked behind it. A key whose older
  // dead letter does not match counts as failed (kConflict). Errors: the queue's read errors.
  base::Result<ReplaySummary> ReplayMatching(const map::Predicate& filter);
  // Runs the group's pending replay requests (the maintenance thread does this while
  // started). Returns how many it ran.
  base::Result<int> RunReplayRequests();
  // Removes dead letters older than dlq_retention_ms (the maintenance thread does this while
  // started). Returns how many.
  base::Result<int> ExpireDeadLetters();
  // Removes dead letter `event` without running it (logged with `reason`); events of its key
  // parked behind it stay until replayed or discarded.
  base::Result<void> Discard(const Event& event, const std::string& reason);
  DeadLetterQueue& dead_letters() { return dlq_; }
  Stats stats() const;
  // The sub-stream leases each of this consumer's subscriptions holds now, in Start's order
  // (streams, then concurrency): a group has settled when every sub-stream is held and the
  // shares are even.
  std::vector<std::int64_t> leases_held() const;

  struct State;  // counters and gauges, shared with the metrics source (consumer.cc)

 private:
  base::Result<void> Deliver(const grid::StreamEvent& delivered);
  base::Result<int> ReplayLeased(const Event& event);  // Replay with the key's lease held
  // Runs the handler of `event` once (breaker accounting, exceptions caught). An open breaker
  // refuses the call: kOverloaded and *refused = true.
  base::Result<void> RunHandler(const EventHandler& handler, const Event& event, bool* refused,
                                const grid::StreamEvent* delivery = nullptr);
  base::Result<void> AddDeadLetter(const Event& event, const base::Error* error, int attempts,
                                   std::int64_t first_failure_ms, bool parked);
  // Whether `event`'s key has dead letters in this group (see parked_ below).
  base::Result<bool> KeyParked(const Event& event, std::uint64_t holding);
  void NoteParked(const std::string& key);
  void Maintain();  // the maintenance thread
  void RefreshGauges();

  std::shared_ptr<grid::Instance> shared_;
  grid::Instance& member_;
  Inbox& inbox_;
  ConsumerOptions options_;
  std::shared_ptr<CircuitBreaker> breaker_;
  std::map<std::string, EventHandler> handlers_;
  std::vector<std::pair<std::shared_ptr<grid::Stream>, grid::SubscriptionId>> subscriptions_;
  DeadLetterQueue dlq_;
  std::shared_ptr<State> state_;
  std::string name_;  // this consumer, in replay requests and logs
  // Keys known to have dead letters in this group, so an event need not read the queue: a
  // key's dead letters are only added by the consumer handling its sub-stream, so within one
  // holding of a sub-stream (StreamEvent::holding) a key missing here has none. Only for a
  // group of one stream (with several, a key's events come on several sub-streams). The set is
  // read whole for each new holding and grows with what this consumer parks; a key found here
  // is checked against the queue (a replay elsewhere may have emptied it).
  std::mutex parked_mu_;
  std::set<std::string> parked_;              // guarded by parked_mu_
  std::set<std::uint64_t> holdings_checked_;  // guarded by parked_mu_
  std::uint64_t parked_version_ = 0;          // NoteParked calls; guarded by parked_mu_
  std::mutex maintenance_mu_;
  std::condition_variable maintenance_cv_;
  bool stopping_ = false;  // guarded by maintenance_mu_
  std::thread maintenance_;
};

}  // namespace tessera::saga
