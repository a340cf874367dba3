// What a service needs when things go wrong or get busy: the client reconnects to a restarted
// member, racing clients see atomic putIfAbsent and entry processors, a peer sending garbage is
// disconnected without disturbing anyone else, and clients sharing one loop stay independent.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>

#include "child_process.h"
#include "tessera/record/generic_record.h"

namespace tessera::integration {
namespace {

using Optional = std::optional<std::string>;
using record::GenericRecord;

int ConnectRaw(std::uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  return fd;
}

// Waits up to `timeout` for the peer to close: true once read() sees EOF or a reset.
bool PeerCloses(int fd, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buffer[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    ssize_t n = recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) return true;  // EOF or ECONNRESET; bytes (an error reply) keep us reading
  }
  return false;
}

void SendAll(int fd, const std::string& bytes) {
  // The member may close mid-send; MSG_NOSIGNAL turns SIGPIPE into an error we ignore.
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<std::size_t>(n);
  }
}

}  // namespace

TEST_CASE("The client reconnects after grid-node restarts on the same port",
          "[tools][client][reconnect]") {
  auto node = NodeProcess::StartOrFail();
  std::string port = std::to_string(node->port());
  auto client = grid::Client::Connect(ClientOptionsFor(*node, 3000ms));
  REQUIRE(client);
  auto m = (*client)->GetMap("durable");
  REQUIRE(m->Set("before", "1"));
  REQUIRE(node->Stop() == 0);

  auto while_down = m->Get("before");  // may fail or not; it must return, not hang
  if (!while_down) UNSCOPED_INFO("while down: " << while_down.error().ToString());

  auto restarted = NodeProcess::Start({"--port", port, "--log-level", "warn", "--threads", "2"});
  for (int attempt = 0; attempt < 10 && !restarted; ++attempt) {  // port may linger briefly
    std::this_thread::sleep_for(200ms);
    restarted = NodeProcess::Start({"--port", port, "--log-level", "warn", "--threads", "2"});
  }
  REQUIRE(restarted);
  bool ok = false;
  for (int attempt = 0; attempt < 10 && !ok; ++attempt) {  // bounded by 10 call timeouts
    ok = m->Set("after", "2").has_value();
  }
  REQUIRE(ok);
  CHECK(m->Get("after").value() == Optional("2"));
  CHECK(m->Get("before").value() == std::nullopt);  // a fresh member has no old data
  CHECK((*client)->connected_address() == "127.0.0.1:" + port);
  (*client)->Shutdown();
  CHECK((*restarted)->Stop() == 0);
}

TEST_CASE("8 clients racing putIfAbsent on the same keys get exactly one winner per key",
          "[tools][client][concurrency]") {
  auto node = NodeProcess::StartOrFail();
  constexpr int kThreads = 8;
  constexpr int kKeys = 1000;
  std::vector<std::vector<int>> wins(kThreads);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&node, &wins, &failures, t] {
      auto client = grid::Client::Connect(ClientOptionsFor(*node));
      if (!client) {
        ++failures;
        return;
      }
      auto m = (*client)->GetMap("race");
      for (int k = 0; k < kKeys; ++k) {
        auto r = m->PutIfAbsent("key-" + std::to_string(k), "thread-" + std::to_string(t));
        if (!r)
          ++failures;
        else if (!r->has_value())
          wins[t].push_back(k);
      }
      (*client)->Shutdown();
    });
  }
  for (auto& th : threads) th.join();
  REQUIRE(failures == 0);
  std::vector<int> winner(kKeys, -1);
  int duplicate_wins = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (int k : wins[t]) {
      if (winner[k] != -1) ++duplicate_wins;
      winner[k] = t;
    }
  }
  CHECK(duplicate_wins == 0);
  CHECK(std::count(winner.begin(), winner.end(), -1) == 0);
  auto client = ConnectOrFail(*node);
  auto m = client->GetMap("race");
  CHECK(m->Size().value() == kKeys);
  for (int k : {0, 499, 999}) {
    CHECK(m->Get("key-" + std::to_string(k)).value() ==
          Optional("thread-" + std::to_string(winner[k])));
  }
  client->Shutdown();
}

TEST_CASE("8 clients incrementing one key add up exactly", "[tools][client][concurrency]") {
  auto node = NodeProcess::StartOrFail();
  constexpr int kThreads = 8;
  constexpr int kPerThread = 150;
  std::vector<std::vector<std::int64_t>> seen(kThreads);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&node, &seen, &failures, t] {
      auto client = grid::Client::Connect(ClientOptionsFor(*node));
      if (!client) {
        ++failures;
        return;
      }
      auto m = (*client)->GetMap("counters");
      auto one = GenericRecord::Build().String("field", "n").Int64("delta", 1).Done();
      for (int i = 0; i < kPerThread; ++i) {
        auto r = m->ExecuteOnKey("shared", "increment", one);
        if (!r)
          ++failures;
        else
          seen[t].push_back(r->GetInt64("value").value_or(-1));
      }
      (*client)->Shutdown();
    });
  }
  for (auto& th : threads) th.join();
  REQUIRE(failures == 0);
  // Every increment observed a distinct intermediate value: 1..N, each exactly once.
  std::vector<std::int64_t> all;
  for (const auto& s : seen) all.insert(all.end(), s.begin(), s.end());
  std::sort(all.begin(), all.end());
  std::vector<std::int64_t> expected(kThreads * kPerThread);
  std::iota(expected.begin(), expected.end(), 1);
  CHECK(all == expected);
  auto client = ConnectOrFail(*node);
  auto stored = GenericRecord::Decode(client->GetMap("counters")->Get("shared").value().value());
  CHECK(stored.value().GetInt64("n").value() == kThreads * kPerThread);
  client->Shutdown();
}

