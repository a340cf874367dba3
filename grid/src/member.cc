// Member wiring: the composition of shards, map service, event executor and front-ends.
// Construction order is dependency order; Shutdown tears down in reverse: stop accepting,
// close connections, stop services, stop shards, then drain the event thread.
#include "tessera/grid/member.h"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>

#include "member_impl.h"
#include "member_persistence.h"
#include "native_protocol.h"
#include "tessera/base/check.h"
#include "tessera/base/log.h"
#include "tessera/hash/redis_hash.h"
#include "tessera/streams/redis_stream.h"
#include "transaction_runner.h"

namespace tessera::grid {

namespace {

std::string NewUuid() {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<std::uint64_t>(rd()) << 32) ^ rd());
  std::uint64_t a = gen(), b = gen();
  b = (b & 0x3fffffffffffffffull) | 0x8000000000000000ull;  // RFC 4122 variant
  a = (a & 0xffffffffffff0fffull) | 0x0000000000004000ull;  // version 4
  return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", a >> 32, (a >> 16) & 0xffff, a & 0xffff,
                     b >> 48, b & 0xffffffffffffull);
}

std::shared_ptr<spdlog::logger> DefaultLogger() { return base::NamedLogger("member"); }

}  // namespace

Member::Member(MemberOptions options, std::shared_ptr<spdlog::logger> log, const base::Clock* clock)
    : options_(std::move(options)), log_(log ? std::move(log) : DefaultLogger()), uuid_(NewUuid()) {
  processors_.RegisterBuiltins();
  hash::Register();  // the data type families a member serves (map/family.h)
  streams::Register();
  options_.map_options.failure_timeout_ms = options_.failure_timeout_ms;  // LeaveCluster's
  options_.map_options.on_log_failure = [log = log_, failed = std::make_shared<std::atomic<bool>>(),
                                         host = options_.on_storage_failure](
                                            const base::Error& error) {
    if (failed->exchange(true)) return;  // once per member, not per shard
    log->critical(
        "{}: writes to persisting maps are refused from now on; {}", error.message(),
        host ? "this member stops, so that its cluster serves its partitions from their backups"
             : "stop this member, free or fix the disk, and start it again on its data directory");
    if (host) host(error);
  };
  // Shared with the logs' flusher threads, which may outlive the registry.
  auto fsync_latency = std::make_shared<metrics::LatencyHistogram>();
  options_.map_options.on_log_sync =
      [fsync_latency, host = options_.map_options.on_log_sync](std::chrono::nanoseconds took) {
        fsync_latency->Record(took);
        if (host) host(took);
      };
  impl_ = std::make_unique<Impl>(options_, log_, clock, processors_);
  impl_->work = std::make_unique<PartitionWorkService>(impl_->shards, impl_->maps, *this);
  impl_->metrics.AdoptHistogram("tessera_log_fsync_seconds", {},
                                "Time each fdatasync of a shard's map log took (--data-dir)",
                                std::move(fsync_latency));
}

void Member::RegisterPartitionWork(std::string name, PartitionWorkFactory factory) {
  std::lock_guard lock(impl_->mu);
  TESSERA_CHECK(!impl_->started, "RegisterPartitionWork called after Start");
  impl_->work->Register(std::move(name), std::move(factory));
}

Member::~Member() { Shutdown(); }

map::MapService& Member::map_service() { return impl_->maps; }

const topic::TopicService& Member::topic_service() const { return impl_->topics; }

