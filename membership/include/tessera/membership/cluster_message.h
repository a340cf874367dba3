#pragma once
// The membership protocol's messages (one-way; a lost message is repaired by the next
// heartbeat round) and their encoding (src/membership.capnp).
//
//   JoinRequest  joiner -> seed or master: who I am and my cluster settings
//   JoinRefused  -> joiner: settings differ (reason names both values); never merged
//   JoinRedirect -> joiner: I am not the master; ask master_address
//   View         master -> members: the member list and partition table
//   Heartbeat    member -> every other member, every heartbeat interval, with the sender's
//                list and table versions (the master resends the view to a stale member)
//   Leave        member -> master: remove me (graceful shutdown)
//   NotMember    master -> a member it has removed: rejoin
//   SplitProbe   master -> an address outside its cluster (a seed, a member it lost), every
//                merge interval: my cluster's master and size (split-brain detection)
//   SplitProbeReply  -> the prober, from a member of another cluster with the same
//                settings: its cluster's master and size
//   MergeInto    master -> its members: leave this cluster and join the one whose master is
//                at master_address, bringing your data (the smaller cluster merges)
//
// Value types; thread-compatible.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/membership/cluster_view.h"

namespace tessera::membership {

enum class MessageType : std::uint16_t {
  kJoinRequest = 1,
  kJoinRefused = 2,
  kJoinRedirect = 3,
  kView = 4,
  kHeartbeat = 5,
  kLeave = 6,
  kNotMember = 7,
  kSplitProbe = 8,
  kSplitProbeReply = 9,
  kMergeInto = 10,
};

// Settings every member of one cluster must share. A join with different ones is refused.
struct ClusterSettings {
  std::string cluster_name = "dev";
  std::uint32_t protocol_version = 1;
  std::uint32_t partition_count = 271;

  friend bool operator==(const ClusterSettings&, const ClusterSettings&) = default;
};

// What a member restarted on its data directory holds, for a full-cluster restart (Membership,
// "Recovery"): sent with its join requests and heartbeats until its cluster has a partition
// table.
struct RecoveryReport {
  std::string member_id;                   // its persistent id
  std::int64_t table_version = 0;          // of the last table it persisted; 0: none
  std::vector<std::string> table_members;  // that table's members, by persistent id
  // Per partition: the replica version its log ends at, whether it holds a complete replica
  // (not one whose copy was cut off), and whether it owned the partition in that table.
  std::vector<std::uint64_t> versions;
  std::vector<bool> held;
  std::vector<bool> owned;

  friend bool operator==(const RecoveryReport&, const RecoveryReport&) = default;
};

struct ClusterMessage {
  MessageType type = MessageType::kHeartbeat;
  MemberInfo from;                  // the sender
  ClusterSettings settings;         // kJoinRequest
  std::string reason;               // kJoinRefused
  std::string master_address;       // kJoinRedirect, kMergeInto
  std::int64_t list_version = 0;    // kHeartbeat
  std::int64_t table_version = 0;   // kHeartbeat
  std::optional<ClusterView> view;  // kView
  MemberInfo master;                // kSplitProbe, kSplitProbeReply: the sender's master
  std::uint32_t member_count = 0;   // kSplitProbe, kSplitProbeReply: its cluster's size
  // kSplitProbe, kSplitProbeReply: the uuids of its cluster's members (empty from a member of
  // an earlier release).
  std::vector<std::string> member_uuids;
  // kHeartbeat: replica copies (migrations) the sender still waits for, under its
  // table_version; what /health/safe of every member reads (MembershipOptions).
  std::int64_t migrations_pending = 0;
  // kJoinRequest, kHeartbeat: the sender's RecoveryReport, until its cluster has a table.
  std::optional<RecoveryReport> recovery;

  friend bool operator==(const ClusterMessage&, const ClusterMessage&) = default;
};

std::string_view MessageTypeName(MessageType type);

// Encodes `message`. A view's partition table must name only members of its member list.
std::string EncodeClusterMessage(const ClusterMessage& message);
// Errors: kBadRequest naming what is wrong (not a message, unknown type, a replica index
// outside the member list).
base::Result<ClusterMessage> DecodeClusterMessage(std::string_view bytes);

}  // namespace tessera::membership
