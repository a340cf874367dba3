#pragma once
// Forwarder: carries keyed RESP commands from the shard their connection lives on to the
// shard owning their key, and their formatted replies back, batched across every connection
// of the shard.
//
// A command queued with Add waits in its shard's outbox until the handlers the shard is
// running now (typically every connection that became readable in one poll) have run; then
// each target shard gets one post with all commands for it, runs them back to back, formats
// their replies there, and sends every reply back in one post. So a poll round costs two
// cross-thread hand-offs per pair of shards, however many connections and commands it had.
//
// Order: commands queued on one shard for one target run in the order they were queued (one
// vector, posts from one thread are FIFO). A command that reaches other shards some other way
// (a fan-out such as MGET or DBSIZE) must call Send first, so it runs after the forwarded
// commands queued before it.
//
// Shard: Add and Send run on the `from` shard; everything else on the shards they post to.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/map/map_request.h"
#include "tessera/map/map_service.h"
#include "tessera/resp/resp_writer.h"
#include "tessera/runtime/shard_set.h"

namespace tessera::resp {

class Connection;

// Formats a forwarded command's result into its reply (runs on the owning shard).
using ForwardFormat = std::function<void(RespWriter&, base::Result<map::MapResult>&)>;

struct ForwardedCommand {
  std::shared_ptr<Connection> conn;
  map::MapRequest request;
  std::uint64_t seq = 0;  // the connection's reply slot
  int protocol = 2;
  ForwardFormat format;
};

class Forwarder : public std::enable_shared_from_this<Forwarder> {
 public:
  // Both references must outlive every post the forwarder makes.
  Forwarder(runtime::ShardSet& shards, map::MapService& maps);

  // Queues `command` on shard `from` for shard `to`. REQUIRES: on shard `from`, from != to.
  void Add(std::size_t from, std::size_t to, ForwardedCommand command);
  // Sends what shard `from` has queued now. REQUIRES: on shard `from`.
  void Send(std::size_t from);

 private:
  struct Reply {
    std::shared_ptr<Connection> conn;
    std::uint64_t seq;
    std::string data;
  };
  struct alignas(64) Outbox {
    std::vector<std::vector<ForwardedCommand>> to;  // per target shard
    bool send_posted = false;
  };

  // On the target shard: runs a batch from `from` and posts the replies back.
  void Run(std::size_t from, std::vector<ForwardedCommand>& batch);
  // On the home shard: hands each reply to its connection, then lets each flush once.
  static void Deliver(std::vector<Reply>& replies);

  runtime::ShardSet& shards_;
  map::MapService& maps_;
  std::vector<Outbox> outboxes_;  // per home shard; outboxes_[s] is touched only on shard s
};

}  // namespace tessera::resp
