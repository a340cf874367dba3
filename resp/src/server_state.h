#pragma once
// ServerState: what every connection of one RespServer shares. Owned through shared_ptr by the
// server and by each connection, so replies that complete after Stop() still find it.
//
// Thread-safety: the references and options are immutable after construction; counters are
// atomics; `connections[s]` is touched only on shard s.

#include <spdlog/logger.h>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "command_table.h"
#include "forwarder.h"
#include "stream_waiters.h"
#include "tessera/base/clock.h"
#include "tessera/map/map_service.h"
#include "tessera/resp/resp_server.h"
#include "tessera/runtime/shard_set.h"
#include "tessera/topic/topic_service.h"

namespace tessera::resp {

class Connection;

// A counter written by one shard thread only, on its own cache line.
struct alignas(64) ShardCounter {
  std::atomic<std::int64_t> value{0};
  void Add(std::int64_t n) {
    value.store(value.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
};

// Stream keys whose keyspace entry this server wrote or found (XADD), per shard: an XADD of a
// key not in it sends the entry with the append (WRONGTYPE for a string or hash; a pipelined
// EXPIRE or DEL after it finds the key). DEL and FLUSHDB through this server take keys out.
// Locked: XADD's replies may complete on other shards.
// `removals` is MapService::StreamKeyRemovals(): when a stream's keyspace entry went on this
// member since the set was last used (a SET over it, its expiry), the set starts over.
struct StreamKeyCache {
  static constexpr std::size_t kMax = 65'536;  // then it starts over
  std::mutex mu;
  std::unordered_set<std::string> keys;
  std::uint64_t removals = 0;
  bool Has(const std::string& key, std::uint64_t removals_now) {
    std::lock_guard lock(mu);
    Refresh(removals_now);
    return keys.count(key) != 0;
  }
  void Add(const std::string& key, std::uint64_t removals_now) {
    std::lock_guard lock(mu);
    Refresh(removals_now);
    if (keys.size() >= kMax) keys.clear();
    keys.insert(key);
  }
  void Refresh(std::uint64_t removals_now) {  // REQUIRES: mu held
    if (removals_now == removals) return;
    keys.clear();
    removals = removals_now;
  }
  void Remove(const std::string& key) {
    std::lock_guard lock(mu);
    keys.erase(key);
  }
  void Clear() {
    std::lock_guard lock(mu);
    keys.clear();
  }
};

struct ServerState {
  ServerState(runtime::ShardSet& s, map::MapService& m, topic::TopicService& t,
              const base::Clock& c, RespServerOptions o, std::shared_ptr<spdlog::logger> l)
      : shards(s),
        maps(m),
        topics(t),
        clock(c),
        options(std::move(o)),
        log(std::move(l)),
        commands(s.size()),
        forwarder(std::make_shared<Forwarder>(s, m)),
        connections(s.size()),
        stream_keys(s.size()),
        start_wall_ms(c.WallMs()) {}

  runtime::ShardSet& shards;
  map::MapService& maps;
  topic::TopicService& topics;
  const base::Clock& clock;
  const RespServerOptions options;
  std::shared_ptr<spdlog::logger> log;
  CommandTable table;

  std::atomic<std::int64_t> connected_clients{0};
  std::atomic<std::int64_t> total_connections{0};
  std::atomic<std::int64_t> protocol_errors{0};
  std::atomic<std::int64_t> unauthenticated_rejected{0};
  std::atomic<std::int64_t> output_limit_disconnects{0};
  std::atomic<std::uint64_t> next_client_id{1};
  std::atomic<std::uint16_t> bound_port{0};  // the listening port once started
  std::vector<ShardCounter> commands;        // per shard
  std::shared_ptr<Forwarder> forwarder;      // keyed commands to other shards
  StreamWaiters stream_waiters;              // blocked XREAD / XREADGROUP by key
  std::vector<std::unordered_map<std::uint64_t, std::weak_ptr<Connection>>> connections;
  std::vector<StreamKeyCache> stream_keys;  // per shard
  const base::Millis start_wall_ms;

  std::int64_t TotalCommands() const {
    std::int64_t total = 0;
    for (const auto& c : commands) total += c.value.load(std::memory_order_relaxed);
    return total;
  }
};

}  // namespace tessera::resp
