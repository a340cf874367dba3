// Stream consumers: one thread per subscription. Each round it (every lease_ttl_ms / 3, or
// every 250 ms while it waits for a sub-stream it was assigned) records its presence in the
// group (kStreamJoin), works out its share (sub-stream i when i % consumers == its rank),
// gives back leases outside its share and takes or renews the others (kStreamLease); then it
// reads every held sub-stream at once (kStreamRead), hands the events to the handler in
// offset order, and commits what was handled (kStreamCommit, fenced by the lease). With
// nothing to read it waits on the owners (WaitForEvents: a kStreamRead with wait_ms per held
// sub-stream, answered by an append with the events from the wait's offset, or "ready" by a
// member that predates wait_read; docs/architecture.md, "Event streams") and then reads only
// the sub-streams that answered, taking the events a wait brought instead of reading them.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <map>
#include <random>

#include <fmt/format.h>

#include "stream_internal.h"
#include "tessera/grid/stream.h"
#include "tessera/map/stream_format.h"
#include "tessera/record/generic_record.h"

namespace tessera::grid {

using base::ErrorCode;
using base::Result;
using Clock = std::chrono::steady_clock;

namespace {

std::atomic<std::uint64_t> g_holdings{0};  // StreamEvent::holding

std::string SessionSuffix() {
  static thread_local std::mt19937_64 random(std::random_device{}());
  return fmt::format("{:08x}", static_cast<std::uint32_t>(random()));
}

}  // namespace

struct Stream::Subscription {
  struct Held {
    std::int64_t next = 1;       // the next offset to hand to the handler
    std::int64_t handled = 0;    // the last offset the handler accepted
    std::int64_t committed = 0;  // the last offset committed
    std::int64_t seen = 0;       // the highest offset this consumer delivered
    std::int64_t failed_offset = 0;
    int failed_attempts = 0;
    Clock::time_point retry_at{};
    Clock::time_point renewed_at{};   // when the lease was last taken, renewed or committed
    std::uint64_t holding = 0;        // StreamEvent::holding
    Clock::time_point commit_sent{};  // the last commit after a batch (commit_interval_ms)
    std::int64_t epoch = 0;           // the owner's lease epoch of this holding (0: none told)
  };

  std::string group;
  std::string consumer;
  StreamHandler handler;
  SubscribeOptions options;
  std::thread thread;
  std::mutex mu;  // for cv only
  std::condition_variable cv;
  std::atomic<bool> stop{false};
  std::map<std::uint32_t, Held> held;  // the thread's own
  Clock::time_point next_rebalance{};
  std::string last_error;  // logged once until it changes
  // Long polls (WaitForEvents), under mu: the sub-streams with a wait parked on their owner
  // (when it should have answered by), and the answers since (sub, other than "timeout").
  struct Parked {
    std::uint64_t generation = 0;  // which wait: only its own answer frees the sub-stream
    Clock::time_point ends;        // when it should have answered by
  };
  struct WaitAnswer {
    std::uint32_t sub = 0;
    std::uint64_t generation = 0;
    bool ready = false;  // answered other than "timeout"
    std::int64_t from = 0;
    std::optional<map::MapResult> read;  // the events, read from `from` (wait_read)
  };
  std::map<std::uint32_t, Parked> parked;
  std::vector<WaitAnswer> answers;
  // Reads that came with wait answers (the thread's own): used by the next read of their
  // sub-stream if it is still at their `from`, else dropped.
  struct Carried {
    std::int64_t from = 0;
    map::MapResult read;
  };
  std::map<std::uint32_t, Carried> carried;
  std::uint64_t wait_generation = 0;
  // Commits sent without waiting for their answer (the commit after a batch): the answers,
  // under mu, are taken by the thread at its next step (TakeCommits); commit_cv wakes only a
  // thread waiting for them (AwaitCommits), so an answer does not wake a thread that sleeps
  // on its waits. At most one per sub-stream in flight (the thread's own `committing`).
  struct CommitAnswer {
    std::uint32_t sub = 0;
    std::uint64_t holding = 0;
    std::int64_t offset = 0;
    Clock::time_point sent_at;
    Result<map::MapResult> result;
  };
  std::vector<CommitAnswer> commit_answers;
  std::condition_variable commit_cv;
  struct InFlight {
    std::int64_t offset = 0;
    Clock::time_point sent_at;
  };
  std::map<std::uint32_t, InFlight> committing;  // the thread's own
  std::weak_ptr<Subscription> self;
  std::atomic<std::int64_t> delivered{0}, committed{0}, redelivered{0}, handler_errors{0},
      leases_lost{0}, leases_held{0}, carried_events{0}, commits{0};

