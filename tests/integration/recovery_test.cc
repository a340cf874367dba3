// Full-cluster restart on data directories (issue 42; membership.h "Recovery"): grid-node
// processes SIGKILLed together and started again, at other ports, each on its directory.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include "child_process.h"

namespace tessera::integration {
namespace {

// A fresh folder under the temp directory, removed at the end of the test.
class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()))) {
    std::filesystem::remove_all(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string operator/(const std::string& sub) const { return (path_ / sub).string(); }

 private:
  std::filesystem::path path_;
};

// Reads `key` of `map` through `client` until the cluster answers other than kRecovering
// (bounded by `limit`); returns that answer.
base::Result<std::optional<std::string>> ReadOnceRecovered(grid::Client& client,
                                                           const std::string& map,
                                                           const std::string& key,
                                                           std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    auto got = client.GetMap(map)->Get(key);
    if (got || got.error().code() != base::ErrorCode::kRecovering ||
        std::chrono::steady_clock::now() > deadline) {
      return got;
    }
    std::this_thread::sleep_for(100ms);
  }
}

// A client that returns kRecovering at once instead of retrying it (the tests look at the
// refusal itself).
std::unique_ptr<grid::Client> ConnectNoRetry(const NodeProcess& node) {
  auto options = ClientOptionsFor(node);
  options.retry_recovering = false;
  auto client = grid::Client::Connect(options);
  if (!client) FAIL("cannot connect to " << node.address() << ": " << client.error().ToString());
  return std::move(*client);
}

