#pragma once
// What a member knows about its cluster: the versioned member list (oldest first; the first
// member is the master) and the partition table the master computed for it.
//
// Value types; thread-compatible.

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/base/clock.h"
#include "tessera/partition/partition_table.h"

namespace tessera::membership {

struct MemberInfo {
  std::string uuid;                // fresh at every start of a member process
  std::string address;             // advertised native-protocol "host:port"
  base::Millis start_wall_ms = 0;  // wall clock at start, for people
  // The member's persistent id (its data directory's, kept across restarts, also at another
  // address); empty for a member without a data directory.
  std::string member_id{};

  friend bool operator==(const MemberInfo&, const MemberInfo&) = default;
};

struct MemberList {
  std::int64_t version = 0;         // bumped by the master at every change; 0 = none yet
  std::vector<MemberInfo> members;  // in join order: [0] is the oldest, the master

  const MemberInfo* Find(const std::string& uuid) const;
  const MemberInfo* FindByAddress(const std::string& address) const;
  // The master, or null for an empty list.
  const MemberInfo* master() const { return members.empty() ? nullptr : &members.front(); }
  std::vector<std::string> Uuids() const;

  friend bool operator==(const MemberList&, const MemberList&) = default;
};

struct ClusterView {
  MemberList members;
  partition::PartitionTable partitions;

  // Every partition has min(backup_count + 1, member count) replicas, all on listed members.
  bool AllReplicasPresent() const;

  friend bool operator==(const ClusterView&, const ClusterView&) = default;
};

}  // namespace tessera::membership
