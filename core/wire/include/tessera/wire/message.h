#pragma once
// Domain types of the native protocol (member<->member and client<->member). One Message is
// one frame on the wire; frame.capnp (private to this module) documents every field and the
// framing. Value types; thread-compatible.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tessera/base/error.h"

namespace tessera::wire {

// The protocol version this build speaks (Hello.protocol_version).
inline constexpr std::uint32_t kProtocolVersion = 1;
// The version that adds lean frames (frame_codec.h), negotiated per connection through
// Hello.max_protocol_version and HelloReply.protocol_version: the lower of the two sides'
// highest versions, or 1 when that is below 2.
inline constexpr std::uint32_t kLeanProtocolVersion = 2;
// The version whose lean frames also carry entries, keys and integer arguments, and results
// with entries (stream appends; map/map_codec.h).
inline constexpr std::uint32_t kLeanEntriesProtocolVersion = 3;
// The version whose lean frames also carry partition transactions (kTransact) and their
// results (map/map_codec.h).
inline constexpr std::uint32_t kLeanTxProtocolVersion = 4;
// The highest version this build speaks.
inline constexpr std::uint32_t kMaxProtocolVersion = 4;

// Default maximum frame size (body bytes, without the 4-byte length prefix).
inline constexpr std::size_t kDefaultMaxFrameBytes = 16 * 1024 * 1024;

// What a frame is. Numbers are the wire values.
enum class MessageKind : std::uint16_t {
  kHello = 1,       // first frame from the connecting side
  kHelloReply = 2,  // the accepting side's answer to Hello
  kRequest = 3,     // a call; answered by one Response with the same call_id
  kResponse = 4,    // the answer to a Request (payload, or error)
  kEvent = 5,       // a server push (topic message, entry event, table update)
};

// Which service owns a message's op and payload. Numbers are the wire values; values this
// build does not name still decode (the receiving service rejects them).
enum class Service : std::uint16_t {
  kNone = 0,     // Hello / HelloReply
  kMap = 1,      // distributed maps
  kTopic = 2,    // topics (publish/subscribe)
  kCluster = 3,  // membership, partition table, admin
};

// Who is connecting. Numbers are the wire values.
enum class Role : std::uint16_t {
  kMember = 1,
  kClient = 2,
};

struct Hello {
  std::uint32_t protocol_version = kProtocolVersion;
  std::string cluster_name;
  Role role = Role::kClient;
  std::string secret;       // empty when the cluster has none
  std::string client_name;  // for logs and stats
  // The highest version the sender speaks (0: protocol_version only); see frame.capnp.
  std::uint32_t max_protocol_version = 0;

  friend bool operator==(const Hello&, const Hello&) = default;
};

struct HelloReply {
  bool accepted = false;
  std::uint32_t protocol_version = kProtocolVersion;
  std::string member_uuid;
  std::string member_address;  // "host:port"
  std::int32_t partition_count = 0;

  friend bool operator==(const HelloReply&, const HelloReply&) = default;
};

// One frame. Which fields matter depends on kind:
//   kHello: hello.  kHelloReply: hello_reply, and error when rejected.
//   kRequest: call_id, partition_id, service, op, payload.
//   kResponse: call_id, service, op, partition_id (echoed), and payload or error.
//   kEvent: service, op, partition_id, payload.
struct Message {
  MessageKind kind = MessageKind::kRequest;
  std::uint64_t call_id = 0;
  std::int32_t partition_id = -1;  // -1 for non-partition ops
  Service service = Service::kNone;
  std::uint16_t op = 0;  // service-specific
  std::string payload;   // the service's own encoding
  std::optional<base::Error> error;
  std::optional<Hello> hello;             // set iff kind == kHello
  std::optional<HelloReply> hello_reply;  // set iff kind == kHelloReply
  // Sent (or received) as a lean frame, and so with the service's lean payload encoding;
  // only on connections that negotiated kLeanProtocolVersion or later (frame_codec.h).
  bool lean = false;

  friend bool operator==(const Message&, const Message&) = default;

  static Message MakeHello(Hello hello);
  // A rejection carries `error`; an acceptance does not.
  static Message MakeHelloReply(HelloReply reply, std::optional<base::Error> error = {});
  static Message MakeRequest(std::uint64_t call_id, std::int32_t partition_id, Service service,
                             std::uint16_t op, std::string payload);
  // A successful response to `request` (call id, partition, service and op echoed).
  static Message MakeResponse(const Message& request, std::string payload);
  // A failed response to `request`.
  static Message MakeErrorResponse(const Message& request, base::Error error);
  static Message MakeEvent(Service service, std::uint16_t op, std::int32_t partition_id,
                           std::string payload);
};

// "Hello", "Request", ...; "Unknown" for values outside the enum.
std::string_view MessageKindName(MessageKind kind);
// "map", "topic", "cluster", "none"; "service<N>" for values outside the enum.
std::string ServiceName(Service service);
// "member" / "client".
std::string_view RoleName(Role role);

}  // namespace tessera::wire
