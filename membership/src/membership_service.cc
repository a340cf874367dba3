// MembershipService design: one thread runs an io_context that owns everything cluster-related
// on this member: the Membership state machine, a tick timer, and TcpTransport's connections.
// Nothing here touches the shards. Deliver() posts to the loop; the accessors read a snapshot
// the loop publishes after every step, so readers never wait for the loop.
#include "tessera/membership/membership_service.h"

#include <future>  // before Asio's awaitable header (Boost 1.74)
#include <utility>

#include <spdlog/spdlog.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "tessera/net/peer_pool.h"
#include "tessera/wire/message.h"

namespace tessera::membership {
namespace {

// Sends each message as a request on the member-role connection PeerPool keeps to the target.
// Failures are only logged (by the pool, once per peer): the protocol resends what matters.
class TcpTransport final : public Transport {
 public:
  static constexpr std::chrono::milliseconds kCallTimeout{5000};

  TcpTransport(boost::asio::io_context& io, const MemberInfo& self,
               const MembershipServiceOptions& options, std::shared_ptr<spdlog::logger> log)
      : log_(log) {
    wire::Hello hello;
    hello.cluster_name = options.membership.settings.cluster_name;
    hello.role = wire::Role::kMember;
    hello.secret = options.secret;
    hello.client_name = self.address;
    auto connect_timeout = std::chrono::milliseconds(
        std::max<base::Millis>(200, options.membership.heartbeat_interval_ms));
    pool_ = net::PeerPool::Create(io, std::move(hello), connect_timeout, options.max_frame_bytes,
                                  std::move(log));
    pool_->set_blocklist(options.blocklist);
  }

  void Send(const std::string& address, const ClusterMessage& message) override {
    auto request = wire::Message::MakeRequest(0, -1, wire::Service::kCluster, kClusterMessageOp,
                                              EncodeClusterMessage(message));
    pool_->Call(address, std::move(request), kCallTimeout,
                [log = log_, address](base::Result<wire::Message> reply) {
                  if (!reply) {
                    log->debug("cluster message to {} failed: {}", address,
                               reply.error().ToString());
                  }
                });
  }

  void CloseAll() { pool_->CloseAll(); }

 private:
  std::shared_ptr<spdlog::logger> log_;
  std::shared_ptr<net::PeerPool> pool_;
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

void MembershipService::set_rejoin_listener(Membership::RejoinListener listener) {
  loop_->membership.set_rejoin_listener(std::move(listener));
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

base::Result<std::string> MembershipService::ForceRecovery() {
  auto done = std::make_shared<std::promise<base::Result<std::string>>>();
  auto answer = done->get_future();
  boost::asio::post(loop_->io, [this, done] {
    done->set_value(loop_->membership.ForceRecovery());
    Publish();
  });
  if (answer.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    return base::Fail(base::ErrorCode::kTimeout,
                      "the membership did not answer within 5 s; try again");
  }
  return answer.get();
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
    last_pause_ms_.store(loop_->membership.last_pause_ms());
    pauses_.store(loop_->membership.pauses());
    rejoins_.store(loop_->membership.rejoins());
    if (peer_reports_ != loop_->membership.peer_reports()) {
      peer_reports_ = loop_->membership.peer_reports();
    }
    if (recovery_status_ != loop_->membership.recovery_status()) {
      recovery_status_ = loop_->membership.recovery_status();
    }
  }
  changed_.notify_all();
}

std::string MembershipService::recovery_status() const {
  std::lock_guard lock(mu_);
  return recovery_status_;
}

std::map<std::string, PeerReport> MembershipService::peer_reports() const {
  std::lock_guard lock(mu_);
  return peer_reports_;
}

}  // namespace tessera::membership