  void Warn(spdlog::logger& log, const std::string& stream, const std::string& what) {
    if (what == last_error) return;
    last_error = what;
    log.warn("stream '{}' group '{}' consumer '{}': {}", stream, group, consumer, what);
  }
  // Sleeps `d`, or until stop or (with waits) a wait's answer.
  void Wait(std::chrono::milliseconds d) {
    std::unique_lock lock(mu);
    cv.wait_for(lock, d, [&] { return stop.load() || !answers.empty(); });
  }
};

Stream::~Stream() {
  std::vector<SubscriptionId> ids;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, s] : subscriptions_) ids.push_back(id);
  }
  for (auto id : ids) Unsubscribe(id);
  std::lock_guard lock(mu_);
  for (auto& t : stopping_) {
    if (t.get_id() == std::this_thread::get_id()) {
      t.detach();  // the last reference went in a handler that unsubscribed itself
    } else if (t.joinable()) {
      t.join();
    }
  }
}

Result<SubscriptionId> Stream::Subscribe(const std::string& group, StreamHandler handler,
                                         SubscribeOptions options) {
  if (auto problem = map::StreamNameProblem("group", group); !problem.empty()) {
    return base::Fail(ErrorCode::kBadRequest, problem);
  }
  if (options.max_batch < 1 || options.commit_every < 0 || options.lease_ttl_ms < 30 ||
      options.retry_delay_ms < 0 || options.max_idle_poll_ms < 1 || options.max_wait_ms < 1) {
    return base::Fail(ErrorCode::kBadRequest,
                      "stream '" + name_ +
                          "': subscribe needs max_batch >= 1, commit_every >= 0, lease_ttl_ms "
                          ">= 30, retry_delay_ms >= 0, max_idle_poll_ms >= 1 and max_wait_ms >= 1");
  }
  if (!handler) return base::Fail(ErrorCode::kBadRequest, "subscribe needs a handler");
  auto s = std::make_shared<Subscription>();
  s->self = s;
  s->group = group;
  if (!options.consumer_id.empty()) {
    if (auto problem = map::StreamNameProblem("consumer", options.consumer_id); !problem.empty()) {
      return base::Fail(ErrorCode::kBadRequest, problem);
    }
  }
  // The lease holder is this subscription, not just its name: two processes given the same
  // consumer id (a restarted one while the old one still runs) must not both pass the fence.
  s->consumer = (options.consumer_id.empty() ? instance_id_ : options.consumer_id) + "/" +
                std::to_string(++consumer_seq_) + "-" + SessionSuffix();
  if (auto ok = CreateGroup(group, options.start); !ok) return std::unexpected(ok.error());
  s->handler = std::move(handler);
  s->options = std::move(options);
  std::lock_guard lock(mu_);
  const SubscriptionId id = next_id_++;
  s->thread = std::thread([this, s] { Run(s); });
  subscriptions_.emplace_back(id, s);
  return id;
}