base::Result<void> Member::Start() {
  std::lock_guard lock(impl_->mu);
  TESSERA_CHECK(!impl_->started, "Member::Start called twice");
  if (!options_.listen && !options_.join.empty()) {
    return base::Fail(base::ErrorCode::kBadRequest,
                      "a member that does not listen cannot join a cluster; set listen or "
                      "remove the join addresses");
  }
  if (options_.backup_count > partition::kMaxBackupCount) {
    return base::Fail(
        base::ErrorCode::kBadRequest,
        fmt::format("backup count {} is above the maximum of {}; use 0 to {}",
                    options_.backup_count, partition::kMaxBackupCount, partition::kMaxBackupCount));
  }
  if (!options_.data_dir.empty()) {
    auto dir = storage::DataDir::Open(options_.data_dir, options_.cluster_name,
                                      options_.partition_count, NewUuid());
    if (!dir) return std::unexpected(dir.error());
    impl_->data_dir = std::move(*dir);
    impl_->state_writer = std::make_unique<EventExecutor>(log_);
    impl_->member_id = impl_->data_dir->member_id();
    log_->info("data directory {}: member id {} ({})", options_.data_dir,
               impl_->data_dir->member_id(), impl_->data_dir->created() ? "new" : "kept");
  }
  impl_->started = true;  // from here a failure shuts down what started
  for (const auto& [name, config] : options_.maps) impl_->maps.Configure(name, config);
  impl_->shards.Start();
  impl_->maps.Start();
  if (impl_->data_dir) {
    // Before any request or table: what the log holds is back before the member serves.
    auto replayed =
        impl_->maps.OpenLog((std::filesystem::path(options_.data_dir) / "maps").string());
    if (!replayed) {
      ShutdownLocked();
      return std::unexpected(replayed.error());
    }
    impl_->replayed = *replayed;
    auto report = LoadRecoveryReport(*impl_->data_dir, *replayed, options_.partition_count);
    if (!report) {
      ShutdownLocked();
      return std::unexpected(report.error());
    }
    // Requests wait for the first table as any joiner's do (MapService::ExpectPartitionTable);
    // they fail with kRecovering only once the cluster's view says it has no table to give
    // (the view listener below). Said here already, a lone member whose own table follows at
    // once failed the requests of a slow first moment.
    impl_->recovery = std::move(*report);
  }
  // A listening member is a cluster member (maybe of one): until its first partition table
  // it must not serve from its empty stores what other members own.
  if (options_.listen) impl_->maps.ExpectPartitionTable();
  impl_->work->Start();  // before the first table: its hook sees every ownership change
  impl_->embedded_topics = std::make_shared<EmbeddedTopics>(impl_->topics, impl_->shards.size(),
                                                            "member:" + uuid_, log_);
  if (options_.listen) StartRouter();  // before any front-end can publish
  if (options_.listen) {
    auto started = StartNative();
    if (!started) {
      ShutdownLocked();
      return started;
    }
  }
  if (options_.resp_port) {
    auto started = StartResp();
    if (!started) {
      ShutdownLocked();
      return started;
    }
  }
  if (auto started = StartMembership(); !started) {
    ShutdownLocked();
    return started;
  }
  if (options_.http_port) {  // last: its probes read the membership
    if (auto started = StartHttp(); !started) {
      ShutdownLocked();
      return started;
    }
  }
  log_->info("member {} started: {} shards, {} partitions, cluster '{}'", uuid_,
             impl_->shards.size(), options_.partition_count, options_.cluster_name);
  return {};
}

base::Result<void> Member::StartNative() {
  net::ServerOptions server;
  server.host = options_.host;
  server.port = options_.port;
  server.handshake.cluster_name = options_.cluster_name;
  server.handshake.secret = options_.secret;
  server.handshake.max_protocol_version = options_.max_protocol_version;
  server.max_frame_bytes = options_.max_frame_bytes;
  server.max_client_unsent_bytes = options_.client_output_limit_bytes;
  server.member_uuid = uuid_;
  server.partition_count = static_cast<std::int32_t>(options_.partition_count);
  ClusterHooks hooks;
  hooks.info = [this] { return InfoJson(); };
  hooks.metrics = [this] { return MetricsText(); };
  impl_->off_shard = std::make_unique<EventExecutor>(log_);
  hooks.off_shard = [this](std::function<void()> task) { impl_->off_shard->Post(std::move(task)); };
  hooks.view = [this] { return EncodedView(); };
  hooks.message = [this](std::string bytes) {
    if (auto* service = impl_->membership_ptr.load()) service->Deliver(std::move(bytes));
  };
  hooks.recovery_force = [this]() -> base::Result<std::string> {
    auto* service = impl_->membership_ptr.load();
    if (!service) {
      return base::Fail(base::ErrorCode::kBadRequest,
                        "this member is not in a cluster: there is no recovery to force");
    }
    return service->ForceRecovery();
  };
  if (impl_->data_dir) {
    hooks.backup = [this](const std::string& target) {
      return BackupDataDir(*impl_->data_dir, impl_->maps, target);
    };
  }
  if (options_.fault_injection) {
    hooks.fault = [this](const std::string& payload) {
      BlockPeers(native::DecodeAddressList(payload));
      const auto now = impl_->blocklist->Get();
      return native::EncodeAddressList({now.begin(), now.end()});
    };
  }
  impl_->native_handler = std::make_unique<NativeHandler>(
      impl_->maps, impl_->topics, impl_->shards.size(), std::move(hooks), log_);
  auto native = net::Server::Start(impl_->shards, server, *impl_->native_handler, log_);
  if (!native) return std::unexpected(native.error());
  impl_->native = std::move(*native);
  log_->info("native protocol on {}:{}", options_.host, impl_->native->port());
  return {};
}

