#pragma once
// Client::Impl: everything behind the public Client (client.h). One object, one I/O thread
// (its ClientLoop's, which other clients may share) that runs every connection, one mutex `mu`
// over all of its mutable state; its methods are
// defined in one file per responsibility:
//   client.cc            construction, Connect, Stop, the public Client methods
//   client_control.cc    the control connection and the cluster view: first connect,
//                        view subscription, reconnect loop
//   client_peers.cc      one connection per member of the view, reopened with backoff
//   client_invoke.cc     map calls: routing to the partition's owner, retries within the
//                        call's timeout
//   client_listeners.cc  entry listeners, registered on every member connection
//   client_topics.cc     topic publish and listeners (through the control connection)
// Private to the grid module.
//
// Thread-safety: public entry points (Invoker, TopicBackend, Stop) may be called from any
// thread; callbacks from connections run on the I/O thread; fields below `mu` are read and
// written only while holding it, and no call on a connection is made while holding it.

#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "event_executor.h"
#include "listener_queue.h"
#include "tessera/base/error.h"
#include "tessera/grid/client.h"
#include "tessera/grid/invoker.h"
#include "tessera/grid/topic.h"
#include "tessera/map/map_request.h"
#include "tessera/net/client_connection.h"
#include "tessera/partition/partitioner.h"
#include "tessera/wire/message.h"

namespace tessera::grid {

// A member's address as host and port.
struct MemberAddress {
  std::string host;
  std::uint16_t port = 0;
};

// Parses "host:port". Errors: kBadRequest naming the text and what is wrong with it.
base::Result<MemberAddress> ParseMemberAddress(const std::string& text);

// A random id naming one client instance as a topic publisher.
std::string NewClientId();

// The ClientLoop's state: one io_context run by one thread. The thread holds the state too, so
// a loop dropped on its own thread (from a callback) lets that thread finish on its own.
struct ClientLoop::State {
  boost::asio::io_context io{1};
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  std::thread thread;

