#pragma once
// Stream: an event stream with consumer groups (Kafka's model on the grid). Obtained from
// Instance::GetStream; the same class serves the embedded member and the client.
//
// Storage: `sub_streams` sub-streams, each in its own partition of the internal map
// "__streams" (so written with the map's synchronous backups, moved by migrations, promoted
// with the partition); formats in tessera/map/stream_format.h. An event goes to the
// sub-stream of its key's partition key (the text after the key's last '@', else the whole
// key), so one key's events keep their append order. Offsets count 1, 2, ... per sub-stream.
//
// Append is idempotent by event id: an id appended within the dedup window (default 10 min)
// returns the original offset and stores nothing. An append that returns OK is on the owner
// and its backups. Append without an id that fails with kMemberLeft may or may not be stored;
// with an id it is retried and applied once.
//
// Consumer groups: Subscribe(group, handler) joins the group (creating it on every sub-stream
// the first time, at the oldest stored event or at the tail). The group's committed cursor per
// sub-stream is stored in the grid. The live consumers of a group share the sub-streams: each
// renews its presence every lease_ttl_ms / 3, takes sub-stream i when i % consumers equals
// its rank by consumer id, and holds a lease (putIfAbsent with TTL lease_ttl_ms, renewed) on
// each sub-stream it consumes. A consumer that stops releases its leases at once; one that
// dies loses them at expiry, and the next holder resumes after the committed cursor. Delivery
// is in order per sub-stream and at least once: events handled but not yet committed when a
// consumer dies are delivered again to the next holder (commit per event with commit_every =
// 1 to make that window one event; the commit after a batch is sent without waiting for its
// answer, commit_every commits wait). A commit by a consumer that lost its lease is refused
// (kConflict), so a paused consumer cannot move a cursor another consumer owns.
//
// Retention and backpressure: an event stays until every group of its sub-stream committed
// it (plus max_age_ms, if set); a stream with no groups keeps its newest events up to the
// limits. A sub-stream at max_events or max_bytes makes Append retry for block_timeout_ms and
// then fail with kOverloaded naming the stream and the slowest group; it never drops an event
// a group has not committed. DeleteGroup removes a group's cursors, lease and retention hold.
//
// Configuration: the first instance to use a stream stores its configuration in the grid
// ("stream@NAME"); later instances use the stored one (a differing local one is logged once),
// so every user routes keys to the same sub-streams.
//
// Thread-safety: safe to use from many threads at once. Handlers run on the subscription's
// own thread, one event at a time.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tessera/base/clock.h"
#include "tessera/base/error.h"
#include "tessera/grid/invoker.h"
#include "tessera/record/generic_record.h"

namespace spdlog {
class logger;
}