base::Result<void> Member::StartResp() {
  resp::RespServerOptions resp;
  resp.host = options_.host;
  resp.port = *options_.resp_port;
  resp.default_map = options_.resp_default_map;
  resp.secret = options_.secret;
  resp.max_bulk_bytes = static_cast<std::int64_t>(options_.resp_max_bulk_bytes);
  resp.unauthenticated_max_args = options_.resp_preauth_max_args;
  resp.unauthenticated_max_bulk_bytes =
      static_cast<std::int64_t>(options_.resp_preauth_max_bulk_bytes);
  resp.unauthenticated_timeout = std::chrono::milliseconds(options_.resp_preauth_timeout_ms);
  resp.max_subscriber_output_bytes = options_.resp_subscriber_output_limit_bytes;
  impl_->resp = std::make_unique<resp::RespServer>(impl_->shards, impl_->maps, impl_->topics,
                                                   *impl_->clock, resp, log_);
  auto started = impl_->resp->Start();
  if (!started) {
    impl_->resp.reset();
    return started;
  }
  log_->info("RESP on {}:{} (default map '{}')", options_.host, impl_->resp->port(),
             options_.resp_default_map);
  return {};
}

void Member::StartRouter() {
  wire::Hello hello;
  hello.cluster_name = options_.cluster_name;
  hello.role = wire::Role::kMember;
  hello.secret = options_.secret;
  hello.client_name = "member " + uuid_;  // for the peers' logs (the port is not bound yet)
  impl_->router = std::make_unique<MemberRouter>(
      std::move(hello), partition::Partitioner(options_.partition_count),
      std::chrono::milliseconds(4000), options_.max_frame_bytes, log_);
  impl_->router->set_blocklist(impl_->blocklist);
  impl_->relay =
      std::make_unique<TopicRelay>(impl_->topics, *impl_->router, impl_->shards, options_.topics,
                                   partition::Partitioner(options_.partition_count), log_);
  impl_->topics.SetClusterPublisher(
      [relay = impl_->relay.get()](topic::Message m) { return relay->Publish(std::move(m)); },
      [relay = impl_->relay.get()] { return relay->HasPeers(); });
}

base::Result<void> Member::StartMembership() {
  // Membership runs on real time even when a test drives TTLs with a manual clock.
  membership::MemberInfo self{uuid_, fmt::format("{}:{}", options_.host, native_port()),
                              impl_->steady.WallMs(),
                              impl_->data_dir ? impl_->member_id : std::string()};
  if (!options_.listen) {
    auto view = std::make_shared<membership::ClusterView>();
    view->members = {1, {self}};
    view->partitions =
        partition::Rebalance({}, {uuid_}, options_.partition_count, options_.backup_count);
    impl_->standalone_view = std::move(view);
    return {};
  }
  membership::MembershipServiceOptions cluster;
  cluster.membership.settings = {options_.cluster_name, wire::kProtocolVersion,
                                 options_.partition_count};
  cluster.membership.backup_count = options_.backup_count;
  cluster.membership.recovery = impl_->recovery;
  cluster.membership.recovery_policy = options_.recovery_policy;
  cluster.membership.recovery_timeout_ms = options_.recovery_timeout_ms;
  cluster.membership.seeds = options_.join;
  cluster.membership.heartbeat_interval_ms = options_.heartbeat_interval_ms;
  cluster.membership.failure_timeout_ms = options_.failure_timeout_ms;
  cluster.membership.join_timeout_ms = options_.join_timeout_ms;
  cluster.membership.join_interval_ms = std::min<base::Millis>(500, options_.heartbeat_interval_ms);
  cluster.membership.merge_interval_ms = options_.merge_interval_ms;
  cluster.membership.migrations_pending = [this] {
    return static_cast<std::int64_t>(impl_->maps.AwaitingPartitionCount());
  };
  cluster.secret = options_.secret;
  cluster.max_frame_bytes = options_.max_frame_bytes;
  cluster.blocklist = impl_->blocklist;
  const std::string self_address = self.address;
  impl_->membership = std::make_unique<membership::MembershipService>(
      std::move(self), std::move(cluster), impl_->steady, log_);
  impl_->merger = std::make_unique<ClusterMerger>(impl_->maps, uuid_, options_.failure_timeout_ms,
                                                  options_.join_timeout_ms, log_);
  impl_->membership->set_rejoin_listener([merger = impl_->merger.get(), impl = impl_.get()](
                                             const std::string& why, base::Millis silent_ms) {
    impl->cluster_epoch.fetch_add(1, std::memory_order_acq_rel);
    merger->OnRejoin(why, silent_ms);
  });
  impl_->membership->set_view_listener([this, self_address](const membership::ClusterView& view) {
    if (const membership::MemberInfo* master = view.members.master()) {
      if (!impl_->last_master.empty() && impl_->last_master != master->uuid) {
        impl_->cluster_epoch.fetch_add(1, std::memory_order_acq_rel);
      }
      impl_->last_master = master->uuid;
    }
    if (view.partitions.version == 0) {
      // A full-cluster restart waits for the members of its last table (membership.h,
      // "Recovery"): no table yet, and requests say why.
      impl_->maps.SetRecovering(fmt::format(
          "recovering: the cluster restarts from its members' data directories and waits for "
          "the members of its last partition table (its master {} says which on "
          "/health/ready)",
          view.members.master() ? view.members.master()->address : std::string("(none yet)")));
      if (impl_->native_handler) impl_->native_handler->PublishView(EncodedView(&view));
      return;
    }
    if (impl_->data_dir && view.members.Find(uuid_)) {
      impl_->state_writer->Post([this, view] {
        if (auto kept = PersistClusterState(*impl_->data_dir, view, uuid_); !kept) {
          log_->error("the partition table could not be kept in the data directory: {}",
                      kept.error().message());
        }
      });
    }
    // The partition table as addresses, for routing, backups and migration.
    std::unordered_map<std::string, std::string> address;
    std::vector<map::MapService::TableMember> members;
    for (const auto& m : view.members.members) {
      address[m.uuid] = m.address;
      members.push_back({m.address, m.uuid});
    }
    std::vector<std::vector<std::string>> replicas(options_.partition_count);
    for (std::uint32_t p = 0; p < view.partitions.partition_count() && p < replicas.size(); ++p) {
      for (const auto& uuid : view.partitions.replicas[p]) {
        auto it = address.find(uuid);
        if (it != address.end()) replicas[p].push_back(it->second);
      }
    }
    std::vector<std::string> others;
    for (const auto& m : members) {
      if (m.address != self_address) others.push_back(m.address);
    }
    std::vector<std::string> owners;
    for (const auto& r : replicas) owners.push_back(r.empty() ? std::string() : r.front());
    impl_->relay->SetPeers(std::move(others), self_address, std::move(owners));
    impl_->maps.SetPartitionTable(std::move(replicas), members, self_address, impl_->router.get(),
                                  view.partitions.recovered);
    if (view.members.Find(uuid_)) impl_->merger->OnJoined();  // a merge's entries may go
    // Clients keep the table to send each key to its owner (see client.h).
    if (impl_->native_handler) impl_->native_handler->PublishView(EncodedView(&view));
  });
  impl_->membership->Start();
  impl_->membership_ptr.store(impl_->membership.get());
  return {};
}

