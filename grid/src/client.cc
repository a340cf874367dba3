// Client design: one I/O thread runs the connection; a background reconnect loop (timers on
// that thread) is the only thing that (re)connects after the first connect. Calls made while
// disconnected wait for it, bounded by their timeout. After each reconnect the entry
// listeners are registered again under fresh server ids; users keep their client-side ids.
//
// Retries: a call that was never sent (kConnectionFailed) is retried after the reconnect
// within its timeout; a read that was sent but lost its connection (kMemberLeft) is retried
// too, since reading twice is harmless. A write that lost its connection is reported as
// kMemberLeft: it may or may not have been applied.
#include "tessera/grid/client.h"

#include <spdlog/spdlog.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/steady_timer.hpp>
#include <charconv>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "event_executor.h"
#include "native_protocol.h"
#include "tessera/base/log.h"
#include "tessera/map/map_codec.h"
#include "tessera/membership/cluster_message.h"
#include "tessera/net/client_connection.h"
#include "tessera/partition/partitioner.h"

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
      return true;
    default:
      return false;
  }
}

std::shared_ptr<spdlog::logger> DefaultLogger() { return base::NamedLogger("client"); }

}  // namespace

struct Client::Impl : public Invoker, public std::enable_shared_from_this<Client::Impl> {
  struct ListenerEntry {
    std::string map_name;
    map::ListenerOptions options;
    std::shared_ptr<map::EntryListener> listener;
    std::int64_t server_id = 0;  // 0 while not registered on the current connection
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

  // --- connection management -------------------------------------------------------------

  net::ClientOptions ConnectionOptions(const Address& address) {
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
    o.on_event = [weak](wire::Message event) {
      if (auto self = weak.lock()) self->OnEvent(std::move(event));
    };
    o.on_closed = [weak](const base::Error& reason) {
      if (auto self = weak.lock()) self->OnClosed(reason);
    };
    return o;
  }

  // First connect: tries each address once, blocking. Returns the last error if none works.
  Result<void> ConnectFirst() {
    std::optional<base::Error> last;
    for (std::size_t i = 0; i < addresses.size(); ++i) {
      auto conn = net::ClientConnection::Connect(io, ConnectionOptions(addresses[i]), log);
      if (conn) {
        Adopt(*conn, i);
        return {};
      }
      last = conn.error();
    }
    return std::unexpected(*last);
  }

  void Adopt(std::shared_ptr<net::ClientConnection> conn, std::size_t address_index) {
    {
      std::lock_guard lock(mu);
      connection = conn;
      next_address = address_index;
      partitioner.emplace(static_cast<std::uint32_t>(
          std::max<std::int32_t>(1, conn->hello_reply().partition_count)));
      reconnect_backoff = std::chrono::milliseconds(50);
    }
    connected_cv.notify_all();
    RegisterListeners(conn);
  }

