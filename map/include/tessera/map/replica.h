#pragma once
// ReplicaUpdate: one change to a partition's copy on a backup member. The owner sends the
// resulting state of every key a write touched (not the operation), so applying an update
// twice, or an entry processor's result, is the same as applying it once. A partition snapshot
// (migration) is a kClearPartition update with an empty map name, kCopySet updates and a
// kPartitionComplete update; a resync of a backup starts with kResyncBegin instead (and its
// later messages with kResyncChunk), and a member that serves the partition as its owner
// ignores it (its sender's table is older).
//
// Replica versions: the owner numbers the writes it replicates per partition (1, 2, ...); a
// partition copy ends with the version it was taken at. A backup that receives a write whose
// version is not the one after its own (a message lost or reordered without a failed
// acknowledgement, or a new owner that missed a write an old one sent) applies it and reports
// the partition stale in its acknowledgement; the owner then re-copies the partition to it.
//
// Value types; thread-compatible.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/base/clock.h"
#include "tessera/base/error.h"
#include "tessera/map/map_request.h"

namespace tessera::map {

struct ReplicaUpdate {
  enum class Kind : std::uint8_t {
    kSet = 1,                // key := value, with the TTL left and the max-idle given
    kDelete = 2,             // key removed (removed, expired, evicted)
    kClearPartition = 3,     // every entry of the partition in map_name (empty: in every map)
    kPartitionComplete = 4,  // the end of a partition copy (migration): it may be served now;
                             // `key` = the sender's master (which cluster sent the copy)
    kCopySet = 5,            // like kSet, as part of a partition copy
    kResyncBegin = 6,        // like kClearPartition (all maps), starting a resync of a backup
    kResyncChunk = 7,        // no change itself: starts a later message of a resync
    kHandoff = 8,            // the previous owner (its address in `key`) stopped the
                             // partition's work: the new owner, which held a replica
                             // already, may start its own
    kProbe = 9,              // no change: asks the receiver, before a copy, for the point its
                             // replay left the partition at (ReplicaAck::points), so the copy
                             // can be the updates after it (MapService, "Catch-up")
  };
  Kind kind = Kind::kSet;
  std::string map_name;
  std::uint32_t partition_id = 0;
  std::string key;
  std::string value;
  base::Millis ttl_left_ms = 0;  // 0 = no TTL deadline
  base::Millis max_idle_ms = 0;  // 0 = none
  // kSet/kDelete/kClearPartition from a write: the partition's replica version after it (the
  // same for every update of one write); kPartitionComplete: the version the copy was taken
  // at; 0: unversioned.
  std::uint64_t version = 0;
  // kSet/kCopySet: how long before it was sent the entry was last written on the owner, and
  // how often it was read there, so a replica (and a promoted backup) keeps the entry's
  // last-update time and hits (merge policies latest_update and higher_hits judge by them).
  base::Millis update_age_ms = 0;
  std::int64_t hits = 0;
  // kSet/kCopySet: what the value holds (map_request.h).
  ValueKind value_kind = ValueKind::kPlain;
  // kSet/kCopySet: the entry's version on the owner (EntryView::version, what RESP WATCH
  // compares), kept by the replica so a promoted backup or a new owner goes on counting from
  // it; 0: not sent (a member of an earlier release), the replica counts its own writes.
  std::uint32_t entry_version = 0;
  // kPartitionComplete: the digest of the partition's history of persisting updates at
  // `version` (ReplicaPoint); 0: unknown (the sender keeps no log).
  std::uint64_t digest = 0;

  friend bool operator==(const ReplicaUpdate&, const ReplicaUpdate&) = default;
};

// A point in a partition's history of persisting updates (the writes of maps that persist,
// as a member's log holds them): the replica version of the last one, and a digest chained
// over every one since the partition's empty start (digest_n = H(digest_n-1, update_n)), so
// two replicas at the same point hold the same entries of those maps, even when a promoted
// backup numbered its writes on from where a dead owner's unreplicated ones had gone.
struct ReplicaPoint {
  std::uint32_t partition_id = 0;
  std::uint64_t version = 0;
  std::uint64_t digest = 0;  // never 0 (0: unknown)

  friend bool operator==(const ReplicaPoint&, const ReplicaPoint&) = default;
};

// A backup's acknowledgement: the partitions it found it had missed updates of, and its
// answers to kProbe updates (the partitions it has a point of; one it has none of is absent).
struct ReplicaAck {
  std::vector<std::uint32_t> stale;
  std::vector<ReplicaPoint> points;

  friend bool operator==(const ReplicaAck&, const ReplicaAck&) = default;
};

std::string EncodeReplicaUpdates(const std::vector<ReplicaUpdate>& updates);
// Errors: kBadRequest naming the problem (not a message, unknown kind).
base::Result<std::vector<ReplicaUpdate>> DecodeReplicaUpdates(std::string_view bytes);
std::string EncodeReplicaAck(const ReplicaAck& ack);
// An empty payload is an ack without stale partitions or points. Errors: kBadRequest.
base::Result<ReplicaAck> DecodeReplicaAck(std::string_view bytes);

}  // namespace tessera::map