std::string Member::MetricsText() const {
  std::lock_guard lock(impl_->metrics_mu);
  auto& registry = impl_->metrics;
  // Counters brought up to the services' own totals (they only grow).
  auto sync = [](metrics::Counter& counter, std::int64_t total) {
    if (total > counter.value()) counter.Increment(total - counter.value());
  };
  // Per topic (a bounded set of names, see topic_service.h) and over every topic.
  using CounterValues = std::vector<std::pair<metrics::Labels, std::int64_t>>;
  using GaugeValues = std::vector<std::pair<metrics::Labels, double>>;
  CounterValues published, delivered, dropped, errors;
  GaugeValues listening;
  for (const auto& [topic, s] : impl_->topics.StatsByTopic()) {
    const metrics::Labels labels = {{"topic", topic}};
    published.emplace_back(labels, s.published);
    delivered.emplace_back(labels, s.delivered);
    dropped.emplace_back(labels, s.dropped);
    errors.emplace_back(labels, s.listener_errors);
    listening.emplace_back(labels, static_cast<double>(s.subscriptions));
  }
  registry.SetCounterFamily("tessera_topic_published_total",
                            "Messages published to the topic through this member",
                            std::move(published));
  registry.SetCounterFamily("tessera_topic_delivered_total",
                            "Messages delivered to the topic's listeners on this member",
                            std::move(delivered));
  registry.SetCounterFamily("tessera_topic_dropped_total",
                            "Messages dropped for listeners on this member that fell behind",
                            std::move(dropped));
  registry.SetCounterFamily("tessera_topic_listener_errors_total",
                            "Listener calls on this member that threw", std::move(errors));
  registry.SetGaugeFamily("tessera_topic_listeners", "Listeners registered on this member",
                          std::move(listening));
  const topic::TopicStats all = impl_->topics.Stats();
  sync(registry.RegisterCounter("tessera_net_slow_clients_closed_total", {},
                                "Native client connections closed because they did not read "
                                "their replies and events (over the unsent limit)"),
       impl_->native ? impl_->native->slow_clients_closed() : 0);
  const resp::RespServerStats resp_stats =
      impl_->resp ? impl_->resp->Stats() : resp::RespServerStats{};
  sync(registry.RegisterCounter("tessera_resp_protocol_errors_total", {},
                                "RESP connections closed for malformed input or over a limit"),
       resp_stats.protocol_errors);
  sync(registry.RegisterCounter("tessera_resp_unauthenticated_rejected_total", {},
                                "RESP connections closed before they authenticated: over the "
                                "limits for them, or silent past the timeout"),
       resp_stats.unauthenticated_rejected);
  sync(registry.RegisterCounter("tessera_resp_output_limit_disconnects_total", {},
                                "RESP subscribers disconnected for not reading their messages"),
       resp_stats.output_limit_disconnects);
  sync(registry.RegisterCounter("tessera_topics_published_total", {},
                                "Messages published through this member, every topic"),
       all.published);
  sync(registry.RegisterCounter("tessera_topics_delivered_total", {},
                                "Messages delivered to listeners on this member, every topic"),
       all.delivered);
  sync(registry.RegisterCounter("tessera_topics_dropped_total", {},
                                "Messages dropped for listeners on this member, every topic"),
       all.dropped);
  sync(registry.RegisterCounter("tessera_topics_listener_errors_total", {},
                                "Listener calls on this member that threw, every topic"),
       all.listener_errors);
  GaugeValues entry_listeners;
  for (const auto& [map_name, count] : impl_->maps.EntryListenerCounts()) {
    entry_listeners.emplace_back(metrics::Labels{{"map", map_name}}, static_cast<double>(count));
  }
  registry.SetGaugeFamily("tessera_map_entry_listeners",
                          "Entry listeners registered on this member (by clients and embedded "
                          "code)",
                          std::move(entry_listeners));
  for (const auto& [ring, c] : impl_->maps.RingStats()) {
    const metrics::Labels labels = {{"topic", ring}};
    sync(registry.RegisterCounter("tessera_reliable_topic_published_total", labels,
                                  "Messages stored in the reliable topic's ring by this member "
                                  "as its owner"),
         c.published);
    sync(registry.RegisterCounter("tessera_reliable_topic_discarded_total", labels,
                                  "Messages the discard-newest policy dropped on this member"),
         c.discarded);
  }
  GaugeValues stream_events, stream_bytes, lag, lag_age, leases;
  const double now_ms = static_cast<double>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                std::chrono::system_clock::now().time_since_epoch())
                                                .count());
  for (const auto& st : impl_->maps.StreamStats()) {
    const metrics::Labels labels = {{"stream", st.stream}};
    sync(registry.RegisterCounter("tessera_stream_appended_total", labels,
                                  "Events stored in the stream by this member as owner"),
         st.appended);
    sync(registry.RegisterCounter("tessera_stream_duplicates_total", labels,
                                  "Appends this member answered from the dedup window"),
         st.duplicates);
    stream_events.emplace_back(labels, static_cast<double>(st.events));
    stream_bytes.emplace_back(labels, static_cast<double>(st.bytes));
    for (const auto& g : st.groups) {
      const metrics::Labels gl = {{"stream", st.stream}, {"group", g.group}};
      sync(registry.RegisterCounter("tessera_stream_delivered_total", gl,
                                    "Events this member served to the group's consumers"),
           g.delivered);
      sync(registry.RegisterCounter("tessera_stream_redelivered_total", gl,
                                    "Events this member served to the group again"),
           g.redelivered);
      sync(registry.RegisterCounter("tessera_stream_committed_total", gl,
                                    "Events the group committed on this member"),
           g.committed);
      lag.emplace_back(gl, static_cast<double>(g.lag));
      lag_age.emplace_back(gl, g.oldest_uncommitted_ms == 0
                                   ? 0.0
                                   : std::max(0.0, now_ms - g.oldest_uncommitted_ms) / 1000.0);
      leases.emplace_back(gl, static_cast<double>(g.leases_held));
    }
  }
  registry.SetGaugeFamily("tessera_stream_events",
                          "Events stored in the sub-streams this member owns",
                          std::move(stream_events));
  registry.SetGaugeFamily("tessera_stream_bytes", "Bytes of those events", std::move(stream_bytes));
  registry.SetGaugeFamily("tessera_stream_lag_events",
                          "Events the group has not committed, in the sub-streams this member "
                          "owns",
                          std::move(lag));
  registry.SetGaugeFamily("tessera_stream_lag_seconds",
                          "Age of the oldest event the group has not committed, in the "
                          "sub-streams this member owns (0: none)",
                          std::move(lag_age));
  registry.SetGaugeFamily("tessera_stream_leases_held",
                          "Sub-streams this member owns whose lease a consumer of the group "
                          "holds",
                          std::move(leases));
  std::vector<std::pair<metrics::Labels, double>> polled;
  for (std::size_t shard = 0; shard < impl_->shards.size(); ++shard) {
    const metrics::Labels labels = {{"shard", std::to_string(shard)}};
    const auto poll = impl_->shards.IdlePollStats(shard);
    polled.emplace_back(labels, static_cast<double>(poll.polled.count()) / 1e6);
    sync(registry.RegisterCounter("tessera_shard_idle_poll_contended_total", labels,
                                  "Samples in which the shard found its core contended and "
                                  "stopped polling"),
         static_cast<std::int64_t>(poll.contended_samples));
  }
  registry.SetFractionalCounterFamily("tessera_shard_idle_poll_seconds_total",
                                      "Time the shard spent polling for work instead of sleeping "
                                      "(--idle-poll-us)",
                                      std::move(polled));
  sync(registry.RegisterCounter("tessera_member_forwarded_requests_total", {},
                                "Keyed requests this member sent on to their owner"),
       static_cast<std::int64_t>(impl_->maps.ForwardedCount()));
  const map::MapService::CopyCounters copies = impl_->maps.CopiesSent();
  sync(registry.RegisterCounter("tessera_migration_partitions_sent_total", {},
                                "Partition copies this member sent (migrations and resyncs)"),
       static_cast<std::int64_t>(copies.partitions));
  sync(registry.RegisterCounter("tessera_migration_bytes_sent_total", {},
                                "Bytes of entries (keys and values) in the partition copies this "
                                "member sent"),
       static_cast<std::int64_t>(copies.bytes));
  sync(registry.RegisterCounter("tessera_catch_up_partitions_sent_total", {},
                                "Of those copies, the catch-ups: the updates a holder restarted "
                                "with its data missed, instead of the whole partition"),
       static_cast<std::int64_t>(copies.catch_ups));
  sync(registry.RegisterCounter("tessera_catch_up_bytes_sent_total", {},
                                "Bytes of entries (keys and values) in the catch-ups this member "
                                "sent"),
       static_cast<std::int64_t>(copies.catch_up_bytes));
  registry
      .RegisterGauge("tessera_member_migrations_pending", {},
                     "Replicas here whose migration copy has not arrived")
      .Set(static_cast<double>(impl_->maps.AwaitingPartitionCount()));
  if (impl_->maps.logging()) {  // --data-dir; tessera_log_fsync_seconds is recorded as it goes
    const map::MapService::LogStats log = impl_->maps.GetLogStats();
    sync(registry.RegisterCounter("tessera_log_records_total", {},
                                  "Records appended to the map log (writes, copies, snapshots)"),
         static_cast<std::int64_t>(log.records));
    sync(registry.RegisterCounter("tessera_log_bytes_total", {}, "Bytes appended to the map log"),
         static_cast<std::int64_t>(log.bytes));
    sync(registry.RegisterCounter("tessera_log_compactions_total", {},
                                  "Snapshot rounds of a shard's partitions completed"),
         static_cast<std::int64_t>(log.compactions));
    sync(registry.RegisterCounter("tessera_log_segments_deleted_total", {},
                                  "Log segments deleted after a snapshot superseded them"),
         static_cast<std::int64_t>(log.segments_dropped));
    registry
        .RegisterGauge("tessera_log_disk_bytes", {},
                       "Bytes of the map log's segments on disk, every shard")
        .Set(static_cast<double>(log.disk_bytes));
    registry
        .RegisterGauge("tessera_log_disk_free_bytes", {},
                       "Free bytes of the data directory's file system, as last read")
        .Set(static_cast<double>(log.free_bytes));
    registry
        .RegisterGauge("tessera_log_space_low", {},
                       "1 while free space is under --log-min-free-bytes: writes to maps that "
                       "persist are refused")
        .Set(log.space_low ? 1.0 : 0.0);
  }
  if (impl_->replayed) {
    registry
        .RegisterGauge("tessera_log_replayed_entries", {},
                       "Entries the member held after replaying its map log at start")
        .Set(static_cast<double>(impl_->replayed->entries));
    registry
        .RegisterGauge("tessera_log_replay_seconds", {},
                       "How long the replay of the map log at start took (slowest shard)")
        .Set(static_cast<double>(impl_->replayed->took_ms) / 1000.0);
  }
  if (auto* service = impl_->membership_ptr.load()) {
    registry
        .RegisterGauge("tessera_member_recovering", {},
                       "1 while the cluster waits, after a restart of every member, for the "
                       "members of its last partition table (/health/ready says which)")
        .Set(service->recovery_status().empty() ? 0.0 : 1.0);
    sync(registry.RegisterCounter("tessera_member_pauses_total", {},
                                  "Times this process did not run for more than a third of the "
                                  "failure timeout (stopped, VM stall, swapping)"),
         static_cast<std::int64_t>(service->pauses()));
    registry
        .RegisterGauge("tessera_member_last_pause_seconds", {},
                       "Length of the last such pause (0: none)")
        .Set(static_cast<double>(service->last_pause_ms()) / 1000.0);
    const ClusterMerger::Stats merges = impl_->merger->stats();
    sync(registry.RegisterCounter("tessera_member_merges_total", {},
                                  "Times this member left its cluster to join another with its "
                                  "data (the smaller side of a split brain, or removed while "
                                  "alive)"),
         static_cast<std::int64_t>(merges.merges));
    sync(registry.RegisterCounter("tessera_merge_entries_applied_total", {},
                                  "Entries, stream events and reliable-topic messages this member "
                                  "brought into the cluster it merged into that the merge kept"),
         static_cast<std::int64_t>(merges.applied));
    sync(registry.RegisterCounter(
             "tessera_merge_entries_discarded_total", {},
             "Entries this member brought to a merge that the maps' merge "
             "policies kept out (and stream events and reliable-topic messages the "
             "cluster had)"),
         static_cast<std::int64_t>(merges.discarded));
    registry
        .RegisterGauge("tessera_merge_entries_pending", {},
                       "Entries taken out at a merge and not applied in the new cluster yet")
        .Set(static_cast<double>(merges.pending));
    registry
        .RegisterGauge("tessera_merge_standby_entries", {},
                       "Entries of merging owners' partitions this member held backups of, "
                       "kept until their owner's merge is applied (sent if it never is)")
        .Set(static_cast<double>(merges.standby));
    sync(registry.RegisterCounter("tessera_merge_standby_sent_total", {},
                                  "Standby entries this member sent because their owner's merge "
                                  "never arrived (it crashed while merging)"),
         static_cast<std::int64_t>(merges.standby_sent));
    sync(registry.RegisterCounter("tessera_merge_standby_dropped_total", {},
                                  "Standby entries dropped: their owner merged them itself, or "
                                  "never left its cluster"),
         static_cast<std::int64_t>(merges.standby_dropped));
  }
  std::int64_t owned = 0;
  for (std::uint32_t p = 0; p < options_.partition_count; ++p) {
    owned += impl_->maps.OwnsPartition(p);
  }
  registry
      .RegisterGauge("tessera_member_partitions_owned", {},
                     "Partitions this member serves as their owner")
      .Set(static_cast<double>(owned));
  registry
      .RegisterGauge("tessera_partition_work_partitions", {},
                     "Partitions whose registered partition work runs on this member")
      .Set(static_cast<double>(impl_->work->running_partitions()));
  sync(registry.RegisterCounter("tessera_partition_work_started_total", {},
                                "Times this member started a partition's work (it came to own "
                                "the partition)"),
       impl_->work->started());
  sync(registry.RegisterCounter("tessera_partition_work_stopped_total", {},
                                "Times this member stopped a partition's work (the partition "
                                "left, or the member stopped)"),
       impl_->work->stopped());
  // Kept as they were when the shards do not answer in time (a scrape during a stall).
  if (auto per_map = impl_->maps.LocalMapStats()) SetMapMetrics(registry, std::move(*per_map));
  const auto view = cluster_view();
  registry
      .RegisterGauge("tessera_cluster_members", {}, "Members in this member's view of its cluster")
      .Set(static_cast<double>(view->members.members.size()));
  registry.RegisterGauge("tessera_cluster_master", {}, "1 when this member is its cluster's master")
      .Set(view->members.master() && view->members.master()->uuid == uuid_ ? 1.0 : 0.0);
  registry
      .RegisterGauge("tessera_cluster_partition_table_version", {},
                     "Version of the partition table this member has installed")
      .Set(static_cast<double>(view->partitions.version));
  registry
      .RegisterGauge("tessera_net_connections", {},
                     "Native-protocol connections open to this member (clients and members)")
      .Set(static_cast<double>(impl_->native ? impl_->native->connection_count() : 0));
  std::vector<std::function<void(metrics::MetricsRegistry&)>> sources;
  {
    std::lock_guard sources_lock(impl_->sources_mu);
    sources = impl_->metrics_sources;
  }
  for (const auto& source : sources) source(registry);
  return registry.RenderPrometheus();
}

