#pragma once
// Helpers for the saga tests: a service's embedded member, a separate "shared" member (its own
// cluster, on loopback) and a client of it, and a bounded wait.

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "tessera/grid/client.h"
#include "tessera/grid/member.h"

namespace tessera::saga::testing {

// Waits (bounded) until `done` holds; returns its last value.
template <typename Pred>
bool WaitFor(Pred done, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return done();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// The service's own member: not listening, one shard.
inline grid::MemberOptions ServiceOptions() {
  grid::MemberOptions o;
  o.listen = false;
  o.threads = 1;
  return o;
}

// The shared cluster's member: cluster "shared", on `port` (0: any free one), one shard.
inline grid::MemberOptions SharedOptions(std::uint16_t port = 0) {
  grid::MemberOptions o;
  o.port = port;
  o.threads = 1;
  o.cluster_name = "shared";
  return o;
}

// A client of the shared member at `port`.
inline std::shared_ptr<grid::Client> ConnectShared(std::uint16_t port) {
  grid::ClientOptions o;
  o.addresses = {"127.0.0.1:" + std::to_string(port)};
  o.cluster_name = "shared";
  o.call_timeout = std::chrono::milliseconds(2000);
  auto client = grid::Client::Connect(o);
  REQUIRE(client.has_value());
  return std::shared_ptr<grid::Client>(std::move(*client));
}

}  // namespace tessera::saga::testing
