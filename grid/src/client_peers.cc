// Member connections ("peers"): one per member of the current view, opened as the view lists
// it, reopened with backoff while it stays listed, closed when it leaves. Every entry listener
// is registered again on each (re)opened peer (logged); users keep their ids.
#include <algorithm>

#include "client_impl.h"

namespace tessera::grid {

using base::ErrorCode;
using Clock = Client::Impl::Clock;
template <typename T>
using Result = base::Result<T>;

void Client::Impl::UpdatePeers(const std::vector<std::string>& members) {
  std::vector<std::shared_ptr<net::ClientConnection>> to_close;
  std::vector<std::string> to_open;
  {
    std::lock_guard lock(mu);
    if (stopping) return;
    for (auto it = peers.begin(); it != peers.end();) {
      if (std::find(members.begin(), members.end(), it->first) == members.end()) {
        if (it->second.conn) to_close.push_back(it->second.conn);
        log->info("member {} left the cluster view; closing its connection", it->first);
        it = peers.erase(it);
        ++routing_version;
      } else {
        ++it;
      }
    }
    for (const auto& m : members) {
      auto [it, fresh] = peers.try_emplace(m);
      if (fresh) to_open.push_back(m);
    }
  }
  for (auto& conn : to_close) conn->Close();
  for (const auto& m : to_open) ConnectPeer(m);
}

void Client::Impl::ConnectPeer(const std::string& address) {
  auto parsed = ParseMemberAddress(address);
  std::uint64_t generation = 0;
  {
    std::lock_guard lock(mu);
    auto it = peers.find(address);
    if (stopping || it == peers.end() || !parsed) {
      if (!parsed) log->warn("member address '{}' is not host:port; not connecting", address);
      return;
    }
    it->second.connecting = true;
    generation = ++peer_generation;
    it->second.generation = generation;
  }
  std::weak_ptr<Impl> weak = weak_from_this();
  net::ClientConnection::AsyncConnect(
      io, ConnectionOptions(*parsed, address, generation), log,
      [weak, address, generation](Result<std::shared_ptr<net::ClientConnection>> conn) {
        if (auto self = weak.lock()) self->OnPeerConnected(address, generation, std::move(conn));
      });
}

void Client::Impl::OnPeerConnected(const std::string& address, std::uint64_t generation,
                                   Result<std::shared_ptr<net::ClientConnection>> conn) {
  std::vector<std::pair<map::ListenerId, wire::Message>> registrations;
  {
    std::unique_lock lock(mu);
    auto it = peers.find(address);
    if (stopping || it == peers.end() || it->second.generation != generation) {
      lock.unlock();
      if (conn) (*conn)->Close();
      return;
    }
    Peer& peer = it->second;
    peer.connecting = false;
    if (!conn) {
      if (peer.last_error != conn.error().message()) {
        log->warn("cannot connect to member {} ({}); its calls go through {} meanwhile", address,
                  conn.error().message(), connection ? connection->address() : "another member");
      }
      peer.last_error = conn.error().message();
      auto delay = peer.backoff;
      peer.backoff = std::min(peer.backoff * 2, std::chrono::milliseconds(2000));
      lock.unlock();
      connected_cv.notify_all();
      RetryPeerAfter(address, delay);
      return;
    }
    if (!peer.last_error.empty()) log->info("member {} reachable again", address);
    peer.last_error.clear();
    peer.backoff = std::chrono::milliseconds(100);
    peer.conn = *conn;
    ++routing_version;
    peer.server_ids.clear();
    peer.refused.clear();
    for (auto& [id, entry] : listeners) {
      peer.server_ids[id] = 0;
      registrations.emplace_back(id, AddListenerMessage(entry));
    }
  }
  connected_cv.notify_all();
  if (registrations.empty()) return;
  log->info("registering {} entry listener(s) on member {}", registrations.size(), address);
  std::weak_ptr<Impl> weak = weak_from_this();
  for (auto& [id, message] : registrations) {
    (*conn)->Call(std::move(message), options.call_timeout,
                  [weak, address, generation, id = id](Result<wire::Message> r) {
                    if (auto self = weak.lock()) {
                      self->OnRegistered(address, generation, id, ServerIdOf(std::move(r)));
                    }
                  });
  }
}

void Client::Impl::RetryPeerAfter(const std::string& address, std::chrono::milliseconds delay) {
  auto timer = std::make_shared<boost::asio::steady_timer>(io, delay);
  std::weak_ptr<Impl> weak = weak_from_this();
  timer->async_wait([weak, timer, address](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->ConnectPeer(address);
  });
}

void Client::Impl::OnPeerClosed(const std::string& address, std::uint64_t generation,
                                const base::Error& reason) {
  {
    std::lock_guard lock(mu);
    auto it = peers.find(address);
    if (stopping || it == peers.end() || it->second.generation != generation) return;
    it->second.conn.reset();
    ++routing_version;
    it->second.server_ids.clear();
    it->second.refused.clear();
    if (it->second.connecting) return;
  }
  connected_cv.notify_all();  // registrations on it are over
  log->warn("connection to member {} lost ({}); reconnecting while it is listed", address,
            reason.message());
  RetryPeerAfter(address, std::chrono::milliseconds(100));
}

void Client::Impl::WaitForPeers(Clock::time_point deadline) {
  std::unique_lock lock(mu);
  connected_cv.wait_until(lock, deadline, [this] {
    if (stopping) return true;
    return std::none_of(peers.begin(), peers.end(),
                        [](const auto& p) { return p.second.connecting; });
  });
}

}  // namespace tessera::grid