  // Stops the loop: handlers not yet run are dropped. Joins the thread, or detaches it when
  // called on it. Idempotent.
  void Stop();
};

struct Client::Impl : public Invoker,
                      public TopicBackend,
                      public std::enable_shared_from_this<Client::Impl> {
  using Clock = std::chrono::steady_clock;
  template <typename T>
  using Result = base::Result<T>;
  using Address = MemberAddress;

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

  Impl(ClientOptions opts, std::vector<Address> addrs, std::shared_ptr<spdlog::logger> logger);
  ~Impl() override { Stop(); }

  // Closes every connection and stops the I/O and event threads; idempotent.
  void Stop();

  // --- control connection and cluster view (client_control.cc) ------------------------------

  // Options for a connection to `address`; events and closes go to the control connection's
  // handlers (`peer` empty) or to the peer `peer` of generation `generation`.
  net::ClientOptions ConnectionOptions(const Address& address, const std::string& peer = "",
                                       std::uint64_t generation = 0);

  // First connect: tries each address once, blocking, then takes the member list and opens a
  // connection to every member (waiting up to the connect timeout for them). Returns the last
  // error if no address works.
  Result<void> ConnectFirst();

  void Adopt(std::shared_ptr<net::ClientConnection> conn, std::size_t address_index, bool blocking);

  // Asks the control connection's member for the view and its changes (native_protocol.h).
  void SubscribeView(const std::shared_ptr<net::ClientConnection>& conn, bool blocking);

  void OnViewReply(const std::shared_ptr<net::ClientConnection>& conn, Result<wire::Message> reply);

  void OnControlEvent(wire::Message event);

  enum class ViewUpdate {
    kApplied,    // installed, or older than the one installed
    kNoMembers,  // a member still forming its first view (it lists no member yet)
    kNotAView,
  };

  // Installs a view (ignoring one older than the current): partition owners, member
  // connections. A view that lists no member is not installed: it would leave the client
  // without a member to register entry listeners on.
  ViewUpdate ApplyView(const std::string& payload);

  void OnClosed(const base::Error& reason);

  void ScheduleReconnect();

  // Reconnects through the configured addresses and every member the last view listed.
  void TryReconnect();

  // The control connection, waiting for the reconnect loop until `deadline` if needed.
  // On the I/O thread it never waits.
  Result<std::shared_ptr<net::ClientConnection>> Current(Clock::time_point deadline);

  std::string AddressList() const;

  // --- member connections (client_peers.cc) -------------------------------------------------

  // Keeps one connection per listed member: opens new ones, closes those of members gone.
  void UpdatePeers(const std::vector<std::string>& members);

  void ConnectPeer(const std::string& address);

  void OnPeerConnected(const std::string& address, std::uint64_t generation,
                       Result<std::shared_ptr<net::ClientConnection>> conn);

  void RetryPeerAfter(const std::string& address, std::chrono::milliseconds delay);

  void OnPeerClosed(const std::string& address, std::uint64_t generation,
                    const base::Error& reason);

  // Waits until no member connection is being opened, or `deadline`.
  void WaitForPeers(Clock::time_point deadline);

  // --- map calls: routing and retries (client_invoke.cc) -------------------------------------

  // Where `request` goes: a keyed request to its partition's owner when that connection is
  // open; anything else (and a key whose owner is unknown or unreachable) to the control
  // connection, whose member forwards or fans out.
  struct Routed {
    std::shared_ptr<net::ClientConnection> conn;
    std::int32_t partition = -1;  // of a keyed request once the client has a view
  };
  Result<Routed> Target(const map::MapRequest& request, Clock::time_point deadline) {
    return Target(request.op, request.key, deadline);
  }
  Result<Routed> Target(map::MapOp op, std::string_view key, Clock::time_point deadline);

  // Fills owner_connections from owner_of and peers. REQUIRES: mu held.
  void RebuildOwnerConnections();

  // A lean frame when the request fits one of the connection's negotiated protocol version.
  static wire::Message Encode(const map::MapRequest& request, std::int32_t partition,
                              std::uint32_t protocol_version);

  static Result<map::MapResult> Decode(Result<wire::Message>&& response);

  // Whether a failed call is sent again (within its deadline): never sent (connection failed),
  // no member took it (not owner; recovering, with options.retry_recovering), or a read or a
  // transaction with an id whose connection was lost. Another write whose connection was lost
  // may have been applied: the caller is told (kMemberLeft).
  bool Retryable(const base::Error& error, const map::MapRequest& request) const;

  static std::chrono::milliseconds Remaining(Clock::time_point deadline);

  void Invoke(map::MapRequest request, Callback done) override;
  void InvokeShared(std::shared_ptr<const map::MapRequest> request, Callback done) override;

  void InvokeUntil(std::shared_ptr<const map::MapRequest> request, Clock::time_point deadline,
                   Callback done);
  // Lean to the owner when its connection is lean (no MapRequest: the frame is encoded from
  // the fields, and a copy of its body is kept for a retry, which decodes it); otherwise
  // Invoke with the request.
  void InvokeKeyed(map::MapOp op, const std::string& map_name, std::string_view key,
                   std::string_view value, const map::WriteOptions& options,
                   Callback done) override;

  // A retry's state: the request, its deadline, the client and the caller's callback.
  using RetryFn = base::UniqueFunction<void(), 128>;
  void RetryAfter(std::chrono::milliseconds delay, RetryFn fn);

  // A retry's turn: InvokeUntil again, or, the client being gone, kShuttingDown to `done`.
  static void RetryOrShutDown(const std::weak_ptr<Impl>& weak,
                              const std::shared_ptr<const map::MapRequest>& request,
                              Clock::time_point deadline, Callback done);

  Result<map::MapResult> InvokeSync(map::MapRequest request) override;
  Result<map::MapResult> InvokeSyncKept(const map::MapRequest& request) override;

  // --- entry listeners: registered on every member, since each member reports the events of
  // the partitions it owns (client_listeners.cc) ---------------------------------------------

  wire::Message AddListenerMessage(const ListenerEntry& entry);

  static Result<std::int64_t> ServerIdOf(Result<wire::Message> response);

  static wire::Message RemoveListenerMessage(std::int64_t server_id);

  // A registration on `address` answered: keeps its id, or undoes it if the listener was
  // removed or the connection replaced meanwhile; a refusal is kept for AddEntryListener.
  void OnRegistered(const std::string& address, std::uint64_t generation, map::ListenerId id,
                    Result<std::int64_t> server_id);

  // A member connection (or connection attempt) by address and generation.
  struct PeerAttempt {
    std::string address;
    std::uint64_t generation;
  };

  // Waits until listener `id` is registered through each of `attempts`, or the attempt is
  // over: the member is gone, or the connection failed or was replaced (the member gets the
  // listener when a later connection opens). The first refusal is the error.
  Result<void> WaitForRegistrations(map::ListenerId id, const std::vector<PeerAttempt>& attempts,
                                    Clock::time_point deadline);

  Result<map::ListenerId> AddEntryListener(const std::string& map_name,
                                           map::ListenerOptions options_in,
                                           map::EntryListener listener) override;

  Result<bool> RemoveEntryListener(map::ListenerId id) override;

  void OnPeerEvent(const std::string& address, wire::Message event);

  // --- topics: published through the control connection's member, which delivers to every
  // member; listeners registered on that member, which receives every message
  // (client_topics.cc) ------------------------------------------------------------------------

  struct TopicListenerEntry {
    std::string topic;
    std::shared_ptr<ListenerQueue> queue;
    std::int64_t server_id = 0;  // on the current control connection; 0 = not registered
  };

  static wire::Message TopicRequest(std::uint16_t op, std::string payload);

  Result<void> Publish(const std::string& topic, std::vector<std::string> payloads) override;

  Result<TopicListenerId> AddListener(const std::string& topic, TopicListener listener) override;

  Result<bool> RemoveListener(TopicListenerId id) override;

  std::int64_t Dropped(TopicListenerId id) const override;

  std::int64_t ListenerErrors(TopicListenerId id) const override;

  // After a (re)connect: subscribes every topic listener on the new control connection.
  void RegisterTopicListeners(const std::shared_ptr<net::ClientConnection>& conn);

  void OnTopicEvent(const std::string& payload);

  ClientOptions options;
  std::vector<Address> addresses;
  std::shared_ptr<spdlog::logger> log;
  EventExecutor events;
  std::shared_ptr<ClientLoop> loop;  // options.loop, or one of its own
  const bool own_loop;               // Stop stops it (a shared loop runs on)
  boost::asio::io_context& io;       // loop's
  boost::asio::steady_timer reconnect_timer;

  mutable std::mutex mu;  // guards everything below
  std::condition_variable connected_cv;
  std::shared_ptr<net::ClientConnection> connection;  // control: view, fallback, whole-map
  std::optional<partition::Partitioner> partitioner;
  std::size_t next_address = 0;
  std::chrono::milliseconds reconnect_backoff{50};
  std::pair<std::int64_t, std::int64_t> view_version{0, 0};  // member list, table
  std::string view_master;                      // the master's uuid in the last view seen
  std::atomic<std::uint64_t> cluster_epoch{0};  // Client::ClusterEpoch: master changes seen
  std::vector<std::string> owner_of;            // partition -> owner address; empty without a view
  std::vector<Address> view_addresses;
  std::vector<std::string> view_members;
  std::map<std::string, Peer> peers;  // by member address
  // owner_of and peers' connections change together with routing_version; Target reads the
  // partition's connection through owner_index and owner_connections, rebuilt when their
  // version is behind (a lookup by address per call showed in a pipelined client's CPU
  // profile). Two bytes per partition rather than a shared_ptr (16): with 50 clients in a
  // process, a table of 271 shared_ptrs each missed the cache on nearly every call (which
  // showed in grid-bench's CPU profile).
  static constexpr std::uint16_t kNoOwner = 0xFFFF;
  std::uint64_t routing_version = 0;
  std::vector<std::uint16_t> owner_index;  // by partition: into owner_connections, or kNoOwner
  std::vector<std::shared_ptr<net::ClientConnection>> owner_connections;  // distinct, < kNoOwner
  std::uint64_t owner_connections_version = ~std::uint64_t{0};
  std::uint64_t peer_generation = 0;
  std::map<map::ListenerId, ListenerEntry> listeners;
  map::ListenerId next_listener_id = 1;
  std::map<TopicListenerId, TopicListenerEntry> topic_listeners;
  TopicListenerId next_topic_listener_id = 1;
  const std::string publisher_id = "client:" + NewClientId();
  bool stopping = false;
};

}  // namespace tessera::grid