std::string Member::EncodedView(const membership::ClusterView* view) const {
  membership::ClusterMessage message;
  message.type = membership::MessageType::kView;
  message.from = {uuid_, fmt::format("{}:{}", options_.host, native_port()), 0, {}};
  message.view = view ? *view : *cluster_view();
  return membership::EncodeClusterMessage(message);
}

std::shared_ptr<const membership::ClusterView> Member::cluster_view() const {
  if (auto* service = impl_->membership_ptr.load()) return service->view();
  return impl_->standalone_view ? impl_->standalone_view
                                : std::make_shared<const membership::ClusterView>();
}

metrics::MetricsRegistry& Member::metrics_registry() { return impl_->metrics; }

void Member::AddMetricsSource(std::function<void(metrics::MetricsRegistry&)> source) {
  std::lock_guard lock(impl_->sources_mu);
  impl_->metrics_sources.push_back(std::move(source));
}

void Member::BlockPeers(std::vector<std::string> addresses) {
  impl_->blocklist->Set({addresses.begin(), addresses.end()});
  if (!addresses.empty()) {
    log_->warn("fault injection: traffic to [{}] is blocked", fmt::join(addresses, ", "));
  } else {
    log_->warn("fault injection: no traffic is blocked any more");
  }
}

std::uint64_t Member::rejoins() const {
  auto* service = impl_->membership_ptr.load();
  return service ? service->rejoins() : 0;
}

