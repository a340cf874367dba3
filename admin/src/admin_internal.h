#pragma once
// Private to tessera::admin: what the REST handlers share (admin_api.cc: cluster, streams,
// dead letters, sagas, outbox; admin_maps.cc: maps and entries).

#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/admin/admin_api.h"
#include "tessera/base/error.h"
#include "tessera/grid/client.h"
#include "tessera/http/server.h"

namespace tessera::admin::internal {

// A failed call as an HTTP error: 400 bad input, 404 not found, 409 conflict, 504 timeout,
// 401 auth, 503 when the cluster cannot answer now, 500 otherwise.
http::Response ErrorResponse(const base::Error& error);
http::Response JsonResponse(const nlohmann::json& doc, int status = 200);

// A whole number query parameter, or `fallback` when absent; nullopt (and `bad` set to the
// 400 to answer) when present and not a whole number within [min, max].
std::optional<std::int64_t> IntQuery(const http::Request& r, const std::string& name,
                                     std::int64_t fallback, std::int64_t min, std::int64_t max,
                                     http::Response& bad);

// Map names of the whole cluster: this member's, and every other member's (asked over the
// native protocol through a client kept per member). Members that did not answer are named
// in `unreachable`.
class ClusterMaps {
 public:
  explicit ClusterMaps(grid::Member& member) : member_(member) {}
  std::vector<std::string> Names(std::vector<std::string>& unreachable);

 private:
  grid::Member& member_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<grid::Client>> peers_;  // by native address
};

// The console's single page (console/index.html, built in).
std::string_view ConsoleHtml();

void RegisterMapRoutes(grid::Member& member, const AdminOptions& options,
                       std::shared_ptr<ClusterMaps> maps,
                       const std::function<void(std::string, std::string, http::Handler)>& route);

}  // namespace tessera::admin::internal
