#pragma once
// A member's health, as orchestrators and operators probe it (Member::Health, and the member's
// HTTP port: /health/live, /health/ready, /health/safe; docs/operations.md).
//
//   live   the process serves: false only once it is shutting down.
//   ready  it can take traffic: started, in its cluster's member list with a partition table
//          (a clustered member), not shutting down. False while it joins.
//   safe   stopping a member now loses nothing and moves nothing that is still moving: this
//          member is ready, every partition has all its replicas (backup_count + 1, at most
//          one per member), this member waits for no replica copy, and every other member's
//          last heartbeat, at most three heartbeat intervals old, reported the same partition
//          table and no copy pending either (the cluster-wide view of Hazelcast's
//          cluster-safe check, as of the last heartbeat round). A member alone is safe when its
//          partitions are assigned: there is nothing to lose by stopping another.
//
// Each check that fails says why, in a sentence naming what it waits for.

#include <cstdint>
#include <string>

namespace tessera::grid {

struct HealthCheck {
  bool ok = false;
  std::string reason;  // why not, or what holds (e.g. "3 members, every replica copied")
};

struct MemberHealth {
  HealthCheck live, ready, safe;
  std::string state;              // "joining", "member", "leaving", "left", "standalone", "stopped"
  std::size_t members = 0;        // in this member's view
  std::string master;             // its address, empty when none
  std::int64_t list_version = 0;  // member list version
  std::int64_t table_version = 0;       // partition table version
  std::int64_t migrations_pending = 0;  // replica copies this member still waits for
};

}  // namespace tessera::grid
