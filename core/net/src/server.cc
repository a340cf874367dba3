// Server state is shared between the Server object and the shard-side callbacks of the listener
// and of every connection (each connection's handlers hold it until the connection closes, so
// Stop() waits for all of them). Per connection: a handshake deadline timer; the handshake
// result lives on the Connection itself (peer_hello), touched only on its shard.
// Calls into the RequestHandler pass through a gate so that none starts after Stop() returned.
#include "tessera/net/server.h"

#include <spdlog/spdlog.h>
#include <algorithm>
#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "tessera/base/secret.h"
#include "tessera/net/tcp_listener.h"

namespace tessera::net {

namespace asio = boost::asio;
using base::Error;
using base::ErrorCode;

namespace {

constexpr auto kStopWait = std::chrono::seconds(5);

// Counts handler calls in flight; once closed, no new call starts.
// TODO(perf): one gate per shard avoids sharing this cache line between shards.
class HandlerGate {
 public:
  bool Enter() {
    in_flight_.fetch_add(1);
    if (closed_.load()) {
      in_flight_.fetch_sub(1);
      return false;
    }
    return true;
  }
  void Leave() { in_flight_.fetch_sub(1); }
  // REQUIRES: not called from inside a handler call.
  void CloseAndWait() {
    closed_.store(true);
    while (in_flight_.load() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

 private:
  std::atomic<int> in_flight_{0};
  std::atomic<bool> closed_{false};
};

base::Result<void> CheckHello(const HandshakePolicy& policy, const wire::Hello& hello) {
  const std::string role(wire::RoleName(hello.role));
  if (hello.protocol_version != policy.protocol_version) {
    return base::Fail(ErrorCode::kProtocol,
                      "protocol version mismatch: member speaks " +
                          std::to_string(policy.protocol_version) + ", " + role + " speaks " +
                          std::to_string(hello.protocol_version) + "; use a " + role +
                          " and member from the same Tessera release");
  }
  const bool role_allowed =
      hello.role == wire::Role::kMember ? policy.accept_members : policy.accept_clients;
  if (!role_allowed) {
    return base::Fail(ErrorCode::kAuthFailed, "this endpoint does not accept " + role +
                                                  " connections; connect to the " + role +
                                                  " port instead");
  }
  if (hello.cluster_name != policy.cluster_name) {
    return base::Fail(ErrorCode::kAuthFailed,
                      "cluster name mismatch: member is in '" + policy.cluster_name + "', " + role +
                          " asked for '" + hello.cluster_name + "'; connect with --cluster-name " +
                          policy.cluster_name + " to join this member's cluster");
  }
  if (!base::ConstantTimeEquals(hello.secret, policy.secret)) {
    return base::Fail(ErrorCode::kAuthFailed,
                      "wrong cluster secret from " + role + " '" + hello.client_name +
                          "'; pass the secret the cluster was started with (--secret)");
  }
  return {};
}

}  // namespace

struct Server::State : std::enable_shared_from_this<Server::State> {
  struct Entry {
    std::shared_ptr<Connection> connection;
    std::shared_ptr<asio::steady_timer> handshake_timer;  // touched on the connection's shard
  };

  State(runtime::ShardSet& shard_set, ServerOptions server_options, RequestHandler& request_handler,
        std::shared_ptr<spdlog::logger> logger)
      : shards(shard_set),
        options(std::move(server_options)),
        handler(request_handler),
        log(std::move(logger)) {}

  void OnAccept(std::size_t shard, asio::ip::tcp::socket socket);
  void OnMessage(const std::shared_ptr<Connection>& connection, wire::Message message);
  void OnHello(const std::shared_ptr<Connection>& connection, wire::Message message);
  void OnProtocolError(const std::shared_ptr<Connection>& connection, const Error& error);
  void OnClosed(const std::shared_ptr<Connection>& connection);
  void Reject(const std::shared_ptr<Connection>& connection, const Error& error);
  void CancelHandshakeTimer(std::uint64_t connection_id);
  wire::HelloReply MakeHelloReply(bool accepted) const;

  runtime::ShardSet& shards;
  const ServerOptions options;
  RequestHandler& handler;
  const std::shared_ptr<spdlog::logger> log;
  HandlerGate gate;
  std::unique_ptr<TcpListener> listener;