// A blocking RESP connection to 127.0.0.1:`port` (the hash writer and its check); a read gives
// up after 5 s.
class RespConnection {
 public:
  explicit RespConnection(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval timeout{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    ok_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RespConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  // The reply's first line (":1", "-ERR ...", "$-1"), or for a bulk string its bytes; "" when
  // the connection failed.
  std::string Call(const std::vector<std::string>& args) {
    std::string out = "*" + std::to_string(args.size()) + "\r\n";
    for (const auto& a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
    if (!ok_ ||
        ::send(fd_, out.data(), out.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(out.size())) {
      return ok_ = false, "";
    }
    std::string line = Line();
    if (line.empty() || line[0] != '$' || line == "$-1") return line;
    const std::size_t size = std::stoul(line.substr(1));
    while (ok_ && buffer_.size() < size + 2) Fill();
    if (!ok_) return "";
    std::string bulk = buffer_.substr(0, size);
    buffer_.erase(0, size + 2);
    return bulk;
  }

 private:
  void Fill() {
    char chunk[4096];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0)
      ok_ = false;
    else
      buffer_.append(chunk, static_cast<std::size_t>(n));
  }
  std::string Line() {
    std::size_t end;
    while ((end = buffer_.find("\r\n")) == std::string::npos && ok_) Fill();
    if (!ok_) return "";
    std::string line = buffer_.substr(0, end);
    buffer_.erase(0, end + 2);
    return line;
  }
  int fd_;
  bool ok_ = false;
  std::string buffer_;
};

std::uint16_t RespPortOf(const NodeProcess& node) {
  std::smatch m;
  const std::string& line = node.ready_line();
  REQUIRE(std::regex_search(line, m, std::regex(R"(resp 127\.0\.0\.1:([0-9]+))")));
  return static_cast<std::uint16_t>(std::stoi(m[1].str()));
}

}  // namespace

TEST_CASE(
    "grid-node --data-dir: three members SIGKILLed together mid-load and restarted at other "
    "ports keep every acknowledged write (always and periodic maps, transactions, a hash over "
    "RESP, a stream's group cursors), requests get Recovering until all three are back",
    "[tools][node][recovery]") {
  TempDir base("grid-node-recovery");
  // `default` holds RESP's keyspace (the hash).
  TempFile config(
      "maps:\n"
      "  orders: {persistence: always}\n"
      "  events: {persistence: periodic}\n"
      "  default: {persistence: always}\n");
  auto args = [&](const std::string& name, std::vector<std::string> extra) {
    extra.insert(extra.end(), {"--data-dir", base / name, "--config", config.path()});
    return FastClusterArgs(extra);
  };
  auto a = NodeProcess::StartOrFail(args("a", {"--resp-port", "0"}));
  auto b = NodeProcess::StartOrFail(args("b", {"--join", a->address()}));
  const std::uint16_t c_http = UnusedPort();
  auto c = NodeProcess::StartOrFail(
      args("c", {"--join", a->address(), "--http-port", std::to_string(c_http)}));
  for (const auto* node : {a.get(), b.get(), c.get()}) WaitForMembers(*node, 3);
  REQUIRE(WaitForStatus(c_http, "/health/safe", 200).status == 200);

  // A stream with a consumer group that handled the first 100 of its 150 events.
  std::vector<std::pair<std::int64_t, std::int64_t>> stream_before;  // per sub: tail, cursor
  {
    auto client = ConnectOrFail(*b);
    auto stream = client->GetStream("shipments");
    for (int i = 0; i < 100; ++i) REQUIRE(stream->Append("k" + std::to_string(i % 10), "e"));
    REQUIRE(stream->CreateGroup("billing"));
    std::atomic<int> handled{0};
    auto id = stream->Subscribe("billing", [&](const grid::StreamEvent&) -> base::Result<void> {
      handled.fetch_add(1);
      return {};
    });
    REQUIRE(id);
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    auto lag = [&] {
      auto info = stream->Info();
      return info && !info->groups.empty() ? info->groups.front().lag : -1;
    };
    while (lag() != 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(50ms);
    }
    REQUIRE(lag() == 0);
    stream->Unsubscribe(*id);
    for (int i = 0; i < 50; ++i) REQUIRE(stream->Append("k" + std::to_string(i % 10), "later"));
    auto info = stream->Info();
    REQUIRE(info);
    for (const auto& sub : info->sub_streams) {
      REQUIRE(sub.groups.size() == 1);
      stream_before.emplace_back(sub.tail, sub.groups.front().cursor);
    }
    client->Shutdown();
  }

  // Two writers, through different members, until about 3000 writes are acknowledged; then
  // every process is killed while they still write.
  std::atomic<bool> stop{false};
  std::atomic<int> acknowledged{0};
  std::mutex mu;
  std::vector<std::pair<std::string, std::string>> acked;  // (map, key); value = key
  auto writer = [&](const NodeProcess* through, const std::string& prefix) {
    auto client = grid::Client::Connect(ClientOptionsFor(*through, 2000ms));
    if (!client) return;  // checked below: too few writes acknowledged
    for (int i = 0; !stop.load() && i < 100'000; ++i) {
      const std::string map = i % 4 == 0 ? "events" : "orders";
      const std::string key = prefix + std::to_string(i);
      if (!(*client)->GetMap(map)->Set(key, key)) continue;  // the members are going down
      std::lock_guard lock(mu);
      acked.emplace_back(map, key);
      acknowledged.fetch_add(1);
    }
    (*client)->Shutdown();
  };
  // Transactions of two keys in one partition, and fields of 20 hashes over RESP.
  std::vector<int> committed;       // transaction i wrote t<i>@tx<i> and u<i>@tx<i>
  std::vector<std::string> fields;  // field f<i> of hash h<i % 20>, value = the field
  int transactions_sent = 0;
  auto transactions = [&] {
    auto client = grid::Client::Connect(ClientOptionsFor(*b, 2000ms));
    if (!client) return;
    for (int i = 0; !stop.load() && i < 100'000; ++i) {
      const std::string pk = "tx" + std::to_string(i);
      grid::Transaction tx(pk);
      tx.Set("orders", "t" + std::to_string(i) + "@" + pk, "T")
          .Set("events", "u" + std::to_string(i) + "@" + pk, "U");
      transactions_sent = i + 1;
      auto r = (*client)->Transact(tx);
      if (!r || !r->committed) continue;
      std::lock_guard lock(mu);
      committed.push_back(i);
      acknowledged.fetch_add(1);
    }
    (*client)->Shutdown();
  };
  const std::uint16_t resp_port = RespPortOf(*a);
  auto hashes = [&] {
    RespConnection resp(resp_port);
    for (int i = 0; !stop.load() && i < 100'000; ++i) {
      const std::string field = "f" + std::to_string(i);
      const std::string reply = resp.Call({"HSET", "h" + std::to_string(i % 20), field, field});
      if (reply.empty() || reply[0] != ':') break;  // the member is going down
      std::lock_guard lock(mu);
      fields.push_back(field);
      acknowledged.fetch_add(1);
    }
  };
  std::thread w1(writer, a.get(), "a-");
  std::thread w2(writer, c.get(), "c-");
  std::thread w3(transactions);
  std::thread w4(hashes);
  const auto load_deadline = std::chrono::steady_clock::now() + 60s;
  while (acknowledged.load() < 3000 && std::chrono::steady_clock::now() < load_deadline) {
    std::this_thread::sleep_for(10ms);
  }
  REQUIRE(acknowledged.load() >= 3000);
  for (auto* node : {a.get(), b.get(), c.get()}) kill(node->pid(), SIGKILL);
  stop.store(true);
  w1.join();
  w2.join();
  w3.join();
  w4.join();
  for (auto* node : {a.get(), b.get(), c.get()}) CHECK(node->Stop(SIGKILL) == 128 + SIGKILL);
  std::vector<std::pair<std::string, std::string>> written;
  {
    std::lock_guard lock(mu);
    written = acked;
  }
  WARN(written.size() << " writes, " << committed.size() << " transactions and " << fields.size()
                      << " hash fields acknowledged before the kill");
  REQUIRE(committed.size() > 10);
  REQUIRE(fields.size() > 10);

  // Two of three back (at new ports): the cluster waits, and says why.
  const std::uint16_t a_http = UnusedPort();
  auto a2 = NodeProcess::StartOrFail(
      args("a", {"--http-port", std::to_string(a_http), "--resp-port", "0"}));
  auto b2 = NodeProcess::StartOrFail(args("b", {"--join", a2->address()}));
  WaitForMembers(*a2, 2);
  auto client = ConnectNoRetry(*a2);
  auto refused = client->GetMap("orders")->Get(written.front().second);
  REQUIRE(!refused);
  CHECK(refused.error().code() == base::ErrorCode::kRecovering);
  CHECK(refused.error().message().find("recovering") != std::string::npos);
  const auto ready = HttpGet(a_http, "/health/ready");
  CHECK(ready.status == 503);
  INFO(ready.body);
  CHECK(ready.body.find("waiting for 1 of the 3 members of the last partition table") !=
        std::string::npos);

  // A client that retries (the default) rides through: its call, made now, is answered once
  // the last member is back.
  auto patient = grid::Client::Connect(ClientOptionsFor(*b2, 60'000ms));
  REQUIRE(patient);
  auto waited = std::async(std::launch::async, [&] {
    return (*patient)->GetMap(written.front().first)->Get(written.front().second);
  });
  CHECK(waited.wait_for(500ms) == std::future_status::timeout);
  auto c2 = NodeProcess::StartOrFail(args("c", {"--join", a2->address()}));
  auto answered = waited.get();
  REQUIRE(answered);
  CHECK(*answered == std::optional<std::string>(written.front().second));
  (*patient)->Shutdown();
  auto first = ReadOnceRecovered(*client, written.front().first, written.front().second, 30s);
  REQUIRE(first);
  CHECK(*first == std::optional<std::string>(written.front().second));
  for (const auto* node : {a2.get(), b2.get(), c2.get()}) {
    auto through = ConnectOrFail(*node);
    int missing = 0;
    std::string example;
    for (const auto& [map, key] : written) {
      auto got = through->GetMap(map)->Get(key);
      REQUIRE(got);
      if (*got != std::optional<std::string>(key)) {
        ++missing;
        example = map + " " + key;
      }
    }
    INFO("through " << node->address() << ", e.g. " << example);
    CHECK(missing == 0);
    through->Shutdown();
  }
  // Every committed transaction is there whole; none is there in part (all or nothing through
  // the kill, those whose answer was lost included).
  {
    std::set<int> acked_tx(committed.begin(), committed.end());
    int lost = 0, partial = 0;
    for (int i = 0; i < transactions_sent; ++i) {
      const std::string pk = "@tx" + std::to_string(i);
      auto t = client->GetMap("orders")->Get("t" + std::to_string(i) + pk);
      auto u = client->GetMap("events")->Get("u" + std::to_string(i) + pk);
      REQUIRE(t);
      REQUIRE(u);
      if (t->has_value() != u->has_value()) ++partial;
      if (acked_tx.contains(i) && !(t->has_value() && u->has_value())) ++lost;
    }
    CHECK(lost == 0);
    CHECK(partial == 0);
  }
  // Every acknowledged hash field, read over RESP from the restarted member.
  {
    RespConnection resp(RespPortOf(*a2));
    int missing = 0;
    for (std::size_t i = 0; i < fields.size(); ++i) {
      const std::string& field = fields[i];
      const int n = std::stoi(field.substr(1));
      missing += resp.Call({"HGET", "h" + std::to_string(n % 20), field}) == field ? 0 : 1;
    }
    CHECK(missing == 0);
  }
  // The stream's events and the group's committed cursors are as they were (50 events left).
  {
    auto info = client->GetStream("shipments")->Info();
    REQUIRE(info);
    std::vector<std::pair<std::int64_t, std::int64_t>> stream_after;
    for (const auto& sub : info->sub_streams) {
      REQUIRE(sub.groups.size() == 1);
      stream_after.emplace_back(sub.tail, sub.groups.front().cursor);
    }
    CHECK(stream_after == stream_before);
    REQUIRE(info->groups.size() == 1);
    CHECK(info->groups.front().lag == 50);
  }
  // Backups were added and copied: every partition has its owner and its backup again.
  CHECK(WaitForStatus(a_http, "/health/safe", 200).status == 200);
  REQUIRE(client->GetMap("orders")->Set("after", "restart"));
  CHECK(client->GetMap("orders")->Get("after").value() == std::optional<std::string>("restart"));
  client->Shutdown();
  for (auto* node : {a2.get(), b2.get(), c2.get()}) CHECK(node->Stop() == 0);
}

TEST_CASE(
    "grid-node --data-dir --recovery partial: one member of two restarted alone serves every "
    "write after the recovery timeout (it held each partition as owner or backup), before it "
    "Recovering",
    "[tools][node][recovery]") {
  TempDir base("grid-node-partial");
  TempFile config("maps:\n  orders: {persistence: always}\n");
  auto args = [&](const std::string& name, std::vector<std::string> extra) {
    extra.insert(extra.end(), {"--data-dir", base / name, "--config", config.path()});
    return extra;  // StartOrFail runs 2 threads
  };
  auto a = NodeProcess::StartOrFail(args("a", {}));
  const std::uint16_t b_http = UnusedPort();
  auto b = NodeProcess::StartOrFail(
      args("b", {"--join", a->address(), "--http-port", std::to_string(b_http)}));
  WaitForMembers(*a, 2);
  // Every partition has its owner and its backup (one on each member) once safe.
  REQUIRE(WaitForStatus(b_http, "/health/safe", 200).status == 200);
  auto client = ConnectOrFail(*a);
  auto orders = client->GetMap("orders");
  for (int i = 0; i < 1000; ++i) {
    REQUIRE(orders->Set("o" + std::to_string(i), "order-" + std::to_string(i)));
  }
  client->Shutdown();
  CHECK(a->Stop(SIGKILL) == 128 + SIGKILL);
  CHECK(b->Stop(SIGKILL) == 128 + SIGKILL);
  // b alone, at a new port: it held every partition, as owner or as backup.
  const auto started = std::chrono::steady_clock::now();
  auto alone = NodeProcess::StartOrFail(
      args("b", {"--recovery", "partial", "--recovery-timeout-ms", "3000"}));
  client = ConnectNoRetry(*alone);
  orders = client->GetMap("orders");
  auto early = orders->Get("o1");
  if (std::chrono::steady_clock::now() - started < 2500ms) {
    REQUIRE(!early);
    CHECK(early.error().code() == base::ErrorCode::kRecovering);
  }
  REQUIRE(ReadOnceRecovered(*client, "orders", "o0", 30s));
  int missing = 0;
  for (int i = 0; i < 1000; ++i) {
    auto got = orders->Get("o" + std::to_string(i));
    REQUIRE(got);
    missing += *got == std::optional<std::string>("order-" + std::to_string(i)) ? 0 : 1;
  }
  CHECK(missing == 0);
  client->Shutdown();
  CHECK(alone->Stop() == 0);
}

}  // namespace tessera::integration

namespace tessera::integration {

TEST_CASE(
    "grid-node --data-dir: a log that can no longer be written (a file size limit, as a full "
    "disk) stops the member with exit code 1, no failed write was acknowledged (native client "
    "and RESP), and a restart has every acknowledged one",
    "[tools][node][recovery]") {
  const bool over_resp = GENERATE(false, true);
  INFO((over_resp ? "RESP" : "native client"));
  TempDir base("grid-node-full");
  std::filesystem::create_directories(base / "");
  // grid-node under a file size limit of 1 MB: the log's first segment cannot grow past it.
  const std::string wrapper = base / "limited-grid-node";
  std::ofstream(wrapper) << "#!/bin/sh\nexec prlimit --fsize=1000000 " << GRID_NODE_PATH
                         << " \"$@\"\n";
  std::filesystem::permissions(wrapper, std::filesystem::perms::owner_all);
  // RESP writes go to the map "default" and take the shard's fast path (the reply waits for
  // the log record: MapService::WhenLogged); the native client's take MapService::Execute.
  TempFile config("maps:\n  orders: {persistence: always}\n  default: {persistence: always}\n");
  const std::vector<std::string> args = {"--data-dir",  base / "node", "--config",
                                         config.path(), "--resp-port", "0"};
  auto node = NodeProcess::StartProgramOrFail(wrapper, args);
  const std::string value(1000, 'v');
  int acknowledged = 0;
  std::string refusal;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  if (over_resp) {
    RespConnection resp(RespPortOf(*node));
    while (refusal.empty() && acknowledged < 5000 && std::chrono::steady_clock::now() < deadline) {
      const std::string reply = resp.Call({"SET", "o" + std::to_string(acknowledged), value});
      if (reply == "+OK") {
        ++acknowledged;
      } else {
        refusal = reply.empty() ? "(no reply)" : reply;
      }
    }
    INFO(refusal);
    CHECK(refusal.rfind("-ERR", 0) == 0);
    CHECK(refusal.find("could not be logged to disk") != std::string::npos);
  } else {
    // A long call timeout: an fsync on a busy disk can take seconds (seen: 2 s under the full
    // suite), and a write that timed out is neither acknowledged nor the refusal this test is
    // about (it ended the loop as a kTimeout, not kStorage, and failed the checks below once).
    auto client = grid::Client::Connect(ClientOptionsFor(*node, 30000ms));
    REQUIRE(client);
    auto orders = (*client)->GetMap("orders");
    std::optional<base::Error> refused;
    while (!refused && acknowledged < 5000 && std::chrono::steady_clock::now() < deadline) {
      auto written = orders->Set("o" + std::to_string(acknowledged), value);
      if (written) {
        ++acknowledged;
      } else {
        refused = written.error();
      }
    }
    REQUIRE(refused);
    INFO(refused->message());
    CHECK(refused->code() == base::ErrorCode::kStorage);
    CHECK(refused->message().find("could not be logged to disk") != std::string::npos);
    (*client)->Shutdown();
  }
  CHECK(acknowledged > 100);
  // The member stops by itself: exit code 1 (Stop's SIGTERM finds it gone or going).
  const auto stopping = std::chrono::steady_clock::now() + 15s;
  bool exited = false;
  while (!exited && std::chrono::steady_clock::now() < stopping) {
    siginfo_t info{};
    // WNOWAIT: left waitable for Stop, which reads the exit code.
    exited =
        waitid(P_PID, static_cast<id_t>(node->pid()), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == node->pid();
    if (!exited) std::this_thread::sleep_for(50ms);
  }
  CHECK(exited);
  CHECK(node->Stop() == 1);

  auto again = NodeProcess::StartOrFail(args);
  int missing = 0;
  if (over_resp) {
    RespConnection resp(RespPortOf(*again));
    for (int i = 0; i < acknowledged; ++i) {
      const std::string key = "o" + std::to_string(i);
      std::string got = resp.Call({"GET", key});
      // Until the member's recovery completes, reads are refused (retryable).
      const auto ready_by = std::chrono::steady_clock::now() + 30s;
      while (got.rfind("-", 0) == 0 && std::chrono::steady_clock::now() < ready_by) {
        std::this_thread::sleep_for(50ms);
        got = resp.Call({"GET", key});
      }
      missing += got == value ? 0 : 1;
    }
  } else {
    auto reader = ConnectOrFail(*again);
    for (int i = 0; i < acknowledged; ++i) {
      auto got = ReadOnceRecovered(*reader, "orders", "o" + std::to_string(i), 30s);
      REQUIRE(got);
      missing += *got == std::optional<std::string>(value) ? 0 : 1;
    }
    reader->Shutdown();
  }
  CHECK(missing == 0);
  CHECK(again->Stop() == 0);
}

}  // namespace tessera::integration

namespace tessera::integration {

TEST_CASE(
    "grid-cli recovery force: two of three members back after a restart of every member serve "
    "every write once an operator forces the recovery, and forcing a cluster that is not "
    "recovering is refused",
    "[tools][node][recovery]") {
  TempDir base("grid-node-recovery-force");
  TempFile config("maps:\n  orders: {persistence: always}\n");
  auto args = [&](const std::string& name, std::vector<std::string> extra) {
    extra.insert(extra.end(), {"--data-dir", base / name, "--config", config.path()});
    return FastClusterArgs(extra);
  };
  auto a = NodeProcess::StartOrFail(args("a", {}));
  auto b = NodeProcess::StartOrFail(args("b", {"--join", a->address()}));
  auto c = NodeProcess::StartOrFail(args("c", {"--join", a->address()}));
  for (const auto* node : {a.get(), b.get(), c.get()}) WaitForMembers(*node, 3);
  const std::uint16_t a_http = UnusedPort();
  {
    auto client = ConnectOrFail(*a);
    for (int i = 0; i < 500; ++i) {
      REQUIRE(client->GetMap("orders")->Set("o" + std::to_string(i), "v" + std::to_string(i)));
    }
    client->Shutdown();
  }
  for (auto* node : {a.get(), b.get(), c.get()}) CHECK(node->Stop(SIGKILL) == 128 + SIGKILL);

  // c's disk is lost for good: a and b come back (at other ports) and wait for it.
  auto a2 = NodeProcess::StartOrFail(args("a", {"--http-port", std::to_string(a_http)}));
  auto b2 = NodeProcess::StartOrFail(args("b", {"--join", a2->address()}));
  WaitForMembers(*a2, 2);
  auto client = ConnectNoRetry(*b2);
  auto waiting = client->GetMap("orders")->Get("o1");
  REQUIRE(!waiting);
  CHECK(waiting.error().code() == base::ErrorCode::kRecovering);

  // Asked through b, which is not the master: grid-cli asks the master.
  auto forced = RunProcess(GRID_CLI_PATH, {"--address", b2->address(), "recovery", "force"});
  INFO(forced.out << forced.err);
  REQUIRE(forced.exit_code == 0);
  CHECK(forced.out.find("recovery forced") != std::string::npos);
  REQUIRE(ReadOnceRecovered(*client, "orders", "o0", 30s));
  int missing = 0;
  for (int i = 0; i < 500; ++i) {
    auto got = client->GetMap("orders")->Get("o" + std::to_string(i));
    REQUIRE(got);
    missing += *got == std::optional<std::string>("v" + std::to_string(i)) ? 0 : 1;
  }
  CHECK(missing == 0);  // each partition had a replica on a or b (backup count 1)
  CHECK(WaitForStatus(a_http, "/health/safe", 200).status == 200);

  auto again = RunProcess(GRID_CLI_PATH, {"--address", a2->address(), "recovery", "force"});
  CHECK(again.exit_code != 0);
  CHECK(again.err.find("not recovering") != std::string::npos);
  client->Shutdown();
  for (auto* node : {a2.get(), b2.get()}) CHECK(node->Stop() == 0);
}

TEST_CASE(
    "A member's persistence shows in grid-cli persistence status, /api/v1/cluster and its "
    "metrics: data directory, log figures and fsync times, and what its restart replayed",
    "[tools][node][recovery]") {
  TempDir base("grid-node-persistence-status");
  TempFile config("maps:\n  orders: {persistence: always}\n");
  const std::uint16_t http = UnusedPort();
  auto args = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), {"--data-dir", base / "a", "--config", config.path(), "--http-port",
                               std::to_string(http)});
    return FastClusterArgs(extra);
  };
  auto a = NodeProcess::StartOrFail(args({}));
  auto memory_only = NodeProcess::StartOrFail(FastClusterArgs({"--join", a->address()}));
  WaitForMembers(*a, 2);
  auto client = ConnectOrFail(*a);
  for (int i = 0; i < 100; ++i) {
    REQUIRE(client->GetMap("orders")->Set("o" + std::to_string(i), "placed"));
  }
  client->Shutdown();

  auto status =
      RunProcess(GRID_CLI_PATH, {"--address", a->address(), "--json", "persistence", "status"});
  REQUIRE(status.exit_code == 0);
  auto doc = nlohmann::json::parse(status.out);
  REQUIRE(doc["members"].size() == 2);
  for (const auto& m : doc["members"]) {
    INFO(m.dump());
    if (m["address"] == a->address()) {
      CHECK(m["data_dir"] == base / "a");
      CHECK(m["logging"] == true);
      CHECK(m["log"]["records"].get<std::int64_t>() >= 50);  // its half, owner or backup
      CHECK(m["log"]["fsyncs"].get<std::int64_t>() > 0);
      CHECK(m["log"]["disk_bytes"].get<std::int64_t>() > 0);
      CHECK(m["replayed"]["entries"] == 0);  // a new directory
    } else {
      CHECK(m["data_dir"] == "");
      CHECK(m["logging"] == false);
      CHECK(m["replayed"].is_null());
    }
    CHECK(m["recovery"] == "");
  }
  auto text = RunProcess(GRID_CLI_PATH, {"--address", a->address(), "persistence", "status"});
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("(none: memory only)") != std::string::npos);
  CHECK(text.out.find(base / "a") != std::string::npos);

  const auto cluster = HttpGet(http, "/api/v1/cluster");
  REQUIRE(cluster.status == 200);
  auto api = nlohmann::json::parse(cluster.body);
  CHECK(api["persistence"]["logging"] == true);
  CHECK(api["persistence"]["member_id"] == api["members"][0]["member_id"]);

  const auto metrics = HttpGet(http, "/metrics");
  REQUIRE(metrics.status == 200);
  INFO(metrics.body);
  for (const char* series :
       {"tessera_log_records_total ", "tessera_log_bytes_total ", "tessera_log_disk_bytes ",
        "tessera_log_compactions_total 0", "tessera_log_fsync_seconds_count ",
        "tessera_log_replayed_entries 0", "tessera_member_recovering 0"}) {
    CHECK(metrics.body.find(series) != std::string::npos);
  }
  CHECK(metrics.body.find("tessera_log_fsync_seconds_count 0") == std::string::npos);

  // Restarted on its directory: what it replayed shows.
  memory_only->Stop(SIGTERM);
  CHECK(a->Stop(SIGKILL) == 128 + SIGKILL);
  auto again = NodeProcess::StartOrFail(args({}));
  status =
      RunProcess(GRID_CLI_PATH, {"--address", again->address(), "--json", "persistence", "status"});
  REQUIRE(status.exit_code == 0);
  doc = nlohmann::json::parse(status.out);
  REQUIRE(doc["members"].size() == 1);
  INFO(doc.dump());
  CHECK(doc["members"][0]["replayed"]["entries"].get<std::int64_t>() == 100);
}

TEST_CASE(
    "grid-cli persistence backup: a copy of every member's data directory taken while writes "
    "go on, started at other ports after the cluster and its directories are gone, holds every "
    "write acknowledged before the backup",
    "[tools][node][recovery]") {
  TempDir base("grid-node-backup");
  TempFile config(
      "maps:\n"
      "  orders: {persistence: always}\n"
      "  events: {persistence: periodic}\n");
  auto args = [&](const std::string& dir, std::vector<std::string> extra) {
    extra.insert(extra.end(), {"--data-dir", dir, "--config", config.path()});
    return FastClusterArgs(extra);
  };
  auto a = NodeProcess::StartOrFail(args(base / "a", {}));
  auto b = NodeProcess::StartOrFail(args(base / "b", {"--join", a->address()}));
  WaitForMembers(*a, 2);

  // A writer goes on through the backup; what it had acknowledged before it began must be in
  // the copy.
  std::mutex mu;
  std::vector<std::string> acknowledged;
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    auto client = ConnectOrFail(*b);
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    for (int i = 0; i < 200'000 && !stop.load() && std::chrono::steady_clock::now() < deadline;
         ++i) {
      const std::string key = "k" + std::to_string(i);
      if (client->GetMap(i % 2 == 0 ? "orders" : "events")->Set(key, "v" + key)) {
        std::lock_guard lock(mu);
        acknowledged.push_back(key);
      }
    }
    client->Shutdown();
  });
  auto count = [&] {
    std::lock_guard lock(mu);
    return acknowledged.size();
  };
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (count() < 3000 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  std::vector<std::string> before;
  {
    std::lock_guard lock(mu);
    before = acknowledged;
  }
  REQUIRE(before.size() >= 3000);
  const std::string folder = base / "backup";
  auto backup = RunProcess(GRID_CLI_PATH,
                           {"--address", a->address(), "--json", "persistence", "backup", folder});
  const std::size_t during = count();
  stop = true;
  writer.join();
  INFO(backup.out << backup.err);
  REQUIRE(backup.exit_code == 0);
  auto doc = nlohmann::json::parse(backup.out);
  REQUIRE(doc["members"].size() == 2);
  std::vector<std::string> copies;
  for (const auto& m : doc["members"]) {
    CHECK(m["bytes"].get<std::int64_t>() > 0);
    copies.push_back(m["dir"].get<std::string>());
    CHECK(std::filesystem::exists(std::filesystem::path(copies.back()) / "member.id"));
  }
  WARN(before.size() << " writes acknowledged before the backup, " << during - before.size()
                     << " while it ran");

  // Bad input: the same folder again (each member's copy exists), and a relative folder.
  auto again =
      RunProcess(GRID_CLI_PATH, {"--address", a->address(), "persistence", "backup", folder});
  CHECK(again.exit_code == 1);
  CHECK(again.err.find("exists already; back up into a new folder") != std::string::npos);
  auto relative =
      RunProcess(GRID_CLI_PATH, {"--address", a->address(), "persistence", "backup", "copies"});
  CHECK(relative.exit_code == 2);
  CHECK(relative.err.find("is not an absolute path") != std::string::npos);

  // The machines are lost: both members and their directories.
  CHECK(a->Stop(SIGKILL) == 128 + SIGKILL);
  CHECK(b->Stop(SIGKILL) == 128 + SIGKILL);
  std::filesystem::remove_all(base / "a");
  std::filesystem::remove_all(base / "b");
  // Restored at other ports from the copies: a full restart of the cluster.
  auto a2 = NodeProcess::StartOrFail(args(copies[0], {}));
  auto b2 = NodeProcess::StartOrFail(args(copies[1], {"--join", a2->address()}));
  auto client = ConnectOrFail(*a2);
  REQUIRE(ReadOnceRecovered(*client, "orders", "k0", 30s));
  int missing = 0;
  std::string example;
  for (std::size_t i = 0; i < before.size(); ++i) {
    const std::string& key = before[i];
    auto got = client->GetMap(std::stoi(key.substr(1)) % 2 == 0 ? "orders" : "events")->Get(key);
    REQUIRE(got);
    if (*got != std::optional<std::string>("v" + key)) {
      ++missing;
      example = key;
    }
  }
  INFO("e.g. " << example);
  CHECK(missing == 0);
  client->Shutdown();
  CHECK(a2->Stop() == 0);
  CHECK(b2->Stop() == 0);
}

}  // namespace tessera::integration

