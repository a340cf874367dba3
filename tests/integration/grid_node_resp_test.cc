// A real grid-node process with --resp-port driven by the real redis-cli and redis-benchmark
// (Debian's redis-tools), as a Redis user would: the same front-end the in-process RESP tests
// cover, here through the member's own flags, threads and shutdown.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <regex>
#include <thread>

#include "child_process.h"

namespace tessera::integration {
namespace {

std::uint16_t RespPort(const NodeProcess& node) {
  std::smatch m;
  const std::string& line = node.ready_line();
  REQUIRE(std::regex_search(line, m, std::regex(R"(resp 127\.0\.0\.1:([0-9]+))")));
  return static_cast<std::uint16_t>(std::stoi(m[1].str()));
}

// redis-cli against `port` with `args`; returns stdout+stderr.
std::string Cli(std::uint16_t port, std::vector<std::string> args) {
  std::vector<std::string> full = {"-p", std::to_string(port)};
  full.insert(full.end(), args.begin(), args.end());
  auto r = RunProcess("/usr/bin/redis-cli", full, 10s);
  return r.out + r.err;
}

std::string Shell(const std::string& command, std::chrono::milliseconds timeout = 60s) {
  auto r = RunProcess("/bin/sh", {"-c", command}, timeout);
  return r.out + r.err;
}

// `redis-cli SUBSCRIBE channel` on `port` for 3 s in the background, started and registered
// (PUBSUB NUMSUB says so) when the constructor returns; output() waits for it to end.
class BackgroundSubscriber {
 public:
  BackgroundSubscriber(std::uint16_t port, const std::string& channel)
      : thread_([this, port, channel] {
          output_ = Shell(
              "timeout 3 redis-cli -p " + std::to_string(port) + " SUBSCRIBE " + channel + " 2>&1",
              10s);
        }) {
    for (int i = 0; i < 100 && !subscribed_; ++i) {
      subscribed_ = Cli(port, {"PUBSUB", "NUMSUB", channel}) == channel + "\n1\n";
      if (!subscribed_) std::this_thread::sleep_for(20ms);
    }
  }
  ~BackgroundSubscriber() {
    if (thread_.joinable()) thread_.join();
  }
  bool subscribed() const { return subscribed_; }
  const std::string& output() {
    if (thread_.joinable()) thread_.join();
    return output_;
  }

