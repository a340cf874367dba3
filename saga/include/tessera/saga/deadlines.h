#pragma once
// Deadlines: saga timers indexed per partition and fired by that partition's owner only.
// No member scans every saga and no token ring splits the work: the grid's partition
// ownership already says who fires what.
//
// A deadline is the entry "<due ms, 16 hex digits>|<kind>|<saga id>@<saga's partition key>" of
// map "__saga.deadlines" (value: the tessera.SagaDeadline record), in the saga's partition, so
// it is set and cleared in the same partition transaction as the saga's transition (Set,
// Clear). Each owned partition's scanner (partition work "saga.deadlines", on its shard) looks
// at its local entries every poll_ms and hands the due ones, oldest first, to `fire` on the
// Deadlines' own thread (blocking calls are fine there). `fire` does what the deadline means
// (e.g. a strict TimeOut transition and Clear in one transaction) and returns OK; the entry is
// then removed if it is still there. An error keeps it: it fires again at the next scan.
// After a member dies, the promoted owner's scanner fires what was due. A deadline can fire
// more than once: when its partition moves between the scan and the fire, across the
// failure-detection window, or when the removal after a fire failed. `fire` must therefore be
// idempotent: check what the deadline is about (the saga's status, the step, the attempt)
// before acting, as the Orchestrator does with guarded transitions.
//
// A deadline racing the transition it guards (a timeout and the last step's reply): both are
// transitions of the same saga entry, applied one after the other on the partition's shard;
// the first to commit wins and the other is a counted no-op (a timeout on a COMPLETED saga is
// "terminal"; a reply after TIMED_OUT is "duplicate").
//
// Thread-safety: Set and Clear are pure; fire runs on one thread per Deadlines object.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "tessera/base/clock.h"
#include "tessera/base/error.h"
#include "tessera/grid/member.h"
#include "tessera/grid/transaction.h"

namespace tessera::saga {

inline constexpr const char* kDeadlineMap = "__saga.deadlines";

struct Deadline {
  std::string saga_id;
  std::string kind;  // what it is for: "saga" (the saga's deadline), "step", "retry", ...
  std::int32_t step = 0;
  std::int32_t attempt = 0;
  std::int64_t due_ms = 0;  // wall clock
  friend bool operator==(const Deadline&, const Deadline&) = default;

  std::string EntryKey() const;
};

struct DeadlinesOptions {
  base::Millis poll_ms = 250;  // how often each owned partition looks for due deadlines
};

class Deadlines {
 public:
  struct Stats {
    std::int64_t fired = 0;   // fire calls that returned OK
    std::int64_t failed = 0;  // fire calls that returned an error (fired again later)
  };

  // Adds the setting (or clearing) of `d` to `tx`. REQUIRES: tx's partition key is the saga's.
  static void Set(grid::Transaction& tx, const Deadline& d);
  static void Clear(grid::Transaction& tx, const Deadline& d);

  // Registers the scanners as partition work "saga.deadlines" on `member`. REQUIRES: before
  // member.Start(); destroy the Deadlines before the member.
  Deadlines(grid::Member& member, std::function<base::Result<void>(const Deadline&)> fire,
            DeadlinesOptions options = {});
  ~Deadlines();

  Stats stats() const;

  struct State;  // shared with the scanners (deadlines.cc)

 private:
  std::shared_ptr<State> state_;
};

}  // namespace tessera::saga
