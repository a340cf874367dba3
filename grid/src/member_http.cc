// The member's HTTP port (MemberOptions::http_port): health probes for orchestrators and the
// Prometheus endpoint; Member::Health, the checks behind them (health.h).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "member_impl.h"
#include "tessera/base/check.h"

namespace tessera::grid {

namespace {

nlohmann::json CheckJson(const HealthCheck& check) {
  return {{"ok", check.ok}, {"reason", check.reason}};
}

nlohmann::json MemberJson(const MemberHealth& h, const std::string& uuid,
                          const std::string& address) {
  return {{"uuid", uuid},
          {"address", address},
          {"state", h.state},
          {"members", h.members},
          {"master", h.master},
          {"list_version", h.list_version},
          {"table_version", h.table_version},
          {"migrations_pending", h.migrations_pending}};
}

// One probe: 200 when `check` holds, 503 otherwise; the body says why either way.
http::Response Probe(const char* name, const HealthCheck& check, nlohmann::json member) {
  nlohmann::json body = {{"check", name},
                         {"status", check.ok ? "UP" : "DOWN"},
                         {"reason", check.reason},
                         {"member", std::move(member)}};
  return http::Response::Json(check.ok ? 200 : 503, body.dump());
}

}  // namespace

MemberHealth Member::Health() const {
  MemberHealth h;
  const bool stopping = impl_->stopping.load();
  const auto* service = impl_->membership_ptr.load();
  const auto view = cluster_view();
  h.members = view->members.members.size();
  h.list_version = view->members.version;
  h.table_version = view->partitions.version;
  if (const auto* master = view->members.master()) h.master = master->address;
  h.migrations_pending = static_cast<std::int64_t>(impl_->maps.AwaitingPartitionCount());
  if (stopping) {
    h.state = "stopped";
  } else if (!options_.listen) {
    h.state = "standalone";
  } else if (service) {
    h.state = std::string(membership::MemberStateName(service->state()));
  } else {
    h.state = "joining";
  }

  h.live =
      stopping ? HealthCheck{false, "the member is shutting down"} : HealthCheck{true, "serving"};
  // Ready: started, listed in its cluster's view with a partition table, not stopping.
  const bool listed = view->members.Find(uuid_) != nullptr;
  const bool assigned =
      view->partitions.partition_count() > 0 &&
      std::all_of(view->partitions.replicas.begin(), view->partitions.replicas.end(),
                  [](const auto& replicas) { return !replicas.empty(); });
  if (stopping) {
    h.ready = {false, "the member is shutting down"};
  } else if (options_.listen &&
             (!service || service->state() != membership::MemberState::kMember)) {
    h.ready = {false,
               fmt::format("the member is {} (not yet in a cluster's member list)", h.state)};
  } else if (!listed) {
    h.ready = {false, "the member is not in its cluster's member list yet"};
  } else if (!assigned) {
    const std::string recovering = service ? service->recovery_status() : std::string();
    h.ready = {false, recovering.empty() ? "the partition table is not assigned yet" : recovering};
  } else {
    h.ready = {true, fmt::format("member of a cluster of {} (list version {}, table version {})",
                                 h.members, h.list_version, h.table_version)};
  }
  if (!h.ready.ok) {
    h.safe = {false, "not ready: " + h.ready.reason};
    return h;
  }
  // Safe: every replica assigned and copied, here and on every other member (as their last
  // heartbeats said, under the same partition table).
  if (!view->AllReplicasPresent()) {
    const auto want = std::min<std::size_t>(view->partitions.backup_count + 1, h.members);
    h.safe = {false,
              fmt::format("some partition has fewer than {} replica(s) on listed members", want)};
    return h;
  }
  if (h.migrations_pending > 0) {
    h.safe = {false, fmt::format("this member waits for {} replica copies (migrations)",
                                 h.migrations_pending)};
    return h;
  }
  const auto reports =
      service ? service->peer_reports() : std::map<std::string, membership::PeerReport>{};
  // A report is current for three heartbeat intervals: a member silent longer (frozen, cut
  // off) may hold the only copy of something, whatever it said last.
  const base::Millis fresh_ms = 3 * options_.heartbeat_interval_ms;
  const base::Millis now_ms = impl_->steady.NowMs();
  for (const auto& m : view->members.members) {
    if (m.uuid == uuid_) continue;
    auto it = reports.find(m.uuid);
    if (it == reports.end()) {
      h.safe = {false, fmt::format("no heartbeat from member {} since it joined; wait a "
                                   "heartbeat interval",
                                   m.address)};
      return h;
    }
    if (now_ms - it->second.heard_ms > fresh_ms) {
      h.safe = {false, fmt::format("no heartbeat from member {} for {} ms (it may be frozen or "
                                   "cut off, and hold the only copy of some partitions)",
                                   m.address, now_ms - it->second.heard_ms)};
      return h;
    }
    if (it->second.table_version != h.table_version) {
      h.safe = {false, fmt::format("member {} reported partition table version {}, this member "
                                   "has {}; wait a heartbeat interval",
                                   m.address, it->second.table_version, h.table_version)};
      return h;
    }
    if (it->second.migrations_pending > 0) {
      h.safe = {false, fmt::format("member {} waits for {} replica copies (migrations)", m.address,
                                   it->second.migrations_pending)};
      return h;
    }
  }
  const auto replicas = std::min<std::size_t>(view->partitions.backup_count + 1, h.members);
  h.safe = {true, fmt::format("{} member(s); every partition has {} replica(s), all copied",
                              h.members, replicas)};
  return h;
}

void Member::AddHttpRoute(std::string method, std::string pattern, http::Handler handler) {
  std::lock_guard lock(impl_->mu);
  TESSERA_CHECK(!impl_->started, "AddHttpRoute called after Start");
  impl_->http_routes.push_back({std::move(method), std::move(pattern), std::move(handler)});
}

std::uint16_t Member::http_port() const { return impl_->http ? impl_->http->port() : 0; }

base::Result<void> Member::StartHttp() {
  http::ServerOptions options;
  options.host = options_.host;
  options.port = *options_.http_port;
  // Probes, scrapes and the admin API, whose handlers block on the grid (a dead letter replay
  // for up to its wait): several threads, so slow requests leave the probes one.
  options.threads = 8;
  auto server = std::make_unique<http::Server>(options);
  const std::string address = fmt::format("{}:{}", options_.host, native_port());
  auto member_json = [this, address](const MemberHealth& h) {
    return MemberJson(h, uuid_, address);
  };
  server->Route("GET", "/health/live", [this, member_json](const http::Request&) {
    const auto h = Health();
    return Probe("live", h.live, member_json(h));
  });
  server->Route("GET", "/health/ready", [this, member_json](const http::Request&) {
    const auto h = Health();
    return Probe("ready", h.ready, member_json(h));
  });
  server->Route("GET", "/health/safe", [this, member_json](const http::Request&) {
    const auto h = Health();
    return Probe("safe", h.safe, member_json(h));
  });
  server->Route("GET", "/health", [this, member_json](const http::Request&) {
    const auto h = Health();
    nlohmann::json body = {{"status", h.ready.ok ? "UP" : "DOWN"},
                           {"live", CheckJson(h.live)},
                           {"ready", CheckJson(h.ready)},
                           {"safe", CheckJson(h.safe)},
                           {"member", member_json(h)}};
    return http::Response::Json(h.ready.ok ? 200 : 503, body.dump());
  });
  server->Route("GET", "/metrics", [this](const http::Request&) {
    http::Response r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = MetricsText();
    return r;
  });
  for (auto& route : impl_->http_routes) {
    server->Route(std::move(route.method), std::move(route.pattern), std::move(route.handler));
  }
  impl_->http_routes.clear();
  if (auto started = server->Start(); !started) {
    return base::Fail(started.error().code(),
                      fmt::format("HTTP port: {} (choose another --http-port, or 0 for any)",
                                  started.error().message()));
  }
  impl_->http = std::move(server);
  impl_->http_ptr.store(impl_->http.get());
  log_->info("HTTP (health, metrics) on {}:{}", options_.host, impl_->http->port());
  return {};
}

}  // namespace tessera::grid
