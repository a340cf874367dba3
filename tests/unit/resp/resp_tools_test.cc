// Drives the RESP front-end with the real redis-cli and redis-benchmark binaries. Every
// process runs under `timeout`, so a misbehaving server fails the test instead of hanging it.
#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <thread>

#include "test_server.h"

using namespace tessera::resp::testing;

namespace {

// Runs a shell command and returns its stdout (stderr merged when asked).
std::string Run(const std::string& command) {
  std::string output;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> chunk{};
  while (std::fgets(chunk.data(), chunk.size(), pipe) != nullptr) output += chunk.data();
  ::pclose(pipe);
  return output;
}

std::string Cli(std::uint16_t port, const std::string& args) {
  return Run("timeout 10 redis-cli -p " + std::to_string(port) + " " + args + " 2>&1");
}

}  // namespace

TEST_CASE("redis-cli: strings, NX, PX expiry, hashes", "[resp][tools]") {
  TestServer server;
  const auto port = server.port();
  CHECK(Cli(port, "PING") == "PONG\n");
  CHECK(Cli(port, "SET greeting hello") == "OK\n");
  CHECK(Cli(port, "GET greeting") == "hello\n");
  CHECK(Cli(port, "SET lock me NX PX 1500") == "OK\n");
  CHECK(Cli(port, "SET lock you NX PX 1500") == "\n");  // nil prints as an empty line
  CHECK(Cli(port, "GET lock") == "me\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(1800));  // > PX, even on a busy machine
  CHECK(Cli(port, "GET lock") == "\n");
  CHECK(Cli(port, "HSET user name ada lang en") == "2\n");
  CHECK(Cli(port, "HGET user lang") == "en\n");
  CHECK(Cli(port, "INCR counter") == "1\n");
  CHECK(Cli(port, "NOSUCHCMD x").find("ERR unknown command 'NOSUCHCMD'") != std::string::npos);
}

TEST_CASE("redis-cli: SUBSCRIBE in the background receives PUBLISH", "[resp][tools][pubsub]") {
  TestServer server;
  const auto port = server.port();
  std::string subscriber_output;
  std::thread subscriber([&subscriber_output, port] {
    subscriber_output =
        Run("timeout 3 redis-cli -p " + std::to_string(port) + " SUBSCRIBE alerts 2>&1");
  });
  RespClient probe(port);
  bool subscribed = false;
  for (int i = 0; i < 100 && !subscribed; ++i) {
    subscribed = probe.Call({"PUBSUB", "NUMSUB", "alerts"}) == "*2\r\n" + Bulk("alerts") + Int(1);
    if (!subscribed) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(subscribed);
  CHECK(Cli(port, "PUBLISH alerts disk-full") == "1\n");
  subscriber.join();
  CHECK(subscriber_output.find("subscribe\nalerts\n1\n") != std::string::npos);
  CHECK(subscriber_output.find("message\nalerts\ndisk-full\n") != std::string::npos);
}

TEST_CASE("redis-cli --pipe mass insertion", "[resp][tools]") {
  TestServer server;
  const auto port = server.port();
  const std::string path = "/tmp/tessera_resp_pipe_" + std::to_string(port) + ".txt";
  {
    std::ofstream file(path, std::ios::binary);
    for (int i = 0; i < 1000; ++i) {
      const std::string key = "key:" + std::to_string(i);
      const std::string value = "value:" + std::to_string(i);
      file << "*3\r\n$3\r\nSET\r\n$" << key.size() << "\r\n"
           << key << "\r\n$" << value.size() << "\r\n"
           << value << "\r\n";
    }
  }
  const auto output =
      Run("timeout 20 redis-cli -p " + std::to_string(port) + " --pipe < " + path + " 2>&1");
  std::remove(path.c_str());
  CHECK(output.find("errors: 0, replies: 1000") != std::string::npos);
  RespClient c(port);
  CHECK(c.Call({"DBSIZE"}) == Int(1000));
  CHECK(c.Call({"GET", "key:999"}) == Bulk("value:999"));
}

TEST_CASE("redis-benchmark runs without errors", "[resp][tools][benchmark]") {
  TestServer server;
  const auto output = Run("timeout 90 redis-benchmark -p " + std::to_string(server.port()) +
                          " -t ping_inline,ping_mbulk,set,get,incr,hset,mset -n 2000 -c 10 -q "
                          "2>&1");
  INFO(output);
  CHECK(output.find("ERR") == std::string::npos);
  for (const auto* test :
       {"PING_INLINE:", "PING_MBULK:", "SET:", "GET:", "INCR:", "HSET:", "MSET (10 keys):"}) {
    CHECK(output.find(test) != std::string::npos);
  }
}