bool Stream::Unsubscribe(SubscriptionId id) {
  std::shared_ptr<Subscription> s;
  {
    std::lock_guard lock(mu_);
    for (auto it = subscriptions_.begin(); it != subscriptions_.end(); ++it) {
      if (it->first != id) continue;
      s = std::move(it->second);
      subscriptions_.erase(it);
      break;
    }
  }
  if (!s) return false;
  {
    std::lock_guard lock(s->mu);
    s->stop = true;
  }
  s->cv.notify_all();
  if (s->thread.get_id() == std::this_thread::get_id()) {
    // From its own handler: Run leaves after it returns; ~Stream joins the thread.
    std::lock_guard lock(mu_);
    stopping_.push_back(std::move(s->thread));
  } else if (s->thread.joinable()) {
    s->thread.join();
  }
  return true;
}

std::optional<SubscriptionStats> Stream::Stats(SubscriptionId id) const {
  std::lock_guard lock(mu_);
  for (const auto& [sid, s] : subscriptions_) {
    if (sid != id) continue;
    return SubscriptionStats{s->delivered.load(),      s->committed.load(),   s->redelivered.load(),
                             s->handler_errors.load(), s->leases_lost.load(), s->leases_held.load(),
                             s->carried_events.load(), s->commits.load()};
  }
  return std::nullopt;
}

void Stream::Run(const std::shared_ptr<Subscription>& s) {
  auto pause = std::chrono::milliseconds(1);
  bool poll = !s->options.wait_on_owner;
  // After a wake only the sub-streams whose waits answered are read, joined by those whose
  // waits answer meanwhile (the others keep a wait parked), until they run dry. Empty: every
  // held sub-stream.
  std::vector<std::uint32_t> only;
  while (!s->stop.load()) {
    if (Clock::now() >= s->next_rebalance) {
      Rebalance(*s);
      only.clear();
    }
    if (s->stop.load()) break;
    if (!only.empty()) {
      TakeWoken(*s, only);
      // A wait for each one not being read whose wait ended meanwhile.
      ParkWaits(s, WaitEnd(*s, Clock::now()), only);
    }
    bool drained = false;
    if (Consume(*s, only, &drained)) {
      pause = std::chrono::milliseconds(1);
      poll = !s->options.wait_on_owner;
      // Everything there was is handled: wait for more now rather than read again to find
      // nothing (a wait answers at once when events came meanwhile). Saves a round trip per
      // wake-up.
      if (!drained || poll) continue;
    }
    only.clear();
    if (poll) {
      s->Wait(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(s->options.max_idle_poll_ms));
    }
    if (!s->options.wait_on_owner || s->stop.load()) continue;
    // Woken, then nothing to read after all (no leases, an older member that answers a wait
    // at once, errors): poll with back-off until a read finds events or a wait runs its course.
    poll = WaitForEvents(s, only) != Waited::kTimedOut;
    if (!poll) pause = std::chrono::milliseconds(1);
  }
  Leave(*s);
}

void Stream::TakeWoken(Subscription& s, std::vector<std::uint32_t>& woken) {
  std::lock_guard lock(s.mu);
  for (auto& a : s.answers) {
    // Only the answer of the wait last parked frees its sub-stream for another; an older
    // one's "ready" still counts.
    if (auto it = s.parked.find(a.sub);
        it != s.parked.end() && it->second.generation == a.generation) {
      s.parked.erase(it);
    }
    if (!a.ready || !s.held.contains(a.sub)) continue;
    if (a.read) s.carried[a.sub] = {a.from, std::move(*a.read)};
    if (std::find(woken.begin(), woken.end(), a.sub) == woken.end()) woken.push_back(a.sub);
  }
  s.answers.clear();
}

Clock::time_point Stream::WaitEnd(const Subscription& s, Clock::time_point now) const {
  auto until = std::min(s.next_rebalance, now + std::chrono::milliseconds(s.options.max_wait_ms));
  for (const auto& [sub, h] : s.held) {
    if (h.retry_at > now) until = std::min(until, h.retry_at);
  }
  return until;
}

