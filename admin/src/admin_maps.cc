// The REST admin API's maps: the cluster's maps with their statistics, and entries (list with
// a predicate, get, put, delete).
#include <fmt/format.h>

#include <algorithm>

#include "admin_internal.h"
#include "tessera/admin/documents.h"
#include "tessera/admin/values.h"
#include "tessera/map/predicate.h"

namespace tessera::admin::internal {
namespace {

using nlohmann::json;

// Maps whose names start with "__" belong to the grid and the framework (sagas, outbox,
// dead letters): read them here, change them through the framework's own endpoints.
http::Response InternalMapRefused(const std::string& name) {
  return http::Response::Error(
      403, "forbidden",
      "map '" + name +
          "' is internal (the grid's or the framework's): it is read-only here; "
          "use the dead letter and saga endpoints to act on the framework's state");
}

// `name` if the cluster has such a map, else the 404 (or the error) in `out`.
bool MapExists(ClusterPeers& peers, const std::string& name, http::Response& out) {
  std::vector<std::string> unreachable;
  const auto names = peers.MapNames(unreachable);
  if (std::binary_search(names.begin(), names.end(), name)) return true;
  if (!unreachable.empty()) {
    out = http::Response::Error(
        503, "unavailable",
        fmt::format("no map '{}' on the members that answered; {} did not answer", name,
                    fmt::join(unreachable, ", ")));
  } else {
    out = http::Response::Error(404, "not_found",
                                "no map '" + name +
                                    "' in this cluster (GET /api/v1/maps lists "
                                    "them; a map exists once it holds an entry)");
  }
  return false;
}

}  // namespace

void RegisterMapRoutes(grid::Member& member, const AdminOptions& options,
                       std::shared_ptr<ClusterPeers> peers,
                       const std::function<void(std::string, std::string, http::Handler)>& route) {
  route("GET", "/api/v1/maps", [&member, peers](const http::Request& r) {
    const bool internal = r.Query("internal") == "true";
    std::vector<std::string> unreachable;
    json list = json::array();
    for (const auto& name : peers->MapNames(unreachable)) {
      if (IsInternalMap(name) && !internal) continue;
      auto stats = member.GetMap(name)->Stats();
      if (!stats) return http::Response::FromError(stats.error());
      list.push_back(MapStatsJson(name, *stats));
    }
    return JsonResponse({{"maps", std::move(list)}, {"unreachable_members", unreachable}});
  });
  route("GET", "/api/v1/maps/{map}", [&member, peers](const http::Request& r) {
    const std::string& name = r.params.at("map");
    http::Response out;
    if (!MapExists(*peers, name, out)) return out;
    auto stats = member.GetMap(name)->Stats();
    return stats ? JsonResponse(MapStatsJson(name, *stats))
                 : http::Response::FromError(stats.error());
  });
  route("GET", "/api/v1/maps/{map}/entries", [&member, peers, options](const http::Request& r) {
    const std::string& name = r.params.at("map");
    http::Response out;
    auto limit = IntQuery(r, "limit", options.default_entry_limit, 0, options.max_entry_limit, out);
    if (!limit) return out;
    map::Predicate predicate;
    if (const std::string where = r.Query("where"); !where.empty()) {
      auto parsed = map::Predicate::Parse(where);
      if (!parsed) return http::Response::FromError(parsed.error());
      predicate = std::move(*parsed);
    }
    if (!MapExists(*peers, name, out)) return out;
    // The matching keys, then the values of the first `limit` only.
    auto map = member.GetMap(name);
    auto keys = map->KeySet(predicate);
    if (!keys) return http::Response::FromError(keys.error());
    std::sort(keys->begin(), keys->end());
    const std::size_t count = keys->size();
    if (static_cast<std::int64_t>(count) > *limit) keys->resize(static_cast<std::size_t>(*limit));
    auto values = map->GetAll(*keys);
    if (!values) return http::Response::FromError(values.error());
    json list = json::array();
    for (const auto& key : *keys) {
      auto it = values->find(key);
      if (it == values->end()) continue;  // removed meanwhile
      list.push_back({{"key", key}, {"value", ValueToJson(it->second)}});
    }
    json doc = {{"map", name},
                {"count", count},
                {"truncated", static_cast<std::int64_t>(count) > *limit},
                {"entries", std::move(list)}};
    if (predicate.kind() != map::Predicate::Kind::kTrue) doc["where"] = predicate.ToString();
    return JsonResponse(doc);
  });
  route("GET", "/api/v1/maps/{map}/entries/{key}", [&member](const http::Request& r) {
    const std::string& name = r.params.at("map");
    const std::string& key = r.params.at("key");
    auto value = member.GetMap(name)->Get(key);
    if (!value) return http::Response::FromError(value.error());
    if (!value->has_value()) {
      return http::Response::Error(404, "not_found",
                                   "map '" + name + "' has no entry '" + key + "'");
    }
    return JsonResponse({{"map", name}, {"key", key}, {"value", ValueToJson(**value)}});
  });
  route("PUT", "/api/v1/maps/{map}/entries/{key}", [&member](const http::Request& r) {
    const std::string& name = r.params.at("map");
    const std::string& key = r.params.at("key");
    if (IsInternalMap(name)) return InternalMapRefused(name);
    const auto body = json::parse(r.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      return http::Response::Error(400, "bad_request",
                                   "the body must be a JSON object: {\"value\": \"text\"} or "
                                   "{\"record\": {...}}, with an optional \"ttl_ms\"");
    }
    std::string bytes;
    if (body.contains("value") && body["value"].is_string()) {
      bytes = body["value"].get<std::string>();
    } else if (body.contains("record") && body["record"].is_object()) {
      auto record = RecordFromJson(body["record"].dump());
      if (!record) return http::Response::FromError(record.error());
      bytes = record->Encode();
    } else {
      return http::Response::Error(400, "bad_request",
                                   "give the entry's value as \"value\" (a string) or \"record\" "
                                   "(a JSON object stored as a record)");
    }
    grid::WriteOptions write;
    if (body.contains("ttl_ms")) {
      if (!body["ttl_ms"].is_number_integer() || body["ttl_ms"].get<std::int64_t>() < 0) {
        return http::Response::Error(400, "bad_request",
                                     "\"ttl_ms\" must be a whole number of milliseconds >= 0");
      }
      write = grid::WithTtl(body["ttl_ms"].get<std::int64_t>());
    }
    auto previous = member.GetMap(name)->Put(key, bytes, write);
    if (!previous) return http::Response::FromError(previous.error());
    return JsonResponse({{"map", name},
                         {"key", key},
                         {"value", ValueToJson(bytes)},
                         {"previous", previous->has_value() ? ValueToJson(**previous) : json()}},
                        previous->has_value() ? 200 : 201);
  });
  route("DELETE", "/api/v1/maps/{map}/entries/{key}", [&member](const http::Request& r) {
    const std::string& name = r.params.at("map");
    const std::string& key = r.params.at("key");
    if (IsInternalMap(name)) return InternalMapRefused(name);
    auto removed = member.GetMap(name)->Remove(key);
    if (!removed) return http::Response::FromError(removed.error());
    if (!removed->has_value()) {
      return http::Response::Error(404, "not_found",
                                   "map '" + name + "' has no entry '" + key + "'");
    }
    return JsonResponse({{"map", name}, {"key", key}, {"removed", ValueToJson(**removed)}});
  });
}

}  // namespace tessera::admin::internal
