// Client design: one I/O thread runs every connection.
//   - The control connection (to one of the configured addresses, or any member the last view
//     listed) subscribes to the member's cluster view: member list + partition table, pushed
//     on every change. A background reconnect loop (timers on the I/O thread) is the only
//     thing that reopens it; calls made while it is down wait for it, bounded by their timeout.
//   - One connection per listed member (a "peer"), opened as the view lists it, reopened with
//     backoff while it stays listed, closed when it leaves. A keyed call goes straight to its
//     partition's owner over that member's connection; whole-map calls, and keyed calls whose
//     owner is unknown or unreachable, go over the control connection (its member forwards or
//     fans out and merges).
//   - Entry listeners are registered on every peer (each member reports the events of the
//     partitions it owns), again on every (re)opened peer, logged; users keep their ids.
//
// Retries within the call's timeout: a call never sent (kConnectionFailed), one no member took
// (kNotOwner), and a read whose connection was lost (kMemberLeft; reading twice is harmless).
// A write whose connection was lost is reported as kMemberLeft: it may or may not have been
// applied.
#include "tessera/grid/client.h"

#include <spdlog/spdlog.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/steady_timer.hpp>
#include <charconv>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>

#include "event_executor.h"
#include "listener_queue.h"
#include "native_protocol.h"
#include "tessera/base/log.h"
#include "tessera/map/map_codec.h"
#include "tessera/membership/cluster_message.h"
#include "tessera/net/client_connection.h"
#include "tessera/partition/partitioner.h"
#include "topic_protocol.h"

namespace tessera::grid {

using base::ErrorCode;
using base::Result;
using Clock = std::chrono::steady_clock;

namespace {

struct Address {
  std::string host;
  std::uint16_t port = 0;
};

Result<Address> ParseAddress(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return base::Fail(ErrorCode::kBadRequest,
                      "address '" + text + "' is not host:port (e.g. 127.0.0.1:5701)");
  }
  Address a;
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

bool IsRead(map::MapOp op) {
  switch (op) {
    case map::MapOp::kGet:
    case map::MapOp::kContainsKey:
    case map::MapOp::kGetEntryView:
    case map::MapOp::kGetAll:
    case map::MapOp::kSize:
    case map::MapOp::kQuery:
    case map::MapOp::kStats:
    case map::MapOp::kRingRead:
      return true;
    default:
      return false;
  }
}

std::shared_ptr<spdlog::logger> DefaultLogger() { return base::NamedLogger("client"); }

// A random id naming this client instance as a topic publisher.
std::string NewClientId() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}", rd(), rd());
}

}  // namespace