void Stream::ParkWaits(const std::shared_ptr<Subscription>& s, Clock::time_point until,
                       const std::vector<std::uint32_t>& except) {
  // A wait whose answer is this late past its end is lost (every call path answers or fails
  // well before: this is a safety net).
  constexpr auto kLost = std::chrono::seconds(10);
  const auto now = Clock::now();
  const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(until - now);
  if (wait < std::chrono::milliseconds(5)) return;
  struct Park {
    std::uint32_t sub;
    std::int64_t from;
    std::uint64_t generation;
  };
  std::vector<Park> parks;
  {
    std::lock_guard lock(s->mu);
    for (const auto& [sub, h] : s->held) {
      auto it = s->parked.find(sub);
      if (h.retry_at > now || (it != s->parked.end() && it->second.ends + kLost > now) ||
          std::find(except.begin(), except.end(), sub) != except.end()) {
        continue;
      }
      const std::uint64_t generation = ++s->wait_generation;
      s->parked[sub] = {generation, now + wait};
      parks.push_back({sub, h.next, generation});
    }
  }
  std::weak_ptr<Subscription> weak = s;
  for (const auto& p : parks) {
    auto rq = StreamRequest(map::MapOp::kStreamRead, meta_keys_[p.sub]);
    // The group goes as wait_group, and at most one event of one byte: a member that predates
    // waits reads a wait as a plain read, and so counts nothing and sends little (and
    // that answer is a read from p.from like any other). The owner answers with up to a batch
    // of events (wait_read); one that predates wait_read, "ready".
    rq.argument = record::GenericRecord::Build()
                      .Int64("from", p.from)
                      .Int64("max", 1)
                      .Int64("max_bytes", 1)
                      .Int64("wait_ms", wait.count())
                      .String("wait_group", s->group)
                      .String("wait_consumer", s->consumer)
                      .Int64("wait_read", s->options.max_batch)
                      .Done();
    invoker_->Invoke(std::move(rq), [weak, p](Result<map::MapResult> r) {
      auto live = weak.lock();
      if (!live) return;
      Subscription::WaitAnswer a{p.sub, p.generation, !r || r->value != "timeout", p.from, {}};
      if (r && r->value != "timeout" && r->value != "ready") a.read = std::move(*r);
      {
        std::lock_guard lock(live->mu);
        live->answers.push_back(std::move(a));
      }
      live->cv.notify_all();
    });
  }
}

Stream::Waited Stream::WaitForEvents(const std::shared_ptr<Subscription>& s,
                                     std::vector<std::uint32_t>& woken) {
  const auto start = Clock::now();
  const auto until = WaitEnd(*s, start);
  if (std::none_of(s->held.begin(), s->held.end(),
                   [&](const auto& held) { return held.second.retry_at <= start; })) {
    return Waited::kNothingHeld;
  }
  woken.clear();
  TakeWoken(*s, woken);  // answers that came while the consumer was busy
  if (!woken.empty()) return Waited::kWoken;
  ParkWaits(s, until);
  std::unique_lock lock(s->mu);
  while (!s->stop.load()) {
    const auto commit = CommitDue(*s);
    if (!s->cv.wait_until(lock, std::min(until, commit),
                          [&] { return s->stop.load() || !s->answers.empty(); })) {
      if (Clock::now() >= until) break;  // the wait ran its course
      lock.unlock();
      CommitAll(*s, /*wait=*/false);  // what the interval held back; the waits stay parked
      lock.lock();
      continue;
    }
    if (s->stop.load()) break;
    lock.unlock();
    TakeWoken(*s, woken);
    if (!woken.empty()) return Waited::kWoken;
    ParkWaits(s, until);  // waits that timed out early (parked by an earlier round)
    lock.lock();
  }
  return Waited::kTimedOut;
}

map::MapRequest Stream::LeaseRequest(const Subscription& s, std::uint32_t sub, bool release) const {
  auto rq =
      StreamRequest(map::MapOp::kStreamLease, map::StreamMetaKey(map::SubStreamName(name_, sub)));
  rq.argument = record::GenericRecord::Build()
                    .String("group", s.group)
                    .String("consumer", s.consumer)
                    .Int64("ttl_ms", s.options.lease_ttl_ms)
                    .Bool("release", release)
                    .Done();
  return rq;
}