namespace tessera::grid {

struct StreamConfig {
  std::uint32_t sub_streams = 16;
  std::int64_t max_events = 100'000;       // per sub-stream
  std::int64_t max_bytes = 64 << 20;       // per sub-stream (stored form of the events)
  base::Millis max_age_ms = 0;             // keep committed events this long (0: drop at once)
  base::Millis dedup_window_ms = 600'000;  // remember event ids this long
  base::Millis block_timeout_ms = 5'000;   // a full sub-stream: retry this long, then fail
  std::vector<std::string> groups;         // created at the oldest event on first use
};

struct StreamEvent {
  std::uint32_t sub_stream = 0;
  std::int64_t offset = 0;
  std::string id;  // the id given to Append ("" = none)
  std::string key;
  std::string payload;
  std::int64_t time_ms = 0;  // wall-clock time it was appended
  int attempt = 1;  // 1 + the times this consumer delivered it before (after handler errors)
  // Which hold of the sub-stream's lease delivered it: unique in the process, the same for
  // every event one subscription delivers while it keeps the lease, new once it takes the
  // sub-stream anew (first time, after losing it, or when another consumer moved the cursor).
  // Between two events of one holding, no other consumer handled this sub-stream's events;
  // state a handler keeps per key can be trusted within a holding (0: not from a subscription).
  std::uint64_t holding = 0;
};

struct StreamAppend {
  std::string key;
  std::string payload;
  std::string id;  // "" = not deduplicated
};

struct AppendResult {
  std::uint32_t sub_stream = 0;
  std::int64_t offset = 0;
  bool duplicate = false;  // the id had been appended before: nothing stored, first offset
  friend bool operator==(const AppendResult&, const AppendResult&) = default;
};

struct SubscribeOptions {
  enum class Start { kOldest, kLatest };
  Start start = Start::kOldest;  // where a group that does not exist yet begins
  int max_batch = 256;           // events read per sub-stream per round
  int commit_every = 0;          // commit after this many handled events (0: after each batch)
  // The commit after a batch goes at most this often per sub-stream (0: after every batch);
  // what was handled meanwhile is committed by a later batch's commit, or by an idle
  // consumer once the interval is over. A wider window of events delivered again after a
  // crash, for fewer commits: one per interval instead of one per wake-up.
  base::Millis commit_interval_ms = 0;
  base::Millis lease_ttl_ms = 10'000;
  base::Millis retry_delay_ms = 100;  // after a handler error, before the event comes again
  // An idle consumer (nothing to read on the sub-streams it holds) parks a wait on each of
  // their owners, answered as soon as an event is appended there (a long poll of up to
  // max_wait_ms, never past its next rebalance; the owner answers after 2 s at the latest and
  // the wait is parked again; all held sub-streams are read at its end), and reads again
  // then. A client's call_timeout must exceed the shorter of max_wait_ms and 2 s (the default
  // is 5 s). False, or a member that does not offer it: it polls at 1 ms, doubling up to
  // max_idle_poll_ms.
  bool wait_on_owner = true;
  base::Millis max_wait_ms = 1'000;
  base::Millis max_idle_poll_ms = 20;
  // Names the consumer in lease holders and the group's presence record ("" = this
  // instance's id); a per-subscription suffix is added, so ids never collide.
  std::string consumer_id;
};

// OK commits the event; an error has it delivered again after retry_delay_ms (and every
// later event of its sub-stream waits). A handler that throws counts as an error.
using StreamHandler = std::function<base::Result<void>(const StreamEvent&)>;

using SubscriptionId = std::uint64_t;

struct SubscriptionStats {
  std::int64_t delivered = 0;    // handler calls
  std::int64_t committed = 0;    // events committed
  std::int64_t redelivered = 0;  // handler calls for an event this consumer saw before
  std::int64_t handler_errors = 0;
  std::int64_t leases_lost = 0;  // leases taken away (expired or refused commit)
  std::int64_t leases_held = 0;  // now
  std::int64_t carried = 0;      // events that came with a wait's answer (no read for them)
  std::int64_t commits = 0;      // commit requests sent
};

struct StreamGroupPosition {
  std::string group;
  std::int64_t cursor = 0;                 // last committed offset
  std::int64_t lag = 0;                    // events after the cursor
  std::int64_t oldest_uncommitted_ms = 0;  // append time of the first of them (0: none)
  std::string holder;                      // the consumer holding the lease ("" = none)
};

struct SubStreamInfo {
  std::uint32_t index = 0;
  std::int64_t head = 1, tail = 0, bytes = 0;
  std::int64_t oldest_ms = 0;  // append time of the oldest stored event (0: empty)
  std::vector<StreamGroupPosition> groups;
};

struct StreamInfo {
  std::string name;
  StreamConfig config;  // as stored in the grid
  std::vector<SubStreamInfo> sub_streams;
  // Per group over all sub-streams: lag = sum, oldest_uncommitted_ms = min (0: none).
  std::vector<StreamGroupPosition> groups;
};

struct StreamSlice {
  std::int64_t head = 1, tail = 0;  // the sub-stream's stored range now
  bool lost = false;                // `from` was below head: those events are gone
  std::vector<StreamEvent> events;
};

class Stream {
 public:
  Stream(std::string name, StreamConfig config, std::shared_ptr<Invoker> invoker,
         std::string instance_id, std::shared_ptr<spdlog::logger> log);
  ~Stream();  // stops this proxy's subscriptions (releasing their leases)