std::uint64_t Member::pauses() const {
  auto* service = impl_->membership_ptr.load();
  return service ? service->pauses() : 0;
}

std::string Member::InfoJson() const {
  nlohmann::json info;
  info["uuid"] = uuid_;
  info["member_id"] = member_id();
  info["data_dir"] = options_.data_dir;
  info["address"] = fmt::format("{}:{}", options_.host, native_port());
  info["cluster"] = options_.cluster_name;
  info["version"] = "0.1.0";
  info["shards"] = impl_->shards.size();
  info["partitions"] = options_.partition_count;
  info["connections"] = impl_->native ? impl_->native->connection_count() : 0;
  info["resp_port"] = resp_port();
  info["maps"] = impl_->maps.MapNames();
  info["migrations_pending"] = impl_->maps.AwaitingPartitionCount();
  info["forwarded_requests"] = impl_->maps.ForwardedCount();
  auto* membership = impl_->membership_ptr.load();
  info["persistence"] =
      PersistenceJson(options_.data_dir, member_id(), impl_->maps, impl_->replayed,
                      membership ? membership->recovery_status() : std::string());
  return info.dump();
}

base::Result<TransactionResult> Member::Transact(const Transaction& transaction) {
  return RunTransaction(*impl_->invoker, transaction);
}