void Stream::Rebalance(Subscription& s) {
  AwaitCommits(s);  // the cursors the leases report are then the ones this consumer knows
  const base::Millis ttl = s.options.lease_ttl_ms;
  auto join = StreamRequest(map::MapOp::kStreamJoin, map::StreamConsumersKey(name_, s.group));
  join.argument =
      record::GenericRecord::Build().String("consumer", s.consumer).Int64("ttl_ms", ttl).Done();
  auto members = Call(std::move(join));
  std::vector<bool> assigned(config_.sub_streams, false);
  if (members) {
    std::size_t rank = 0, count = members->entries.size();
    for (std::size_t i = 0; i < count; ++i) {
      if (members->entries[i].first == s.consumer) rank = i;
    }
    for (std::uint32_t i = 0; i < config_.sub_streams && count > 0; ++i) {
      assigned[i] = i % count == rank;
    }
  } else {
    s.Warn(*log_, name_,
           "cannot reach the group's presence record (" + members.error().ToString() +
               "); keeping the leases it holds");
    for (const auto& [sub, h] : s.held) assigned[sub] = true;
  }
  // Outside our share: commit what was handled, then give the lease back.
  std::vector<std::uint32_t> give_back;
  for (const auto& [sub, h] : s.held) {
    if (!assigned[sub]) give_back.push_back(sub);
  }
  if (!give_back.empty()) CommitAll(s);
  std::vector<map::MapRequest> requests;
  std::vector<std::uint32_t> subs;
  auto lease = [&](std::uint32_t sub, bool release) {
    requests.push_back(LeaseRequest(s, sub, release));
    subs.push_back(sub);
  };
  for (auto sub : give_back) {
    s.held.erase(sub);
    lease(sub, true);
  }
  for (std::uint32_t sub = 0; sub < config_.sub_streams; ++sub) {
    if (assigned[sub]) lease(sub, false);
  }
  const auto sent_at = Clock::now();  // a lease granted now lasts from about here
  auto results = CallAll(std::move(requests), &s.stop);
  bool waiting = false;
  for (std::size_t j = 0; j < results.size(); ++j) {
    const std::uint32_t sub = subs[j];
    if (!assigned[sub]) continue;  // a release: nothing to learn
    auto& r = results[j];
    auto it = s.held.find(sub);
    if (!r) {
      if (r.error().code() == ErrorCode::kNotFound && it != s.held.end()) {
        s.held.erase(it);  // the group was deleted
      }
      s.Warn(*log_, name_,
             "lease on sub-stream " + std::to_string(sub) + ": " + r.error().ToString());
      continue;
    }
    if (!r->flag) {  // someone else holds it: it gives it back when it sees the new share
      if (it != s.held.end()) {
        s.held.erase(it);
        ++s.leases_lost;
      }
      waiting = true;
      continue;
    }
    // A lease that lapsed and was taken again (the owner's epoch moved on), or one not renewed
    // for a whole TTL as far as this consumer can tell: another consumer may have handled (and
    // not committed) events meanwhile, so this is a new holding even if the cursor did not
    // move. Its commits carry the new epoch; the old holding's would be refused.
    std::int64_t epoch = 0;
    for (const auto& [name, text] : r->entries) {
      if (name == "epoch") std::from_chars(text.data(), text.data() + text.size(), epoch);
    }
    const bool lapsed =
        it != s.held.end() && (sent_at - it->second.renewed_at >= std::chrono::milliseconds(ttl) ||
                               epoch != it->second.epoch);
    if (it == s.held.end() || r->count != it->second.committed || lapsed) {
      // Newly taken, or the cursor is not where we left it (our lease lapsed and another
      // consumer moved it, or the group was re-created): resume after the committed cursor.
      Subscription::Held h;
      h.committed = h.handled = r->count;
      h.next = r->count + 1;
      h.holding = g_holdings.fetch_add(1) + 1;
      h.epoch = epoch;
      if (it != s.held.end()) h.seen = it->second.seen;
      s.held[sub] = h;
    }
    s.held[sub].renewed_at = sent_at;
  }
  s.leases_held = static_cast<std::int64_t>(s.held.size());
  std::erase_if(s.carried, [&](const auto& c) { return !s.held.contains(c.first); });
  const auto interval =
      std::chrono::milliseconds(waiting ? std::min<base::Millis>(ttl / 3, 250) : ttl / 3);
  s.next_rebalance = Clock::now() + interval;
}