  const std::string& name() const { return name_; }

  // Errors: kBadRequest (bad stream name, batch too large, sub-stream count differs from the
  // stored one), kOverloaded (full for block_timeout_ms), and the map's call errors.
  base::Result<AppendResult> Append(std::string key, std::string payload, std::string id = "");
  // Append without waiting: `done` gets the result on an internal thread (it must not
  // block). A full sub-stream fails at once with kOverloaded (no block_timeout_ms retry).
  // The first call may block once to read or store the stream's configuration.
  void AppendAsync(StreamAppend event, std::function<void(base::Result<AppendResult>)> done);
  // One append per sub-stream, sent in parallel; each sub-stream's part is all or nothing.
  // On error, parts for other sub-streams may be stored: send the batch again with the same
  // ids to finish it (stored events come back as duplicates).
  base::Result<std::vector<AppendResult>> AppendAll(std::vector<StreamAppend> events);
  // The sub-stream `key`'s events go to.
  std::uint32_t SubStreamOf(std::string_view key);

  // Starts a consumer of `group` (its own thread). Errors: kBadRequest for a bad group name
  // or options, and errors creating the group.
  base::Result<SubscriptionId> Subscribe(const std::string& group, StreamHandler handler,
                                         SubscribeOptions options = {});
  // Stops it after the event in hand, commits what it handled and releases its leases; true
  // if it existed. No handler call starts after this returns.
  bool Unsubscribe(SubscriptionId id);
  std::optional<SubscriptionStats> Stats(SubscriptionId id) const;

  // Creates the group on every sub-stream (no change where it exists).
  base::Result<void> CreateGroup(const std::string& group,
                                 SubscribeOptions::Start start = SubscribeOptions::Start::kOldest);
  // Removes the group from every sub-stream: its cursors, its lease and its hold on events
  // (what the remaining groups committed then goes), and its list of live consumers; no change
  // where it does not exist. Stop its consumers first: one still running loses its sub-streams
  // (it logs that the group is gone) and gets nothing more. A group named in an instance's
  // StreamConfig::groups comes back with that instance's first write after it starts.
  // Errors: kBadRequest for a bad name, kNotFound when the stream does not exist.
  base::Result<void> DeleteGroup(const std::string& group);
  // The stream's sub-streams and groups. Errors: kNotFound when the stream does not exist
  // (Info never creates it).
  base::Result<StreamInfo> Info();
  // Up to `max` events of sub-stream `sub` from offset `from` (or its oldest stored event, if
  // later), without a group: nothing is committed. For tools (grid-cli stream tail).
  // Errors: kNotFound when the stream does not exist, kBadRequest for a sub-stream out of range.
  base::Result<StreamSlice> Read(std::uint32_t sub, std::int64_t from, int max = 256);