namespace tessera::integration {

TEST_CASE(
    "grid-node --data-dir: after a recovery a member drops what it replayed of partitions "
    "another member's replica was chosen for, so a second restart of every member replays "
    "each entry once per replica",
    "[tools][node][recovery]") {
  TempDir base("grid-node-superseded");
  TempFile config("maps:\n  orders: {persistence: always}\n");
  auto args = [&](const std::string& name, std::vector<std::string> extra) {
    extra.insert(extra.end(), {"--data-dir", base / name, "--config", config.path()});
    return FastClusterArgs(extra);
  };
  // Three members, one backup: each entry is on two of them.
  auto start_all = [&](std::uint16_t http) {
    std::vector<std::unique_ptr<NodeProcess>> nodes;
    nodes.push_back(NodeProcess::StartOrFail(args("a", {"--http-port", std::to_string(http)})));
    for (const char* name : {"b", "c"}) {
      nodes.push_back(NodeProcess::StartOrFail(args(name, {"--join", nodes[0]->address()})));
    }
    for (const auto& n : nodes) WaitForMembers(*n, 3);
    REQUIRE(WaitForStatus(http, "/health/safe", 200).status == 200);  // backups copied
    return nodes;
  };
  const std::uint16_t http = UnusedPort();
  auto nodes = start_all(http);
  {
    auto client = ConnectOrFail(*nodes[0]);
    for (int i = 0; i < 1000; ++i) {
      REQUIRE(client->GetMap("orders")->Set("o" + std::to_string(i), "v"));
    }
    client->Shutdown();
  }
  auto replayed_total = [&](const NodeProcess& through) {
    auto status = RunProcess(GRID_CLI_PATH,
                             {"--address", through.address(), "--json", "persistence", "status"});
    REQUIRE(status.exit_code == 0);
    std::int64_t total = 0;
    const auto doc = nlohmann::json::parse(status.out);
    for (const auto& m : doc["members"]) {
      total += m["replayed"]["entries"].get<std::int64_t>();
    }
    return total;
  };
  for (int restart = 1; restart <= 2; ++restart) {
    for (auto& n : nodes) CHECK(n->Stop(SIGKILL) == 128 + SIGKILL);
    nodes = start_all(http);
    // Each member replays the replicas it held when killed: 2 x 1000 in all (the first restart
    // too: the cluster had its backups copied).
    INFO("restart " << restart);
    CHECK(replayed_total(*nodes[0]) == 2000);
  }
  auto client = ConnectOrFail(*nodes[1]);
  CHECK(client->GetMap("orders")->Size().value() == 1000);
  client->Shutdown();
  for (auto& n : nodes) CHECK(n->Stop() == 0);
}

}  // namespace tessera::integration