bool Stream::Consume(Subscription& s, const std::vector<std::uint32_t>& only, bool* drained) {
  bool read_all = true;  // every read answered with less than a batch, all of it handled
  const auto now = Clock::now();
  std::vector<map::MapRequest> requests;
  std::vector<std::size_t> read_into;  // requests[k]'s answer goes to results[read_into[k]]
  std::vector<std::uint32_t> subs;
  std::vector<Result<map::MapResult>> results;
  for (const auto& [sub, h] : s.held) {
    if (h.retry_at > now) continue;
    if (!only.empty() && std::find(only.begin(), only.end(), sub) == only.end()) continue;
    subs.push_back(sub);
    if (auto c = s.carried.find(sub); c != s.carried.end()) {
      const bool current = c->second.from == h.next;  // else the consumer moved on meanwhile
      if (current) {
        s.carried_events += static_cast<std::int64_t>(c->second.read.entries.size());
        results.emplace_back(std::move(c->second.read));
      }
      s.carried.erase(c);
      if (current) continue;
    }
    auto rq = StreamRequest(map::MapOp::kStreamRead, meta_keys_[sub]);
    rq.argument = record::GenericRecord::Build()
                      .Int64("from", h.next)
                      .Int64("max", s.options.max_batch)
                      .String("group", s.group)  // the owner counts deliveries per group
                      .Done();
    requests.push_back(std::move(rq));
    read_into.push_back(results.size());
    results.emplace_back(std::unexpected(base::Error(ErrorCode::kInternal, "not read")));
  }
  if (subs.empty()) return false;
  if (!requests.empty()) {
    auto read = CallAll(std::move(requests), &s.stop);
    for (std::size_t k = 0; k < read.size(); ++k) results[read_into[k]] = std::move(read[k]);
  }
  bool progressed = false;
  for (std::size_t j = 0; j < results.size() && !s.stop.load(); ++j) {
    auto& r = results[j];
    auto it = s.held.find(subs[j]);
    if (it == s.held.end()) continue;
    auto& h = it->second;
    if (!r) {
      s.Warn(*log_, name_,
             "read of sub-stream " + std::to_string(subs[j]) + " failed (" + r.error().ToString() +
                 "); retrying");
      read_all = false;
      continue;
    }
    if (r->entries.size() >= static_cast<std::size_t>(s.options.max_batch)) read_all = false;
    std::size_t handled = 0;
    if (r->flag) {  // removed before this group committed them: max age, or group re-created
      s.Warn(*log_, name_,
             "sub-stream " + std::to_string(subs[j]) + ": events " + std::to_string(h.next) +
                 " to " + std::to_string(r->count - 1) +
                 " were removed before this group committed them");
      h.next = r->count;
    }
    const auto lease_ttl = std::chrono::milliseconds(s.options.lease_ttl_ms);
    for (const auto& [offset_text, bytes] : r->entries) {
      if (s.stop.load()) break;
      // A long batch: stop before the lease could lapse under us; the next round renews it
      // (Rebalance every ttl / 3) and goes on from here.
      if (Clock::now() - h.renewed_at > lease_ttl * 2 / 3) break;
      StreamEvent e = DecodeEvent(subs[j], offset_text, bytes);
      e.attempt = e.offset == h.failed_offset ? h.failed_attempts + 1 : 1;
      e.holding = h.holding;
      if (e.offset <= h.seen) ++s.redelivered;
      h.seen = std::max(h.seen, e.offset);
      ++s.delivered;
      Result<void> ok;
      try {
        ok = s.handler(e);
      } catch (const std::exception& ex) {
        ok = base::Fail(ErrorCode::kInternal, std::string("the handler threw: ") + ex.what());
      } catch (...) {
        ok = base::Fail(ErrorCode::kInternal, "the handler threw");
      }
      progressed = true;
      if (!ok) {
        ++s.handler_errors;
        h.failed_offset = e.offset;
        h.failed_attempts = e.attempt;
        h.retry_at = Clock::now() + std::chrono::milliseconds(s.options.retry_delay_ms);
        log_->debug("stream '{}' group '{}': handler failed on sub-stream {} offset {}: {}", name_,
                    s.group, e.sub_stream, e.offset, ok.error().ToString());
        break;
      }
      h.handled = e.offset;
      h.next = e.offset + 1;
      ++handled;
      if (s.options.commit_every > 0 && h.handled - h.committed >= s.options.commit_every) {
        CommitAll(s);  // may drop the sub-stream (lease lost): `h` is then gone
        if (s.held.find(subs[j]) == s.held.end()) break;
      }
    }
    if (handled < r->entries.size()) read_all = false;  // stopped short: read again
    // Events past what came (a read cut by max_bytes, or a wait answered with one event by a
    // member that predates wait_read): read again rather than wait.
    if (auto held = s.held.find(subs[j]);
        !r->entries.empty() && held != s.held.end() && held->second.next <= RangeOf(*r).tail) {
      read_all = false;
    }
  }
  CommitAll(s, /*wait=*/false);  // its answer is taken at the next step
  if (drained != nullptr) *drained = read_all && !s.stop.load();
  return progressed;
}

