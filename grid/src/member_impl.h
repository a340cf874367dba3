#pragma once
// Member::Impl: what a Member owns, in construction (dependency) order. Private to grid/src:
// member.cc wires it, member_http.cc serves the member's HTTP port from it.

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cluster_merger.h"
#include "embedded_invoker.h"
#include "embedded_topics.h"
#include "event_executor.h"
#include "member_router.h"
#include "native_handler.h"
#include "partition_work_service.h"
#include "tessera/base/clock.h"
#include "tessera/grid/member.h"
#include "tessera/http/server.h"
#include "tessera/map/map_service.h"
#include "tessera/membership/membership_service.h"
#include "tessera/metrics/metrics_registry.h"
#include "tessera/net/server.h"
#include "tessera/resp/resp_server.h"
#include "tessera/runtime/shard_set.h"
#include "tessera/storage/data_dir.h"
#include "tessera/topic/topic_service.h"
#include "topic_relay.h"

namespace tessera::grid {

struct Member::Impl {
  Impl(const MemberOptions& options, std::shared_ptr<spdlog::logger> log,
       const base::Clock* clock_in, const map::EntryProcessorRegistry& processors)
      : clock(clock_in ? clock_in : &steady),
        shards(options.threads ? options.threads : runtime::DefaultShardCount(),
               std::chrono::microseconds(options.idle_poll_us)),
        maps(shards, partition::Partitioner(options.partition_count), *clock, processors, log,
             options.map_options),
        events(log),
        invoker(std::make_shared<EmbeddedInvoker>(maps, events)),
        topics(shards, log, options.topic_stats_limit) {}

  base::SteadyClock steady;
  const base::Clock* clock;
  // Member::ClusterEpoch: rejoins and master changes seen (the membership's thread writes).
  std::atomic<std::uint64_t> cluster_epoch{0};
  std::string last_master;  // the membership's thread only
  runtime::ShardSet shards;
  map::MapService maps;
  EventExecutor events;
  // Native requests that wait for every shard (metrics), run off the shards; not `events`,
  // whose thread delivers listener events and must not wait.
  std::unique_ptr<EventExecutor> off_shard;
  // Writes DIR/cluster.state for each table, in order, off the membership's thread: its
  // fsyncs must not hold the heartbeats (a 2 s fsync under a busy disk got a member removed).
  std::unique_ptr<EventExecutor> state_writer;
  std::shared_ptr<EmbeddedInvoker> invoker;
  topic::TopicService topics;
  std::unique_ptr<NativeHandler> native_handler;
  std::unique_ptr<net::Server> native;
  std::unique_ptr<resp::RespServer> resp;
  std::unique_ptr<http::Server> http;  // member_http.cc
  std::atomic<http::Server*> http_ptr{
      nullptr};                       // `http` once started, for Shutdown's lock-free stop
  std::atomic<bool> stopping{false};  // Shutdown began: not ready, not live
  std::unique_ptr<membership::MembershipService> membership;
  std::unique_ptr<PartitionWorkService> work;  // made by Member's constructor
  std::unique_ptr<MemberRouter> router;        // sends requests for other members' partitions
  std::unique_ptr<TopicRelay> relay;           // sends published messages to the other members
  std::unique_ptr<ClusterMerger> merger;       // split-brain merges (clustered members)
  std::unique_ptr<storage::DataDir> data_dir;  // MemberOptions::data_dir, Start to Shutdown
  std::string member_id;                       // its id, set before any port opens
  // What a restart on the data directory brought back of the cluster's last table (Start).
  std::optional<membership::RecoveryReport> recovery;
  // What the map log held at Start (its replay), with a data directory.
  std::optional<map::LogRecovery> replayed;
  // Fault injection (Member::BlockPeers): shared by the router's and membership's pools.
  std::shared_ptr<net::PeerBlocklist> blocklist = std::make_shared<net::PeerBlocklist>();
  std::shared_ptr<EmbeddedTopics> embedded_topics;
  // Read by the native handler's cluster hooks on shard threads; set once in Start.
  std::atomic<membership::MembershipService*> membership_ptr{nullptr};
  std::shared_ptr<const membership::ClusterView> standalone_view;  // when not listening
  metrics::MetricsRegistry metrics;
  std::mutex metrics_mu;  // one MetricsText at a time (it brings counters up to date)
  std::mutex mu;          // guards proxies and started/stopped
  std::map<std::string, std::shared_ptr<Map>> proxies;
  std::mutex sources_mu;
  std::vector<std::function<void(metrics::MetricsRegistry&)>> metrics_sources;  // sources_mu
  bool started = false;
  bool stopped = false;
  struct HttpRoute {
    std::string method, pattern;
    http::Handler handler;
  };
  std::vector<HttpRoute> http_routes;  // Member::AddHttpRoute, before Start
};

// Sets the per-map families tessera_map_* from MapService::LocalMapStats (member_metrics.cc).
// At most kMaxMapSeries maps (those with the most entries): map names come from clients, and
// every name is a series per family.
inline constexpr std::size_t kMaxMapSeries = 1000;
void SetMapMetrics(metrics::MetricsRegistry& registry,
                   std::vector<std::pair<std::string, map::MapStats>> stats);

}  // namespace tessera::grid