struct Client::Impl : public Invoker,
                      public TopicBackend,
                      public std::enable_shared_from_this<Client::Impl> {
  struct ListenerEntry {
    std::string map_name;
    map::ListenerOptions options;
    std::shared_ptr<map::EntryListener> listener;
  };
  // A connection to one member of the current view (by its advertised address).
  struct Peer {
    std::shared_ptr<net::ClientConnection> conn;  // open, or null
    bool connecting = false;
    bool wanted = true;            // listed in the current view
    std::uint64_t generation = 0;  // of the connection attempt `conn` came from
    std::chrono::milliseconds backoff{100};
    std::string last_error;  // logged once until the next success
    // Listeners registered on `conn`: client id -> the member's id (0 while registering).
    std::map<map::ListenerId, std::int64_t> server_ids;
    // Registrations `conn`'s member refused, until AddEntryListener reports them.
    std::map<map::ListenerId, base::Error> refused;
  };

  Impl(ClientOptions opts, std::vector<Address> addrs, std::shared_ptr<spdlog::logger> logger)
      : options(std::move(opts)),
        addresses(std::move(addrs)),
        log(std::move(logger)),
        events(log),
        reconnect_timer(io) {
    work.emplace(io.get_executor());
    io_thread = std::thread([this] { io.run(); });
  }

  ~Impl() override { Stop(); }

  // --- connections -------------------------------------------------------------------------

  // Options for a connection to `address`; events and closes go to the control connection's
  // handlers (`peer` empty) or to the peer `peer` of generation `generation`.
  net::ClientOptions ConnectionOptions(const Address& address, const std::string& peer = "",
                                       std::uint64_t generation = 0) {
    net::ClientOptions o;
    o.host = address.host;
    o.port = address.port;
    o.connect_timeout = options.connect_timeout;
    o.hello.cluster_name = options.cluster_name;
    o.hello.secret = options.secret;
    o.hello.client_name = options.client_name;
    o.hello.role = wire::Role::kClient;
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

  // First connect: tries each address once, blocking, then takes the member list and opens a
  // connection to every member (waiting up to the connect timeout for them). Returns the last
  // error if no address works.
  Result<void> ConnectFirst() {
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

  void Adopt(std::shared_ptr<net::ClientConnection> conn, std::size_t address_index,
             bool blocking) {
    {
      std::lock_guard lock(mu);
      connection = conn;
      next_address = address_index;
      partitioner.emplace(static_cast<std::uint32_t>(
          std::max<std::int32_t>(1, conn->hello_reply().partition_count)));
      reconnect_backoff = std::chrono::milliseconds(50);
      view_version = {0, 0};  // maybe another cluster incarnation: take its view as it is
    }
    connected_cv.notify_all();
    SubscribeView(conn, blocking);
    RegisterTopicListeners(conn);
  }

  // Asks the control connection's member for the view and its changes (native_protocol.h).
  void SubscribeView(const std::shared_ptr<net::ClientConnection>& conn, bool blocking) {
    auto request = wire::Message::MakeRequest(0, -1, wire::Service::kCluster,
                                              native::kClusterViewSubscribe, "");
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

  void OnViewReply(const std::shared_ptr<net::ClientConnection>& conn,
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

  void OnControlEvent(wire::Message event) {
    if (event.service == wire::Service::kCluster && event.op == native::kClusterViewEvent) {
      ApplyView(event.payload);
    } else if (event.service == wire::Service::kTopic && event.op == native::kTopicEvent) {
      OnTopicEvent(event.payload);
    }
  }

  enum class ViewUpdate {
    kApplied,    // installed, or older than the one installed
    kNoMembers,  // a member still forming its first view (it lists no member yet)
    kNotAView,
  };

  // Installs a view (ignoring one older than the current): partition owners, member
  // connections. A view that lists no member is not installed: it would leave the client
  // without a member to register entry listeners on.
  ViewUpdate ApplyView(const std::string& payload) {
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
      std::pair<std::int64_t, std::int64_t> version{view.members.version, view.partitions.version};
      if (version < view_version) return ViewUpdate::kApplied;
      view_version = version;
      if (!partitioner || owners.size() != partitioner->partition_count()) owners.clear();
      owner_of = std::move(owners);
      view_members = members;
      view_addresses.clear();
      for (const auto& a : members) {
        if (auto parsed = ParseAddress(a)) view_addresses.push_back(*parsed);
      }
    }
    UpdatePeers(members);
    return ViewUpdate::kApplied;
  }

  // Keeps one connection per listed member: opens new ones, closes those of members gone.
  void UpdatePeers(const std::vector<std::string>& members) {
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

  void ConnectPeer(const std::string& address) {
    auto parsed = ParseAddress(address);
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

  void OnPeerConnected(const std::string& address, std::uint64_t generation,
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

  void RetryPeerAfter(const std::string& address, std::chrono::milliseconds delay) {
    auto timer = std::make_shared<boost::asio::steady_timer>(io, delay);
    std::weak_ptr<Impl> weak = weak_from_this();
    timer->async_wait([weak, timer, address](const boost::system::error_code& ec) {
      if (ec) return;
      if (auto self = weak.lock()) self->ConnectPeer(address);
    });
  }

  void OnPeerClosed(const std::string& address, std::uint64_t generation,
                    const base::Error& reason) {
    {
      std::lock_guard lock(mu);
      auto it = peers.find(address);
      if (stopping || it == peers.end() || it->second.generation != generation) return;
      it->second.conn.reset();
      it->second.server_ids.clear();
      it->second.refused.clear();
      if (it->second.connecting) return;
    }
    connected_cv.notify_all();  // registrations on it are over
    log->warn("connection to member {} lost ({}); reconnecting while it is listed", address,
              reason.message());
    RetryPeerAfter(address, std::chrono::milliseconds(100));
  }

  // Waits until no member connection is being opened, or `deadline`.
  void WaitForPeers(Clock::time_point deadline) {
    std::unique_lock lock(mu);
    connected_cv.wait_until(lock, deadline, [this] {
      if (stopping) return true;
      return std::none_of(peers.begin(), peers.end(),
                          [](const auto& p) { return p.second.connecting; });
    });
  }

  void OnClosed(const base::Error& reason) {
    {
      std::lock_guard lock(mu);
      if (stopping) return;
      connection.reset();
    }
    log->warn("connection to the member lost ({}); reconnecting", reason.message());
    ScheduleReconnect();
  }

  void ScheduleReconnect() {
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

  // Reconnects through the configured addresses and every member the last view listed.
  void TryReconnect() {
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

  // The control connection, waiting for the reconnect loop until `deadline` if needed.
  // On the I/O thread it never waits.
  Result<std::shared_ptr<net::ClientConnection>> Current(Clock::time_point deadline) {
    std::unique_lock lock(mu);
    auto ready = [this] { return stopping || (connection && connection->is_open()); };
    if (!ready() && std::this_thread::get_id() != io_thread.get_id()) {
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

  // Where `request` goes: a keyed request to its partition's owner when that connection is
  // open; anything else (and a key whose owner is unknown or unreachable) to the control
  // connection, whose member forwards or fans out.
  Result<std::shared_ptr<net::ClientConnection>> Target(const map::MapRequest& request,
                                                        Clock::time_point deadline) {
    if (map::MapOpIsKeyed(request.op)) {
      std::lock_guard lock(mu);
      if (partitioner && !owner_of.empty()) {
        auto it = peers.find(owner_of[partitioner->PartitionOf(request.key)]);
        if (it != peers.end() && it->second.conn && it->second.conn->is_open()) {
          return it->second.conn;
        }
      }
    }
    return Current(deadline);
  }

  std::string AddressList() const {
    std::string out;
    for (const auto& a : addresses) {
      if (!out.empty()) out += ",";
      out += a.host + ":" + std::to_string(a.port);
    }
    return out;
  }

  // --- map calls ---------------------------------------------------------------------------

  wire::Message Encode(const map::MapRequest& request) {
    std::int32_t partition = -1;
    if (map::MapOpIsKeyed(request.op)) {
      std::lock_guard lock(mu);
      if (partitioner) partition = static_cast<std::int32_t>(partitioner->PartitionOf(request.key));
    }
    return wire::Message::MakeRequest(0, partition, wire::Service::kMap,
                                      static_cast<std::uint16_t>(request.op),
                                      map::EncodeRequest(request));
  }

  static Result<map::MapResult> Decode(Result<wire::Message> response) {
    if (!response) return std::unexpected(response.error());
    return map::DecodeResult(response->payload);
  }

  // Whether a failed call is sent again (within its deadline): never sent (connection failed),
  // no member took it (not owner), or a read whose connection was lost. A write whose
  // connection was lost may have been applied: the caller is told (kMemberLeft).
  static bool Retryable(const base::Error& error, map::MapOp op) {
    const auto code = error.code();
    return code == ErrorCode::kConnectionFailed || code == ErrorCode::kNotOwner ||
           (code == ErrorCode::kMemberLeft && IsRead(op));
  }

  static std::chrono::milliseconds Remaining(Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    return std::max(left, std::chrono::milliseconds(1));
  }

  void Invoke(map::MapRequest request, Callback done) override {
    InvokeUntil(std::make_shared<const map::MapRequest>(std::move(request)),
                Clock::now() + options.call_timeout, std::move(done));
  }

  void InvokeUntil(std::shared_ptr<const map::MapRequest> request, Clock::time_point deadline,
                   Callback done) {
    auto conn = Target(*request, deadline);
    std::weak_ptr<Impl> weak = weak_from_this();
    if (!conn) {
      // A retry on the I/O thread does not wait for the reconnect loop: it polls.
      if (conn.error().code() == ErrorCode::kConnectionFailed && Clock::now() < deadline &&
          std::this_thread::get_id() == io_thread.get_id()) {
        return RetryAfter(std::chrono::milliseconds(50),
                          [weak, request, deadline, done = std::move(done)] {
                            if (auto again = weak.lock())
                              again->InvokeUntil(request, deadline, done);
                          });
      }
      boost::asio::post(io,
                        [done = std::move(done), e = conn.error()] { done(std::unexpected(e)); });
      return;
    }
    (*conn)->Call(Encode(*request), Remaining(deadline),
                  [weak, request, deadline, done = std::move(done)](Result<wire::Message> r) {
                    auto result = Decode(std::move(r));
                    auto self = weak.lock();
                    if (result || !self || Clock::now() >= deadline ||
                        !Retryable(result.error(), request->op)) {
                      return done(std::move(result));
                    }
                    self->log->debug("retrying {} after: {}", map::MapOpName(request->op),
                                     result.error().message());
                    self->RetryAfter(std::chrono::milliseconds(20),
                                     [weak, request, deadline, done = std::move(done)] {
                                       if (auto again = weak.lock())
                                         again->InvokeUntil(request, deadline, done);
                                     });
                  });
  }

  void RetryAfter(std::chrono::milliseconds delay, std::function<void()> fn) {
    auto timer = std::make_shared<boost::asio::steady_timer>(io, delay);
    timer->async_wait([timer, fn = std::move(fn)](const boost::system::error_code& ec) {
      if (!ec) fn();
    });
  }

  Result<map::MapResult> InvokeSync(map::MapRequest request) override {
    auto deadline = Clock::now() + options.call_timeout;
    for (;;) {
      auto conn = Target(request, deadline);
      if (!conn) return std::unexpected(conn.error());
      auto result = Decode((*conn)->CallSync(Encode(request), Remaining(deadline)));
      if (result || Clock::now() >= deadline || !Retryable(result.error(), request.op)) {
        return result;
      }
      log->debug("retrying {} after: {}", map::MapOpName(request.op), result.error().message());
      if (result.error().code() == ErrorCode::kNotOwner) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }

  // --- listeners: registered on every member, since each member reports the events of the
  // partitions it owns ------------------------------------------------------------------------

  wire::Message AddListenerMessage(const ListenerEntry& entry) {
    std::string payload = record::GenericRecord::Build()
                              .String("map", entry.map_name)
                              .BytesField("options", map::EncodeListenerOptions(entry.options))
                              .Done()
                              .Encode();
    return wire::Message::MakeRequest(0, -1, wire::Service::kMap, native::kMapAddListener,
                                      std::move(payload));
  }

  static Result<std::int64_t> ServerIdOf(Result<wire::Message> response) {
    if (!response) return std::unexpected(response.error());
    auto rec = record::GenericRecord::Decode(response->payload);
    if (!rec) return std::unexpected(rec.error());
    return rec->GetInt64("id");
  }

  static wire::Message RemoveListenerMessage(std::int64_t server_id) {
    auto payload = record::GenericRecord::Build().Int64("id", server_id).Done().Encode();
    return wire::Message::MakeRequest(0, -1, wire::Service::kMap, native::kMapRemoveListener,
                                      std::move(payload));
  }

  // A registration on `address` answered: keeps its id, or undoes it if the listener was
  // removed or the connection replaced meanwhile; a refusal is kept for AddEntryListener.
  void OnRegistered(const std::string& address, std::uint64_t generation, map::ListenerId id,
                    Result<std::int64_t> server_id) {
    std::shared_ptr<net::ClientConnection> undo;
    bool stale = false;
    {
      std::lock_guard lock(mu);
      auto it = peers.find(address);
      stale = it == peers.end() || it->second.generation != generation;
      if (!stale) {
        Peer& peer = it->second;
        if (!server_id) {
          peer.server_ids.erase(id);
          if (listeners.count(id) != 0) {
            peer.refused.insert_or_assign(
                id, base::Error(server_id.error().code(), "registering the listener on member " +
                                                              address + ": " +
                                                              server_id.error().message()));
          }
        } else if (listeners.count(id) == 0) {
          undo = peer.conn;
          peer.server_ids.erase(id);
        } else {
          peer.server_ids[id] = *server_id;
        }
      }
    }
    connected_cv.notify_all();
    if (!server_id) {
      if (!stale) {
        log->warn("could not register entry listener {} on member {}: {}", id, address,
                  server_id.error().message());
      }
      return;
    }
    if (undo) undo->Call(RemoveListenerMessage(*server_id), options.call_timeout, [](auto) {});
  }

  // A member connection (or connection attempt) by address and generation.
  struct PeerAttempt {
    std::string address;
    std::uint64_t generation;
  };

  // Waits until listener `id` is registered through each of `attempts`, or the attempt is
  // over: the member is gone, or the connection failed or was replaced (the member gets the
  // listener when a later connection opens). The first refusal is the error.
  Result<void> WaitForRegistrations(map::ListenerId id, const std::vector<PeerAttempt>& attempts,
                                    Clock::time_point deadline) {
    std::unique_lock lock(mu);
    std::optional<base::Error> error;
    std::string waiting_for;
    auto done = [&] {
      waiting_for.clear();
      for (const auto& [address, generation] : attempts) {
        auto it = peers.find(address);
        if (stopping || it == peers.end() || it->second.generation != generation) continue;
        const Peer& peer = it->second;
        if (auto refused = peer.refused.find(id); refused != peer.refused.end()) {
          error = refused->second;
          return true;
        }
        auto registered = peer.server_ids.find(id);
        if (peer.connecting || (registered != peer.server_ids.end() && registered->second == 0)) {
          waiting_for = address;
          return false;
        }
      }
      return true;
    };
    if (!connected_cv.wait_until(lock, deadline, done)) {
      return base::Fail(ErrorCode::kTimeout,
                        "member " + waiting_for +
                            " did not answer the listener registration within the connect and "
                            "call timeouts; is it overloaded? The listener was not added");
    }
    if (error) return std::unexpected(*error);
    return {};
  }

  Result<map::ListenerId> AddEntryListener(const std::string& map_name,
                                           map::ListenerOptions options_in,
                                           map::EntryListener listener) override {
    ListenerEntry entry{map_name, std::move(options_in),
                        std::make_shared<map::EntryListener>(std::move(listener))};
    auto message = AddListenerMessage(entry);
    struct On {
      std::string address;
      std::uint64_t generation;
      std::shared_ptr<net::ClientConnection> conn;
    };
    std::vector<On> on;
    std::vector<PeerAttempt> involved;  // every member connected or being connected to
    map::ListenerId id = 0;
    {
      std::lock_guard lock(mu);
      id = next_listener_id++;
      listeners.emplace(id, std::move(entry));
      for (auto& [address, peer] : peers) {
        if (peer.conn && peer.conn->is_open()) {
          peer.server_ids[id] = 0;
          on.push_back({address, peer.generation, peer.conn});
          involved.push_back({address, peer.generation});
        } else if (peer.connecting) {
          involved.push_back({address, peer.generation});  // OnPeerConnected registers it
        }
      }
    }
    // Every member at once; each answers before our call returns, so events of writes made
    // after this call are reported.
    std::weak_ptr<Impl> weak = weak_from_this();
    for (auto& o : on) {
      o.conn->Call(
          message, options.call_timeout,
          [weak, address = o.address, generation = o.generation, id](Result<wire::Message> r) {
            if (auto self = weak.lock()) {
              self->OnRegistered(address, generation, id, ServerIdOf(std::move(r)));
            }
          });
    }
    auto registered = WaitForRegistrations(
        id, involved, Clock::now() + options.connect_timeout + options.call_timeout);
    if (!registered) {
      (void)RemoveEntryListener(id);
      return std::unexpected(registered.error());
    }
    return id;
  }

  Result<bool> RemoveEntryListener(map::ListenerId id) override {
    std::vector<std::pair<std::shared_ptr<net::ClientConnection>, std::int64_t>> registered;
    {
      std::lock_guard lock(mu);
      if (listeners.erase(id) == 0) return false;
      for (auto& [address, peer] : peers) {
        peer.refused.erase(id);
        auto it = peer.server_ids.find(id);
        if (it == peer.server_ids.end()) continue;
        // 0: still registering; OnRegistered undoes it when the answer comes.
        if (it->second != 0 && peer.conn) registered.emplace_back(peer.conn, it->second);
        if (it->second != 0) peer.server_ids.erase(it);
      }
    }
    std::optional<base::Error> error;
    for (auto& [conn, server_id] : registered) {
      auto r = conn->CallSync(RemoveListenerMessage(server_id), options.call_timeout);
      // A member that went away dropped the listener with the connection.
      if (!r && r.error().code() != ErrorCode::kMemberLeft &&
          r.error().code() != ErrorCode::kConnectionFailed && !error) {
        error = r.error();
      }
    }
    if (error) return std::unexpected(*error);
    return true;
  }

  void OnPeerEvent(const std::string& address, wire::Message event) {
    if (event.service != wire::Service::kMap || event.op != native::kMapEntryEvent) return;
    auto rec = record::GenericRecord::Decode(event.payload);
    if (!rec) return;
    auto server_id = rec->GetInt64("listener");
    const record::Value* bytes = rec->Find("event");
    if (!server_id || !bytes || bytes->type() != record::FieldType::kBytes) return;
    auto decoded = map::DecodeEvent(bytes->AsBytes().data);
    if (!decoded) {
      log->warn("dropping an undecodable entry event: {}", decoded.error().message());
      return;
    }
    std::shared_ptr<map::EntryListener> target;
    {
      std::lock_guard lock(mu);
      auto peer = peers.find(address);
      if (peer == peers.end()) return;
      for (auto& [id, sid] : peer->second.server_ids) {
        if (sid != *server_id) continue;
        auto it = listeners.find(id);
        if (it != listeners.end()) target = it->second.listener;
      }
    }
    if (!target) return;
    events.Post([target, e = std::move(*decoded)] { (*target)(e); });
  }

  // --- topics: published through the control connection's member, which delivers to every
  // member; listeners registered on that member, which receives every message ------------

  struct TopicListenerEntry {
    std::string topic;
    std::shared_ptr<ListenerQueue> queue;
    std::int64_t server_id = 0;  // on the current control connection; 0 = not registered
  };

  static wire::Message TopicRequest(std::uint16_t op, std::string payload) {
    return wire::Message::MakeRequest(0, -1, wire::Service::kTopic, op, std::move(payload));
  }

  Result<void> Publish(const std::string& topic, std::vector<std::string> payloads) override {
    auto message = TopicRequest(native::kTopicPublish,
                                EncodeTopicBatch({topic, std::move(payloads), publisher_id, 0}));
    auto deadline = Clock::now() + options.call_timeout;
    for (;;) {
      auto conn = Current(deadline);
      if (!conn) return std::unexpected(conn.error());
      auto reply = (*conn)->CallSync(message, Remaining(deadline));
      if (reply) return {};
      // Never sent: safe to send again. Anything else may have been published.
      if (reply.error().code() != ErrorCode::kConnectionFailed || Clock::now() >= deadline) {
        return std::unexpected(reply.error());
      }
    }
  }

  Result<TopicListenerId> AddListener(const std::string& topic, TopicListener listener) override {
    auto queue =
        std::make_shared<ListenerQueue>(topic, std::move(listener), kListenerQueueCapacity, log);
    auto conn = Current(Clock::now() + options.call_timeout);
    if (!conn) return std::unexpected(conn.error());
    auto server_id = ServerIdOf((*conn)->CallSync(
        TopicRequest(native::kTopicSubscribe,
                     record::GenericRecord::Build().String("topic", topic).Done().Encode()),
        options.call_timeout));
    if (!server_id) return std::unexpected(server_id.error());
    std::lock_guard lock(mu);
    TopicListenerId id = next_topic_listener_id++;
    topic_listeners.emplace(id, TopicListenerEntry{topic, std::move(queue), *server_id});
    return id;
  }

  Result<bool> RemoveListener(TopicListenerId id) override {
    std::int64_t server_id = 0;
    std::shared_ptr<ListenerQueue> queue;  // stops its thread when this returns
    {
      std::lock_guard lock(mu);
      auto it = topic_listeners.find(id);
      if (it == topic_listeners.end()) return false;
      server_id = it->second.server_id;
      queue = std::move(it->second.queue);
      topic_listeners.erase(it);
    }
    if (server_id == 0) return true;
    auto conn = Current(Clock::now() + options.call_timeout);
    if (!conn) return true;  // the member dropped it with the connection
    auto r = (*conn)->CallSync(
        TopicRequest(native::kTopicUnsubscribe,
                     record::GenericRecord::Build().Int64("id", server_id).Done().Encode()),
        options.call_timeout);
    if (!r && r.error().code() != ErrorCode::kMemberLeft) return std::unexpected(r.error());
    return true;
  }

  std::int64_t Dropped(TopicListenerId id) const override {
    std::lock_guard lock(mu);
    auto it = topic_listeners.find(id);
    return it == topic_listeners.end() ? 0 : it->second.queue->dropped();
  }

  std::int64_t ListenerErrors(TopicListenerId id) const override {
    std::lock_guard lock(mu);
    auto it = topic_listeners.find(id);
    return it == topic_listeners.end() ? 0 : it->second.queue->errors();
  }

  // After a (re)connect: subscribes every topic listener on the new control connection.
  void RegisterTopicListeners(const std::shared_ptr<net::ClientConnection>& conn) {
    std::vector<std::pair<TopicListenerId, std::string>> pending;
    {
      std::lock_guard lock(mu);
      for (auto& [id, entry] : topic_listeners) {
        entry.server_id = 0;
        pending.emplace_back(id, entry.topic);
      }
    }
    if (pending.empty()) return;
    log->info("re-registering {} topic listener(s) on {}", pending.size(), conn->address());
    std::weak_ptr<Impl> weak = weak_from_this();
    for (auto& [id, topic] : pending) {
      conn->Call(
          TopicRequest(native::kTopicSubscribe,
                       record::GenericRecord::Build().String("topic", topic).Done().Encode()),
          options.call_timeout, [weak, conn, id = id](Result<wire::Message> r) {
            auto self = weak.lock();
            if (!self) return;
            auto server_id = ServerIdOf(std::move(r));
            if (!server_id) {
              self->log->warn("could not re-register topic listener {}: {}", id,
                              server_id.error().message());
              return;
            }
            std::lock_guard lock(self->mu);
            auto it = self->topic_listeners.find(id);
            if (it != self->topic_listeners.end() && self->connection == conn) {
              it->second.server_id = *server_id;
            }
          });
    }
  }

  void OnTopicEvent(const std::string& payload) {
    auto event = DecodeTopicEvent(payload);
    if (!event) {
      log->warn("dropping an undecodable topic message: {}", event.error().message());
      return;
    }
    std::shared_ptr<ListenerQueue> queue;
    {
      std::lock_guard lock(mu);
      for (auto& [id, entry] : topic_listeners) {
        if (entry.server_id == event->first) queue = entry.queue;
      }
    }
    if (queue) queue->Push(std::move(event->second));
  }

  void Stop() {
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
    }
    connected_cv.notify_all();
    for (auto& conn : conns) conn->Close();
    boost::asio::post(io, [this] { reconnect_timer.cancel(); });
    work.reset();
    if (io_thread.joinable()) {
      if (std::this_thread::get_id() == io_thread.get_id()) {
        io_thread.detach();
      } else {
        io.stop();
        io_thread.join();
      }
    }
    events.Stop();
    std::map<TopicListenerId, TopicListenerEntry> topics;
    {
      std::lock_guard lock(mu);
      topics = std::move(topic_listeners);
      topic_listeners.clear();
    }
  }

  ClientOptions options;
  std::vector<Address> addresses;
  std::shared_ptr<spdlog::logger> log;
  EventExecutor events;
  boost::asio::io_context io{1};
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  std::thread io_thread;
  boost::asio::steady_timer reconnect_timer;

  mutable std::mutex mu;  // guards everything below
  std::condition_variable connected_cv;
  std::shared_ptr<net::ClientConnection> connection;  // control: view, fallback, whole-map
  std::optional<partition::Partitioner> partitioner;
  std::size_t next_address = 0;
  std::chrono::milliseconds reconnect_backoff{50};
  std::pair<std::int64_t, std::int64_t> view_version{0, 0};  // member list, table
  std::vector<std::string> owner_of;  // partition -> owner address; empty without a view
  std::vector<Address> view_addresses;
  std::vector<std::string> view_members;
  std::map<std::string, Peer> peers;  // by member address
  std::uint64_t peer_generation = 0;
  std::map<map::ListenerId, ListenerEntry> listeners;
  map::ListenerId next_listener_id = 1;
  std::map<TopicListenerId, TopicListenerEntry> topic_listeners;
  TopicListenerId next_topic_listener_id = 1;
  const std::string publisher_id = "client:" + NewClientId();
  bool stopping = false;
};

Result<std::unique_ptr<Client>> Client::Connect(ClientOptions options,
                                                std::shared_ptr<spdlog::logger> log) {
  if (options.addresses.empty()) {
    return base::Fail(ErrorCode::kBadRequest, "no member address given; pass host:port");
  }
  std::vector<Address> addresses;
  for (const auto& text : options.addresses) {
    auto a = ParseAddress(text);
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

std::shared_ptr<Topic> Client::GetTopic(const std::string& name) {
  return std::make_shared<Topic>(name, std::static_pointer_cast<TopicBackend>(impl_));
}

std::shared_ptr<Map> Client::GetMap(const std::string& name) {
  std::lock_guard lock(proxies_mu_);
  auto& proxy = proxies_[name];
  if (!proxy) proxy = std::make_shared<Map>(name, impl_);
  return proxy;
}

void Client::Shutdown() { impl_->Stop(); }

namespace {
// One blocking call (empty request) on the client's current connection.
Result<std::string> ClusterCall(Client::Impl& impl, std::uint16_t op,
                                wire::Service service = wire::Service::kCluster) {
  auto conn = impl.Current(Clock::now() + impl.options.call_timeout);
  if (!conn) return std::unexpected(conn.error());
  auto reply = (*conn)->CallSync(wire::Message::MakeRequest(0, -1, service, op, ""),
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

base::Result<std::string> Client::FetchTopicStatsJson() {
  return ClusterCall(*impl_, native::kTopicStats, wire::Service::kTopic);
}

std::string Client::connected_address() const {
  std::lock_guard lock(impl_->mu);
  return impl_->connection ? impl_->connection->address() : "";
}

}  // namespace tessera::grid

namespace tessera::grid {

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