Clock::time_point Stream::CommitDue(const Subscription& s) const {
  auto due = Clock::time_point::max();
  if (s.options.commit_interval_ms <= 0) return due;  // every batch commits at once
  for (const auto& [sub, h] : s.held) {
    if (h.handled <= h.committed || s.committing.contains(sub)) continue;
    due = std::min(due, h.commit_sent + std::chrono::milliseconds(s.options.commit_interval_ms));
  }
  return due;
}

void Stream::TakeCommits(Subscription& s) {
  std::vector<Subscription::CommitAnswer> answers;
  {
    std::lock_guard lock(s.mu);
    answers.swap(s.commit_answers);
  }
  for (auto& a : answers) {
    if (auto c = s.committing.find(a.sub);
        c != s.committing.end() && c->second.offset == a.offset) {
      s.committing.erase(c);
    }
    auto it = s.held.find(a.sub);
    if (it == s.held.end() || it->second.holding != a.holding) continue;  // given up since
    ApplyCommit(s, a.sub, a.offset, a.sent_at, a.result);
  }
  if (!answers.empty()) s.leases_held = static_cast<std::int64_t>(s.held.size());
}

void Stream::AwaitCommits(Subscription& s) {
  if (s.committing.empty()) return;
  {
    std::unique_lock lock(s.mu);
    s.commit_cv.wait_for(lock, std::chrono::seconds(5),
                         [&] { return s.commit_answers.size() >= s.committing.size(); });
  }
  TakeCommits(s);
}

void Stream::ApplyCommit(Subscription& s, std::uint32_t sub, std::int64_t offset,
                         Clock::time_point sent_at, const Result<map::MapResult>& r) {
  auto it = s.held.find(sub);
  if (it == s.held.end()) return;
  if (r) {
    if (offset > it->second.committed) {
      s.committed += offset - it->second.committed;
      it->second.committed = offset;
    }
    it->second.renewed_at = std::max(it->second.renewed_at, sent_at);
    return;
  }
  if (r.error().code() == ErrorCode::kConflict || r.error().code() == ErrorCode::kNotFound) {
    // The lease went to another consumer (we were too slow or paused): it delivers again
    // what we handled after the cursor.
    s.Warn(*log_, name_, r.error().message());
    s.held.erase(it);
    ++s.leases_lost;
    s.next_rebalance = Clock::now();
    return;
  }
  if (s.stop.load()) return;  // stopping: Leave commits again
  s.Warn(*log_, name_,
         "commit on sub-stream " + std::to_string(it->first) + " failed (" + r.error().ToString() +
             "); retrying");
}

