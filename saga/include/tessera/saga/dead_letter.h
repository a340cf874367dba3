#pragma once
// DeadLetterQueue: a consumer group's dead letters, in the shared cluster.
// An event whose handler failed for good (its retries spent, or a non-retryable error) becomes
// a dead letter with the handler, the error, the attempts and the first and last failure
// times; the group moves on. Later events of the same key are parked behind it (sequenced, as
// Axon's DLQ): they become dead letters too, marked parked, without running the handler, so
// the key's order holds. Consumer::Replay runs a dead letter's handler again for that group
// only (through the inbox, which never marked a failed event) and, when it succeeds, the
// parked events of its key after it, in order; a replay limit per entry stops endless replays.
//
// Storage: map "__dlq.<group>", key "<event id as 16 hex digits>@<event key's partition key>",
// value the record "tessera.DeadLetter" (fields below; `event` is the tessera.Event record),
// so grid-cli and predicates can filter by group, type, key and time; map
// "__dlq.<group>.keys", key = the event's key, value = its dead letters (incrementRaw count).
//
// Replay requests: replay runs the group's handler, so only the group's consumers can do it.
// A tool (grid-cli dlq replay) stores a ReplayRequest in map "__dlq.<group>.replays"; one of
// the group's running consumers claims it (a compare-and-set from pending to running), runs it
// and stores the outcome (done or failed), kept for an hour for the tool to read.
//
// Thread-safety: every method is safe from any thread (blocking calls).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/grid/instance.h"
#include "tessera/map/predicate.h"
#include "tessera/saga/event.h"

namespace tessera::saga {

struct DeadLetter {
  Event event;
  std::string group;
  std::string handler;  // the event type whose handler failed
  std::int32_t error_code = 0;
  std::string error;
  std::int32_t attempts = 0;
  std::int64_t first_failure_ms = 0;
  std::int64_t last_failure_ms = 0;
  std::int32_t replays = 0;
  bool parked = false;  // behind an earlier dead letter of its key; its handler never ran
  friend bool operator==(const DeadLetter&, const DeadLetter&) = default;
};

// A replay asked for from outside the consumers (record "tessera.ReplayRequest").
struct ReplayRequest {
  std::string id;                  // the request's key (unique: the requester picks it)
  std::int64_t event_id = 0;       // one dead letter; 0: every one matching `type` and `key`
  std::string type;                // filter: event type ("" = any)
  std::string key;                 // filter: event key ("" = any)
  std::string status = "pending";  // pending, running, done (all ran) or failed (some did not)
  std::string by;                  // the consumer that ran it
  std::int32_t replayed = 0;       // handler runs that succeeded (parked events included)
  std::int32_t failed = 0;         // dead letters whose replay failed (they stay queued)
  std::string error;               // the first failure
  std::int64_t requested_ms = 0, finished_ms = 0;
  std::int64_t claimed_ms = 0;  // when `by` claimed it
  std::string stored;  // the bytes as read from the map (what Claim and Cancel compare with)
  friend bool operator==(const ReplayRequest&, const ReplayRequest&) = default;
};

class DeadLetterQueue {
 public:
  DeadLetterQueue(std::shared_ptr<grid::Instance> shared, std::string group);

  static std::string MapName(const std::string& group) { return "__dlq." + group; }
  static std::string EntryKey(const Event& event);

  // Stores `letter` (replacing an entry of the same event) and counts it for its key.
  base::Result<void> Add(const DeadLetter& letter);
  // Whether the event's key has dead letters in this group (its later events park).
  base::Result<bool> KeyParked(const Event& event);
  // Every key that has dead letters in this group (one read of the keys map).
  base::Result<std::vector<std::string>> ParkedKeys();
  // Dead letters matching `filter` (over the tessera.DeadLetter record: "event.type",
  // "event.key", "last_failure_ms", "parked", ...), by event id.
  base::Result<std::vector<DeadLetter>> List(const map::Predicate& filter = map::Predicate());
  base::Result<std::optional<DeadLetter>> Get(const Event& event);
  base::Result<std::int64_t> Count();
  // Removes the dead letter (replayed, or given up on: `reason` is logged by the caller).
  base::Result<void> Remove(const DeadLetter& letter);
  // Saves a changed dead letter (a failed replay's count and error) if it is still queued.
  base::Result<void> Update(const DeadLetter& letter);

  // Replay requests (see above). RequestReplay stores a pending request (kConflict if the id
  // is taken); PendingReplays lists the pending ones and those running for longer than
  // kStaleClaimMs (their consumer died: they are claimed again); Claim moves one to running
  // for `by` (false: another consumer got it or it was cancelled); Finish stores the outcome;
  // Cancel removes it if still pending.
  static constexpr std::int64_t kStaleClaimMs = 600'000;
  static std::string ReplayMapName(const std::string& group) { return MapName(group) + ".replays"; }
  // The replay lease of `key` (map "__dlq.<group>.replaying", TTL `ttl_ms`): "" when `holder`
  // got it (or holds it already), else the holder that has it.
  base::Result<std::string> LeaseReplay(const std::string& key, const std::string& holder,
                                        base::Millis ttl_ms);
  base::Result<void> ReleaseReplay(const std::string& key, const std::string& holder);
  base::Result<void> RequestReplay(const ReplayRequest& request);
  base::Result<std::vector<ReplayRequest>> PendingReplays();
  base::Result<bool> ClaimReplay(ReplayRequest& request, const std::string& by);
  base::Result<void> FinishReplay(const ReplayRequest& request);
  base::Result<std::optional<ReplayRequest>> GetReplay(const std::string& id);
  base::Result<bool> CancelReplay(const ReplayRequest& request);

  const std::string& group() const { return group_; }

 private:
  std::shared_ptr<grid::Instance> shared_;
  std::string group_;
};

record::GenericRecord DeadLetterToRecord(const DeadLetter& letter);
base::Result<DeadLetter> DeadLetterFromRecord(const record::GenericRecord& record);
record::GenericRecord ReplayRequestToRecord(const ReplayRequest& request);
base::Result<ReplayRequest> ReplayRequestFromRecord(const record::GenericRecord& record);

}  // namespace tessera::saga
