#include "tessera/net/tcp_listener.h"

#include <spdlog/sinks/null_sink.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <mutex>
#include <set>

namespace asio = boost::asio;
using asio::ip::tcp;
using tessera::base::ErrorCode;
using tessera::net::TcpListener;
using tessera::runtime::ShardSet;

namespace {
std::shared_ptr<spdlog::logger> QuietLog() {
  return std::make_shared<spdlog::logger>("net-test",
                                          std::make_shared<spdlog::sinks::null_sink_mt>());
}
}  // namespace

TEST_CASE("TcpListener hands sockets to shards round-robin on their own thread", "[net]") {
  ShardSet shards(2);
  shards.Start();
  std::mutex mutex;
  std::vector<std::size_t> seen_shards;
  std::vector<bool> on_right_thread;
  std::vector<bool> nodelay;
  std::promise<void> all_accepted;
  auto listener = TcpListener::Listen(
      shards, "127.0.0.1", 0,
      [&mutex, &seen_shards, &on_right_thread, &nodelay, &all_accepted, &shards](
          std::size_t shard, tcp::socket socket) {
        tcp::no_delay option;
        socket.get_option(option);
        std::lock_guard lock(mutex);
        seen_shards.push_back(shard);
        on_right_thread.push_back(shards.OnShard(shard) &&
                                  &socket.get_executor().context() == &shards.Context(shard));
        nodelay.push_back(option.value());
        if (seen_shards.size() == 4) all_accepted.set_value();
      },
      QuietLog());
  REQUIRE(listener.has_value());
  REQUIRE((*listener)->port() != 0);

  asio::io_context io;
  std::vector<tcp::socket> clients;
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back(io);
    clients.back().connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), (*listener)->port()));
  }
  REQUIRE(all_accepted.get_future().wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  std::lock_guard lock(mutex);
  CHECK(std::multiset<std::size_t>(seen_shards.begin(), seen_shards.end()) ==
        std::multiset<std::size_t>{0, 0, 1, 1});
  CHECK(std::count(on_right_thread.begin(), on_right_thread.end(), true) == 4);
  CHECK(std::count(nodelay.begin(), nodelay.end(), true) == 4);
  (*listener)->Close();
  (*listener)->Close();  // idempotent
  shards.Stop();
}

TEST_CASE("TcpListener reports a busy port and a bad host clearly", "[net]") {
  ShardSet shards(1);
  shards.Start();
  auto noop = [](std::size_t, tcp::socket) {};
  auto first = TcpListener::Listen(shards, "127.0.0.1", 0, noop, QuietLog());
  REQUIRE(first.has_value());
  const auto port = (*first)->port();
  auto second = TcpListener::Listen(shards, "127.0.0.1", port, noop, QuietLog());
  REQUIRE_FALSE(second.has_value());
  CHECK(second.error().code() == ErrorCode::kConnectionFailed);
  CHECK(second.error().message() == "cannot listen on 127.0.0.1:" + std::to_string(port) +
                                        ": address already in use; pick another port with --port");
  auto bad = TcpListener::Listen(shards, "not a host", 0, noop, QuietLog());
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().code() == ErrorCode::kBadRequest);
  first->reset();
  shards.Stop();
}

TEST_CASE("TcpListener stops accepting after Close", "[net]") {
  ShardSet shards(1);
  shards.Start();
  auto listener = TcpListener::Listen(
      shards, "127.0.0.1", 0, [](std::size_t, tcp::socket) {}, QuietLog());
  REQUIRE(listener.has_value());
  const auto port = (*listener)->port();
  (*listener)->Close();
  asio::io_context io;
  tcp::socket client(io);
  boost::system::error_code error;
  client.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), error);
  CHECK(error == asio::error::connection_refused);
  shards.Stop();
}
