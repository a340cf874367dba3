@0xd3a41f0c8be27e19;
# The membership protocol's message (membership/cluster_message.h documents the protocol).
# Carried as the payload of native-protocol Event frames, service cluster, op clusterMessage.
# Compatibility: never renumber or reuse a field number; only append.

$import "/capnp/c++.capnp".namespace("tessera::membership::capnp_schema");

struct MemberInfo {
  uuid @0 :Text;
  address @1 :Text;        # advertised native-protocol "host:port"
  startWallMs @2 :Int64;   # wall clock at the member's start (ms since the epoch)
  memberId @3 :Text;       # persistent id (its data directory's); empty: none
}

struct View {
  listVersion @0 :Int64;
  members @1 :List(MemberInfo);    # oldest first; the first is the master
  tableVersion @2 :Int64;
  backupCount @3 :UInt32;
  partitions @4 :List(List(UInt16));
  # partitions[p] = indices into members: owner first, then backups.
  recovered @5 :Bool;              # a full-cluster restart's first table
}

struct RecoveryReport {
  memberId @0 :Text;
  tableVersion @1 :Int64;
  tableMembers @2 :List(Text);
  versions @3 :List(UInt64);
  held @4 :List(Bool);
  owned @5 :List(Bool);
}

struct ClusterMessage {
  type @0 :UInt16;            # membership::MessageType (1 = joinRequest ... 10 = mergeInto)
  from @1 :MemberInfo;        # the sender
  clusterName @2 :Text;       # joinRequest: the sender's cluster settings
  protocolVersion @3 :UInt32;
  partitionCount @4 :UInt32;
  reason @5 :Text;            # joinRefused: why, and what to do
  masterAddress @6 :Text;     # joinRedirect: where the master is
  listVersion @7 :Int64;      # heartbeat: the sender's member-list version
  tableVersion @8 :Int64;     # heartbeat: the sender's partition-table version
  view @9 :View;              # view: the member list and partition table
  hasView @10 :Bool;
  master @11 :MemberInfo;     # splitProbe/splitProbeReply: the sender's master
  memberCount @12 :UInt32;    # splitProbe/splitProbeReply: members of the sender's cluster
  migrationsPending @13 :Int64;  # heartbeat: replica copies the sender still waits for
  memberUuids @14 :List(Text);   # splitProbe/splitProbeReply: the members of the sender's
                                 # cluster (empty from a member of an earlier release)
  recovery @15 :RecoveryReport;  # joinRequest/heartbeat before the first table: what the
  hasRecovery @16 :Bool;         # sender restarted with (full-cluster restart)
}
