#include "member_router.h"

#include <boost/asio/post.hpp>

#include "native_protocol.h"
#include "tessera/map/map_codec.h"

namespace tessera::grid {

MemberRouter::MemberRouter(wire::Hello hello, partition::Partitioner partitioner,
                           std::chrono::milliseconds call_timeout, std::size_t max_frame_bytes,
                           std::shared_ptr<spdlog::logger> log)
    : partitioner_(partitioner), call_timeout_(call_timeout), work_(io_.get_executor()) {
  pool_ = net::PeerPool::Create(io_, std::move(hello),
                                std::min(call_timeout, std::chrono::milliseconds(2000)),
                                max_frame_bytes, std::move(log));
  thread_ = std::thread([this] { io_.run(); });
}

MemberRouter::~MemberRouter() { Stop(); }

void MemberRouter::Send(const std::string& address, map::MapRequest request, Callback done) {
  const std::int32_t partition =
      map::MapOpIsKeyed(request.op)
          ? static_cast<std::int32_t>(partitioner_.PartitionOf(request.key))
          : -1;
  auto message = wire::Message::MakeRequest(0, partition, wire::Service::kMap,
                                            static_cast<std::uint16_t>(request.op),
                                            map::EncodeRequest(request));
  pool_->Call(address, std::move(message), call_timeout_,
              [done = std::move(done)](base::Result<wire::Message> reply) {
                if (!reply) return done(std::unexpected(reply.error()));
                done(map::DecodeResult(reply->payload));
              });
}

void MemberRouter::SendReplica(const std::string& address, std::vector<map::ReplicaUpdate> updates,
                               std::function<void(base::Result<map::ReplicaAck>)> done) {
  const std::int32_t partition =
      updates.empty() ? -1 : static_cast<std::int32_t>(updates.front().partition_id);
  auto message = wire::Message::MakeRequest(0, partition, wire::Service::kMap, native::kMapReplica,
                                            map::EncodeReplicaUpdates(updates));
  pool_->Call(address, std::move(message), call_timeout_,
              [done = std::move(done)](base::Result<wire::Message> reply) {
                if (!reply) return done(std::unexpected(reply.error()));
                done(map::DecodeReplicaAck(reply->payload));
              });
}

void MemberRouter::SendTopic(const std::string& address, std::string batch, std::uint16_t op,
                             std::function<void(base::Result<void>)> done) {
  auto message = wire::Message::MakeRequest(0, -1, wire::Service::kTopic, op, std::move(batch));
  pool_->Call(address, std::move(message), call_timeout_,
              [done = std::move(done)](base::Result<wire::Message> reply) {
                if (!reply) return done(std::unexpected(reply.error()));
                done({});
              });
}

void MemberRouter::Post(std::function<void()> fn) { boost::asio::post(io_, std::move(fn)); }

void MemberRouter::Stop() {
  if (!thread_.joinable()) return;
  pool_->CloseAll();
  work_.reset();
  boost::asio::post(io_, [this] { io_.stop(); });
  thread_.join();
}

}  // namespace tessera::grid
