#pragma once
// MemberRouter: the member's map::ClusterRouting. It sends map requests for partitions other
// members own to them, as native-protocol map requests on member-role connections (so the
// receiver runs them locally and never forwards again), from its own I/O thread.
//
// Thread-safety: Send is safe from any thread; callbacks run on the router's thread.

#include <utility>  // before Asio's awaitable header (Boost 1.74)

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "tessera/map/map_service.h"
#include "tessera/net/peer_pool.h"

namespace tessera::grid {

class MemberRouter final : public map::ClusterRouting {
 public:
  // `hello` identifies this member to the others (role member, cluster name, secret).
  MemberRouter(wire::Hello hello, partition::Partitioner partitioner,
               std::chrono::milliseconds call_timeout, std::size_t max_frame_bytes,
               std::shared_ptr<spdlog::logger> log);
  ~MemberRouter() override;

  void Send(const std::string& address, map::MapRequest request, Callback done) override;
  void SendReplica(const std::string& address, std::vector<map::ReplicaUpdate> updates,
                   std::function<void(base::Result<map::ReplicaAck>)> done) override;
  // Fault injection (net::PeerBlocklist). REQUIRES: before the first call.
  void set_blocklist(std::shared_ptr<const net::PeerBlocklist> blocklist) {
    pool_->set_blocklist(std::move(blocklist));
  }
  // Runs `fn` on the router's thread; what one thread posts runs in its order.
  void Post(std::function<void()> fn);
  // Sends an encoded topic batch (topic_protocol.h) to `address`: `op` kTopicDeliver (to its
  // listeners) or kTopicPublish (for it to order and deliver everywhere).
  void SendTopic(const std::string& address, std::string batch, std::uint16_t op,
                 std::function<void(base::Result<void>)> done);

  // Closes the connections and joins the thread; calls still pending fail or are dropped.
  // Idempotent. REQUIRES: no further Send.
  void Stop();

 private:
  partition::Partitioner partitioner_;
  std::chrono::milliseconds call_timeout_;
  boost::asio::io_context io_{1};
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::shared_ptr<net::PeerPool> pool_;
  std::thread thread_;
};

}  // namespace tessera::grid
