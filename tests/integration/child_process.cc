// fork+exec rather than posix_spawn so the child can close every inherited descriptor
// (close_range) — client sockets and listeners of the test must not leak into grid-node.
// Between fork and exec the child only calls async-signal-safe functions.
#include "child_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <utility>  // before Asio's awaitable header (Boost 1.74)

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <regex>
#include <thread>

namespace tessera::integration {
namespace {

using Clock = std::chrono::steady_clock;

struct Spawned {
  pid_t pid = -1;
  int out_fd = -1;
  int err_fd = -1;  // -1 when stderr is inherited
};

Spawned Spawn(const std::string& path, const std::vector<std::string>& args, bool capture_err) {
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  REQUIRE(pipe2(out, O_CLOEXEC) == 0);
  if (capture_err) REQUIRE(pipe2(err, O_CLOEXEC) == 0);
  std::vector<std::string> storage = {path};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    if (capture_err) dup2(err[1], STDERR_FILENO);
    close_range(3, ~0U, 0);
    execv(path.c_str(), argv.data());
    _exit(127);
  }
  close(out[1]);
  if (capture_err) close(err[1]);
  return {pid, out[0], capture_err ? err[0] : -1};
}

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Waits for `pid` until `deadline`; returns its exit code or nullopt if still running.
std::optional<int> WaitUntil(pid_t pid, Clock::time_point deadline) {
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return ExitCodeOf(status);
    if (r < 0) return -1;
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(5ms);
  }
}

int KillAndReap(pid_t pid) {
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  return ExitCodeOf(status);
}

// Reads whatever is available on `fd` into `into`; returns false at EOF or error.
bool ReadSome(int fd, std::string& into) {
  char buffer[4096];
  ssize_t n = read(fd, buffer, sizeof buffer);
  if (n <= 0) return false;
  into.append(buffer, static_cast<std::size_t>(n));
  return true;
}

int MillisUntil(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<std::int64_t>(0, left.count()));
}

// Reads both pipes until both reach EOF or the deadline passes; returns false on timeout.
bool DrainPipes(Spawned& p, std::string& out, std::string& err, Clock::time_point deadline) {
  while (p.out_fd >= 0 || p.err_fd >= 0) {
    pollfd fds[2] = {{p.out_fd, POLLIN, 0}, {p.err_fd, POLLIN, 0}};
    int ready = poll(fds, 2, MillisUntil(deadline));
    if (ready == 0) return false;
    if (ready < 0) continue;
    if (fds[0].revents != 0 && !ReadSome(p.out_fd, out)) {
      close(p.out_fd);
      p.out_fd = -1;
    }
    if (fds[1].revents != 0 && !ReadSome(p.err_fd, err)) {
      close(p.err_fd);
      p.err_fd = -1;
    }
  }
  return true;
}

}  // namespace

