#pragma once
// What the three services of the order-fulfillment example share: their command line, the
// embedded member (the service's own cluster: its instances join each other), the client of
// the shared cluster (grid-node processes: the event streams, the DLQ), the HTTP server, the
// ready line scripts wait for, and a clean stop on SIGINT/SIGTERM.
//
// Common flags (every service):
//   --port P           the embedded member's native port (0 = any; grid-cli connects there)
//   --join HOST:PORT   another instance of the same service (repeatable)
//   --shared HOST:PORT a member of the shared cluster (repeatable; at least one)
//   --shared-cluster NAME   the shared cluster's name (default "shared")
//   --http-port P      the REST port (0 = any)
//   --threads N        the embedded member's shards (default 1)
//   --heartbeat-ms MS, --failure-timeout-ms MS   the embedded cluster's failure detection
//   --idle-poll-us US  as grid-node's: a shard out of work polls this long before it sleeps
//   --member-http-port P   the embedded member's HTTP port (off by default; 0 = any): health,
//                      /metrics, the REST API and the console (tessera/admin/admin_api.h)
//   --log-level LEVEL  trace|debug|info|warn|error (default info)
//   --data-dir DIR     the embedded member's data directory (grid-node's --data-dir): every map
//                      of the service persists (`always`), so a restart of every instance
//                      keeps its state, outbox and sagas; StartMember then waits until its
//                      cluster has a partition table (all instances of its last one back)
// and the service's own flags, each with a default (`--name value`). Every service answers
// GET /health (200 {"status":"ok"}) once serving.
//
// Ready line (stdout, once serving): "<program> ready: native 127.0.0.1:P http 127.0.0.1:H",
// then " member-http 127.0.0.1:M" with --member-http-port.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/grid/instance.h"
#include "tessera/grid/map.h"
#include "tessera/grid/member.h"
#include "tessera/http/server.h"

namespace tessera::examples {

class Service {
 public:
  // Parses the command line; prints the problem and the usage and exits with 2 on a bad one.
  // `own_flags`: the service's flags (without "--") and their defaults. Blocks SIGINT and
  // SIGTERM in every thread (WaitForStop takes them). Call first thing in main().
  Service(std::string program, int argc, char** argv, std::map<std::string, std::string> own_flags,
          std::string usage);

  // Connects to the shared cluster (retrying for up to 60 s, so a service may start before or
  // during a pause of the shared cluster) and builds the embedded member, not started yet:
  // the caller adds its outbox, orchestrator or processors, then calls StartMember, adds its
  // routes to http() and calls StartHttp.
  base::Result<void> Prepare();
  // With --join, returns once the member is in a cluster: admitted by another instance, or
  // alone when none answered within the join timeout (10 s, so that a slow machine does not
  // make a restarted instance found a cluster of its own). With --min-cluster-size N, once its
  // cluster has N members (the instances start together). Error kTimeout after 60 s.
  base::Result<void> StartMember();
  base::Result<void> StartHttp();
  // Prints the ready line, blocks until SIGINT or SIGTERM, then stops the HTTP server.
  void WaitForStop();

  grid::Member& member() { return *member_; }
  std::shared_ptr<grid::Instance> shared() { return shared_; }
  http::Server& http() { return *http_; }
  const std::string& program() const { return program_; }

  const std::string& Flag(const std::string& name) const;
  std::int64_t IntFlag(const std::string& name) const;  // validated numbers (>= 0)

 private:
  [[noreturn]] void Usage(const std::string& problem) const;

  std::string program_;
  std::string usage_;
  std::map<std::string, std::string> flags_;
  std::vector<std::string> join_, shared_addresses_;
  std::shared_ptr<grid::Instance> shared_;
  std::unique_ptr<grid::Member> member_;
  std::unique_ptr<http::Server> http_;
};

// An order line: `quantity` of `product` at `price` (cents) each.
struct OrderLine {
  std::string product;
  std::int64_t quantity = 0;
  std::int64_t price = 0;
};

// Lines in a saga's data and in commands: "product:quantity:price,..." (product names are
// letters, digits, '-' and '_'). Errors: kBadRequest naming the bad line.
std::string EncodeLines(const std::vector<OrderLine>& lines);
base::Result<std::vector<OrderLine>> DecodeLines(const std::string& text);
bool ValidName(const std::string& name);  // letters, digits, '-', '_'; 1..64 characters

// One-way states of the example's effects ("held:3", "charged:1500", "released:3", "void"):
// the name and the number after ':' (0 when there is none). Tombstones (released, refunded,
// void) are kept as long as the inbox's markers, so a late command still finds them.
inline constexpr base::Millis kTombstoneTtlMs = 7LL * 24 * 3600 * 1000;
std::pair<std::string, std::int64_t> SplitState(const std::string& state);
std::int64_t ToNumber(const std::string& text);                 // a stored decimal (0 when not one)
std::vector<std::string> SplitCommas(const std::string& text);  // "" -> none

// Every one-way state in `map` (keys "<order>@<owner>") as
// {"<array>": [{"order", "<owner_field>", "state", "<number_field>"}, ...]}.
http::Response ListStates(grid::Map& map, const char* array, const char* owner_field,
                          const char* number_field);

}  // namespace tessera::examples
