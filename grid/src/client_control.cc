// The control connection: one connection, to one of the configured addresses or any member the
// last view listed, that subscribes to that member's cluster view (member list + partition
// table, pushed on every change). A background reconnect loop (timers on the I/O thread) is
// the only thing that reopens it; calls made while it is down wait for it, bounded by their
// timeout (Current). Whole-map calls, and keyed calls whose owner is unknown or unreachable,
// go over it (its member forwards or fans out and merges).
#include <algorithm>

#include "client_impl.h"
#include "native_protocol.h"
#include "tessera/map/map_codec.h"
#include "tessera/membership/cluster_message.h"

namespace tessera::grid {

using base::ErrorCode;
using Clock = Client::Impl::Clock;
template <typename T>
using Result = base::Result<T>;

net::ClientOptions Client::Impl::ConnectionOptions(const Address& address, const std::string& peer,
                                                   std::uint64_t generation) {
  net::ClientOptions o;
  o.host = address.host;
  o.port = address.port;
  o.connect_timeout = options.connect_timeout;
  o.hello.cluster_name = options.cluster_name;
  o.hello.secret = options.secret;
  o.hello.client_name = options.client_name;
  o.hello.role = wire::Role::kClient;
  o.hello.max_protocol_version = options.max_protocol_version;
  o.max_frame_bytes = options.max_frame_bytes;
  o.operation_name = [](wire::Service service, std::uint16_t op) {
    if (service == wire::Service::kMap && op < 100) {
      return "map." + std::string(map::MapOpName(static_cast<map::MapOp>(op)));
    }
    return wire::ServiceName(service) + ".op" + std::to_string(op);
  };
  std::weak_ptr<Impl> weak = weak_from_this();
  if (peer.empty()) {
    o.on_event = [weak](wire::Message event) {
      if (auto self = weak.lock()) self->OnControlEvent(std::move(event));
    };
    o.on_closed = [weak](const base::Error& reason) {
      if (auto self = weak.lock()) self->OnClosed(reason);
    };
  } else {
    o.on_event = [weak, peer](wire::Message event) {
      if (auto self = weak.lock()) self->OnPeerEvent(peer, std::move(event));
    };
    o.on_closed = [weak, peer, generation](const base::Error& reason) {
      if (auto self = weak.lock()) self->OnPeerClosed(peer, generation, reason);
    };
  }
  return o;
}

Result<void> Client::Impl::ConnectFirst() {
  std::optional<base::Error> last;
  for (std::size_t i = 0; i < addresses.size(); ++i) {
    auto conn = net::ClientConnection::Connect(io, ConnectionOptions(addresses[i]), log);
    if (conn) {
      Adopt(*conn, i, /*blocking=*/true);
      return {};
    }
    last = conn.error();
  }
  return std::unexpected(*last);
}

void Client::Impl::Adopt(std::shared_ptr<net::ClientConnection> conn, std::size_t address_index,
                         bool blocking) {
  {
    std::lock_guard lock(mu);
    connection = conn;
    next_address = address_index;
    partitioner.emplace(
        static_cast<std::uint32_t>(std::max<std::int32_t>(1, conn->hello_reply().partition_count)));
    reconnect_backoff = std::chrono::milliseconds(50);
    view_version = {0, 0};  // maybe another cluster incarnation: take its view as it is
  }
  connected_cv.notify_all();
  SubscribeView(conn, blocking);
  RegisterTopicListeners(conn);
}

void Client::Impl::SubscribeView(const std::shared_ptr<net::ClientConnection>& conn,
                                 bool blocking) {
  auto request =
      wire::Message::MakeRequest(0, -1, wire::Service::kCluster, native::kClusterViewSubscribe, "");
  if (blocking) {
    auto reply = conn->CallSync(std::move(request), options.call_timeout);
    OnViewReply(conn, std::move(reply));
    WaitForPeers(Clock::now() + options.connect_timeout);
    return;
  }
  std::weak_ptr<Impl> weak = weak_from_this();
  conn->Call(std::move(request), options.call_timeout, [weak, conn](Result<wire::Message> reply) {
    if (auto self = weak.lock()) self->OnViewReply(conn, std::move(reply));
  });
}

void Client::Impl::OnViewReply(const std::shared_ptr<net::ClientConnection>& conn,
                               Result<wire::Message> reply) {
  const ViewUpdate update = reply ? ApplyView(reply->payload) : ViewUpdate::kNotAView;
  if (update == ViewUpdate::kApplied) return;
  // No view yet: the connected member alone is known (and gets the entry listeners) until
  // its view event arrives.
  if (update == ViewUpdate::kNoMembers) {
    log->debug("{} has not formed its first view yet; sending every call through it",
               conn->address());
  } else {
    log->warn("no cluster view from {} ({}); sending every call through it", conn->address(),
              reply ? "undecodable" : reply.error().message());
  }
  UpdatePeers({conn->address()});
}

void Client::Impl::OnControlEvent(wire::Message event) {
  if (event.service == wire::Service::kCluster && event.op == native::kClusterViewEvent) {
    ApplyView(event.payload);
  } else if (event.service == wire::Service::kTopic && event.op == native::kTopicEvent) {
    OnTopicEvent(event.payload);
  }
}

Client::Impl::ViewUpdate Client::Impl::ApplyView(const std::string& payload) {
  auto message = membership::DecodeClusterMessage(payload);
  if (!message || !message->view) return ViewUpdate::kNotAView;
  const membership::ClusterView& view = *message->view;
  if (view.members.members.empty()) return ViewUpdate::kNoMembers;
  std::unordered_map<std::string, std::string> address_of;
  std::vector<std::string> members;
  for (const auto& m : view.members.members) {
    address_of[m.uuid] = m.address;
    members.push_back(m.address);
  }
  std::vector<std::string> owners(view.partitions.partition_count());
  for (std::uint32_t p = 0; p < owners.size(); ++p) {
    auto it = address_of.find(view.partitions.Owner(p));
    if (it != address_of.end()) owners[p] = it->second;
  }
  {
    std::lock_guard lock(mu);
    // A new master (a failover, a merge, or a restarted cluster after a reconnect), even in a
    // view this client does not install: reservations made through it are checked again.
    const std::string& master = view.members.members.front().uuid;
    if (!view_master.empty() && view_master != master) {
      cluster_epoch.fetch_add(1, std::memory_order_acq_rel);
    }
    view_master = master;
    std::pair<std::int64_t, std::int64_t> version{view.members.version, view.partitions.version};
    if (version < view_version) return ViewUpdate::kApplied;
    view_version = version;
    if (!partitioner || owners.size() != partitioner->partition_count()) owners.clear();
    owner_of = std::move(owners);
    ++routing_version;
    view_members = members;
    view_addresses.clear();
    for (const auto& a : members) {
      if (auto parsed = ParseMemberAddress(a)) view_addresses.push_back(*parsed);
    }
  }
  UpdatePeers(members);
  return ViewUpdate::kApplied;
}

void Client::Impl::OnClosed(const base::Error& reason) {
  {
    std::lock_guard lock(mu);
    if (stopping) return;
    connection.reset();
  }
  log->warn("connection to the member lost ({}); reconnecting", reason.message());
  ScheduleReconnect();
}

void Client::Impl::ScheduleReconnect() {
  std::chrono::milliseconds delay;
  {
    std::lock_guard lock(mu);
    if (stopping) return;
    delay = reconnect_backoff;
    reconnect_backoff = std::min(reconnect_backoff * 2, std::chrono::milliseconds(1000));
  }
  reconnect_timer.expires_after(delay);
  std::weak_ptr<Impl> weak = weak_from_this();
  reconnect_timer.async_wait([weak](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->TryReconnect();
  });
}

void Client::Impl::TryReconnect() {
  Address target;
  std::size_t index;
  {
    std::lock_guard lock(mu);
    if (stopping) return;
    std::vector<Address> candidates = addresses;
    for (const auto& a : view_addresses) {
      bool known = std::any_of(candidates.begin(), candidates.end(), [&](const Address& c) {
        return c.host == a.host && c.port == a.port;
      });
      if (!known) candidates.push_back(a);
    }
    index = next_address % candidates.size();
    next_address = index + 1;
    target = candidates[index];
  }
  std::weak_ptr<Impl> weak = weak_from_this();
  net::ClientConnection::AsyncConnect(
      io, ConnectionOptions(target), log,
      [weak, index, target](Result<std::shared_ptr<net::ClientConnection>> conn) {
        auto self = weak.lock();
        if (!self) return;
        if (!conn) {
          self->log->debug("reconnect to {}:{} failed: {}", target.host, target.port,
                           conn.error().message());
          self->ScheduleReconnect();
          return;
        }
        self->log->info("reconnected to {}", (*conn)->address());
        self->Adopt(std::move(*conn), index + 1, /*blocking=*/false);
      });
}

Result<std::shared_ptr<net::ClientConnection>> Client::Impl::Current(Clock::time_point deadline) {
  std::unique_lock lock(mu);
  auto ready = [this] { return stopping || (connection && connection->is_open()); };
  if (!ready() && !io.get_executor().running_in_this_thread()) {
    connected_cv.wait_until(lock, deadline, ready);
  }
  if (stopping) return base::Fail(ErrorCode::kShuttingDown, "the client is shut down");
  if (!connection || !connection->is_open()) {
    return base::Fail(ErrorCode::kConnectionFailed,
                      "not connected to any member of " + AddressList() +
                          "; is grid-node running? (the client keeps reconnecting)");
  }
  return connection;
}

std::string Client::Impl::AddressList() const {
  std::string out;
  for (const auto& a : addresses) {
    if (!out.empty()) out += ",";
    out += a.host + ":" + std::to_string(a.port);
  }
  return out;
}

}  // namespace tessera::grid
