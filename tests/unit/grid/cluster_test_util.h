#pragma once
// Helpers for the grid tests that run several in-process members of one cluster on loopback.

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tessera/grid/member.h"

namespace tessera::grid::testing {

// A listening member (port 0) with fast heartbeats and timeouts, joining `join` if given.
inline MemberOptions ClusterMember(std::vector<std::string> join = {}) {
  MemberOptions o;
  o.port = 0;
  o.threads = 1;
  o.heartbeat_interval_ms = 100;
  o.failure_timeout_ms = 2000;
  o.join_timeout_ms = 2000;
  o.join = std::move(join);
  return o;
}

inline std::string AddressOf(const Member& m) {
  return "127.0.0.1:" + std::to_string(m.native_port());
}

// Waits (bounded) until `done` holds; returns its last value.
template <typename Pred>
bool WaitUntil(Pred done, std::chrono::milliseconds limit = std::chrono::seconds(15)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return done();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// Every one of `members` lists `count` members.
inline bool AllList(const std::vector<Member*>& members, std::size_t count) {
  for (auto* m : members) {
    if (m->cluster_view()->members.members.size() != count) return false;
  }
  return true;
}

}  // namespace tessera::grid::testing
