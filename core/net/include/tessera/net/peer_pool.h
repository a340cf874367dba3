#pragma once
// PeerPool: calls to other members by address, over one member-role ClientConnection per
// address, opened on first use and reopened after a loss. Calls made while a connection is
// being opened wait for it (a bounded number; beyond that the oldest fail); when opening fails
// they fail with its error.
//
// Thread-safety: Call and CloseAll are safe from any thread; callbacks run on the io_context's
// thread. REQUIRES: `io` outlives the pool and runs on one thread.

#include <utility>  // before Asio's awaitable header (Boost 1.74)

#include <spdlog/logger.h>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "tessera/net/client_connection.h"

namespace tessera::net {

// Fault injection for tests and chaos runs: the addresses a member must not reach, as if the
// network between them were cut. Every PeerPool of the member that holds it fails calls to
// them at once (kConnectionFailed) and closes its connections to them. Cutting both directions
// takes a block on each side. Thread-safe.
class PeerBlocklist {
 public:
  void Set(std::set<std::string> addresses) {
    std::lock_guard lock(mu_);
    blocked_ = std::move(addresses);
    any_.store(!blocked_.empty(), std::memory_order_release);
  }
  std::set<std::string> Get() const {
    std::lock_guard lock(mu_);
    return blocked_;
  }
  bool Contains(const std::string& address) const {
    if (!any_.load(std::memory_order_acquire)) return false;
    std::lock_guard lock(mu_);
    return blocked_.count(address) != 0;
  }

 private:
  mutable std::mutex mu_;
  std::set<std::string> blocked_;  // guarded by mu_
  std::atomic<bool> any_{false};
};

class PeerPool : public std::enable_shared_from_this<PeerPool> {
 public:
  // Calls waiting for one connection to open; beyond this the oldest fails (kOverloaded).
  static constexpr std::size_t kMaxWaiting = 4096;
  // A peer that rejected our Hello (other cluster name, secret or protocol version) is not
  // dialled again for this long: its settings will hardly change, and every attempt costs a
  // log line on both sides. Calls to it fail at once meanwhile.
  static constexpr std::chrono::seconds kRefusedBackoff{30};

  // `hello` is sent on every connection (role member). `connect_timeout` bounds each dial.
  static std::shared_ptr<PeerPool> Create(boost::asio::io_context& io, wire::Hello hello,
                                          std::chrono::milliseconds connect_timeout,
                                          std::size_t max_frame_bytes,
                                          std::shared_ptr<spdlog::logger> log);

  // Calls `address` ("host:port"); `done` runs once (see ClientConnection::Call for errors;
  // plus kBadRequest for an unparsable address and the dial's error when it cannot connect).
  void Call(const std::string& address, wire::Message request, std::chrono::milliseconds timeout,
            ClientConnection::CallCallback done);
  // Closes every connection; later calls open new ones.
  void CloseAll();
  // Calls to the addresses `blocklist` holds fail (see PeerBlocklist). REQUIRES: before the
  // first Call.
  void set_blocklist(std::shared_ptr<const PeerBlocklist> blocklist) {
    blocklist_ = std::move(blocklist);
  }

  class Passkey {
    friend class PeerPool;
    Passkey() = default;
  };
  PeerPool(Passkey, boost::asio::io_context& io, ClientOptions options,
           std::shared_ptr<spdlog::logger> log);

 private:
  struct Waiting {
    wire::Message request;
    std::chrono::milliseconds timeout;
    ClientConnection::CallCallback done;
  };
  struct Peer {
    std::shared_ptr<ClientConnection> connection;
    bool connecting = false;
    std::deque<Waiting> waiting;
    std::string last_error;  // logged once until the next success
    std::chrono::steady_clock::time_point refused_until;
  };
  void CallOnIo(const std::string& address, Waiting call);
  void Connect(const std::string& address, Peer& peer);
  void OnConnected(const std::string& address,
                   base::Result<std::shared_ptr<ClientConnection>> result);

  boost::asio::io_context& io_;
  const ClientOptions options_;
  std::shared_ptr<spdlog::logger> log_;
  std::map<std::string, Peer> peers_;  // io thread only
  std::shared_ptr<const PeerBlocklist> blocklist_;
};

}  // namespace tessera::net