std::shared_ptr<Map> Member::GetMap(const std::string& name) {
  std::lock_guard lock(impl_->mu);
  auto& proxy = impl_->proxies[name];
  if (!proxy) proxy = std::make_shared<Map>(name, impl_->invoker);
  return proxy;
}

std::shared_ptr<ReliableTopic> Member::GetReliableTopic(const std::string& name,
                                                        ReliableTopicConfig config) {
  return std::make_shared<ReliableTopic>(name, config, impl_->invoker, "member:" + uuid_, log_);
}

std::shared_ptr<Stream> Member::GetStream(const std::string& name, StreamConfig config) {
  return std::make_shared<Stream>(name, std::move(config), impl_->invoker, "member:" + uuid_, log_);
}

std::shared_ptr<Topic> Member::GetTopic(const std::string& name) {
  return std::make_shared<Topic>(name, impl_->embedded_topics);
}

std::uint64_t Member::ClusterEpoch() const {
  return impl_->cluster_epoch.load(std::memory_order_acquire);
}

void Member::Shutdown() {
  // The HTTP port first, and without the lock: its handlers may be waiting for it (GetMap),
  // and stopping the server waits for them.
  impl_->stopping.store(true);
  if (auto* http = impl_->http_ptr.load()) http->Stop();
  std::lock_guard lock(impl_->mu);
  ShutdownLocked();
}

