// Member wiring: the composition of shards, map service, event executor and front-ends.
// Construction order is dependency order; Shutdown tears down in reverse: stop accepting,
// close connections, stop services, stop shards, then drain the event thread.
#include "tessera/grid/member.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include <mutex>
#include <random>
#include <thread>

#include "embedded_invoker.h"
#include "event_executor.h"
#include "native_handler.h"
#include "tessera/base/check.h"
#include "tessera/base/log.h"
#include "tessera/net/server.h"
#include "tessera/resp/resp_server.h"
#include "tessera/runtime/shard_set.h"
#include "tessera/topic/topic_service.h"

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

struct Member::Impl {
  Impl(const MemberOptions& options, std::shared_ptr<spdlog::logger> log,
       const base::Clock* clock_in, const map::EntryProcessorRegistry& processors)
      : clock(clock_in ? clock_in : &steady),
        shards(options.threads ? options.threads
                               : std::max(1u, std::thread::hardware_concurrency())),
        maps(shards, partition::Partitioner(options.partition_count), *clock, processors, log,
             options.map_options),
        events(log),
        invoker(std::make_shared<EmbeddedInvoker>(maps, events)),
        topics(shards, log) {}

  base::SteadyClock steady;
  const base::Clock* clock;
  runtime::ShardSet shards;
  map::MapService maps;
  EventExecutor events;
  std::shared_ptr<EmbeddedInvoker> invoker;
  topic::TopicService topics;
  std::unique_ptr<NativeHandler> native_handler;
  std::unique_ptr<net::Server> native;
  std::unique_ptr<resp::RespServer> resp;
  std::mutex mu;  // guards proxies and started/stopped
  std::map<std::string, std::shared_ptr<Map>> proxies;
  bool started = false;
  bool stopped = false;
};

Member::Member(MemberOptions options, std::shared_ptr<spdlog::logger> log, const base::Clock* clock)
    : options_(std::move(options)), log_(log ? std::move(log) : DefaultLogger()), uuid_(NewUuid()) {
  processors_.RegisterBuiltins();
  impl_ = std::make_unique<Impl>(options_, log_, clock, processors_);
}

Member::~Member() { Shutdown(); }

map::MapService& Member::map_service() { return impl_->maps; }

base::Result<void> Member::Start() {
  std::lock_guard lock(impl_->mu);
  TESSERA_CHECK(!impl_->started, "Member::Start called twice");
  impl_->started = true;
  for (const auto& [name, config] : options_.maps) impl_->maps.Configure(name, config);
  impl_->shards.Start();
  impl_->maps.Start();
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
  server.max_frame_bytes = options_.max_frame_bytes;
  server.member_uuid = uuid_;
  server.partition_count = static_cast<std::int32_t>(options_.partition_count);
  impl_->native_handler = std::make_unique<NativeHandler>(
      impl_->maps, [this] { return InfoJson(); }, log_);
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

std::string Member::InfoJson() const {
  nlohmann::json info;
  info["uuid"] = uuid_;
  info["address"] = fmt::format("{}:{}", options_.host, native_port());
  info["cluster"] = options_.cluster_name;
  info["version"] = "0.1.0";
  info["shards"] = impl_->shards.size();
  info["partitions"] = options_.partition_count;
  info["connections"] = impl_->native ? impl_->native->connection_count() : 0;
  info["resp_port"] = resp_port();
  info["maps"] = impl_->maps.MapNames();
  return info.dump();
}

std::shared_ptr<Map> Member::GetMap(const std::string& name) {
  std::lock_guard lock(impl_->mu);
  auto& proxy = impl_->proxies[name];
  if (!proxy) proxy = std::make_shared<Map>(name, impl_->invoker);
  return proxy;
}

void Member::Shutdown() {
  std::lock_guard lock(impl_->mu);
  ShutdownLocked();
}

void Member::ShutdownLocked() {
  if (!impl_->started || impl_->stopped) return;
  impl_->stopped = true;
  if (impl_->resp) impl_->resp->Stop();
  if (impl_->native) impl_->native->Stop();
  impl_->maps.Stop();
  impl_->shards.Stop();
  impl_->events.Stop();
  log_->info("member {} stopped", uuid_);
}

std::uint16_t Member::native_port() const { return impl_->native ? impl_->native->port() : 0; }

std::uint16_t Member::resp_port() const { return impl_->resp ? impl_->resp->port() : 0; }

}  // namespace tessera::grid
