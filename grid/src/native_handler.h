#pragma once
// NativeHandler: the member's native-protocol front-end. It only decodes, routes and
// replies: map requests go to MapService, listener registrations become MapService listeners
// that push Event frames to the connection, cluster requests answer from member state.
//
// Shard: OnRequest runs on the connection's shard; replies are sent from whichever shard
// completed the operation (Connection::Send is thread-safe).
// Thread-safety: the listener bookkeeping is guarded by a mutex.

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tessera/map/map_service.h"
#include "tessera/net/server.h"
#include "tessera/topic/topic_service.h"

namespace tessera::grid {

// What the handler asks of the member for cluster requests.
struct ClusterHooks {
  std::function<std::string()> info;  // kClusterInfo: the member-info JSON
  // kClusterMetrics: Prometheus text. It waits for every shard (per-map statistics), so the
  // handler runs it through `off_shard`, which runs a task on a thread that is no shard's.
  std::function<std::string()> metrics;
  std::function<void(std::function<void()>)> off_shard;
  // kClusterView: the encoded view message (native_protocol.h).
  std::function<std::string()> view;
  // membership::kClusterMessageOp from a member-role connection: the encoded message; null
  // when not clustered.
  std::function<void(std::string)> message;
  // kClusterFault: sets the blocked peers (Member::BlockPeers) from the payload and returns
  // them; null when fault injection is off.
  std::function<std::string(const std::string&)> fault;
  // kClusterRecoveryForce (run through `off_shard`: it waits for the membership's thread);
  // null when not clustered.
  std::function<base::Result<std::string>()> recovery_force;
  // kClusterBackup (run through `off_shard`: it copies files): the backup folder -> JSON.
  std::function<base::Result<std::string>(const std::string&)> backup;
};

class NativeHandler final : public net::RequestHandler {
 public:
  // `topics` delivers on `shard_count` shards (subscriptions are spread over them).
  NativeHandler(map::MapService& maps, topic::TopicService& topics, std::size_t shard_count,
                ClusterHooks cluster, std::shared_ptr<spdlog::logger> log);

  void OnRequest(const std::shared_ptr<net::Connection>& connection,
                 wire::Message request) override;
  // Lean keyed map requests among `frames`: their entries are prefetched
  // (MapService::PrefetchKeys) before the requests run one by one.
  void BeforeFrames(const std::shared_ptr<net::Connection>& connection,
                    std::span<const wire::Message> frames) override;
  void OnClosed(const std::shared_ptr<net::Connection>& connection) override;
  // Pushes `encoded_view` (as answered to kClusterView) to every connection subscribed with
  // kClusterViewSubscribe. Thread-safe.
  void PublishView(const std::string& encoded_view);

 private:
  void HandleMap(const std::shared_ptr<net::Connection>& connection, wire::Message request);
  void AddListener(const std::shared_ptr<net::Connection>& connection,
                   const wire::Message& request);
  void RemoveListener(const std::shared_ptr<net::Connection>& connection,
                      const wire::Message& request);
  void ApplyReplica(const std::shared_ptr<net::Connection>& connection,
                    const wire::Message& request);
  void HandleCluster(const std::shared_ptr<net::Connection>& connection,
                     const wire::Message& request);
  void HandleTopic(const std::shared_ptr<net::Connection>& connection,
                   const wire::Message& request);

  map::MapService& maps_;
  topic::TopicService& topics_;
  const std::size_t shard_count_;
  ClusterHooks cluster_;
  std::shared_ptr<spdlog::logger> log_;
  std::mutex mu_;
  std::map<std::uint64_t, std::vector<map::ListenerId>> listeners_;              // by connection id
  std::map<std::uint64_t, std::weak_ptr<net::Connection>> view_subscribers_;     // by id
  std::map<std::uint64_t, std::vector<topic::SubscriptionId>> topic_listeners_;  // by conn id
};

}  // namespace tessera::grid