 private:
  struct Subscription;
  // Stores the configuration in the grid (create) or reads the stored one (kNotFound if none).
  base::Result<void> EnsureCreated(bool create = true);
  base::Result<map::MapResult> Call(map::MapRequest request);
  // REQUIRES: loaded_ (EnsureCreated succeeded).
  // The events at `index` are moved into the request.
  map::MapRequest AppendRequest(std::uint32_t sub, std::vector<StreamAppend>& events,
                                const std::vector<std::size_t>& index) const;
  map::MapRequest AppendRequest(std::uint32_t sub, StreamAppend event) const;
  base::Result<void> CreateGroupOnAll(const std::string& group, SubscribeOptions::Start start);
  // Sends the requests at once; waits for every answer, for `abandon` to turn true, or for
  // `limit` (missing answers are kTimeout errors).
  std::vector<base::Result<map::MapResult>> CallAll(
      std::vector<map::MapRequest> requests, const std::atomic<bool>* abandon = nullptr,
      std::chrono::milliseconds limit = std::chrono::minutes(5));
  // The same for requests the caller keeps (Invoker::InvokeShared).
  std::vector<base::Result<map::MapResult>> CallAllShared(
      const std::vector<std::shared_ptr<const map::MapRequest>>& requests);
  // CallAll's body: send(i, done) sends request i of n.
  std::vector<base::Result<map::MapResult>> Gather(
      std::size_t n, const std::function<void(std::size_t, Invoker::Callback)>& send,
      const std::atomic<bool>* abandon, std::chrono::milliseconds limit);
  void Run(const std::shared_ptr<Subscription>& s);
  map::MapRequest LeaseRequest(const Subscription& s, std::uint32_t sub, bool release) const;
  void Rebalance(Subscription& s);
  // Reads the held sub-streams in `only` (all when empty), hands their events to the handler
  // and commits; whether any event was handled. `drained`: whether every read answered with
  // less than a batch and all of it was handled (reading again now would likely find nothing).
  bool Consume(Subscription& s, const std::vector<std::uint32_t>& only = {},
               bool* drained = nullptr);
  // Parks a long poll on the owner of every sub-stream `s` holds that has none parked
  // (SubscribeOptions::wait_on_owner) and waits until one answers other than "timeout"
  // (`woken` gets those), until the wait ends (at most 1 s, never past the next rebalance or
  // a retry) or stop. Waits outlive the call: their answers are kept for the next one.
  enum class Waited { kNothingHeld, kWoken, kTimedOut };
  Waited WaitForEvents(const std::shared_ptr<Subscription>& s, std::vector<std::uint32_t>& woken);
  // Parks a wait running until `until` on every held sub-stream without one, except those in
  // `except` (being read) and those waiting for a handler retry.
  void ParkWaits(const std::shared_ptr<Subscription>& s,
                 std::chrono::steady_clock::time_point until,
                 const std::vector<std::uint32_t>& except = {});
  // When waits parked now end: max_wait_ms on, never past the next rebalance or a retry.
  std::chrono::steady_clock::time_point WaitEnd(const Subscription& s,
                                                std::chrono::steady_clock::time_point now) const;
  // Moves the answers of parked waits into `woken` (the held sub-streams that answered
  // other than "timeout", once each).
  void TakeWoken(Subscription& s, std::vector<std::uint32_t>& woken);
  // Commits what was handled on each held sub-stream. wait=false sends without waiting (one
  // commit in flight per sub-stream, none sooner than commit_interval_ms after the last); the
  // answers are taken by TakeCommits, at the start of the next CommitAll or Rebalance
  // (AwaitCommits).
  void CommitAll(Subscription& s, bool wait = true);
  // When the first commit that commit_interval_ms held back is due (max: none). An idle
  // consumer sends it then, its waits still parked.
  std::chrono::steady_clock::time_point CommitDue(const Subscription& s) const;
  void TakeCommits(Subscription& s);
  void AwaitCommits(Subscription& s);
  // A commit's answer for held sub-stream `sub` (offset as sent).
  void ApplyCommit(Subscription& s, std::uint32_t sub, std::int64_t offset,
                   std::chrono::steady_clock::time_point sent_at,
                   const base::Result<map::MapResult>& r);
  void Leave(Subscription& s);

  const std::string name_;
  StreamConfig config_;  // the stored one once loaded_ (written under create_mu_ before that)
  std::shared_ptr<Invoker> invoker_;
  const std::string instance_id_;
  std::shared_ptr<spdlog::logger> log_;
  std::mutex create_mu_;
  std::atomic<bool> created_{false};
  std::atomic<bool> loaded_{false};  // config_ holds the stored configuration (set once)
  // From config_, set with it before loaded_: every sub-stream's meta key (where its appends
  // go) and the limits each append carries.
  std::vector<std::string> meta_keys_;
  record::GenericRecord append_limits_;
  mutable std::mutex mu_;
  std::vector<std::pair<SubscriptionId, std::shared_ptr<Subscription>>> subscriptions_;  // mu_
  SubscriptionId next_id_ = 1;                                                           // mu_
  std::vector<std::thread> stopping_;  // threads of subscriptions that removed themselves; mu_
  std::atomic<std::uint64_t> consumer_seq_{0};
};

}  // namespace tessera::grid