 private:
  bool subscribed_ = false;
  std::string output_;
  std::thread thread_;  // last: starts after the state it writes
};

}  // namespace

TEST_CASE("redis-cli drives grid-node: strings, NX+PX expiry, hashes, counters, errors",
          "[tools][resp]") {
  auto node = NodeProcess::StartOrFail({"--resp-port", "0"});
  const auto port = RespPort(*node);
  CHECK(Cli(port, {"PING"}) == "PONG\n");
  CHECK(Cli(port, {"SET", "greeting", "hello"}) == "OK\n");
  CHECK(Cli(port, {"GET", "greeting"}) == "hello\n");
  CHECK(Cli(port, {"SET", "lock", "me", "NX", "PX", "1500"}) == "OK\n");
  CHECK(Cli(port, {"SET", "lock", "you", "NX", "PX", "1500"}) == "\n");  // nil: not stored
  CHECK(Cli(port, {"GET", "lock"}) == "me\n");
  std::this_thread::sleep_for(1800ms);  // > PX, with slack for a busy machine
  CHECK(Cli(port, {"GET", "lock"}) == "\n");
  CHECK(Cli(port, {"SET", "lock", "you", "NX", "PX", "1500"}) == "OK\n");  // free again
  CHECK(Cli(port, {"HSET", "user", "name", "ada", "lang", "en"}) == "2\n");
  CHECK(Cli(port, {"HGET", "user", "lang"}) == "en\n");
  CHECK(Cli(port, {"INCRBY", "visits", "5"}) == "5\n");
  CHECK(Cli(port, {"INCR", "greeting"}).find("ERR value is not an integer") != std::string::npos);
  CHECK(Cli(port, {"NOSUCHCMD", "x"}).find("ERR unknown command 'NOSUCHCMD'") != std::string::npos);
  CHECK(Cli(port, {"GET", "greeting"}) == "hello\n");  // errors changed nothing
  // The same data is visible through the native protocol: one map, two front-ends.
  auto get = RunProcess(GRID_CLI_PATH,
                        {"--address", node->address(), "map", "get", "default", "greeting"});
  CHECK(get.exit_code == 0);
  CHECK(get.out.find("hello") != std::string::npos);
  CHECK(node->Stop() == 0);
}

TEST_CASE("redis-cli --pipe loads grid-node, SUBSCRIBE receives PUBLISH", "[tools][resp]") {
  auto node = NodeProcess::StartOrFail({"--resp-port", "0"});
  const auto port = RespPort(*node);
  const std::string path = "/tmp/tessera-pipe-" + std::to_string(port) + ".txt";
  {
    std::ofstream out(path);
    for (int i = 0; i < 5000; ++i) out << "SET key:" << i << " value-" << i << "\r\n";
  }
  const auto piped =
      Shell("timeout 20 redis-cli -p " + std::to_string(port) + " --pipe < " + path + " 2>&1");
  std::remove(path.c_str());
  CHECK(piped.find("errors: 0, replies: 5000") != std::string::npos);
  CHECK(Cli(port, {"DBSIZE"}) == "5000\n");
  CHECK(Cli(port, {"GET", "key:4999"}) == "value-4999\n");

  BackgroundSubscriber subscriber(port, "alerts");
  CHECK(subscriber.subscribed());
  CHECK(Cli(port, {"PUBLISH", "alerts", "disk-full"}) == "1\n");
  CHECK(subscriber.output().find("message\nalerts\ndisk-full\n") != std::string::npos);
  CHECK(node->Stop() == 0);
}

TEST_CASE("redis-benchmark against grid-node completes without errors", "[tools][resp]") {
  auto node = NodeProcess::StartOrFail({"--resp-port", "0"});
  const auto port = RespPort(*node);
  const auto output = Shell("timeout 90 redis-benchmark -p " + std::to_string(port) +
                                " -t ping_inline,ping_mbulk,set,get,incr,hset,mset -n 2000 "
                                "-c 10 -P 4 -q 2>&1",
                            100s);
  INFO(output);
  CHECK(output.find("ERR") == std::string::npos);
  for (const auto* test :
       {"PING_INLINE:", "PING_MBULK:", "SET:", "GET:", "INCR:", "HSET:", "MSET (10 keys):"}) {
    CHECK(output.find(test) != std::string::npos);
  }
  CHECK(Cli(port, {"PING"}) == "PONG\n");  // still serving
  CHECK(node->Stop() == 0);
}

}  // namespace tessera::integration

namespace tessera::integration {

TEST_CASE("RESP on any member of a cluster serves every key", "[tools][resp][cluster]") {
  const std::vector<std::string> fast = {"--heartbeat-ms", "200", "--failure-timeout-ms", "1500"};
  auto args = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), fast.begin(), fast.end());
    extra.insert(extra.end(), {"--resp-port", "0"});
    return extra;
  };
  auto a = NodeProcess::StartOrFail(args({}));
  auto b = NodeProcess::StartOrFail(args({"--join", a->address()}));
  WaitForMembers(*b, 2);
  const auto port_a = RespPort(*a), port_b = RespPort(*b);
  std::string script;
  for (int i = 0; i < 200; ++i)
    script += "SET key" + std::to_string(i) + " v" + std::to_string(i) + "\n";
  CHECK(Shell("printf '" + script + "' | redis-cli -p " + std::to_string(port_a) + " --pipe")
            .find("errors: 0, replies: 200") != std::string::npos);
  // Half of those keys live on b's partitions; a RESP client of b reads all of them, and
  // DBSIZE counts the cluster's keys once.
  CHECK(Cli(port_b, {"DBSIZE"}) == "200\n");
  CHECK(Cli(port_a, {"DBSIZE"}) == "200\n");
  CHECK(Cli(port_b, {"MGET", "key0", "key1", "key2", "key199"}) == "v0\nv1\nv2\nv199\n");
  CHECK(Cli(port_b, {"INCR", "counter"}) == "1\n");
  CHECK(Cli(port_a, {"INCR", "counter"}) == "2\n");
  CHECK(Cli(port_b, {"SET", "lock", "b", "NX"}) == "OK\n");
  CHECK(Cli(port_a, {"SET", "lock", "a", "NX"}) == "\n");  // one winner across members

  // Pub/sub spans the cluster: a subscriber on b hears what is published on a.
  BackgroundSubscriber subscriber(port_b, "alerts");
  CHECK(subscriber.subscribed());
  CHECK(Cli(port_a, {"PUBLISH", "alerts", "from-a"}) == "0\n");  // no subscriber on a itself
  CHECK(subscriber.output().find("message\nalerts\nfrom-a\n") != std::string::npos);
}

}  // namespace tessera::integration

