// MembershipService design: one thread runs an io_context that owns everything cluster-related
// on this member: the Membership state machine, a tick timer, and TcpTransport's connections.
// Nothing here touches the shards. Deliver() posts to the loop; the accessors read a snapshot
// the loop publishes after every step, so readers never wait for the loop.
#include "tessera/membership/membership_service.h"

#include <utility>  // before Asio's awaitable header (Boost 1.74)

#include <spdlog/spdlog.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <map>

#include "tessera/net/client_connection.h"
#include "tessera/wire/message.h"

namespace tessera::membership {
namespace {

// Sends each message as a request on a member-role connection to the target, opened on first
// use and reopened after a loss. While a connection is being opened messages queue (a few;
// older ones are dropped: the protocol resends what matters on the next round).
class TcpTransport final : public Transport {
 public:
  static constexpr std::size_t kMaxQueued = 16;
  static constexpr std::chrono::milliseconds kCallTimeout{5000};
  // A member that rejected our hello (other cluster name or secret, other protocol version) is
  // not dialled again for this long: its settings will hardly change, and each attempt costs a
  // log line on both sides.
  static constexpr std::chrono::seconds kRefusedBackoff{30};

  TcpTransport(boost::asio::io_context& io, const MemberInfo& self,
               const MembershipServiceOptions& options, std::shared_ptr<spdlog::logger> log)
      : io_(io), log_(std::move(log)) {
    client_.hello.cluster_name = options.membership.settings.cluster_name;
    client_.hello.role = wire::Role::kMember;
    client_.hello.secret = options.secret;
    client_.hello.client_name = self.address;
    client_.max_frame_bytes = options.max_frame_bytes;
    client_.connect_timeout = std::chrono::milliseconds(
        std::max<base::Millis>(200, options.membership.heartbeat_interval_ms));
  }

  void Send(const std::string& address, const ClusterMessage& message) override {
    Peer& peer = peers_[address];
    std::string payload = EncodeClusterMessage(message);
    if (peer.connection && peer.connection->is_open()) {
      Call(address, peer, std::move(payload));
      return;
    }
    if (std::chrono::steady_clock::now() < peer.refused_until) return;  // see kRefusedBackoff
    if (peer.queue.size() == kMaxQueued) peer.queue.pop_front();
    peer.queue.push_back(std::move(payload));
    if (!peer.connecting) Connect(address);
  }

  void CloseAll() {
    for (auto& [address, peer] : peers_) {
      if (peer.connection) peer.connection->Close();
    }
    peers_.clear();
  }

 private:
  struct Peer {
    std::shared_ptr<net::ClientConnection> connection;
    bool connecting = false;
    std::deque<std::string> queue;
    std::string last_error;  // logged once until the next success
    std::chrono::steady_clock::time_point refused_until;
  };

  void Connect(const std::string& address) {
    Peer& peer = peers_[address];
    auto colon = address.rfind(':');
    unsigned port = 0;
    if (colon == std::string::npos || std::sscanf(address.c_str() + colon + 1, "%u", &port) != 1 ||
        port == 0 || port > 65535) {
      ReportError(peer, address, "not a host:port address");
      peer.queue.clear();
      return;
    }
    net::ClientOptions options = client_;
    options.host = address.substr(0, colon);
    options.port = static_cast<std::uint16_t>(port);
    peer.connecting = true;
    net::ClientConnection::AsyncConnect(
        io_, std::move(options), log_,
        [this, address](base::Result<std::shared_ptr<net::ClientConnection>> result) {
          auto it = peers_.find(address);
          if (it == peers_.end()) {
            if (result) (*result)->Close();
            return;  // closed meanwhile
          }
          Peer& p = it->second;
          p.connecting = false;
          if (!result) {
            ReportError(p, address, result.error().ToString());
            p.queue.clear();
            const auto code = result.error().code();
            if (code == base::ErrorCode::kAuthFailed || code == base::ErrorCode::kProtocol) {
              p.refused_until = std::chrono::steady_clock::now() + kRefusedBackoff;
            }
            return;
          }
          if (!p.last_error.empty()) log_->info("member at {} reachable again", address);
          p.last_error.clear();
          p.connection = std::move(*result);
          while (!p.queue.empty()) {
            Call(address, p, std::move(p.queue.front()));
            p.queue.pop_front();
          }
        });
  }

