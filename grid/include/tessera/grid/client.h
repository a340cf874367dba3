#pragma once
// Client: a "smart" client of a shared cluster, offering the same Instance API as the
// embedded member. It connects to the first reachable address of its list, performs the Hello
// handshake (cluster name, secret, protocol version), and keeps the cluster's member list and
// partition table (pushed by that member on every change). It holds one connection per member
// and sends each keyed call straight to its partition's owner; whole-map calls (size, values,
// queries, executeOnEntries, getAll/putAll) go to one member, which fans them out and merges.
// Calls are retried within their timeout when never sent, when no member took them (not
// owner, or the cluster is recovering: a restart of every member from its data directory, until
// the members of its last partition table are back), and reads and transactions (which carry an id:
// applied once) when their member left; another write whose member left mid-call fails with
// kMemberLeft (it may have been applied). When the first member goes away the client reconnects
// (rotating through its addresses and every member the last view listed, with backoff); a call made
// meanwhile waits within its timeout. Entry listeners are registered on every member, and again on
// members that join or come back (logged).
//
// Thread-safety: safe to use from many threads at once. Callbacks run on the client's I/O
// thread, its ClientLoop's (async results), or its event thread (entry listeners; started on
// the first event).

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/grid/instance.h"
#include "tessera/membership/cluster_view.h"
#include "tessera/wire/message.h"

namespace spdlog {
class logger;
}

namespace tessera::grid {

// ClientLoop: the thread that runs clients' connections: their sockets, timers and async
// results. A client made without one starts its own. Many clients may share one, as a program
// holding many clients should (a load generator, a service talking to several clusters): their
// sockets then share one thread and one wait for readiness, where a loop per client costs a
// thread, and a thread wake-up per reply, each (docs/benchmarks.md). The thread stops
// once the loop's last holder (a client, or the caller) drops it.
// Every client on a loop runs its callbacks (async results) on the loop's thread: a callback
// must not make a blocking call on a client of the same loop (it would wait for itself; the
// client checks and aborts rather than deadlock).
class ClientLoop {
 public:
  // Starts the loop's thread.
  static std::shared_ptr<ClientLoop> Start();
  ~ClientLoop();
  ClientLoop(const ClientLoop&) = delete;
  ClientLoop& operator=(const ClientLoop&) = delete;

  struct State;  // private to the grid module (client_impl.h)
  explicit ClientLoop(std::shared_ptr<State> state);
  State& state() const { return *state_; }

 private:
  std::shared_ptr<State> state_;
};

struct ClientOptions {
  std::vector<std::string> addresses = {"127.0.0.1:5701"};  // host:port
  // The loop that runs this client's connections; null: the client starts its own.
  std::shared_ptr<ClientLoop> loop;
  std::string cluster_name = "dev";
  std::string secret;
  std::string client_name = "tessera-client";
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds call_timeout{5000};  // every blocking call fails after this
  std::uint32_t max_frame_bytes = 16 * 1024 * 1024;
  // Calls the cluster refuses as recovering (kRecovering: its members restart from their data
  // directories, nothing was applied) are retried within call_timeout; false returns that
  // error at once (a caller that shows the state rather than waits it out).
  bool retry_recovering = true;
  // The highest native protocol version offered in the hello; the member answers with the
  // lower of this and its own. From 2, get, set, put, putIfAbsent, remove, delete,
  // containsKey and replace travel as lean frames (no Cap'n Proto; wire/frame_codec.h,
  // map/map_codec.h); from 3, stream appends too. 1: version 1 frames only.
  std::uint32_t max_protocol_version = wire::kMaxProtocolVersion;
};

class Client final : public Instance {
 public:
  // Connects and handshakes. Errors: kBadRequest (unparsable address, naming it),
  // kConnectionFailed ("cannot connect to 127.0.0.1:5701: connection refused; is grid-node
  // running?"), kAuthFailed (cluster name or secret rejected; the member's reason),
  // kProtocol (version mismatch), kTimeout.
  static base::Result<std::unique_ptr<Client>> Connect(
      ClientOptions options, std::shared_ptr<spdlog::logger> log = nullptr);
  ~Client() override;

  std::shared_ptr<Map> GetMap(const std::string& name) override;
  std::shared_ptr<Topic> GetTopic(const std::string& name) override;
  std::shared_ptr<ReliableTopic> GetReliableTopic(const std::string& name,
                                                  ReliableTopicConfig config = {}) override;
  std::shared_ptr<Stream> GetStream(const std::string& name, StreamConfig config = {}) override;
  base::Result<TransactionResult> Transact(const Transaction& transaction) override;
  void Shutdown() override;
  std::uint64_t ClusterEpoch() const override;

  // The connected member's view of the cluster: member list (oldest first, the first is the
  // master) and partition table. Errors: those of a call (kTimeout, kConnectionFailed, ...).
  base::Result<membership::ClusterView> FetchClusterView();
  // The connected member's status as JSON: {uuid, address, cluster, version, shards,
  // partitions, connections, resp_port, maps, migrations_pending, forwarded_requests}.
  base::Result<std::string> FetchMemberInfoJson();
  // The connected member's topic counters as JSON: {"topics": {NAME: {published (on this
  // member), delivered (to its listeners), dropped, listener_errors, listeners (registered
  // on this member)}}}.
  base::Result<std::string> FetchTopicStatsJson();
  // The connected member's metrics in the Prometheus text format (Member::MetricsText).
  base::Result<std::string> FetchMetricsText();
  // Fault injection on the connected member (it must run with fault injection on): it stops
  // sending anything to the members at `addresses` (Member::BlockPeers); empty heals. Returns
  // the list now in force. Errors: kUnsupported when fault injection is off there.
  base::Result<std::vector<std::string>> SetBlockedPeers(const std::vector<std::string>& addresses);
  // Operators: the connected member, the master of a cluster recovering from a restart of
  // every member, goes on without the members of its last table still missing, when every
  // partition has a replica among those back (Membership::ForceRecovery). Returns what it did.
  // Errors: kBadRequest (not recovering, not the master: the text names it), kConflict
  // (partitions without a replica back).
  base::Result<std::string> ForceRecovery();
  // Has the connected member copy its data directory into `folder`/<its persistent id>, a
  // folder on the member's machine (an absolute path): a consistent backup of the member as of
  // the call, every write it acknowledged before included; a member started on the copy is
  // that member as of then. Returns JSON {member_id, dir, bytes, took_ms}. Errors: kBadRequest
  // (no data directory, a relative folder or one inside the data directory), kConflict (the
  // member's folder exists there), kStorage.
  base::Result<std::string> BackupDataDir(const std::string& folder);

  // The address of the member currently connected to ("" when disconnected).
  std::string connected_address() const;
  // The native protocol version spoken with that member: the lower of the two sides' highest
  // (ClientOptions::max_protocol_version), 1 below 2 (0 when disconnected).
  std::uint32_t protocol_version() const;
  // The members of the last cluster view received, oldest first (empty before one), and of
  // those the ones this client has an open connection to.
  std::vector<std::string> member_addresses() const;
  std::vector<std::string> connected_members() const;

  struct Impl;  // private to client.cc
  explicit Client(std::shared_ptr<Impl> impl);

 private:
  std::shared_ptr<Impl> impl_;
  // Proxies hold the Impl (their Invoker), never the Client: no ownership cycle.
  std::mutex proxies_mu_;
  std::map<std::string, std::shared_ptr<Map>> proxies_;
};

}  // namespace tessera::grid
