#pragma once
// Helpers for multi-process tests: run a tool to completion capturing its output, and keep a
// grid-node running for the length of a test (an RAII guard that always kills and reaps it).
//
// Thread-safety: a NodeProcess belongs to the test thread that started it.

#include <sys/types.h>

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/grid/client.h"

namespace tessera::integration {

using namespace std::chrono_literals;

struct ProcessResult {
  int exit_code = -1;  // 128 + signal when killed by a signal
  std::string out;
  std::string err;
  bool timed_out = false;  // killed after the timeout
};

// Runs `path args...` to completion (fork+exec), capturing stdout and stderr. Kills it with
// SIGKILL after `timeout`.
ProcessResult RunProcess(const std::string& path, const std::vector<std::string>& args,
                         std::chrono::milliseconds timeout = 30s);

// Lines of `text` (without the trailing newline's empty line).
std::vector<std::string> Lines(const std::string& text);

// A running grid-node. The destructor SIGKILLs and reaps it if it is still running.
class NodeProcess {
 public:
  // Starts grid-node with `args` (add "--port", "0" yourself) and waits for its ready line.
  // Errors: kInternal with the exit status and output when it exits or hangs before ready.
  static base::Result<std::unique_ptr<NodeProcess>> Start(std::vector<std::string> args,
                                                          std::chrono::milliseconds timeout = 30s,
                                                          const std::string& program = "");
  // Starts a node with --port 0 --log-level warn plus `extra`; FAILs the test on error.
  static std::unique_ptr<NodeProcess> StartOrFail(std::vector<std::string> extra = {});
  // The same with another program that runs a member as grid-node does (tools/grid-node's
  // RunNode), e.g. WORK_NODE_PATH.
  static std::unique_ptr<NodeProcess> StartProgramOrFail(const std::string& program,
                                                         std::vector<std::string> extra);

  ~NodeProcess();
  NodeProcess(const NodeProcess&) = delete;
  NodeProcess& operator=(const NodeProcess&) = delete;

  // Sends `signal` and waits for the exit; returns the exit code (128 + signal if killed by
  // one), or -1 if it had to be SIGKILLed after `timeout`.
  int Stop(int signal = 15 /*SIGTERM*/, std::chrono::milliseconds timeout = 20s);

  std::uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& ready_line() const { return ready_line_; }
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

  NodeProcess(pid_t pid, int stdout_fd) : pid_(pid), stdout_fd_(stdout_fd) {}

 private:
  pid_t pid_;
  int stdout_fd_;  // kept open so the node never gets SIGPIPE on stdout
  std::uint16_t port_ = 0;
  std::string ready_line_;
};

// grid-node flags for fast failure detection, so cluster tests take seconds: heartbeat
// 200 ms, a silent member removed after 1.5 s, a join without answer given up after 1.5 s;
// then `extra`.
std::vector<std::string> FastClusterArgs(std::vector<std::string> extra = {});

// Client options for `node` with the given call/connect timeout.
grid::ClientOptions ClientOptionsFor(const NodeProcess& node,
                                     std::chrono::milliseconds timeout = 5000ms);
// Connects to `node`; FAILs the test on error.
std::unique_ptr<grid::Client> ConnectOrFail(const NodeProcess& node);

// Waits (up to 20 s) until `node`'s view lists `count` members and returns that view; FAILs
// the test otherwise.
membership::ClusterView WaitForMembers(const NodeProcess& node, std::size_t count);

// A temporary file removed at the end of the test.
class TempFile {
 public:
  explicit TempFile(const std::string& content) {
    auto unique = std::chrono::steady_clock::now().time_since_epoch().count();
    path_ = std::filesystem::temp_directory_path() /
            ("grid-node-test-" + std::to_string(getpid()) + "-" + std::to_string(unique) + ".yaml");
    std::ofstream(path_) << content;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// A loopback port with nothing listening on it, below the kernel's ephemeral range and
// reserved for this process (a lock file per port), so no other test and no outgoing
// connection takes it while a member is down and about to be restarted there.
std::uint16_t UnusedPort();

// HTTP/1.1 against a member's --http-port on 127.0.0.1.
struct HttpReply {
  int status = 0;
  std::string content_type;
  std::string body;
  nlohmann::json Json() const { return nlohmann::json::parse(body); }
};
// One GET; throws (boost::system::system_error) when nothing answers on `port`.
HttpReply HttpGet(std::uint16_t port, const std::string& target);
// The HTTP port in `node`'s ready line; FAILs the test when it has none.
std::uint16_t HttpPortOf(const NodeProcess& node);
// Polls `target` until it answers `status` (bounded by `limit`); returns the last reply.
HttpReply WaitForStatus(std::uint16_t port, const std::string& target, int status,
                        std::chrono::milliseconds limit = 20s);

}  // namespace tessera::integration
