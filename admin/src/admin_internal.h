#pragma once
// Private to tessera::admin: what the REST handlers share (admin_api.cc: cluster, streams,
// dead letters, sagas, outbox; admin_maps.cc: maps and entries).

#include <cstdint>
#include <functional>
#include <map>
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

http::Response JsonResponse(const nlohmann::json& doc, int status = 200);

// A whole number query parameter, or `fallback` when absent; nullopt (and `bad` set to the
// 400 to answer) when present and not a whole number within [min, max].
std::optional<std::int64_t> IntQuery(const http::Request& r, const std::string& name,
                                     std::int64_t fallback, std::int64_t min, std::int64_t max,
                                     http::Response& bad);

// What only each member knows, gathered from the whole cluster: this member's directly, every
// other member's over the native protocol through a client kept per member. Members that did
// not answer are named in `unreachable`.
class ClusterPeers {
 public:
  explicit ClusterPeers(grid::Member& member) : member_(member) {}
  // The maps each member holds (a map exists on a member once one of its partitions there
  // holds an entry), sorted, without repeats.
  std::vector<std::string> MapNames(std::vector<std::string>& unreachable);
  // Per topic, each counter summed over the members: {"topics": {NAME: {published, delivered,
  // dropped, listener_errors, listeners}}}.
  nlohmann::json TopicTotals(std::vector<std::string>& unreachable);

 private:
  // fn(address, client) for every other member of the view; a member whose client cannot
  // connect, or for which fn returns false, is unreachable (its client is dropped).
  void ForEachPeer(std::vector<std::string>& unreachable,
                   const std::function<bool(grid::Client&)>& fn);

  grid::Member& member_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<grid::Client>> peers_;  // by native address
};

// The console's single page (console/index.html, built in).
std::string_view ConsoleHtml();

void RegisterMapRoutes(grid::Member& member, const AdminOptions& options,
                       std::shared_ptr<ClusterPeers> peers,
                       const std::function<void(std::string, std::string, http::Handler)>& route);

}  // namespace tessera::admin::internal
