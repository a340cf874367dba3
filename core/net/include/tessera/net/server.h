#pragma once
// Server: the member side of the native protocol. A TcpListener spreads accepted connections
// over the shards; each connection must open with a Hello that passes the HandshakePolicy,
// then every Request frame is handed to the RequestHandler on the connection's shard.
//
// Bad input never takes the server down: a malformed, oversized or unknown frame, or a request
// before the hello, gets an error reply where possible (a HelloReply before the handshake, a
// Response with call id 0 after it), a log line, and that one connection is closed.

#include <utility>  // before Asio's awaitable header (Boost 1.74)

#include <spdlog/logger.h>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "tessera/base/error.h"
#include "tessera/net/connection.h"
#include "tessera/runtime/shard_set.h"
#include "tessera/wire/message.h"

namespace tessera::net {

// Receives the requests of handshaken connections.
// Shard: every method runs on the connection's shard (connection->shard()); a handler may
// reply from any thread with connection->Send(wire::Message::MakeResponse(request, ...)).
class RequestHandler {
 public:
  virtual ~RequestHandler() = default;
  // The peer passed the handshake; `connection->peer_hello()` says who it is.
  virtual void OnAccepted(const std::shared_ptr<Connection>& connection) { (void)connection; }
  // A Request frame. Must be answered with exactly one Response carrying request.call_id.
  virtual void OnRequest(const std::shared_ptr<Connection>& connection, wire::Message request) = 0;
  // The frames (any kind) one read of a handshaken connection delivered, before they come
  // to OnRequest/OnEvent one by one: a hint (see Connection::BatchHandler). Ignored by default.
  virtual void BeforeFrames(const std::shared_ptr<Connection>& connection,
                            std::span<const wire::Message> frames) {
    (void)connection;
    (void)frames;
  }
  // An Event frame from the peer (member<->member pushes). Ignored by default.
  virtual void OnEvent(const std::shared_ptr<Connection>& connection, wire::Message event) {
    (void)connection;
    (void)event;
  }
  // A handshaken connection closed; called once, after which it sends nothing more.
  virtual void OnClosed(const std::shared_ptr<Connection>& connection) { (void)connection; }
};

// Who may connect. Value type.
struct HandshakePolicy {
  std::string cluster_name = "dev";
  std::string secret;  // empty: no secret required (a client's secret must then be empty too)
  std::uint32_t protocol_version = wire::kProtocolVersion;
  // The highest version served: a hello offering kLeanProtocolVersion or later
  // (max_protocol_version) is answered with the lower of its offer and this, and its
  // connection may use lean frames. 1 turns lean frames off.
  std::uint32_t max_protocol_version = wire::kMaxProtocolVersion;
  bool accept_members = true;
  bool accept_clients = true;
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;  // 0 = ephemeral; read the bound port with Server::port()
  HandshakePolicy handshake;
  std::size_t max_frame_bytes = wire::kDefaultMaxFrameBytes;
  // The largest first frame (the Hello) of a connection: a peer that has not been accepted
  // cannot make the member buffer more (a larger frame is refused at its header and the
  // connection closed). A Hello is well under 1 KiB.
  std::size_t max_hello_bytes = 64 * 1024;
  // The most bytes of replies and events that may wait unwritten for a client (role client)
  // that does not read them; past it the connection is closed, logged and counted
  // (slow_clients_closed). 0 = no limit. Member connections have none (their traffic is
  // acknowledged or chunked by the protocols on top).
  std::size_t max_client_unsent_bytes = 64 * 1024 * 1024;
  // A connection that has not completed the hello within this time is closed.
  std::chrono::milliseconds handshake_timeout{10000};
  // Sent in every accepted HelloReply (accepted/protocol_version are filled in by the server).
  std::string member_uuid;
  std::string member_address;  // advertised "host:port"
  std::int32_t partition_count = 0;
};

// Thread-safety: Start/Stop from a non-shard thread; port() and connection_count() from any.
class Server {
 public:
  // Listens on options.host:options.port and starts serving.
  // Errors: those of TcpListener::Listen (kBadRequest, kConnectionFailed).
  // REQUIRES: shards are started; `shards` and `handler` outlive the server (until Stop
  // returns).
  static base::Result<std::unique_ptr<Server>> Start(runtime::ShardSet& shards,
                                                     ServerOptions options, RequestHandler& handler,
                                                     std::shared_ptr<spdlog::logger> log);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  std::uint16_t port() const;
  // Open connections, handshaken or not.
  std::size_t connection_count() const;
  // Client connections closed because they did not read (max_client_unsent_bytes).
  std::int64_t slow_clients_closed() const;

  // Stops accepting, closes every connection and waits (up to a few seconds) until each has
  // reported OnClosed; afterwards the handler is never called again. Idempotent; also run by
  // the destructor. REQUIRES: not on a shard thread; shards still running.
  void Stop();

  struct State;  // shared with the shards' callbacks; private to server.cc
  class Passkey {
    friend class Server;
    Passkey() = default;
  };
  // Internal: use Start().
  Server(Passkey, std::shared_ptr<State> state);

 private:
  std::shared_ptr<State> state_;
};

}  // namespace tessera::net
