// Client: the public facade over Client::Impl (client_impl.h), which runs one I/O thread for
// every connection; the control connection and the cluster view, the member connections, map
// calls and listeners each live in a file of their own (see client_impl.h).
#include "tessera/grid/client.h"

#include <charconv>
#include <random>

#include "client_impl.h"
#include "native_protocol.h"
#include "tessera/base/log.h"
#include "tessera/membership/cluster_message.h"
#include "transaction_runner.h"

namespace tessera::grid {

using base::ErrorCode;
using base::Result;
using Clock = Client::Impl::Clock;

Result<MemberAddress> ParseMemberAddress(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return base::Fail(ErrorCode::kBadRequest,
                      "address '" + text + "' is not host:port (e.g. 127.0.0.1:5701)");
  }
  MemberAddress a;
  a.host = text.substr(0, colon);
  unsigned port = 0;
  auto digits = std::string_view(text).substr(colon + 1);
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (ec != std::errc() || end != digits.data() + digits.size() || port == 0 || port > 65535) {
    return base::Fail(ErrorCode::kBadRequest,
                      "address '" + text + "' has no valid port (1-65535) after ':'");
  }
  a.port = static_cast<std::uint16_t>(port);
  return a;
}

std::string NewClientId() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}", rd(), rd());
}

namespace {

std::shared_ptr<spdlog::logger> DefaultLogger() { return base::NamedLogger("client"); }

}  // namespace

std::shared_ptr<ClientLoop> ClientLoop::Start() {
  auto state = std::make_shared<State>();
  state->work.emplace(state->io.get_executor());
  state->thread = std::thread([state] { state->io.run(); });
  return std::make_shared<ClientLoop>(std::move(state));
}

ClientLoop::ClientLoop(std::shared_ptr<State> state) : state_(std::move(state)) {}

ClientLoop::~ClientLoop() { state_->Stop(); }

void ClientLoop::State::Stop() {
  work.reset();
  io.stop();
  if (!thread.joinable()) return;
  if (std::this_thread::get_id() == thread.get_id()) {
    thread.detach();  // stopped from a callback: the thread ends after it
  } else {
    thread.join();
  }
}

Client::Impl::Impl(ClientOptions opts, std::vector<Address> addrs,
                   std::shared_ptr<spdlog::logger> logger)
    : options(std::move(opts)),
      addresses(std::move(addrs)),
      log(std::move(logger)),
      events(log),
      loop(options.loop ? options.loop : ClientLoop::Start()),
      own_loop(!options.loop),
      io(loop->state().io),
      reconnect_timer(io) {
  options.loop.reset();  // held as `loop`
}

void Client::Impl::Stop() {
  std::vector<std::shared_ptr<net::ClientConnection>> conns;
  {
    std::lock_guard lock(mu);
    if (stopping) return;
    stopping = true;
    if (connection) conns.push_back(std::move(connection));
    for (auto& [address, peer] : peers) {
      if (peer.conn) conns.push_back(std::move(peer.conn));
    }
    peers.clear();
    owner_index.clear();
    owner_connections.clear();
    ++routing_version;
  }
  connected_cv.notify_all();
  for (auto& conn : conns) conn->Close();
  // A shared loop outlives this client: nothing posted holds `this`, and calls still pending
  // complete there with an error. A loop of its own stops here, dropping them.
  boost::asio::post(io, [weak = weak_from_this()] {
    if (auto self = weak.lock()) self->reconnect_timer.cancel();
  });
  if (own_loop) loop->state().Stop();
  events.Stop();
  std::map<TopicListenerId, TopicListenerEntry> topics;
  {
    std::lock_guard lock(mu);
    topics = std::move(topic_listeners);
    topic_listeners.clear();
  }
}

Result<std::unique_ptr<Client>> Client::Connect(ClientOptions options,
                                                std::shared_ptr<spdlog::logger> log) {
  if (options.addresses.empty()) {
    return base::Fail(ErrorCode::kBadRequest, "no member address given; pass host:port");
  }
  std::vector<MemberAddress> addresses;
  for (const auto& text : options.addresses) {
    auto a = ParseMemberAddress(text);
    if (!a) return std::unexpected(a.error());
    addresses.push_back(*a);
  }
  auto impl = std::make_shared<Impl>(std::move(options), std::move(addresses),
                                     log ? std::move(log) : DefaultLogger());
  auto connected = impl->ConnectFirst();
  if (!connected) {
    impl->Stop();
    return std::unexpected(connected.error());
  }
  return std::make_unique<Client>(std::move(impl));
}

