@0xb5520c4d28d561a5;
# The native protocol's frame: one of these per frame, member<->member and client<->member.
#
# On the wire a frame is a 4-byte little-endian unsigned length N followed by N bytes holding one
# Cap'n Proto message in the standard (unpacked) stream encoding: segment table + segments.
# N counts the message bytes only, not the 4-byte prefix. N is a multiple of 8 and at most the
# receiver's maximum frame size (default 16 MiB); a bigger N is rejected before the body is read.
#
# Compatibility: never renumber or reuse a field number; only append. Readers ignore fields
# they do not know. Bump protocolVersion (see Hello) for changes old peers cannot ignore.

$import "/capnp/c++.capnp".namespace("tessera::wire::capnp_schema");

struct Frame {
  kind @0 :Kind;
  # What this frame is; decides which of the fields below are meaningful.
  # A reader that does not know the value rejects the frame (protocol error).

  callId @1 :UInt64;
  # Request: chosen by the caller, unique among its calls in flight on this connection.
  # Response: the callId of the request it answers (0 when answering an unparsable frame).
  # Hello, HelloReply, Event: 0.

  partitionId @2 :Int32 = -1;
  # Request/Response/Event: the partition the operation targets, -1 for non-partition ops.

  service @3 :UInt16;
  # Request/Response/Event: which service owns op and payload: 1 = map, 2 = topic,
  # 3 = cluster/admin. 0 = none (Hello, HelloReply).

  op @4 :UInt16;
  # Request/Response/Event: the operation, numbered by the service (e.g. map.put).

  payload @5 :Data;
  # Request/Response/Event: the operation's arguments or result in the service's own encoding
  # (e.g. the map codec). Empty when there is nothing to carry.

  error @6 :Error;
  # Response: set when the request failed; then payload is empty. Unset on success.
  # HelloReply: set when the hello was rejected (accepted = false).

  hello @7 :Hello;
  # Hello: the connecting side's introduction. Unset for other kinds.

  helloReply @8 :HelloReply;
  # HelloReply: the accepting side's answer to a Hello. Unset for other kinds.

  enum Kind {
    unknown @0;     # never sent; a frame with this kind is a protocol error
    hello @1;       # first frame from the connecting side
    helloReply @2;  # first frame from the accepting side, answers hello
    request @3;     # a call; answered by exactly one response with the same callId
    response @4;    # the answer to a request
    event @5;       # a server push (topic message, entry event, member/partition table update)
  }
}

struct Error {
  code @0 :UInt16;
  # A tessera::base::ErrorCode value (stable numbers: 2 = BadRequest, 3 = Timeout, ...).

  message @1 :Text;
  # For people: names what was wrong and what to do.

  reason @2 :UInt16;
  # A tessera::base::ErrorReason value: which case of the code it is, where callers branch on
  # it (0 = none). A reader of the release before skips it.
}

struct Hello {
  protocolVersion @0 :UInt32;
  # The protocol version the sender speaks; currently 1. A member rejects other versions.

  clusterName @1 :Text;
  # The cluster the sender wants to talk to; must equal the member's cluster name.

  role @2 :Role;
  # Whether the sender is a cluster member or a client.

  secret @3 :Text;
  # The shared cluster secret; empty when the cluster has none. Compared in constant time.

  clientName @4 :Text;
  # A free-form name for logs and stats (e.g. "grid-cli" or the member's address).

  maxProtocolVersion @5 :UInt32;
  # The highest protocol version the sender can speak (0: only protocolVersion). A member that
  # speaks 2 as well answers protocolVersion 2 in its HelloReply, and from then on both sides
  # may send lean frames (frame_codec.h) on the connection. protocolVersion stays 1, so
  # members of the release before accept the hello and answer 1.

  enum Role {
    unknown @0;  # never sent; rejected
    member @1;   # another member of the cluster (join, heartbeat, backup, migration)
    client @2;   # a client (smart client, CLI)
  }
}

struct HelloReply {
  accepted @0 :Bool;
  # True when the hello was accepted; false means the member closes the connection next.

  protocolVersion @1 :UInt32;
  # The protocol version the member speaks.

  memberUuid @2 :Text;
  # The accepting member's UUID.

  memberAddress @3 :Text;
  # The accepting member's advertised "host:port" for this protocol.

  partitionCount @4 :Int32;
  # The cluster's partition count (0 when not known).
}
# HelloReply's rejection reason travels in Frame.error (code + message).
