#pragma once
// Client: a connection to a shared cluster, offering the same Instance API as the embedded
// member. It connects to the first reachable address of its list, performs the Hello
// handshake (cluster name, secret, protocol version), and reconnects when the member
// restarts: a call made while disconnected first tries to reconnect (rotating through the
// addresses, with backoff) within its timeout. Entry listeners are re-registered after a
// reconnect (logged).
//
// Thread-safety: safe to use from many threads at once. Callbacks run on the client's I/O
// thread (async results) or its event thread (entry listeners).

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/grid/instance.h"
#include "tessera/membership/cluster_view.h"

namespace spdlog {
class logger;
}

namespace tessera::grid {

struct ClientOptions {
  std::vector<std::string> addresses = {"127.0.0.1:5701"};  // host:port
  std::string cluster_name = "dev";
  std::string secret;
  std::string client_name = "tessera-client";
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds call_timeout{5000};  // every blocking call fails after this
  std::uint32_t max_frame_bytes = 16 * 1024 * 1024;
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
  void Shutdown() override;

  // The connected member's view of the cluster: member list (oldest first, the first is the
  // master) and partition table. Errors: those of a call (kTimeout, kConnectionFailed, ...).
  base::Result<membership::ClusterView> FetchClusterView();
  // The connected member's status as JSON: {uuid, address, cluster, version, shards,
  // partitions, connections, resp_port, maps, migrations_pending}.
  base::Result<std::string> FetchMemberInfoJson();

  // The address of the member currently connected to ("" when disconnected).
  std::string connected_address() const;

  struct Impl;  // private to client.cc
  explicit Client(std::shared_ptr<Impl> impl);

 private:
  std::shared_ptr<Impl> impl_;
  // Proxies hold the Impl (their Invoker), never the Client: no ownership cycle.
  std::mutex proxies_mu_;
  std::map<std::string, std::shared_ptr<Map>> proxies_;
};

}  // namespace tessera::grid
