// The REST admin API: cluster, partitions, streams, consumer groups, dead letters, sagas and
// the outbox (maps and entries are in admin_maps.cc, the console in console.cc).
#include "tessera/admin/admin_api.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "admin_internal.h"
#include "tessera/admin/documents.h"
#include "tessera/base/secret.h"
#include "tessera/partition/partition_table.h"
#include "tessera/saga/dead_letter.h"
#include "tessera/saga/saga_store.h"

namespace tessera::admin {
namespace internal {

using nlohmann::json;

http::Response JsonResponse(const json& doc, int status) {
  return http::Response::Json(status, doc.dump(-1, ' ', false, json::error_handler_t::replace));
}

std::optional<std::int64_t> IntQuery(const http::Request& r, const std::string& name,
                                     std::int64_t fallback, std::int64_t min, std::int64_t max,
                                     http::Response& bad) {
  const std::string text = r.Query(name);
  if (text.empty()) return fallback;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (*end != '\0' || errno != 0 || v < min || v > max) {
    bad = http::Response::Error(
        400, "bad_request",
        fmt::format("query parameter '{}' is '{}': expected a whole number from {} to {}", name,
                    text, min, max));
    return std::nullopt;
  }
  return v;
}

void ClusterPeers::ForEachPeer(std::vector<std::string>& unreachable,
                               const std::function<bool(grid::Client&)>& fn) {
  const auto view = member_.cluster_view();
  const std::string self = fmt::format("{}:{}", member_.options().host, member_.native_port());
  for (const auto& m : view->members.members) {
    if (m.address == self) continue;
    std::shared_ptr<grid::Client> client;
    {
      std::lock_guard lock(mu_);
      auto it = peers_.find(m.address);
      if (it != peers_.end()) client = it->second;
    }
    if (!client) {
      grid::ClientOptions co;
      co.addresses = {m.address};
      co.cluster_name = member_.options().cluster_name;
      co.secret = member_.options().secret;
      co.client_name = "admin-api";
      co.connect_timeout = std::chrono::milliseconds(2000);
      co.call_timeout = std::chrono::milliseconds(3000);
      auto connected = grid::Client::Connect(co);
      if (!connected) {
        unreachable.push_back(m.address);
        continue;
      }
      client = std::shared_ptr<grid::Client>(std::move(*connected));
      std::lock_guard lock(mu_);
      peers_[m.address] = client;
    }
    // A client fails over to another member when its own goes: then it no longer speaks for
    // this one.
    if (client->connected_address() != m.address || !fn(*client)) {
      unreachable.push_back(m.address);
      std::lock_guard lock(mu_);
      peers_.erase(m.address);  // connect again next time
    }
  }
}

std::vector<std::string> ClusterPeers::MapNames(std::vector<std::string>& unreachable) {
  std::vector<std::string> names = member_.map_service().MapNames();
  ForEachPeer(unreachable, [&names](grid::Client& client) {
    auto info = client.FetchMemberInfoJson();
    auto theirs = info ? MapNamesOfInfo(*info) : std::nullopt;
    if (!theirs) return false;
    names.insert(names.end(), theirs->begin(), theirs->end());
    return true;
  });
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

json ClusterPeers::TopicTotals(std::vector<std::string>& unreachable) {
  std::map<std::string, std::map<std::string, std::int64_t>> totals;
  for (const auto& [name, s] : member_.topic_service().StatsByTopic()) {
    auto& t = totals[name];
    t["published"] += s.published;
    t["delivered"] += s.delivered;
    t["dropped"] += s.dropped;
    t["listener_errors"] += s.listener_errors;
    t["listeners"] += s.subscriptions;
  }
  ForEachPeer(unreachable, [&totals](grid::Client& client) {
    auto stats = client.FetchTopicStatsJson();
    auto doc = stats ? json::parse(*stats, nullptr, false) : json();
    if (!stats || doc.is_discarded() || !doc.contains("topics")) return false;
    for (const auto& [topic, counters] : doc["topics"].items()) {
      for (const auto& [name, value] : counters.items()) {
        if (value.is_number_integer()) totals[topic][name] += value.get<std::int64_t>();
      }
    }
    return true;
  });
  return {{"topics", totals}};
}

}  // namespace internal

namespace {

using internal::IntQuery;
using internal::JsonResponse;
using nlohmann::json;

// The instance the handlers read through, as the shared_ptr saga::DeadLetterQueue wants (the
// member outlives its HTTP port, so it is not owned).
std::shared_ptr<grid::Instance> Unowned(grid::Member& member) {
  return std::shared_ptr<grid::Instance>(&member, [](grid::Instance*) {});
}

// Compares in time that depends on the lengths only, not on where the texts differ.
json CheckJson(const grid::HealthCheck& c) { return {{"ok", c.ok}, {"reason", c.reason}}; }

json ClusterJson(grid::Member& member) {
  const auto view = member.cluster_view();
  const auto health = member.Health();
  json members = json::array();
  std::map<std::string, std::pair<std::size_t, std::size_t>> counts;  // uuid -> owned, backups
  for (const auto& c : partition::CountReplicas(view->partitions, view->members.Uuids())) {
    counts[c.member] = {c.owned, c.backups};
  }
  for (std::size_t i = 0; i < view->members.members.size(); ++i) {
    const auto& m = view->members.members[i];
    members.push_back({{"uuid", m.uuid},
                       {"member_id", m.member_id},
                       {"address", m.address},
                       {"master", i == 0},
                       {"this_member", m.uuid == member.uuid()},
                       {"started_ms", m.start_wall_ms},
                       {"partitions_owned", counts[m.uuid].first},
                       {"backups", counts[m.uuid].second}});
  }
  return {
      {"cluster", member.options().cluster_name},
      {"member",
       {{"uuid", member.uuid()},
        {"address", fmt::format("{}:{}", member.options().host, member.native_port())},
        {"state", health.state}}},
      {"health",
       {{"live", CheckJson(health.live)},
        {"ready", CheckJson(health.ready)},
        {"safe", CheckJson(health.safe)}}},
      {"master", health.master},
      {"members", std::move(members)},
      {"list_version", view->members.version},
      {"table_version", view->partitions.version},
      {"partition_count", view->partitions.partition_count()},
      {"backup_count", view->partitions.backup_count},
      {"migrations_pending", health.migrations_pending},
      // This member's data directory, log and recovery (grid-cli persistence status asks
      // every member).
      {"persistence", json::parse(member.InfoJson(), nullptr, false).value("persistence", json())}};
}

// A stream that exists (404 otherwise), or the error response in `out`.
std::optional<grid::StreamInfo> ExistingStream(grid::Member& member, const std::string& name,
                                               http::Response& out) {
  auto names = StreamNames(member);
  if (!names) {
    out = http::Response::FromError(names.error());
    return std::nullopt;
  }
  if (!std::binary_search(names->begin(), names->end(), name)) {
    out = http::Response::Error(404, "not_found",
                                "no stream '" + name +
                                    "' in this cluster (GET /api/v1/streams "
                                    "lists them)");
    return std::nullopt;
  }
  auto info = member.GetStream(name)->Info();
  if (!info) {
    out = http::Response::FromError(info.error());
    return std::nullopt;
  }
  return *info;
}

// The event id path segment: a whole number (decimal, as listed).
std::optional<std::int64_t> EventId(const http::Request& r, http::Response& bad) {
  const std::string& text = r.params.at("event_id");
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v <= 0) {
    bad = http::Response::Error(400, "bad_request",
                                "event id '" + text + "' is not a positive whole number");
    return std::nullopt;
  }
  return v;
}

// The dead letter list filter from the query string.
std::optional<DeadLetterFilter> LetterFilter(const http::Request& r, http::Response& bad) {
  DeadLetterFilter f;
  f.type = r.Query("type");
  f.key = r.Query("key");
  constexpr std::int64_t kMax = std::int64_t{1} << 50;
  for (auto [name, slot] : {std::pair{"older_than_ms", &f.older_than_ms},
                            std::pair{"newer_than_ms", &f.newer_than_ms}}) {
    if (r.Query(name).empty()) continue;
    auto v = IntQuery(r, name, 0, 0, kMax, bad);
    if (!v) return std::nullopt;
    *slot = *v;
  }
  return f;
}

http::Response ReplayResponse(const std::string& group,
                              const base::Result<saga::ReplayRequest>& done) {
  if (!done) return http::Response::FromError(done.error());
  return JsonResponse({{"group", group},
                       {"request", done->id},
                       {"status", done->status},
                       {"replayed", done->replayed},
                       {"failed", done->failed},
                       {"error", done->error},
                       {"consumer", done->by}});
}

void RegisterFrameworkRoutes(
    grid::Member& member, const AdminOptions& options,
    const std::function<void(std::string, std::string, http::Handler)>& route) {
  route("GET", "/api/v1/streams", [&member](const http::Request&) {
    auto names = StreamNames(member);
    if (!names) return http::Response::FromError(names.error());
    json list = json::array();
    for (const auto& name : *names) {
      auto info = member.GetStream(name)->Info();
      if (!info) return http::Response::FromError(info.error());
      json j = StreamInfoJson(*info);
      j.erase("sub_streams");
      list.push_back(std::move(j));
    }
    return JsonResponse({{"streams", std::move(list)}});
  });
  route("GET", "/api/v1/streams/{stream}", [&member](const http::Request& r) {
    http::Response out;
    auto info = ExistingStream(member, r.params.at("stream"), out);
    if (!info) return out;
    json doc = StreamInfoJson(*info);
    json groups = json::array();
    for (auto& row : GroupRows(*info)) {
      json j = GroupJson(row.position);
      j["leases"] = row.leases;
      j["consumers"] = row.holders;
      j["sub_streams"] = std::move(row.sub_streams);
      groups.push_back(std::move(j));
    }
    doc["groups"] = std::move(groups);
    return JsonResponse(doc);
  });
  route("GET", "/api/v1/consumers", [&member](const http::Request&) {
    auto doc = ConsumersJson(member);
    return doc ? JsonResponse(*doc) : http::Response::FromError(doc.error());
  });

  // Dead letters.
  route("GET", "/api/v1/dlq/{group}", [&member](const http::Request& r) {
    http::Response bad;
    auto filter = LetterFilter(r, bad);
    if (!filter) return bad;
    saga::DeadLetterQueue dlq(Unowned(member), r.params.at("group"));
    auto letters = dlq.List(DeadLetterPredicate(*filter));
    if (!letters) return http::Response::FromError(letters.error());
    json list = json::array();
    for (const auto& l : *letters) list.push_back(DeadLetterJson(l));
    return JsonResponse(
        {{"group", dlq.group()}, {"count", letters->size()}, {"dead_letters", std::move(list)}});
  });
  auto one_letter = [&member](const http::Request& r, http::Response& out)
      -> std::optional<std::pair<std::unique_ptr<saga::DeadLetterQueue>, saga::DeadLetter>> {
    auto id = EventId(r, out);
    if (!id) return std::nullopt;
    auto dlq = std::make_unique<saga::DeadLetterQueue>(Unowned(member), r.params.at("group"));
    DeadLetterFilter f;
    f.event_id = *id;
    auto letters = dlq->List(DeadLetterPredicate(f));
    if (!letters) {
      out = http::Response::FromError(letters.error());
      return std::nullopt;
    }
    if (letters->empty()) {
      out = http::Response::Error(
          404, "not_found",
          fmt::format("group '{}' has no dead letter of event {}", dlq->group(), *id));
      return std::nullopt;
    }
    return std::pair{std::move(dlq), letters->front()};
  };
  route("GET", "/api/v1/dlq/{group}/{event_id}", [one_letter](const http::Request& r) {
    http::Response out;
    auto found = one_letter(r, out);
    return found ? JsonResponse(DeadLetterJson(found->second)) : out;
  });
  route("DELETE", "/api/v1/dlq/{group}/{event_id}", [one_letter](const http::Request& r) {
    http::Response out;
    auto found = one_letter(r, out);
    if (!found) return out;
    if (auto removed = found->first->Remove(found->second); !removed) {
      return http::Response::FromError(removed.error());
    }
    return JsonResponse({{"group", found->first->group()},
                         {"discarded", found->second.event.id},
                         {"discarded_str", std::to_string(found->second.event.id)},
                         {"reason", r.Query("reason")}});
  });
  route("POST", "/api/v1/dlq/{group}/{event_id}/replay",
        [one_letter, options](const http::Request& r) {
          http::Response out;
          auto wait = IntQuery(r, "wait_ms", options.replay_wait_ms, 0, 120'000, out);
          if (!wait) return out;
          auto found = one_letter(r, out);
          if (!found) return out;
          DeadLetterFilter which;
          which.event_id = found->second.event.id;
          return ReplayResponse(found->first->group(),
                                ReplayDeadLetters(*found->first, which, *wait));
        });
  route("POST", "/api/v1/dlq/{group}/replay", [&member, options](const http::Request& r) {
    http::Response out;
    auto wait = IntQuery(r, "wait_ms", options.replay_wait_ms, 0, 120'000, out);
    if (!wait) return out;
    DeadLetterFilter which;
    which.type = r.Query("type");
    which.key = r.Query("key");
    saga::DeadLetterQueue dlq(Unowned(member), r.params.at("group"));
    return ReplayResponse(dlq.group(), ReplayDeadLetters(dlq, which, *wait));
  });

  // Sagas and the outbox.
  route("GET", "/api/v1/sagas", [&member](const http::Request& r) {
    http::Response bad;
    SagaFilter f;
    f.status = r.Query("status");
    f.type = r.Query("type");
    if (!r.Query("older_than_ms").empty()) {
      auto v = IntQuery(r, "older_than_ms", 0, 0, std::int64_t{1} << 50, bad);
      if (!v) return bad;
      f.older_than_ms = *v;
    }
    auto limit = IntQuery(r, "limit", 1000, 0, 100'000, bad);
    if (!limit) return bad;
    saga::SagaStore store(member);
    auto sagas = store.List(SagaPredicate(f));
    if (!sagas) return http::Response::FromError(sagas.error());
    json list = json::array();
    for (const auto& s : *sagas) {
      if (static_cast<std::int64_t>(list.size()) >= *limit) break;
      list.push_back(SagaJson(s, false));
    }
    return JsonResponse({{"count", sagas->size()},
                         {"truncated", static_cast<std::int64_t>(sagas->size()) > *limit},
                         {"sagas", std::move(list)}});
  });
  route("GET", "/api/v1/sagas/stats", [&member](const http::Request&) {
    saga::SagaStore store(member);
    auto sagas = store.List();
    return sagas ? JsonResponse(SagaStatsJson(*sagas)) : http::Response::FromError(sagas.error());
  });
  route("GET", "/api/v1/sagas/{id}", [&member](const http::Request& r) {
    saga::SagaStore store(member);
    auto s = store.Get(r.params.at("id"));
    if (!s) return http::Response::FromError(s.error());
    if (!s->has_value()) {
      return http::Response::Error(404, "not_found",
                                   "no saga '" + r.params.at("id") +
                                       "' on this member (sagas live in the orchestrating "
                                       "service's member)");
    }
    return JsonResponse(SagaJson(**s, true));
  });
  route("GET", "/api/v1/outbox", [&member](const http::Request&) {
    auto doc = OutboxJson(member, member.options().partition_count);
    return doc ? JsonResponse(*doc) : http::Response::FromError(doc.error());
  });
}

}  // namespace

void RegisterAdminApi(grid::Member& member, AdminOptions options) {
  const std::string secret = member.options().secret;
  // Every API route: the secret first when one is set.
  auto route = [&member, secret](std::string method, std::string pattern, http::Handler handler) {
    const bool mutates = method != "GET";
    member.AddHttpRoute(
        std::move(method), std::move(pattern),
        [secret, mutates, handler = std::move(handler)](const http::Request& r) {
          if (!secret.empty() &&
              !base::ConstantTimeEquals(r.Header("authorization"), "Bearer " + secret)) {
            auto denied =
                http::Response::Error(401, "unauthorized",
                                      "this member has a secret: send it as 'Authorization: Bearer "
                                      "<secret>'");
            denied.headers.emplace_back("WWW-Authenticate", "Bearer");
            return denied;
          }
          // A change needs a JSON request: a browser sends one from another
          // origin only after a CORS preflight, which this server refuses, so
          // a page the operator visits cannot replay or delete on its own.
          if (mutates && r.Header("content-type").rfind("application/json", 0) != 0) {
            return http::Response::Error(415, "unsupported_media_type",
                                         "send changes with 'Content-Type: application/json'");
          }
          return handler(r);
        });
  };
  // The console: static, open (its API calls carry the secret).
  member.AddHttpRoute("GET", "/console", [](const http::Request&) {
    http::Response page;
    page.content_type = "text/html; charset=utf-8";
    page.body = std::string(internal::ConsoleHtml());
    return page;
  });
  member.AddHttpRoute("GET", "/", [](const http::Request&) {
    http::Response moved = http::Response::Json(302, R"({"console":"/console"})");
    moved.headers.emplace_back("Location", "/console");
    return moved;
  });
  route("GET", "/api/v1/cluster",
        [&member](const http::Request&) { return JsonResponse(ClusterJson(member)); });
  route("GET", "/api/v1/partitions", [&member](const http::Request&) {
    return JsonResponse(PartitionsJson(*member.cluster_view()));
  });
  auto peers = std::make_shared<internal::ClusterPeers>(member);
  internal::RegisterMapRoutes(member, options, peers, route);
  route("GET", "/api/v1/topics", [peers](const http::Request&) {
    std::vector<std::string> unreachable;
    json doc = peers->TopicTotals(unreachable);
    doc["unreachable_members"] = unreachable;
    return JsonResponse(doc);
  });
  RegisterFrameworkRoutes(member, options, route);
}

}  // namespace tessera::admin