void Member::ShutdownLocked() {
  if (!impl_->started || impl_->stopped) return;
  impl_->stopped = true;
  impl_->stopping.store(true);  // Health(): not live, not ready
  // Before leaving: the members taking this one's partitions start their work once it left
  // the table, so it must be over here first.
  impl_->work->Stop();
  if (impl_->merger && !impl_->merger->WaitApplied(std::chrono::seconds(10))) {
    log_->error("a split-brain merge was still sending when the member shut down");
  }
  if (impl_->membership) {
    // Leave while the native port still receives the master's answer.
    auto wait =
        std::chrono::milliseconds(std::min<std::int64_t>(options_.failure_timeout_ms, 5000));
    if (impl_->membership->view()->members.members.size() > 1 && !impl_->membership->Leave(wait)) {
      log_->warn("left without the master's confirmation within {} ms", wait.count());
    }
    impl_->membership_ptr.store(nullptr);
    impl_->membership->Stop();
  }
  if (impl_->http) impl_->http->Stop();  // Shutdown stopped it; a failed Start did not
  if (impl_->embedded_topics) impl_->embedded_topics->Stop();
  if (impl_->resp) impl_->resp->Stop();
  if (impl_->native) impl_->native->Stop();
  if (impl_->off_shard) impl_->off_shard->Stop();  // after the last native request came in
  impl_->maps.Stop();
  if (impl_->merger) impl_->merger->Stop();  // after the map service: a batch in flight fails
  if (impl_->router) impl_->router->Stop();  // after the map service: forwards finish first
  impl_->shards.Stop();
  impl_->events.Stop();
  if (impl_->state_writer) impl_->state_writer->Stop();  // writes the last table it was given
  impl_->data_dir.reset();                               // the directory's lock goes last
  log_->info("member {} stopped", uuid_);
}

const std::string& Member::member_id() const {
  return impl_->member_id.empty() ? uuid_ : impl_->member_id;
}

std::uint16_t Member::native_port() const { return impl_->native ? impl_->native->port() : 0; }

std::uint16_t Member::resp_port() const { return impl_->resp ? impl_->resp->port() : 0; }

}  // namespace tessera::grid
