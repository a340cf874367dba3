#pragma once
// RespServer: the RESP (Redis protocol) front-end of a member, so redis-cli, redis-benchmark
// and Redis client libraries can use the grid. It only parses, routes and replies: every key
// (a string, a hash, a stream's marker) is an entry of its kind in the map named by
// RespServerOptions::default_map (map/redis_hash.h), and pub/sub goes through the
// TopicService. See docs/resp.md for the command list.
//
// Each accepted connection lives on one shard (round-robin). A read batch is parsed in place,
// every complete command is executed (inline when the key's partition is on the
// connection's shard, else on the owning shard), and the replies of the batch leave in one
// write, in request order even when they complete on different shards.
//
// Thread-safety: Start/Stop/port/Stats from any non-shard thread; Stats from any thread.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "tessera/base/clock.h"
#include "tessera/base/error.h"
#include "tessera/map/map_service.h"
#include "tessera/runtime/shard_set.h"
#include "tessera/topic/topic_service.h"

namespace spdlog {
class logger;
}

namespace tessera::resp {

struct RespServerOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;            // 0 = ephemeral (read it back with port())
  std::string default_map = "default";  // map holding the string keyspace (db 0)
  std::string secret;  // non-empty: clients must AUTH with it before other commands
  std::int64_t max_bulk_bytes = 512LL * 1024 * 1024;  // largest accepted argument
  // With a secret, until a connection authenticated (AUTH or HELLO ... AUTH): a command may
  // have at most this many arguments of at most this many bytes each (Redis: 10 and 16 KB);
  // more is a protocol error that closes the connection before the member reads or allocates
  // the argument.
  std::int64_t unauthenticated_max_args = 10;
  std::int64_t unauthenticated_max_bulk_bytes = 16 * 1024;
  // With a secret: a connection that has not authenticated this long after it connected (or
  // after RESET) is told so and closed. 0 = never.
  std::chrono::milliseconds unauthenticated_timeout{10000};
  // A connection stops reading while this many replies are outstanding or this many reply
  // bytes wait to be written, and resumes when they drain.
  std::size_t max_pending_replies = 4096;
  std::size_t max_output_bytes = 64 * 1024 * 1024;
  // A subscriber whose unread pushes (published messages it has not read yet) reach this many
  // bytes is disconnected (as Redis's client-output-buffer-limit pubsub 32mb): a client that
  // subscribes and stops reading cannot make the member buffer without bound. Logged, and
  // counted in INFO stats `output_limit_disconnects`.
  std::size_t max_subscriber_output_bytes = 32 * 1024 * 1024;
  // Limits of a stream XADD creates (stored as its Tessera stream configuration): entries
  // every group acknowledged (all, without groups) make room for new ones; beyond them XADD
  // fails naming the group that holds entries back.
  std::int64_t stream_max_entries = 1'000'000;
  std::int64_t stream_max_bytes = 256LL * 1024 * 1024;
};

struct RespServerStats {
  std::int64_t connected_clients = 0;
  std::int64_t total_connections = 0;  // accepted since start
  std::int64_t total_commands = 0;     // commands executed (including failed ones)
  std::int64_t protocol_errors = 0;    // connections closed for malformed input
  // Of those, connections that had not authenticated (over the limits for them, or malformed).
  std::int64_t unauthenticated_rejected = 0;
  // Subscribers disconnected for not reading (max_subscriber_output_bytes).
  std::int64_t output_limit_disconnects = 0;
};

struct ServerState;  // private (resp/src)

class RespServer {
 public:
  // Every reference must outlive the server. `clock` must be the clock the MapService uses
  // (TTL replies convert its deadlines). Call Start() to listen.
  RespServer(runtime::ShardSet& shards, map::MapService& maps, topic::TopicService& topics,
             const base::Clock& clock, RespServerOptions options,
             std::shared_ptr<spdlog::logger> log);
  // Stops if still running.
  ~RespServer();
  RespServer(const RespServer&) = delete;
  RespServer& operator=(const RespServer&) = delete;

  // Listens on options.host:options.port. Errors: those of net::TcpListener::Listen
  // (kBadRequest bad host, kConnectionFailed port in use).
  // REQUIRES: shards are started.
  base::Result<void> Start();

  // Stops accepting, closes every connection and waits (bounded, 5 s) until each shard has
  // closed its connections. Idempotent. REQUIRES: not called from a shard thread; shards are
  // still running.
  void Stop();

  // The bound port (valid after Start).
  std::uint16_t port() const;

  RespServerStats Stats() const;

 private:
  std::shared_ptr<ServerState> state_;
  struct Listener;
  std::unique_ptr<Listener> listener_;
};

}  // namespace tessera::resp