  void OnClosed(const base::Error& reason) {
    {
      std::lock_guard lock(mu);
      if (stopping) return;
      connection.reset();
      for (auto& [id, entry] : listeners) entry.server_id = 0;
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

  void TryReconnect() {
    std::size_t index;
    {
      std::lock_guard lock(mu);
      if (stopping) return;
      index = next_address;
      next_address = (next_address + 1) % addresses.size();
    }
    std::weak_ptr<Impl> weak = weak_from_this();
    net::ClientConnection::AsyncConnect(
        io, ConnectionOptions(addresses[index]), log,
        [weak, index](Result<std::shared_ptr<net::ClientConnection>> conn) {
          auto self = weak.lock();
          if (!self) return;
          if (!conn) {
            self->log->debug("reconnect to {}:{} failed: {}", self->addresses[index].host,
                             self->addresses[index].port, conn.error().message());
            self->ScheduleReconnect();
            return;
          }
          self->log->info("reconnected to {}", (*conn)->address());
          self->Adopt(std::move(*conn), index);
        });
  }

  // The open connection, waiting for the reconnect loop until `deadline` if needed.
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

  void Invoke(map::MapRequest request, Callback done) override {
    auto deadline = Clock::now() + options.call_timeout;
    auto conn = Current(deadline);
    if (!conn) {
      boost::asio::post(io,
                        [done = std::move(done), e = conn.error()] { done(std::unexpected(e)); });
      return;
    }
    (*conn)->Call(
        Encode(request), options.call_timeout,
        [done = std::move(done)](Result<wire::Message> r) { done(Decode(std::move(r))); });
  }

  Result<map::MapResult> InvokeSync(map::MapRequest request) override {
    auto deadline = Clock::now() + options.call_timeout;
    wire::Message message = Encode(request);
    for (;;) {
      auto conn = Current(deadline);
      if (!conn) return std::unexpected(conn.error());
      auto remaining =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (remaining.count() <= 0) remaining = std::chrono::milliseconds(1);
      auto result = Decode((*conn)->CallSync(message, remaining));
      if (result || Clock::now() >= deadline) return result;
      auto code = result.error().code();
      bool retry = code == ErrorCode::kConnectionFailed ||
                   (code == ErrorCode::kMemberLeft && IsRead(request.op));
      if (!retry) return result;
      log->debug("retrying {} after: {}", map::MapOpName(request.op), result.error().message());
    }
  }

  // --- listeners ---------------------------------------------------------------------------

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

  Result<map::ListenerId> AddEntryListener(const std::string& map_name,
                                           map::ListenerOptions options_in,
                                           map::EntryListener listener) override {
    ListenerEntry entry{map_name, std::move(options_in),
                        std::make_shared<map::EntryListener>(std::move(listener)), 0};
    auto conn = Current(Clock::now() + options.call_timeout);
    if (!conn) return std::unexpected(conn.error());
    auto server_id = ServerIdOf((*conn)->CallSync(AddListenerMessage(entry), options.call_timeout));
    if (!server_id) return std::unexpected(server_id.error());
    std::lock_guard lock(mu);
    map::ListenerId id = next_listener_id++;
    entry.server_id = *server_id;
    listeners.emplace(id, std::move(entry));
    return id;
  }

  Result<bool> RemoveEntryListener(map::ListenerId id) override {
    std::int64_t server_id = 0;
    {
      std::lock_guard lock(mu);
      auto it = listeners.find(id);
      if (it == listeners.end()) return false;
      server_id = it->second.server_id;
      listeners.erase(it);
    }
    if (server_id == 0) return true;  // not registered on the current connection
    auto conn = Current(Clock::now() + options.call_timeout);
    if (!conn) return true;  // the member dropped it with the connection
    auto payload = record::GenericRecord::Build().Int64("id", server_id).Done().Encode();
    auto r = (*conn)->CallSync(
        wire::Message::MakeRequest(0, -1, wire::Service::kMap, native::kMapRemoveListener, payload),
        options.call_timeout);
    if (!r) return std::unexpected(r.error());
    return true;
  }

  // After a (re)connect: registers every listener on the new connection (asynchronously).
  void RegisterListeners(const std::shared_ptr<net::ClientConnection>& conn) {
    std::vector<std::pair<map::ListenerId, wire::Message>> pending;
    {
      std::lock_guard lock(mu);
      for (auto& [id, entry] : listeners) {
        if (entry.server_id == 0) pending.emplace_back(id, AddListenerMessage(entry));
      }
    }
    if (pending.empty()) return;
    log->info("re-registering {} entry listener(s) on {}", pending.size(), conn->address());
    std::weak_ptr<Impl> weak = weak_from_this();
    for (auto& [id, message] : pending) {
      conn->Call(std::move(message), options.call_timeout,
                 [weak, id = id](Result<wire::Message> r) {
                   auto self = weak.lock();
                   if (!self) return;
                   auto server_id = ServerIdOf(std::move(r));
                   if (!server_id) {
                     self->log->warn("could not re-register listener {}: {}", id,
                                     server_id.error().message());
                     return;
                   }
                   std::lock_guard lock(self->mu);
                   auto it = self->listeners.find(id);
                   if (it != self->listeners.end()) it->second.server_id = *server_id;
                 });
    }
  }

  void OnEvent(wire::Message event) {
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
      for (auto& [id, entry] : listeners) {
        if (entry.server_id == *server_id) target = entry.listener;
      }
    }
    if (!target) return;
    events.Post([target, e = std::move(*decoded)] { (*target)(e); });
  }

  void Stop() {
    std::shared_ptr<net::ClientConnection> conn;
    {
      std::lock_guard lock(mu);
      if (stopping) return;
      stopping = true;
      conn = std::move(connection);
    }
    connected_cv.notify_all();
    if (conn) conn->Close();
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
  std::shared_ptr<net::ClientConnection> connection;
  std::optional<partition::Partitioner> partitioner;
  std::size_t next_address = 0;
  std::chrono::milliseconds reconnect_backoff{50};
  std::map<map::ListenerId, ListenerEntry> listeners;
  map::ListenerId next_listener_id = 1;
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

std::shared_ptr<Map> Client::GetMap(const std::string& name) {
  std::lock_guard lock(proxies_mu_);
  auto& proxy = proxies_[name];
  if (!proxy) proxy = std::make_shared<Map>(name, impl_);
  return proxy;
}

void Client::Shutdown() { impl_->Stop(); }

namespace {
// One blocking cluster-service call (empty request) on the client's current connection.
Result<std::string> ClusterCall(Client::Impl& impl, std::uint16_t op) {
  auto conn = impl.Current(Clock::now() + impl.options.call_timeout);
  if (!conn) return std::unexpected(conn.error());
  auto reply = (*conn)->CallSync(wire::Message::MakeRequest(0, -1, wire::Service::kCluster, op, ""),
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

std::string Client::connected_address() const {
  std::lock_guard lock(impl_->mu);
  return impl_->connection ? impl_->connection->address() : "";
}

}  // namespace tessera::grid
