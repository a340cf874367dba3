#pragma once
// Split-brain merge of map entries. When a member leaves its cluster to join another (the
// smaller side of a healed network partition, or a member removed while it was paused), it
// takes the live entries of the partitions it owned out of its stores (MapService::LeaveCluster)
// and, once it has joined, sends them to their new owners as MapOp::kMergeEntries. The owner
// applies each entry by the map's MergePolicy (MapConfig::merge_policy, the surviving
// cluster's configuration).
//
// Deletions are not merged: an entry the surviving side removed during the split comes back if
// the merging side still had it and the policy takes absent keys (every policy does), as in
// Hazelcast. A merged entry keeps its last-update time and hits (its version is the owner's).
// Replicas and migration copies carry both too, so a partition that moved during the split is
// judged by when its entries were written, not by when they were copied.
//
// Value types and pure functions; thread-compatible.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/base/clock.h"
#include "tessera/base/error.h"
#include "tessera/map/map_request.h"

namespace tessera::map {

enum class MergePolicy : std::uint8_t {
  kPutIfAbsent = 0,   // the merging entry only where the key is absent (default)
  kPassThrough = 1,   // the merging entry always wins
  kHigherHits = 2,    // the entry read more often wins; absent: the merging entry
  kLatestUpdate = 3,  // the entry written last (wall clock) wins; absent: the merging entry
};
// "put_if_absent", "pass_through", "higher_hits", "latest_update".
std::string_view MergePolicyName(MergePolicy policy);
// Errors: kBadRequest naming the text and the four names.
base::Result<MergePolicy> ParseMergePolicy(std::string_view text);

// One entry of the merging side.
struct MergeEntry {
  std::string value;
  base::Millis update_wall_ms = 0;     // wall-clock time of its last write (ms since 1970)
  std::int64_t hits = 0;               // reads since its creation
  base::Millis ttl_left_ms = 0;        // 0 = no TTL deadline
  base::Millis max_idle_ms = 0;        // 0 = none
  ValueKind kind = ValueKind::kPlain;  // what the value holds (map_request.h)
  friend bool operator==(const MergeEntry&, const MergeEntry&) = default;
};
// The value of one (key, value) pair of kMergeEntries' entries.
std::string EncodeMergeEntry(const MergeEntry& entry);
// Errors: kBadRequest for bytes EncodeMergeEntry did not produce.
base::Result<MergeEntry> DecodeMergeEntry(std::string_view bytes);

// Whether `policy` lets the merging entry replace what the owner has: `existing` false when
// the key is absent there; otherwise its hits and the wall-clock time of its last write.
bool MergeWins(MergePolicy policy, const MergeEntry& merging, bool existing,
               std::int64_t existing_hits, base::Millis existing_update_wall_ms);

// What a member that leaves its cluster took out, as the requests that merge it: a map's
// entries (kMergeEntries: entries = key, EncodeMergeEntry), or a sub-stream's events
// (kStreamMerge on key "meta@P" of kStreamMap: entries = offset, stored event; keys = groups),
// or a ring's messages (kRingMerge on key "ring@R" of kRingMap: entries = sequence,
// EncodeMergeEntry of the message with its TTL left).
// A companion map's entries (family.h; a large hash's fields) come back as its family's op
// and merge command (FamilySpec::merge_command) on the owner entry's key, and the owner entry
// is not sent: the merge command makes it again (a hash: from its fields, without its TTL).
struct MergeBatch {
  MapOp op = MapOp::kMergeEntries;
  std::string map_name;
  std::string key;
  std::vector<std::pair<std::string, std::string>> entries;
  std::vector<std::string> keys;
  std::string processor;  // a family's op: the command
  // Empty: entries of a partition the leaving member owned. Otherwise the identity
  // (MapService::TableMember::id) of the owner of the partition whose backup replica this
  // member held: a standby copy, sent only if that owner's own merge does not arrive (it
  // crashed while merging); see grid's ClusterMerger.
  std::string standby_for;

  // The request that applies this batch on the cluster it joined.
  MapRequest Request() const;
};

}  // namespace tessera::map
