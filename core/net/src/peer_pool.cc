#include "tessera/net/peer_pool.h"

#include <boost/asio/post.hpp>
#include <charconv>

namespace tessera::net {

using base::ErrorCode;

std::shared_ptr<PeerPool> PeerPool::Create(boost::asio::io_context& io, wire::Hello hello,
                                           std::chrono::milliseconds connect_timeout,
                                           std::size_t max_frame_bytes,
                                           std::shared_ptr<spdlog::logger> log) {
  ClientOptions options;
  options.hello = std::move(hello);
  options.connect_timeout = connect_timeout;
  options.max_frame_bytes = max_frame_bytes;
  return std::make_shared<PeerPool>(Passkey(), io, std::move(options), std::move(log));
}

PeerPool::PeerPool(Passkey, boost::asio::io_context& io, ClientOptions options,
                   std::shared_ptr<spdlog::logger> log)
    : io_(io), options_(std::move(options)), log_(std::move(log)) {}

void PeerPool::Call(const std::string& address, wire::Message request,
                    std::chrono::milliseconds timeout, ClientConnection::CallCallback done) {
  boost::asio::post(io_, [self = shared_from_this(), address,
                          call = Waiting{std::move(request), timeout, std::move(done)}]() mutable {
    self->CallOnIo(address, std::move(call));
  });
}

void PeerPool::CloseAll() {
  boost::asio::post(io_, [self = shared_from_this()] {
    auto peers = std::move(self->peers_);
    self->peers_.clear();
    for (auto& [address, peer] : peers) {
      if (peer.connection) peer.connection->Close();
      for (auto& w : peer.waiting) {
        w.done(base::Fail(ErrorCode::kShuttingDown, "closing the connections to other members"));
      }
    }
  });
}

void PeerPool::CallOnIo(const std::string& address, Waiting call) {
  if (blocklist_ && blocklist_->Contains(address)) {
    if (auto it = peers_.find(address); it != peers_.end() && it->second.connection) {
      it->second.connection->Close();
      it->second.connection.reset();
    }
    call.done(base::Fail(ErrorCode::kConnectionFailed,
                         "traffic to " + address + " is blocked (fault injection)"));
    return;
  }
  Peer& peer = peers_[address];
  if (peer.connection && peer.connection->is_open()) {
    peer.connection->Call(std::move(call.request), call.timeout, std::move(call.done));
    return;
  }
  if (std::chrono::steady_clock::now() < peer.refused_until) {
    call.done(base::Fail(ErrorCode::kConnectionFailed,
                         "member at " + address + " refused this member: " + peer.last_error));
    return;
  }
  if (peer.waiting.size() == kMaxWaiting) {
    peer.waiting.front().done(base::Fail(ErrorCode::kOverloaded,
                                         "too many calls waiting for a connection to " + address));
    peer.waiting.pop_front();
  }
  peer.waiting.push_back(std::move(call));
  if (!peer.connecting) Connect(address, peer);
}

void PeerPool::Connect(const std::string& address, Peer& peer) {
  auto colon = address.rfind(':');
  unsigned port = 0;
  const char* digits = address.c_str() + (colon == std::string::npos ? 0 : colon + 1);
  auto [end, ec] = std::from_chars(digits, address.c_str() + address.size(), port);
  if (colon == std::string::npos || ec != std::errc() || *end != '\0' || port == 0 ||
      port > 65535) {
    auto waiting = std::move(peer.waiting);
    peer.waiting.clear();
    for (auto& w : waiting) {
      w.done(base::Fail(ErrorCode::kBadRequest,
                        "'" + address + "' is not a member address (host:port)"));
    }
    return;
  }
  ClientOptions options = options_;
  options.host = address.substr(0, colon);
  options.port = static_cast<std::uint16_t>(port);
  peer.connecting = true;
  ClientConnection::AsyncConnect(
      io_, std::move(options), log_,
      [self = shared_from_this(), address](base::Result<std::shared_ptr<ClientConnection>> r) {
        self->OnConnected(address, std::move(r));
      });
}

void PeerPool::OnConnected(const std::string& address,
                           base::Result<std::shared_ptr<ClientConnection>> result) {
  auto it = peers_.find(address);
  if (it == peers_.end()) {  // CloseAll ran meanwhile
    if (result) (*result)->Close();
    return;
  }
  Peer& peer = it->second;
  peer.connecting = false;
  auto waiting = std::move(peer.waiting);
  peer.waiting.clear();
  if (!result) {
    const std::string error = result.error().ToString();
    if (peer.last_error != error) log_->warn("cannot reach member at {}: {}", address, error);
    peer.last_error = error;
    const auto code = result.error().code();
    if (code == ErrorCode::kAuthFailed || code == ErrorCode::kProtocol) {
      peer.refused_until = std::chrono::steady_clock::now() + kRefusedBackoff;
    }
    for (auto& w : waiting) w.done(std::unexpected(result.error()));
    return;
  }
  if (!peer.last_error.empty()) log_->info("member at {} reachable again", address);
  peer.last_error.clear();
  peer.connection = std::move(*result);
  for (auto& w : waiting) {
    peer.connection->Call(std::move(w.request), w.timeout, std::move(w.done));
  }
}

}  // namespace tessera::net