  void Call(const std::string& address, Peer& peer, std::string payload) {
    auto request = wire::Message::MakeRequest(0, -1, wire::Service::kCluster, kClusterMessageOp,
                                              std::move(payload));
    peer.connection->Call(
        std::move(request), kCallTimeout, [log = log_, address](base::Result<wire::Message> reply) {
          if (!reply) {
            log->debug("cluster message to {} failed: {}", address, reply.error().ToString());
          }
        });
  }

  void ReportError(Peer& peer, const std::string& address, const std::string& error) {
    if (peer.last_error == error) return;
    peer.last_error = error;
    log_->warn("cannot reach member at {}: {}", address, error);
  }

  boost::asio::io_context& io_;
  std::shared_ptr<spdlog::logger> log_;
  net::ClientOptions client_;
  std::map<std::string, Peer> peers_;
};

}  // namespace

struct MembershipService::Loop {
  Loop(const MemberInfo& self, MembershipServiceOptions options, const base::Clock& clock,
       std::shared_ptr<spdlog::logger> log)
      : work(io.get_executor()),
        tick_timer(io),
        tick(std::chrono::milliseconds(
            std::clamp<base::Millis>(options.membership.heartbeat_interval_ms / 10, 10, 100))),
        transport(io, self, options, log),
        membership(self, options.membership, transport, clock, log) {}

  boost::asio::io_context io{1};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work;
  boost::asio::steady_timer tick_timer;
  std::chrono::milliseconds tick;
  TcpTransport transport;
  Membership membership;
};

MembershipService::MembershipService(MemberInfo self, MembershipServiceOptions options,
                                     const base::Clock& clock, std::shared_ptr<spdlog::logger> log)
    : self_(std::move(self)),
      log_(std::move(log)),
      loop_(std::make_unique<Loop>(self_, std::move(options), clock, log_)),
      view_(std::make_shared<const ClusterView>()) {}

MembershipService::~MembershipService() { Stop(); }

void MembershipService::set_view_listener(std::function<void(const ClusterView&)> listener) {
  on_view_ = std::move(listener);
}

void MembershipService::Start() {
  started_ = true;
  loop_->membership.set_view_listener([this](const ClusterView& view) {
    {
      std::lock_guard lock(mu_);
      view_ = std::make_shared<const ClusterView>(view);
    }
    if (on_view_) on_view_(view);
  });
  boost::asio::post(loop_->io, [this] {
    loop_->membership.Start();
    Publish();
    ArmTick();
  });
  thread_ = std::thread([this] { loop_->io.run(); });
}

void MembershipService::ArmTick() {
  loop_->tick_timer.expires_after(loop_->tick);
  loop_->tick_timer.async_wait([this](const boost::system::error_code& error) {
    if (error || stopped_loop_) return;
    loop_->membership.Tick();
    Publish();
    ArmTick();
  });
}

void MembershipService::Deliver(std::string bytes) {
  boost::asio::post(loop_->io, [this, bytes = std::move(bytes)] {
    auto message = DecodeClusterMessage(bytes);
    if (!message) {
      log_->warn("dropped a cluster message: {}", message.error().ToString());
      return;
    }
    loop_->membership.OnMessage(*message);
    Publish();
  });
}

bool MembershipService::Leave(std::chrono::milliseconds timeout) {
  if (!started_ || stopped_) return false;
  boost::asio::post(loop_->io, [this] {
    loop_->membership.Leave();
    Publish();
  });
  std::unique_lock lock(mu_);
  return changed_.wait_for(lock, timeout, [this] { return state_.load() == MemberState::kLeft; });
}

void MembershipService::Stop() {
  if (!started_ || stopped_) return;
  stopped_ = true;
  boost::asio::post(loop_->io, [this] {
    stopped_loop_ = true;
    loop_->tick_timer.cancel();
    loop_->transport.CloseAll();
  });
  loop_->work.reset();
  // Give the closes a moment to run, then stop whatever is still pending.
  boost::asio::post(loop_->io, [this] { loop_->io.stop(); });
  thread_.join();
}

std::shared_ptr<const ClusterView> MembershipService::view() const {
  std::lock_guard lock(mu_);
  return view_;
}

void MembershipService::Publish() {
  {
    std::lock_guard lock(mu_);
    state_.store(loop_->membership.state());
    master_.store(loop_->membership.is_master());
  }
  changed_.notify_all();
}

}  // namespace tessera::membership
