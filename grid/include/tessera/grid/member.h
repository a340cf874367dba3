#pragma once
// Member: the embedded instance. A member owns the shards (one thread per shard), the map
// service, the entry-processor registry and the front-ends: the native protocol port (for
// clients and, later, other members) and an optional RESP port.
//
// Lifecycle: construct, register entry processors, Start(), use GetMap(), Shutdown().
// Thread-safety: after Start(), every method is safe from any thread.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/base/clock.h"
#include "tessera/grid/health.h"
#include "tessera/grid/instance.h"
#include "tessera/grid/partition_work.h"
#include "tessera/http/server.h"
#include "tessera/map/entry_processor.h"
#include "tessera/map/map_service.h"
#include "tessera/membership/cluster_view.h"
#include "tessera/membership/membership.h"
#include "tessera/topic/topic_service.h"
#include "tessera/wire/message.h"

namespace spdlog {
class logger;
}

namespace tessera::metrics {
class MetricsRegistry;
}

namespace tessera::grid {

struct MemberOptions {
  std::string host = "127.0.0.1";  // address the native port binds to
  // Native protocol port; 0 = pick a free port (read it back with native_port()).
  std::uint16_t port = 5701;
  // Serve the native protocol at all (an embedded member may keep its data private).
  bool listen = true;
  std::string cluster_name = "dev";
  std::string secret;       // empty = no secret required
  std::size_t threads = 0;  // shards; 0 = runtime::DefaultShardCount() (cores less one, >= 1)
  // How long a shard out of work keeps polling before it sleeps, while its work arrives more
  // often than that and its core is not contended (runtime::ShardSet, runtime::IdlePoll);
  // 0 = sleep at once. Trades CPU for latency and throughput: under a steady stream of events
  // less than this apart, the shard's thread is busy all the time.
  std::uint32_t idle_poll_us = 50;
  std::uint32_t partition_count = 271;
  std::uint32_t max_frame_bytes = 16 * 1024 * 1024;
  // The highest native protocol version answered to clients (lean frames from 2, stream
  // appends as lean frames from 3; docs/architecture.md, "Wire protocol"). 1: every
  // connection stays on version 1 (a rollout, or a codec bug).
  std::uint32_t max_protocol_version = wire::kMaxProtocolVersion;
  map::MapServiceOptions map_options;
  std::map<std::string, map::MapConfig> maps;        // per-map configuration
  std::map<std::string, topic::TopicConfig> topics;  // per-topic configuration
  // Topic names kept with statistics of their own besides those with a subscription here
  // (metrics, grid-cli topic stats); others count in the totals only. See topic_service.h.
  std::uint32_t topic_stats_limit = topic::TopicService::kDefaultStatsLimit;
  std::optional<std::uint16_t> resp_port;  // RESP front-end (off when unset; 0 = any)
  // HTTP port (off when unset; 0 = any), bound to `host`: GET /health/live, /health/ready,
  // /health/safe (200, or 503 with the reason: health.h), /health (all three), /metrics
  // (MetricsText, Prometheus text format). On threads of its own, never a shard's.
  std::optional<std::uint16_t> http_port;
  std::string resp_default_map = "default";
  std::uint64_t resp_max_bulk_bytes = 512ull * 1024 * 1024;
  // Before a RESP connection authenticated (with a secret): at most this many arguments of at
  // most this many bytes per command, and authenticated within this long of connecting
  // (resp::RespServerOptions::unauthenticated_*).
  std::uint32_t resp_preauth_max_args = 10;
  std::uint64_t resp_preauth_max_bulk_bytes = 16 * 1024;
  std::uint32_t resp_preauth_timeout_ms = 10'000;
  // A RESP subscriber whose unread messages reach this is disconnected
  // (resp::RespServerOptions::max_subscriber_output_bytes).
  std::uint64_t resp_subscriber_output_limit_bytes = 32ull * 1024 * 1024;
  // A native client whose unread replies and events reach this is disconnected
  // (net::ServerOptions::max_client_unsent_bytes; 0 = no limit).
  std::uint64_t client_output_limit_bytes = 64ull * 1024 * 1024;
  // Cluster membership (needs listen = true). Empty join = start a new cluster as its master.
  std::vector<std::string> join;   // seed members' native "host:port"
  std::uint32_t backup_count = 1;  // replicas beyond the owner, 0..6
  std::int64_t heartbeat_interval_ms = 1000;
  std::int64_t failure_timeout_ms = 5000;  // silence after which a member is removed
  std::int64_t join_timeout_ms = 5000;     // no cluster found through `join` by then: start one
  // Split brain: how often the master looks for another cluster of the same name at the join
  // addresses and at members it lost (0 = never); the smaller cluster then merges into the
  // larger, each map by its MapConfig::merge_policy. See docs/architecture.md.
  std::int64_t merge_interval_ms = 2000;
  // Serve the fault-injection op (Client::SetBlockedPeers, grid-cli fault): for tests and
  // chaos runs; off by default.
  bool fault_injection = false;
  // The member's data directory (storage::DataDir; empty = none). Start opens it, created if
  // absent, and holds its lock until Shutdown; it keeps the member's persistent id
  // (member_id()) and is refused when another process holds it or it belongs to another
  // cluster name or partition count. Its "maps" folder holds the member's map log
  // (MapService::OpenLog): maps whose MapConfig::persistence is not kNone, and every internal
  // map, are logged and come back at the next start. It also keeps the last partition table
  // (cluster.state): after a restart of every member the cluster waits for that table's
  // members and serves each partition from its newest replica (recovery_policy below).
  std::string data_dir;
  // Full-cluster restart (membership.h, "Recovery"): a member restarted on a data directory
  // that holds a partition table waits, with its cluster, for the members of that table
  // (requests get kRecovering meanwhile). kFull waits for all of them; kPartial goes on after
  // recovery_timeout_ms when every partition has a replica among the members back.
  membership::RecoveryPolicy recovery_policy = membership::RecoveryPolicy::kFull;
  // A write or fsync of the data directory's log failed (a full or failing disk): the member
  // must not go on as if it kept what it acknowledges. Writes to persisting maps fail with
  // kStorage from then on (logged once); this is called once, on a log thread, for the host to
  // stop the member (grid-node exits 1) so its cluster fails its partitions over to their
  // backups. It must not call Shutdown itself (post it elsewhere). Null: the member logs it
  // and serves on, refusing those writes.
  std::function<void(const base::Error&)> on_storage_failure;
  std::int64_t recovery_timeout_ms = 300'000;
};

class Member final : public Instance {
 public:
  // `clock` may be null (steady clock); when given it must outlive the member.
  explicit Member(MemberOptions options, std::shared_ptr<spdlog::logger> log = nullptr,
                  const base::Clock* clock = nullptr);
  ~Member() override;

