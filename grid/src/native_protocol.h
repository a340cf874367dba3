#pragma once
// Native-protocol op numbers of the grid's services beyond the map operations themselves.
// Map requests: service kMap, op = map::MapOp value, payload = map::EncodeRequest bytes;
// the response payload is map::EncodeResult bytes.
// Shared by the member's NativeHandler and the Client (both private to the grid module).
// Numbers travel on the wire: append only.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::grid::native {

// Service kMap, listener management. Payloads are GenericRecord::Encode() bytes.
//   add:    request {map: string, options: bytes (map::EncodeListenerOptions)}
//           response {id: int64}
//   remove: request {id: int64}  response {removed: bool}
inline constexpr std::uint16_t kMapAddListener = 100;
inline constexpr std::uint16_t kMapRemoveListener = 101;
// Service kMap, member to member only: apply replica updates (backup writes, migration
// copies) for partitions the sender owns. Request map::EncodeReplicaUpdates bytes, empty
// response once applied.
inline constexpr std::uint16_t kMapReplica = 102;
// Service kMap event frames: payload {listener: int64, event: bytes (map::EncodeEvent)}.
inline constexpr std::uint16_t kMapEntryEvent = 200;

// Service kTopic. Payloads are GenericRecord::Encode() bytes (topic_protocol.h).
//   publish:     {topic, payloads: [bytes], publisher, time} -> empty; the member delivers to
//                its listeners and sends the batch on to every other member (from anyone)
//   deliver:     same request, member to member only: deliver to this member's listeners
//   subscribe:   {topic} -> {id}; the member then pushes kTopicEvent frames on this connection
//   unsubscribe: {id} -> {removed: bool}
//   stats:       empty -> JSON {"topics": {NAME: {published, delivered, dropped,
//                listener_errors, listeners}}} of this member
inline constexpr std::uint16_t kTopicPublish = 1;
inline constexpr std::uint16_t kTopicDeliver = 2;
inline constexpr std::uint16_t kTopicSubscribe = 3;
inline constexpr std::uint16_t kTopicUnsubscribe = 4;
inline constexpr std::uint16_t kTopicStats = 5;
// Service kTopic event frames: {listener, topic, payload: bytes, publisher, time, sequence}.
inline constexpr std::uint16_t kTopicEvent = 200;

// Service kCluster.
//   ping:   empty request, response "pong"
//   info:   empty request, response JSON {uuid, address, cluster, version, shards, partitions,
//           connections, resp_port, maps: [names], forwarded_requests (keyed requests sent
//           on to their owner), migrations_pending (replicas here whose
//           migration copy has not arrived)}
inline constexpr std::uint16_t kClusterPing = 1;
inline constexpr std::uint16_t kClusterInfo = 2;
//   view:   empty request, response membership::EncodeClusterMessage of a View message
//           (from = the answering member, view = its member list and partition table)
inline constexpr std::uint16_t kClusterView = 3;
//   view subscription (clients): empty request, response as for view; afterwards the member
//   pushes an event frame (service kCluster, op kClusterViewEvent, same payload) on this
//   connection whenever its view changes.
inline constexpr std::uint16_t kClusterViewSubscribe = 4;
//   metrics: empty request, response the member's metrics in the Prometheus text format
inline constexpr std::uint16_t kClusterMetrics = 5;
//   fault injection (tests and chaos runs; served only by members started with fault
//   injection on, else kUnsupported): request the addresses this member must stop sending to,
//   one per line (empty: none, the network heals), response the same list as now in force.
inline constexpr std::uint16_t kClusterFault = 6;
//   recovery force (operators: grid-cli recovery force): empty request, answered by the
//   master of a cluster recovering from a restart of every member (Membership::ForceRecovery):
//   the response says what it did; errors name why not (not recovering, not the master,
//   partitions without a replica back).
inline constexpr std::uint16_t kClusterRecoveryForce = 7;
//   backup (operators: grid-cli persistence backup): request a folder on the member's machine
//   (an absolute path); the member copies its data directory into FOLDER/<its persistent id>
//   (member_persistence.h BackupDataDir), response JSON {member_id, dir, bytes, took_ms}.
inline constexpr std::uint16_t kClusterBackup = 8;
// kClusterFault's payloads: addresses one per line.
inline std::string EncodeAddressList(const std::vector<std::string>& addresses) {
  std::string out;
  for (const auto& address : addresses) out += address + "\n";
  return out;
}
inline std::vector<std::string> DecodeAddressList(std::string_view text) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    if (end > at) out.emplace_back(text.substr(at, end - at));
    at = end + 1;
  }
  return out;
}
inline constexpr std::uint16_t kClusterViewEvent = 201;
//   member to member: one encoded membership::ClusterMessage, empty response. Only from
//   member-role connections. Same number as membership::kClusterMessageOp.
inline constexpr std::uint16_t kClusterMessage = 10;

}  // namespace tessera::grid::native
