// Composition: the listener hands each socket to a shard; the shard creates a Connection that
// owns itself through its pending I/O (classic Asio shared_ptr lifetime). The per-shard
// registry holds weak pointers only, so Stop() can close whatever is still open.
#include "tessera/resp/resp_server.h"

#include <spdlog/logger.h>
#include <future>

#include "connection.h"
#include "server_state.h"
#include "tessera/hash/redis_hash.h"
#include "tessera/net/tcp_listener.h"
#include "tessera/streams/redis_stream.h"

namespace tessera::resp {

struct RespServer::Listener {
  std::unique_ptr<net::TcpListener> tcp;
};

RespServer::RespServer(runtime::ShardSet& shards, map::MapService& maps,
                       topic::TopicService& topics, const base::Clock& clock,
                       RespServerOptions options, std::shared_ptr<spdlog::logger> log)
    : state_(std::make_shared<ServerState>(shards, maps, topics, clock, std::move(options),
                                           std::move(log))),
      listener_(std::make_unique<Listener>()) {
  hash::Register();  // the families of its commands (map/family.h), as a member registers them
  streams::Register();
}

RespServer::~RespServer() { Stop(); }

base::Result<void> RespServer::Start() {
  std::weak_ptr<ServerState> weak = state_;
  auto on_accept = [weak](std::size_t shard, boost::asio::ip::tcp::socket socket) {
    auto state = weak.lock();
    if (!state) return;
    std::make_shared<Connection>(state, shard, std::move(socket))->Start();
  };
  auto tcp = net::TcpListener::Listen(state_->shards, state_->options.host, state_->options.port,
                                      std::move(on_accept), state_->log);
  if (!tcp) return std::unexpected(tcp.error());
  listener_->tcp = std::move(*tcp);
  state_->bound_port = listener_->tcp->port();
  return {};
}

void RespServer::Stop() {
  if (!listener_->tcp) return;
  listener_->tcp->Close();
  listener_->tcp.reset();
  std::vector<std::future<void>> closed;
  for (std::size_t shard = 0; shard < state_->shards.size(); ++shard) {
    auto done = std::make_shared<std::promise<void>>();
    closed.push_back(done->get_future());
    state_->shards.InvokeOn(shard, [state = state_, shard, done] {
      auto connections = state->connections[shard];  // Close() erases from the registry
      for (auto& [id, weak] : connections) {
        if (auto conn = weak.lock()) conn->Close();
      }
      done->set_value();
    });
  }
  for (auto& f : closed) {
    if (f.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
      state_->log->warn("RESP server stop: a shard did not close its connections within 5 s");
    }
  }
}

std::uint16_t RespServer::port() const { return state_->bound_port.load(); }

RespServerStats RespServer::Stats() const {
  RespServerStats stats;
  stats.connected_clients = state_->connected_clients.load();
  stats.total_connections = state_->total_connections.load();
  stats.total_commands = state_->TotalCommands();
  stats.protocol_errors = state_->protocol_errors.load();
  stats.unauthenticated_rejected = state_->unauthenticated_rejected.load();
  stats.output_limit_disconnects = state_->output_limit_disconnects.load();
  return stats;
}

}  // namespace tessera::resp