  // Registry to add entry processors to. REQUIRES: before Start().
  map::EntryProcessorRegistry& processors() { return processors_; }
  // Registers partition-owned work (partition_work.h): `factory` runs on a partition's shard
  // each time this member comes to own the partition, and what it returns is destroyed there
  // when the member stops owning it (before the partition's data moves) or shuts down.
  // Metrics: tessera_member_partitions_owned, tessera_partition_work_partitions,
  // tessera_partition_work_{started,stopped}_total. REQUIRES: before Start(); unique names (a
  // second registration of a name replaces the first).
  void RegisterPartitionWork(std::string name, PartitionWorkFactory factory);

  // Starts the shards, services and listeners, then joins the cluster (in the background: the
  // member serves at once; cluster_view() shows when it has joined). Errors:
  // kConnectionFailed when a port cannot be bound (the message names the port and what to
  // do); kBadRequest for join addresses without listen, or a backup count above 6.
  // REQUIRES: called once.
  base::Result<void> Start();

  std::shared_ptr<Map> GetMap(const std::string& name) override;
  std::shared_ptr<Topic> GetTopic(const std::string& name) override;
  std::shared_ptr<ReliableTopic> GetReliableTopic(const std::string& name,
                                                  ReliableTopicConfig config = {}) override;
  std::shared_ptr<Stream> GetStream(const std::string& name, StreamConfig config = {}) override;
  // Leaves the cluster gracefully (bounded by the failure timeout), then stops everything.
  base::Result<TransactionResult> Transact(const Transaction& transaction) override;
  void Shutdown() override;
  std::uint64_t ClusterEpoch() const override;