TEST_CASE("Garbage and oversized frames close that connection only, other clients keep working",
          "[tools][client][robustness]") {
  auto node = NodeProcess::StartOrFail();
  auto client = ConnectOrFail(*node);
  auto m = client->GetMap("precious");
  for (int i = 0; i < 100; ++i) REQUIRE(m->Set("k" + std::to_string(i), "v" + std::to_string(i)));

  // Garbage: a small length prefix in either byte order followed by bytes that are no message.
  int garbage = ConnectRaw(node->port());
  SendAll(garbage, std::string("\x40\x00\x00\x00", 4) + std::string(4092, '\xab'));
  CHECK(PeerCloses(garbage, 5s));
  close(garbage);

  // A frame header announcing ~4 GiB, far above the member's frame limit.
  int oversized = ConnectRaw(node->port());
  SendAll(oversized, std::string("\xff\xff\xff\xf0", 4) + std::string(64, '\0'));
  CHECK(PeerCloses(oversized, 5s));
  close(oversized);

  for (int i = 0; i < 100; ++i) {
    CHECK(m->Get("k" + std::to_string(i)).value() == Optional("v" + std::to_string(i)));
  }
  auto other = ConnectOrFail(*node);
  CHECK(other->GetMap("precious")->Size().value() == 100);
  other->Shutdown();
  client->Shutdown();
  CHECK(node->Stop() == 0);
}

TEST_CASE("Clients sharing one ClientLoop run their callbacks on its thread",
          "[tools][client][loop]") {
  auto node = NodeProcess::StartOrFail();
  auto loop = grid::ClientLoop::Start();
  constexpr int kClients = 8;
  constexpr int kCalls = 200;
  std::vector<std::unique_ptr<grid::Client>> clients;
  for (int c = 0; c < kClients; ++c) {
    auto options = ClientOptionsFor(*node);
    options.loop = loop;
    auto client = grid::Client::Connect(options);
    REQUIRE(client);
    clients.push_back(std::move(*client));
  }
  std::mutex mu;
  std::condition_variable cv;
  std::set<std::thread::id> callback_threads;
  int done = 0;
  int failed = 0;
  auto record = [&](const base::Result<map::MapResult>& r) {
    std::lock_guard lock(mu);
    callback_threads.insert(std::this_thread::get_id());
    if (!r) ++failed;
    ++done;
    cv.notify_all();
  };
  for (int c = 0; c < kClients; ++c) {
    auto m = clients[c]->GetMap("shared-loop");
    for (int i = 0; i < kCalls; ++i) {
      m->SetAsync("c" + std::to_string(c) + "-" + std::to_string(i), std::to_string(i), {}, record);
    }
  }
  {
    std::unique_lock lock(mu);
    REQUIRE(cv.wait_for(lock, 20s, [&] { return done == kClients * kCalls; }));
    CHECK(failed == 0);
    CHECK(callback_threads.size() == 1);  // one thread ran every client's connections
    CHECK(callback_threads.count(std::this_thread::get_id()) == 0);
  }
  for (int c = 0; c < kClients; ++c) {
    CHECK(clients[c]->GetMap("shared-loop")->Get("c" + std::to_string(c) + "-7").value() ==
          Optional("7"));
  }

  // One client shut down with calls in flight: each of its callbacks still runs once (with a
  // result or an error; the loop runs on), and the clients sharing the loop keep working.
  done = 0;
  auto first = clients[0]->GetMap("shared-loop");
  for (int i = 0; i < kCalls; ++i) first->GetAsync("c0-" + std::to_string(i), record);
  clients[0]->Shutdown();
  {
    std::unique_lock lock(mu);
    CHECK(cv.wait_for(lock, 10s, [&] { return done == kCalls; }));
  }
  CHECK(first->Get("c0-1").error().code() == base::ErrorCode::kShuttingDown);
  for (int c = 1; c < kClients; ++c) {
    auto m = clients[c]->GetMap("shared-loop");
    REQUIRE(m->Set("after", std::to_string(c)));
    CHECK(m->Get("after").value() == Optional(std::to_string(c)));
  }
  clients.clear();  // the loop's thread stops with its last holder
  loop.reset();
}

}  // namespace tessera::integration
