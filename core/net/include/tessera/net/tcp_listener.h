#pragma once
// TcpListener: the accept side of every TCP endpoint (native protocol, RESP, HTTP). It owns one
// listening socket and hands each accepted connection to a shard, round-robin, so connection
// handling spreads over the shard threads.

#include <utility>  // before Asio's awaitable header (Boost 1.74)

#include <spdlog/logger.h>
#include <boost/asio/ip/tcp.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tessera/base/error.h"
#include "tessera/runtime/shard_set.h"

namespace tessera::net {

// Accepts TCP connections on one address and hands each socket to a shard, round-robin.
// The acceptor itself runs on shard 0's io_context.
// Thread-safety: Listen/Close from any non-shard thread; on_accept runs on the target shard.
class TcpListener {
 public:
  using OnAccept = std::function<void(std::size_t shard, boost::asio::ip::tcp::socket socket)>;

  // Binds host:port (port 0 = ephemeral) with SO_REUSEADDR and starts accepting. The accepted
  // socket belongs to shard's io_context and has TCP_NODELAY set. `host` is a numeric IPv4/IPv6
  // address ("localhost" is taken as 127.0.0.1).
  // Accept errors (EMFILE, ENFILE, ...) are logged and accepting resumes after a short delay.
  // Errors: kBadRequest for an unparsable host; kConnectionFailed when the address cannot be
  // bound, e.g. "cannot listen on 127.0.0.1:6379: address already in use; pick another port
  // with --port".
  // REQUIRES: `shards` outlives the listener; shards are started (otherwise nothing is
  // accepted until they are).
  static base::Result<std::unique_ptr<TcpListener>> Listen(runtime::ShardSet& shards,
                                                           const std::string& host,
                                                           std::uint16_t port, OnAccept on_accept,
                                                           std::shared_ptr<spdlog::logger> log);

  ~TcpListener();
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  // The bound port (the ephemeral one when Listen was given 0).
  std::uint16_t port() const;

  // Stops accepting and closes the listening socket; sockets accepted but not yet handed to
  // on_accept are dropped. Idempotent; also run by the destructor.
  void Close();

  struct State;  // shared with in-flight accept handlers; private to tcp_listener.cc
  class Passkey {
    friend class TcpListener;
    Passkey() = default;
  };
  // Internal: use Listen().
  TcpListener(Passkey, std::shared_ptr<State> state);

 private:
  std::shared_ptr<State> state_;
};

}  // namespace tessera::net