  // The native port actually bound (useful with port 0), 0 if not listening.
  std::uint16_t native_port() const;
  // The RESP port actually bound, 0 if RESP is off.
  std::uint16_t resp_port() const;
  // The HTTP port actually bound, 0 if HTTP is off.
  std::uint16_t http_port() const;
  // Liveness, readiness and whether stopping a member now is safe (health.h). Cheap: reads
  // the member's current view and the other members' last heartbeats.
  MemberHealth Health() const;
  // Serves `handler` on the member's HTTP port (http::Server::Route) besides the probes and
  // /metrics: for code built on the member (tessera::admin's REST API and console). Ignored
  // when HTTP is off. REQUIRES: before Start().
  void AddHttpRoute(std::string method, std::string pattern, http::Handler handler);
  // This process's identity in its cluster, fresh at every start (a restarted member is a new
  // one until it brings its data back: docs/architecture.md, "Restart at the same address").
  const std::string& uuid() const { return uuid_; }
  // The member's persistent id: its data directory's, kept across restarts (also at another
  // address or port); without a data directory, uuid(). Valid after a successful Start().
  const std::string& member_id() const;
  const MemberOptions& options() const { return options_; }
  map::MapService& map_service();
  // The member's topic delivery and its per-topic counters (TopicService::StatsByTopic).
  const topic::TopicService& topic_service() const;
  // The member's current view of its cluster (members, partition table); a one-member view
  // when not listening. Never null after Start().
  std::shared_ptr<const membership::ClusterView> cluster_view() const;
  // Times this process was seen paused (its membership timer did not run for more than a
  // third of the failure timeout: SIGSTOP, a VM stall, swapping), 0 when not clustered. A
  // holder of a lease (putIfAbsent with TTL) reads it before and after acting: a change means
  // the lease may have expired meanwhile and must be checked again before relying on it.
  std::uint64_t pauses() const;
  // Times this member left its cluster to join another with its data (merged after a split
  // brain, or removed while alive and rejoined); 0 when not clustered.
  std::uint64_t rejoins() const;
  // Fault injection for tests and chaos runs: this member stops sending anything to the
  // members at `addresses` ("host:port"; its connections to them close, its calls to them fail
  // as if the network were cut); an empty list lifts the block. A network partition between two
  // groups takes a block on every member of each, naming the other group.
  void BlockPeers(std::vector<std::string> addresses);
  // The member's metrics in the Prometheus text format: per topic published/delivered/
  // dropped/listener-error counters and listener gauges, forwarded requests, pending
  // migrations, pauses. Also served to clients (Client::FetchMetricsText, grid-cli metrics).
  std::string MetricsText() const;
  // Code built on the member (the saga framework) adds its metrics: `source` runs at every
  // MetricsText and sets its families (MetricsRegistry::SetCounterFamily and the like). It
  // must not call MetricsText. Sources stay for the member's life; the code behind one must
  // outlive the member or make the source a no-op when it is gone.
  void AddMetricsSource(std::function<void(metrics::MetricsRegistry&)> source);
  // The registry behind MetricsText, for code built on the member that keeps series of its
  // own (a histogram it records into): they render with the member's metrics.
  metrics::MetricsRegistry& metrics_registry();
  // This member as grid-cli and other members see it (the native protocol's member info), a
  // JSON object: uuid, member_id, data_dir, address, cluster, shards, partitions, maps,
  // migrations_pending, ..., and "persistence" (its data directory, map log figures, what its
  // start replayed, a full-cluster restart's wait). Thread-safe.
  std::string InfoJson() const;

 private:
  struct Impl;
  base::Result<void> StartNative();
  base::Result<void> StartResp();
  base::Result<void> StartHttp();  // member_http.cc
  base::Result<void> StartMembership();
  void StartRouter();
  void ShutdownLocked();  // REQUIRES: impl_->mu held
  // `view` (or the current view) as the View message clients receive (native_protocol.h).
  std::string EncodedView(const membership::ClusterView* view = nullptr) const;
  MemberOptions options_;
  std::shared_ptr<spdlog::logger> log_;
  std::string uuid_;
  map::EntryProcessorRegistry processors_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::grid