ProcessResult RunProcess(const std::string& path, const std::vector<std::string>& args,
                         std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  Spawned p = Spawn(path, args, /*capture_err=*/true);
  ProcessResult result;
  bool drained = DrainPipes(p, result.out, result.err, deadline);
  std::optional<int> code = drained ? WaitUntil(p.pid, deadline) : std::nullopt;
  if (!code) {
    result.timed_out = true;
    code = KillAndReap(p.pid);
  }
  if (p.out_fd >= 0) close(p.out_fd);
  if (p.err_fd >= 0) close(p.err_fd);
  result.exit_code = *code;
  return result;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

base::Result<std::unique_ptr<NodeProcess>> NodeProcess::Start(std::vector<std::string> args,
                                                              std::chrono::milliseconds timeout,
                                                              const std::string& program) {
  auto deadline = Clock::now() + timeout;
  Spawned p = Spawn(program.empty() ? GRID_NODE_PATH : program, args, /*capture_err=*/false);
  auto node = std::make_unique<NodeProcess>(p.pid, p.out_fd);
  std::string out;
  static const std::regex kReady(
      R"((?:grid-node|stream-consumer) ready: native [0-9.]+:([0-9]+) .*)");
  while (true) {
    auto newline = out.find('\n');
    if (newline != std::string::npos) {
      node->ready_line_ = out.substr(0, newline);
      std::smatch m;
      if (std::regex_match(node->ready_line_, m, kReady)) {
        node->port_ = static_cast<std::uint16_t>(std::stoi(m[1].str()));
        return node;
      }
      return base::Fail(base::ErrorCode::kInternal, "unexpected first line: " + out);
    }
    pollfd fd = {p.out_fd, POLLIN, 0};
    int ready = poll(&fd, 1, MillisUntil(deadline));
    if (ready == 0 || (fd.revents != 0 && !ReadSome(p.out_fd, out))) {
      int code = node->Stop(SIGKILL, 5s);
      return base::Fail(base::ErrorCode::kInternal, "grid-node did not become ready (exit code " +
                                                        std::to_string(code) + "), stdout: " + out);
    }
  }
}

std::vector<std::string> FastClusterArgs(std::vector<std::string> extra) {
  std::vector<std::string> args = {"--heartbeat-ms",    "200", "--failure-timeout-ms", "1500",
                                   "--join-timeout-ms", "1500"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::unique_ptr<NodeProcess> NodeProcess::StartOrFail(std::vector<std::string> extra) {
  return StartProgramOrFail("", std::move(extra));
}

std::unique_ptr<NodeProcess> NodeProcess::StartProgramOrFail(const std::string& program,
                                                             std::vector<std::string> extra) {
  std::vector<std::string> args = {"--port", "0", "--log-level", "warn", "--threads", "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto node = Start(args, 30s, program);
  if (!node) FAIL(node.error().message());
  return std::move(*node);
}

NodeProcess::~NodeProcess() {
  if (pid_ > 0) KillAndReap(pid_);
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

int NodeProcess::Stop(int signal, std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  kill(pid_, signal);
  std::optional<int> code = WaitUntil(pid_, Clock::now() + timeout);
  if (!code) {
    KillAndReap(pid_);
    code = -1;
  }
  pid_ = -1;
  return *code;
}

grid::ClientOptions ClientOptionsFor(const NodeProcess& node, std::chrono::milliseconds timeout) {
  grid::ClientOptions options;
  options.addresses = {node.address()};
  options.connect_timeout = timeout;
  options.call_timeout = timeout;
  return options;
}

std::unique_ptr<grid::Client> ConnectOrFail(const NodeProcess& node) {
  auto client = grid::Client::Connect(ClientOptionsFor(node));
  if (!client) FAIL("cannot connect to " << node.address() << ": " << client.error().ToString());
  return std::move(*client);
}

namespace {

// Whether nothing listens on 127.0.0.1:`port` (bound with SO_REUSEADDR, as grid-node's
// listeners are, so a port in TIME_WAIT still counts as free).
bool Bindable(std::uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

}  // namespace

std::uint16_t UnusedPort() {
  // Below the kernel's ephemeral range (32768-60999 by default): a port the kernel hands out
  // for `bind(0)` or for an outgoing connection's local end is never one of these, so a member
  // restarted at its port after seconds finds it free. Test processes running side by side
  // (ctest -j) agree through a lock file per port, held until the process exits.
  constexpr int kFirst = 20000;
  constexpr int kCount = 12000;
  static const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "tessera-test-ports";
  static int next = static_cast<int>(getpid() * 7919L % kCount);
  std::error_code ignored;
  std::filesystem::create_directories(dir, ignored);
  for (int tried = 0; tried < kCount; ++tried) {
    const auto port = static_cast<std::uint16_t>(kFirst + next);
    next = (next + 1) % kCount;
    const auto lock_path = dir / (std::to_string(port) + ".lock");
    int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) continue;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0 || !Bindable(port)) {
      close(fd);
      continue;
    }
    return port;  // fd stays open: the lock is this process's until it exits
  }
  FAIL("no free loopback port in " << kFirst << "-" << kFirst + kCount - 1);
  return 0;
}

membership::ClusterView WaitForMembers(const NodeProcess& node, std::size_t count) {
  auto deadline = std::chrono::steady_clock::now() + 20s;
  for (;;) {
    auto view = ConnectOrFail(node)->FetchClusterView();
    if (view && view->members.members.size() == count) return *view;
    if (std::chrono::steady_clock::now() > deadline) {
      FAIL("the cluster did not reach " << count << " members within 20 s");
    }
    std::this_thread::sleep_for(50ms);
  }
}

namespace asio = boost::asio;
namespace bh = boost::beast::http;

HttpReply HttpGet(std::uint16_t port, const std::string& target) {
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), port});
  bh::request<bh::string_body> req(bh::verb::get, target, 11);
  req.set(bh::field::host, "127.0.0.1");
  bh::write(socket, req);
  boost::beast::flat_buffer buffer;
  bh::response<bh::string_body> res;
  bh::read(socket, buffer, res);
  return {static_cast<int>(res.result_int()), std::string(res[bh::field::content_type]),
          res.body()};
}

std::uint16_t HttpPortOf(const NodeProcess& node) {
  std::smatch m;
  const std::string& line = node.ready_line();
  REQUIRE(std::regex_search(line, m, std::regex(R"(http 127\.0\.0\.1:([0-9]+))")));
  return static_cast<std::uint16_t>(std::stoi(m[1]));
}

HttpReply WaitForStatus(std::uint16_t port, const std::string& target, int status,
                        std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  HttpReply r = HttpGet(port, target);
  while (r.status != status && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
    r = HttpGet(port, target);
  }
  return r;
}

}  // namespace tessera::integration
