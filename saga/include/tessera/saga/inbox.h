#pragma once
// Inbox: effectively-once handling. A consumer group's handler makes its
// state changes as a partition transaction on the service's embedded member; Commit adds the
// marker of (group, event id) to that transaction, with an "absent" precondition, so the
// changes and the marker commit together or not at all. A redelivered event finds its marker:
// nothing is applied again, and it counts as a duplicate. A handler that writes to several
// partitions commits each part with Commit: each part gets its own marker (in its partition),
// so a retried handler applies each part once. The marker is per partition key: a handler
// commits all it writes under one partition key in one Commit (a second Commit of the same
// event under the same partition key is a duplicate and applies nothing).
//
// Handlers with external side effects (an HTTP call, an email) cannot join a transaction:
// Lease takes the marker for a while (putIfAbsent with TTL) before the effect, Complete makes
// it permanent after it, Release gives it back when the effect failed, so that redelivery or
// a DLQ replay runs the handler again. A lease that lapses (the holder died) lets the next
// delivery run it again: the effect may then happen twice, so make it idempotent downstream
// if it cannot be.
//
// Markers live in the map "__inbox", key "<group>|<event id>@<partition key>", and expire
// after the retention (default 7 days): a duplicate arriving later than that is applied again.
// Keep it longer than the longest redelivery you expect (stream retention, DLQ parking).
//
// Thread-safety: every method is safe from any thread (they block: not on a shard thread).

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "tessera/base/clock.h"
#include "tessera/base/error.h"
#include "tessera/grid/instance.h"
#include "tessera/grid/transaction.h"
#include "tessera/saga/event.h"

namespace tessera::saga {

inline constexpr const char* kInboxMap = "__inbox";

struct InboxOptions {
  base::Millis retention_ms = 7LL * 24 * 3600 * 1000;  // how long a marker is kept
  base::Millis lease_ms = 30'000;                      // Lease's hold without Complete
};

enum class InboxOutcome : std::uint8_t {
  kApplied = 1,    // the changes and the marker committed
  kDuplicate = 2,  // the marker was there: nothing was applied (already handled)
};

class Inbox {
 public:
  struct Stats {
    std::int64_t applied = 0;
    std::int64_t duplicates = 0;
  };

  // `member` is the service's embedded member (or any Instance); it outlives the Inbox.
  explicit Inbox(grid::Instance& member, InboxOptions options = {});

  // Commits `changes` (a transaction in some partition, built by the handler) together with
  // the marker of (group, event) in that partition. Errors: kConflict naming the operation
  // when another precondition of `changes` failed (nothing applied: the handler decides), the
  // transaction's errors (kBadRequest: a key outside its partition; connection errors).
  base::Result<InboxOutcome> Commit(const std::string& group, const Event& event,
                                    const grid::Transaction& changes);

  // External side effects: the lease's token when this caller holds the marker now (run the
  // effect, then Complete, or Release with the token); nullopt when the event was handled
  // already or another delivery holds it. `partition_key` places the marker.
  base::Result<std::optional<std::string>> Lease(const std::string& group, const Event& event,
                                                 const std::string& partition_key);
  base::Result<void> Complete(const std::string& group, const Event& event,
                              const std::string& partition_key);
  // Gives back the lease `token` names; a lease that lapsed and was taken by another delivery,
  // or a completed marker, stays.
  base::Result<void> Release(const std::string& group, const Event& event,
                             const std::string& partition_key, const std::string& token);
  // Whether (group, event) is marked handled (or leased) in `partition_key`'s partition.
  base::Result<bool> Seen(const std::string& group, const Event& event,
                          const std::string& partition_key);

  Stats stats() const { return {applied_.load(), duplicates_.load()}; }

  // The marker key of (group, event) in `partition_key`'s partition.
  static std::string MarkerKey(const std::string& group, const Event& event,
                               const std::string& partition_key);

 private:
  grid::Instance& member_;
  InboxOptions options_;
  std::atomic<std::int64_t> applied_{0};
  std::atomic<std::int64_t> duplicates_{0};
};

}  // namespace tessera::saga