Client::Client(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Client::~Client() { Shutdown(); }

std::shared_ptr<ReliableTopic> Client::GetReliableTopic(const std::string& name,
                                                        ReliableTopicConfig config) {
  return std::make_shared<ReliableTopic>(name, config, std::static_pointer_cast<Invoker>(impl_),
                                         impl_->publisher_id, impl_->log);
}

std::shared_ptr<Stream> Client::GetStream(const std::string& name, StreamConfig config) {
  return std::make_shared<Stream>(name, std::move(config), std::static_pointer_cast<Invoker>(impl_),
                                  impl_->publisher_id, impl_->log);
}

std::shared_ptr<Topic> Client::GetTopic(const std::string& name) {
  return std::make_shared<Topic>(name, std::static_pointer_cast<TopicBackend>(impl_));
}

base::Result<TransactionResult> Client::Transact(const Transaction& transaction) {
  return RunTransaction(*impl_, transaction);
}

std::shared_ptr<Map> Client::GetMap(const std::string& name) {
  std::lock_guard lock(proxies_mu_);
  auto& proxy = proxies_[name];
  if (!proxy) proxy = std::make_shared<Map>(name, impl_);
  return proxy;
}

void Client::Shutdown() { impl_->Stop(); }

std::uint64_t Client::ClusterEpoch() const {
  return impl_->cluster_epoch.load(std::memory_order_acquire);
}

namespace {
// One blocking call on the client's current connection.
Result<std::string> ClusterCall(Client::Impl& impl, std::uint16_t op,
                                wire::Service service = wire::Service::kCluster,
                                std::string payload = {}) {
  auto conn = impl.Current(Clock::now() + impl.options.call_timeout);
  if (!conn) return std::unexpected(conn.error());
  auto reply = (*conn)->CallSync(wire::Message::MakeRequest(0, -1, service, op, std::move(payload)),
                                 impl.options.call_timeout);
  if (!reply) return std::unexpected(reply.error());
  return std::move(reply->payload);
}
}  // namespace

base::Result<membership::ClusterView> Client::FetchClusterView() {
  auto payload = ClusterCall(*impl_, native::kClusterView);
  if (!payload) return std::unexpected(payload.error());
  auto message = membership::DecodeClusterMessage(*payload);
  if (!message) return std::unexpected(message.error());
  if (!message->view) {
    return base::Fail(ErrorCode::kProtocol,
                      "the member answered the cluster-view request "
                      "without a view; upgrade the member");
  }
  return std::move(*message->view);
}

base::Result<std::string> Client::FetchMemberInfoJson() {
  return ClusterCall(*impl_, native::kClusterInfo);
}

base::Result<std::string> Client::FetchMetricsText() {
  return ClusterCall(*impl_, native::kClusterMetrics);
}

base::Result<std::vector<std::string>> Client::SetBlockedPeers(
    const std::vector<std::string>& addresses) {
  auto reply = ClusterCall(*impl_, native::kClusterFault, wire::Service::kCluster,
                           native::EncodeAddressList(addresses));
  if (!reply) return std::unexpected(reply.error());
  return native::DecodeAddressList(*reply);
}

base::Result<std::string> Client::ForceRecovery() {
  return ClusterCall(*impl_, native::kClusterRecoveryForce);
}

base::Result<std::string> Client::BackupDataDir(const std::string& folder) {
  return ClusterCall(*impl_, native::kClusterBackup, wire::Service::kCluster, folder);
}

base::Result<std::string> Client::FetchTopicStatsJson() {
  return ClusterCall(*impl_, native::kTopicStats, wire::Service::kTopic);
}

std::string Client::connected_address() const {
  std::lock_guard lock(impl_->mu);
  return impl_->connection ? impl_->connection->address() : "";
}

std::uint32_t Client::protocol_version() const {
  std::lock_guard lock(impl_->mu);
  if (!impl_->connection) return 0;
  return impl_->connection->protocol_version();
}

std::vector<std::string> Client::member_addresses() const {
  std::lock_guard lock(impl_->mu);
  return impl_->view_members;
}

std::vector<std::string> Client::connected_members() const {
  std::lock_guard lock(impl_->mu);
  std::vector<std::string> out;
  for (const auto& address : impl_->view_members) {
    auto it = impl_->peers.find(address);
    if (it != impl_->peers.end() && it->second.conn && it->second.conn->is_open()) {
      out.push_back(address);
    }
  }
  return out;
}

}  // namespace tessera::grid