  mutable std::mutex mutex;
  std::condition_variable all_closed;
  std::unordered_map<std::uint64_t, Entry> connections;  // guarded by mutex
  std::uint64_t next_connection_id = 1;                  // guarded by mutex
  bool stopping = false;                                 // guarded by mutex
  std::atomic<std::int64_t> slow_clients_closed{0};
};

void Server::State::OnAccept(std::size_t shard, asio::ip::tcp::socket socket) {
  std::shared_ptr<Connection> connection;
  auto timer = std::make_shared<asio::steady_timer>(shards.Context(shard));
  {
    std::lock_guard lock(mutex);
    if (stopping) return;
    const std::uint64_t id = next_connection_id++;
    connection = Connection::Create(std::move(socket), id, shard, options.max_frame_bytes, log);
    connection->set_max_frame_bytes(
        std::min(options.max_hello_bytes, options.max_frame_bytes),
        "for a connection's first frame, its Hello; the peer must open with a Hello");
    connections.emplace(id, Entry{connection, timer});
  }
  log->debug("connection {} from {} on shard {}", connection->id(), connection->remote_address(),
             shard);
  auto self = shared_from_this();
  timer->expires_after(options.handshake_timeout);
  timer->async_wait(
      [self, weak = std::weak_ptr<Connection>(connection)](const boost::system::error_code& error) {
        auto connection = weak.lock();
        if (error || !connection || connection->peer_hello() != nullptr) return;
        self->Reject(connection, Error(ErrorCode::kProtocol,
                                       "no Hello within " +
                                           std::to_string(self->options.handshake_timeout.count()) +
                                           " ms; the peer must open with a Hello frame"));
      });
  connection->Start(Connection::Handlers{
      .on_message = [self](const std::shared_ptr<Connection>& c,
                           wire::Message m) { self->OnMessage(c, std::move(m)); },
      .on_protocol_error = [self](const std::shared_ptr<Connection>& c,
                                  const Error& e) { self->OnProtocolError(c, e); },
      .on_closed = [self](const std::shared_ptr<Connection>& c) { self->OnClosed(c); },
      .on_batch =
          [self](const std::shared_ptr<Connection>& c, std::span<const wire::Message> frames) {
            if (!self->gate.Enter()) return;
            self->handler.BeforeFrames(c, frames);
            self->gate.Leave();
          },
  });
}

void Server::State::OnMessage(const std::shared_ptr<Connection>& connection,
                              wire::Message message) {
  if (connection->peer_hello() == nullptr) {
    OnHello(connection, std::move(message));
    return;
  }
  if (message.kind != wire::MessageKind::kRequest && message.kind != wire::MessageKind::kEvent) {
    OnProtocolError(connection,
                    Error(ErrorCode::kProtocol,
                          "unexpected " + std::string(wire::MessageKindName(message.kind)) +
                              " frame after the handshake; only Request and Event "
                              "frames may follow the Hello"));
    connection->Close();
    return;
  }
  if (!gate.Enter()) return;
  if (message.kind == wire::MessageKind::kRequest) {
    handler.OnRequest(connection, std::move(message));
  } else {
    handler.OnEvent(connection, std::move(message));
  }
  gate.Leave();
}

void Server::State::OnHello(const std::shared_ptr<Connection>& connection, wire::Message message) {
  if (message.kind != wire::MessageKind::kHello) {
    Reject(connection,
           Error(ErrorCode::kProtocol, "expected a Hello as the first frame, got a " +
                                           std::string(wire::MessageKindName(message.kind)) +
                                           "; the peer must open with a Hello frame"));
    return;
  }
  const wire::Hello& hello = *message.hello;
  if (auto verdict = CheckHello(options.handshake, hello); !verdict) {
    Reject(connection, verdict.error());
    return;
  }
  CancelHandshakeTimer(connection->id());
  const std::uint32_t version =
      std::min({hello.max_protocol_version, options.handshake.max_protocol_version,
                wire::kMaxProtocolVersion});
  const bool lean = version >= wire::kLeanProtocolVersion;
  connection->set_peer_hello(hello);
  connection->set_accept_lean(lean);
  connection->set_max_frame_bytes(options.max_frame_bytes);
  if (hello.role == wire::Role::kClient) {
    connection->set_max_unsent_bytes(options.max_client_unsent_bytes);
  }
  connection->set_protocol_version(lean ? version : 1);
  wire::HelloReply reply = MakeHelloReply(true);
  if (lean) reply.protocol_version = version;
  connection->Send(wire::Message::MakeHelloReply(std::move(reply)));
  log->info("accepted {} '{}' from {} (connection {})", wire::RoleName(hello.role),
            hello.client_name, connection->remote_address(), connection->id());
  if (!gate.Enter()) return;
  handler.OnAccepted(connection);
  gate.Leave();
}

void Server::State::OnProtocolError(const std::shared_ptr<Connection>& connection,
                                    const Error& error) {
  log->warn("closing connection {} from {}: {}", connection->id(), connection->remote_address(),
            error.ToString());
  if (connection->peer_hello() == nullptr) {
    connection->Send(wire::Message::MakeHelloReply(MakeHelloReply(false), error));
  } else {
    wire::Message reply;
    reply.kind = wire::MessageKind::kResponse;
    reply.call_id = 0;  // the offending frame's call id is unknown
    reply.error = error;
    connection->Send(reply);
  }
}

void Server::State::Reject(const std::shared_ptr<Connection>& connection, const Error& error) {
  log->warn("rejected connection {} from {}: {}", connection->id(), connection->remote_address(),
            error.ToString());
  connection->Send(wire::Message::MakeHelloReply(MakeHelloReply(false), error));
  connection->Close();
}

void Server::State::OnClosed(const std::shared_ptr<Connection>& connection) {
  CancelHandshakeTimer(connection->id());
  if (connection->unsent_limit_hit()) slow_clients_closed.fetch_add(1);
  if (connection->peer_hello() != nullptr && gate.Enter()) {
    handler.OnClosed(connection);
    gate.Leave();
  }
  std::lock_guard lock(mutex);
  connections.erase(connection->id());
  if (connections.empty()) all_closed.notify_all();
}

void Server::State::CancelHandshakeTimer(std::uint64_t connection_id) {
  std::shared_ptr<asio::steady_timer> timer;
  {
    std::lock_guard lock(mutex);
    auto it = connections.find(connection_id);
    if (it == connections.end()) return;
    timer = std::move(it->second.handshake_timer);
  }
  if (timer) timer->cancel();
}

wire::HelloReply Server::State::MakeHelloReply(bool accepted) const {
  return wire::HelloReply{.accepted = accepted,
                          .protocol_version = options.handshake.protocol_version,
                          .member_uuid = options.member_uuid,
                          .member_address = options.member_address,
                          .partition_count = options.partition_count};
}

base::Result<std::unique_ptr<Server>> Server::Start(runtime::ShardSet& shards,
                                                    ServerOptions options, RequestHandler& handler,
                                                    std::shared_ptr<spdlog::logger> log) {
  auto state = std::make_shared<State>(shards, std::move(options), handler, std::move(log));
  auto listener = TcpListener::Listen(
      shards, state->options.host, state->options.port,
      // Weak: the listener is owned by state, a strong capture would be a cycle.
      [weak = std::weak_ptr<State>(state)](std::size_t shard, asio::ip::tcp::socket socket) {
        if (auto state = weak.lock()) state->OnAccept(shard, std::move(socket));
      },
      state->log);
  if (!listener) return std::unexpected(listener.error());
  state->listener = std::move(*listener);
  return std::make_unique<Server>(Passkey(), std::move(state));
}

Server::Server(Passkey, std::shared_ptr<State> state) : state_(std::move(state)) {}

Server::~Server() { Stop(); }

std::uint16_t Server::port() const { return state_->listener->port(); }

std::int64_t Server::slow_clients_closed() const { return state_->slow_clients_closed.load(); }

std::size_t Server::connection_count() const {
  std::lock_guard lock(state_->mutex);
  return state_->connections.size();
}

void Server::Stop() {
  std::vector<std::shared_ptr<Connection>> open;
  {
    std::lock_guard lock(state_->mutex);
    if (state_->stopping) return;
    state_->stopping = true;
  }
  state_->listener->Close();  // the accept callback holds state: release it
  {
    std::lock_guard lock(state_->mutex);
    for (auto& [id, entry] : state_->connections) open.push_back(entry.connection);
  }
  for (auto& connection : open) connection->Close();
  open.clear();
  {
    std::unique_lock lock(state_->mutex);
    if (!state_->all_closed.wait_for(lock, kStopWait,
                                     [this] { return state_->connections.empty(); })) {
      state_->log->warn("{} connections did not close within {} s of Stop",
                        state_->connections.size(), kStopWait.count());
    }
  }
  state_->gate.CloseAndWait();
}

}  // namespace tessera::net