namespace tessera::integration {
namespace {

// The resident set of process `pid` in bytes (VmRSS), or 0 when unreadable.
std::uint64_t ResidentBytes(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

}  // namespace

TEST_CASE(
    "grid-node with a secret cuts off a RESP client that sends a 256 MiB argument before AUTH at "
    "its header, without reading or allocating it, and keeps serving",
    "[tools][resp][auth]") {
  auto node =
      NodeProcess::StartOrFail({"--resp-port", "0", "--secret", "s3cret", "--http-port", "0"});
  const auto port = RespPort(*node);
  REQUIRE(Cli(port, {"-a", "s3cret", "--no-auth-warning", "SET", "k", "v"}) == "OK\n");
  const std::uint64_t rss_before = ResidentBytes(node->pid());
  REQUIRE(rss_before > 0);

  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  timeval timeout{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  // The header of a 256 MiB argument (under the member's 512 MiB limit after AUTH), then up to
  // 64 MiB of it: the member must close the connection long before.
  const std::string header = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$268435456\r\n";
  REQUIRE(::send(fd, header.data(), header.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(header.size()));
  const std::string chunk(1 << 20, 'x');
  std::uint64_t sent = 0;
  while (sent < (64u << 20)) {
    const ssize_t n = ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (n <= 0) break;  // reset by the member (or the send timed out: nobody reads)
    sent += static_cast<std::uint64_t>(n);
  }
  std::string reply(512, '\0');
  const ssize_t got = ::recv(fd, reply.data(), reply.size(), 0);
  ::close(fd);
  INFO("sent " << sent << " bytes; reply: " << (got > 0 ? reply.substr(0, got) : "(none)"));
  // What the kernel's socket buffers take before the reset, not the argument.
  CHECK(sent < (16u << 20));
  const std::uint64_t rss_after = ResidentBytes(node->pid());
  INFO("RSS before " << rss_before << ", after " << rss_after);
  CHECK(rss_after < rss_before + (16u << 20));
  // The member goes on serving, authenticated clients and its data alike.
  CHECK(Cli(port, {"-a", "s3cret", "--no-auth-warning", "GET", "k"}) == "v\n");
  // Counted in its metrics.
  const auto metrics = HttpGet(HttpPortOf(*node), "/metrics");
  CHECK(metrics.body.find("tessera_resp_unauthenticated_rejected_total 1\n") != std::string::npos);
  CHECK(metrics.body.find("tessera_resp_protocol_errors_total 1\n") != std::string::npos);
}

}  // namespace tessera::integration

namespace tessera::integration {

TEST_CASE(
    "grid-node's pre-AUTH limits and RESP timeouts are set by its flags, and a bad value stops "
    "the start naming it",
    "[tools][resp][auth]") {
  auto node =
      NodeProcess::StartOrFail({"--resp-port", "0", "--secret", "s3cret", "--resp-preauth-max-args",
                                "3", "--resp-preauth-timeout-ms", "60000"});
  const auto port = RespPort(*node);
  // redis-cli prints an error reply with a blank line after it.
  CHECK(Cli(port, {"GET", "k"}).rfind("NOAUTH Authentication required.\n", 0) == 0);
  const std::string cut = Cli(port, {"MSET", "a", "1", "b", "2"});
  INFO(cut);
  CHECK(cut.find("unauthenticated multibulk length: 5 arguments, and a client that has not "
                 "authenticated may send at most 3; AUTH first") != std::string::npos);
  CHECK(Cli(port, {"-a", "s3cret", "--no-auth-warning", "MSET", "a", "1", "b", "2"}) == "OK\n");

  auto bad = RunProcess(GRID_NODE_PATH, {"--resp-preauth-max-bulk-bytes", "10"}, 10s);
  CHECK(bad.exit_code != 0);
  CHECK((bad.out + bad.err).find("resp-preauth-max-bulk-bytes must be at least 64") !=
        std::string::npos);
}

}  // namespace tessera::integration