void Stream::CommitAll(Subscription& s, bool wait) {
  TakeCommits(s);
  std::vector<map::MapRequest> requests;
  std::vector<std::uint32_t> subs;
  const auto sent_at = Clock::now();
  for (const auto& [sub, h] : s.held) {
    if (h.handled <= h.committed) continue;
    if (!wait &&
        sent_at < h.commit_sent + std::chrono::milliseconds(s.options.commit_interval_ms)) {
      continue;  // the next batch's commit, or CommitDue, takes it
    }
    if (!wait) {
      // One in flight per sub-stream (an answer lost for 10 s no longer counts).
      if (auto c = s.committing.find(sub);
          c != s.committing.end() && sent_at - c->second.sent_at < std::chrono::seconds(10)) {
        continue;
      }
    }
    auto rq = StreamRequest(map::MapOp::kStreamCommit,
                            map::StreamMetaKey(map::SubStreamName(name_, sub)));
    rq.argument = record::GenericRecord::Build()
                      .String("group", s.group)
                      .String("consumer", s.consumer)
                      .Int64("offset", h.handled)
                      .Int64("max_age_ms", config_.max_age_ms)
                      .Int64("ttl_ms", s.options.lease_ttl_ms)  // renews the lease
                      .Int64("epoch", h.epoch)  // of the holding that read the events
                      .Done();
    requests.push_back(std::move(rq));
    subs.push_back(sub);
  }
  if (requests.empty()) return;
  s.commits += static_cast<std::int64_t>(requests.size());
  if (!wait) {
    for (std::size_t j = 0; j < requests.size(); ++j) {
      Subscription::Held& h = s.held[subs[j]];
      h.commit_sent = sent_at;
      s.committing[subs[j]] = {h.handled, sent_at};
      invoker_->Invoke(
          std::move(requests[j]), [weak = s.self, sub = subs[j], holding = h.holding,
                                   offset = h.handled, sent_at](Result<map::MapResult> r) {
            auto live = weak.lock();
            if (!live) return;
            {
              std::lock_guard lock(live->mu);
              live->commit_answers.push_back({sub, holding, offset, sent_at, std::move(r)});
            }
            live->commit_cv.notify_all();
          });
    }
    return;
  }
  std::vector<std::int64_t> offsets;
  for (auto sub : subs) offsets.push_back(s.held[sub].handled);
  // Stopping: the last commits get a few seconds (an instance shutting down may not answer).
  auto results = s.stop.load() ? CallAll(std::move(requests), nullptr, std::chrono::seconds(3))
                               : CallAll(std::move(requests), &s.stop);
  for (std::size_t j = 0; j < results.size(); ++j) {
    ApplyCommit(s, subs[j], offsets[j], sent_at, results[j]);
  }
  s.leases_held = static_cast<std::int64_t>(s.held.size());
}

void Stream::Leave(Subscription& s) {
  CommitAll(s);
  std::vector<map::MapRequest> requests;
  for (const auto& [sub, h] : s.held) requests.push_back(LeaseRequest(s, sub, true));
  auto leave = StreamRequest(map::MapOp::kStreamJoin, map::StreamConsumersKey(name_, s.group));
  leave.argument =
      record::GenericRecord::Build().String("consumer", s.consumer).Bool("leave", true).Done();
  requests.push_back(std::move(leave));
  // Best effort: what fails expires by itself.
  (void)CallAll(std::move(requests), nullptr, std::chrono::seconds(3));
  s.held.clear();
  s.leases_held = 0;
}

}  // namespace tessera::grid
