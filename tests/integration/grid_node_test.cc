// grid-node as a process: the ready line, clean shutdown on signals, config precedence, and
// the exit codes and one-line errors for bad flags, bad config files and a busy port.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "child_process.h"

namespace tessera::integration {
namespace {

void RequireOneLineError(const ProcessResult& r, int exit_code, const std::string& mentions) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == exit_code);
  REQUIRE(Lines(r.err).size() == 1);
  CHECK(r.err.find(mentions) != std::string::npos);
  CHECK(r.out.empty());
}

}  // namespace

TEST_CASE("grid-node prints the ready line and exits 0 on SIGTERM and SIGINT", "[tools][node]") {
  for (int signal : {SIGTERM, SIGINT}) {
    auto node = NodeProcess::StartOrFail({"--cluster-name", "blue"});
    static const std::regex kLine(
        R"(grid-node ready: native 127\.0\.0\.1:[0-9]+ resp off http off cluster 'blue' member [0-9a-fA-F-]{8,})");
    CHECK(std::regex_match(node->ready_line(), kLine));
    CHECK(node->port() != 0);
    auto options = ClientOptionsFor(*node);
    options.cluster_name = "blue";
    auto client = grid::Client::Connect(options);
    REQUIRE(client);
    REQUIRE((*client)->GetMap("m")->Set("k", "v"));
    (*client)->Shutdown();
    CHECK(node->Stop(signal) == 0);
  }
}

TEST_CASE("grid-node serves RESP on the port it prints when asked", "[tools][node]") {
  auto node = NodeProcess::StartOrFail({"--resp-port", "0"});
  std::smatch m;
  REQUIRE(std::regex_search(node->ready_line(), m, std::regex(R"(resp 127\.0\.0\.1:([0-9]+))")));
  CHECK(std::stoi(m[1].str()) != 0);
  CHECK(std::stoi(m[1].str()) != node->port());
  CHECK(node->Stop() == 0);
}

namespace {

// User plus system CPU time the process has used (from /proc/PID/stat).
std::chrono::milliseconds ProcessCpuTime(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));  // after "pid (comm) "
  std::string field;
  long ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stol(field);  // utime, stime
  }
  return std::chrono::milliseconds(ticks * 1000 / sysconf(_SC_CLK_TCK));
}

}  // namespace

TEST_CASE("grid-node polls for work only while it keeps coming: idle, it uses almost no CPU",
          "[tools][node]") {
  for (std::string idle_poll : {"50", "0"}) {
    INFO("--idle-poll-us " << idle_poll);
    auto node = NodeProcess::StartOrFail({"--idle-poll-us", idle_poll});  // two shards
    auto client = grid::Client::Connect(ClientOptionsFor(*node));
    REQUIRE(client);
    auto map = (*client)->GetMap("m");
    for (int i = 0; i < 2000; ++i) REQUIRE(map->Set("k" + std::to_string(i), "v"));
    REQUIRE(map->Get("k1999").value() == std::optional<std::string>("v"));
    const auto before = ProcessCpuTime(node->pid());
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const auto used = ProcessCpuTime(node->pid()) - before;
    // Two shards polling for the whole second would use ~2000 ms.
    INFO("CPU used in an idle second: " << used.count() << " ms");
    CHECK(used < std::chrono::milliseconds(150));
    (*client)->Shutdown();
    CHECK(node->Stop() == 0);
  }
}

TEST_CASE("grid-node --help prints usage and exits 0", "[tools][node]") {
  auto r = RunProcess(GRID_NODE_PATH, {"--help"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("--port") != std::string::npos);
  CHECK(r.out.find("--config") != std::string::npos);
}

TEST_CASE("grid-node rejects bad flags with exit code 2 and one line", "[tools][node]") {
  RequireOneLineError(RunProcess(GRID_NODE_PATH, {"--port", "abc"}), 2, "abc");
  RequireOneLineError(RunProcess(GRID_NODE_PATH, {"--port", "70000"}), 2, "70000");
  RequireOneLineError(RunProcess(GRID_NODE_PATH, {"--bogus"}), 2, "bogus");
  RequireOneLineError(RunProcess(GRID_NODE_PATH, {"--log-level", "loud"}), 2, "loud");
  RequireOneLineError(RunProcess(GRID_NODE_PATH, {"--partitions", "0"}), 2, "partitions");
  RequireOneLineError(RunProcess(GRID_NODE_PATH, {"stray"}), 2, "stray");
  RequireOneLineError(RunProcess(GRID_NODE_PATH, {"--idle-poll-us", "-1"}), 2, "idle-poll-us");
  RequireOneLineError(RunProcess(GRID_NODE_PATH, {"--idle-poll-us", "2000000"}), 2, "2000000");
  RequireOneLineError(RunProcess(GRID_NODE_PATH, {"--topic-stats-limit", "-5"}), 2,
                      "topic-stats-limit");
  RequireOneLineError(RunProcess(GRID_NODE_PATH, {"--max-transaction-ops", "0"}), 2,
                      "max-transaction-ops must be at least 1");
  RequireOneLineError(RunProcess(GRID_NODE_PATH, {"--transaction-id-ttl-ms", "x"}), 2,
                      "transaction-id-ttl-ms");
  RequireOneLineError(RunProcess(GRID_NODE_PATH, {"--log-compact-bytes", "100"}), 2,
                      "log-compact-bytes must be at least 4096");
  RequireOneLineError(RunProcess(GRID_NODE_PATH, {"--log-segment-bytes", "-1"}), 2,
                      "log-segment-bytes");
  RequireOneLineError(RunProcess(GRID_NODE_PATH, {"--log-sync-ms", "soon"}), 2, "log-sync-ms");
}

TEST_CASE("grid-node --max-transaction-ops bounds a transaction's size", "[tools][node][tx]") {
  auto node = NodeProcess::StartOrFail({"--max-transaction-ops", "2"});
  auto client = ConnectOrFail(*node);
  grid::Transaction two("p");
  two.Set("m", "a@p", "1").Set("m", "b@p", "2");
  auto ok = client->Transact(two);
  REQUIRE(ok);
  CHECK(ok->committed);
  grid::Transaction three("p");
  three.Set("m", "c@p", "1").Set("m", "d@p", "2").Set("m", "e@p", "3");
  auto refused = client->Transact(three);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == base::ErrorCode::kBadRequest);
  CHECK_THAT(refused.error().message(), Catch::Contains("3 operations, more than the limit of 2"));
  CHECK_FALSE(client->GetMap("m")->Get("c@p")->has_value());
}

TEST_CASE("grid-node rejects unreadable or invalid config files with exit code 2",
          "[tools][node]") {
  RequireOneLineError(RunProcess(GRID_NODE_PATH, {"--config", "/nonexistent/grid.yaml"}), 2,
                      "/nonexistent/grid.yaml");
  TempFile broken("port: [1, 2\ncluster-name: x\n");
  RequireOneLineError(RunProcess(GRID_NODE_PATH, {"--config", broken.path()}), 2, broken.path());
  TempFile unknown("port: 0\nflavour: mint\n");
  RequireOneLineError(RunProcess(GRID_NODE_PATH, {"--config", unknown.path()}), 2, "flavour");
  TempFile bad_map("maps:\n  orders: {default_ttl_ms: soon}\n");
  RequireOneLineError(RunProcess(GRID_NODE_PATH, {"--config", bad_map.path()}), 2, "soon");
  TempFile bad_async("maps:\n  orders: {async_backups: maybe}\n");
  RequireOneLineError(RunProcess(GRID_NODE_PATH, {"--config", bad_async.path()}), 2,
                      "async_backups' is 'maybe'; use true or false");
  TempFile bad_persistence("maps:\n  orders: {persistence: sometimes}\n");
  RequireOneLineError(RunProcess(GRID_NODE_PATH, {"--config", bad_persistence.path()}), 2,
                      "persistence' is 'sometimes'; use none, periodic or always");
  RequireOneLineError(RunProcess(GRID_NODE_PATH, {"--recovery", "eventually"}), 2,
                      "'recovery' is 'eventually'; use full or partial");
}

TEST_CASE("grid-node exits 1 with one line when its port is in use", "[tools][node]") {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(listen(fd, 1) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  std::string port = std::to_string(ntohs(addr.sin_port));
  auto r = RunProcess(GRID_NODE_PATH, {"--port", port, "--log-level", "error"});
  close(fd);
  RequireOneLineError(r, 1, port);
}

TEST_CASE("grid-node applies per-map config from YAML and flags override the file",
          "[tools][node]") {
  TempFile config(
      "cluster-name: from-file\n"
      "log-level: warn\n"
      "maps:\n"
      "  short: {default_ttl_ms: 300, max_idle_ms: 0, max_entries: 0, async_backups: true}\n");
  auto node = NodeProcess::StartOrFail({"--config", config.path(), "--cluster-name", "flag"});
  CHECK(node->ready_line().find("cluster 'flag'") != std::string::npos);
  auto options = ClientOptionsFor(*node);
  options.cluster_name = "flag";
  auto client = grid::Client::Connect(options);
  REQUIRE(client);
  auto short_map = (*client)->GetMap("short");
  auto plain_map = (*client)->GetMap("plain");
  REQUIRE(short_map->Set("k", "v"));
  REQUIRE(plain_map->Set("k", "v"));
  CHECK(short_map->Get("k").value() == std::optional<std::string>("v"));
  std::this_thread::sleep_for(700ms);
  CHECK(short_map->Get("k").value() == std::nullopt);  // the map's default TTL applied
  CHECK(plain_map->Get("k").value() == std::optional<std::string>("v"));
  (*client)->Shutdown();
  CHECK(node->Stop() == 0);
}

}  // namespace tessera::integration

namespace tessera::integration {

TEST_CASE(
    "grid-node --data-dir: a second grid-node on the same directory exits 1 with one line "
    "naming the holder, and the directory is free again once the first stops",
    "[tools][node]") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("grid-node-data-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  auto first = NodeProcess::StartOrFail({"--data-dir", dir.string()});
  RequireOneLineError(RunProcess(GRID_NODE_PATH, {"--port", "0", "--data-dir", dir.string()}), 1,
                      "is in use by another process (pid " + std::to_string(first->pid()) + ")");
  auto client = ConnectOrFail(*first);  // the first serves on
  REQUIRE(client->GetMap("m")->Set("k", "v"));
  client->Shutdown();
  CHECK(first->Stop() == 0);
  RequireOneLineError(RunProcess(GRID_NODE_PATH, {"--port", "0", "--data-dir", dir.string(),
                                                  "--cluster-name", "other"}),
                      1, "belongs to cluster 'dev', not 'other'");
  auto again = NodeProcess::StartOrFail({"--data-dir", dir.string()});
  CHECK(again->Stop() == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "grid-node --data-dir: a member SIGKILLed and restarted keeps every acknowledged write of "
    "its persisting maps, with absolute TTL deadlines, and nothing of a map that does not "
    "persist",
    "[tools][node]") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("grid-node-log-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  TempFile config(
      "maps:\n"
      "  orders: {persistence: always}\n"
      "  events: {persistence: periodic}\n");
  const std::vector<std::string> args = {"--data-dir", dir.string(), "--config", config.path()};
  auto node = NodeProcess::StartOrFail(args);
  auto client = ConnectOrFail(*node);
  auto orders = client->GetMap("orders");
  auto events = client->GetMap("events");
  auto cache = client->GetMap("cache");
  for (int i = 0; i < 2000; ++i) {
    REQUIRE(orders->Set("o" + std::to_string(i), "order-" + std::to_string(i)));
  }
  for (int i = 0; i < 500; ++i) REQUIRE(events->Set("e" + std::to_string(i), "event"));
  for (int i = 0; i < 100; ++i) REQUIRE(cache->Set("c" + std::to_string(i), "cached"));
  tessera::map::WriteOptions short_ttl;
  short_ttl.ttl_ms = 1500;
  tessera::map::WriteOptions long_ttl;
  long_ttl.ttl_ms = 3'600'000;
  const auto short_written = std::chrono::steady_clock::now();
  REQUIRE(orders->Set("short", "x", short_ttl));
  REQUIRE(orders->Set("long", "y", long_ttl));
  client->Shutdown();
  CHECK(node->Stop(SIGKILL) == 128 + SIGKILL);
  // Restarted after the short TTL ran out: an entry whose TTL restarted at the restart would
  // still be there.
  std::this_thread::sleep_until(short_written + std::chrono::milliseconds(1600));
  auto again = NodeProcess::StartOrFail(args);
  client = ConnectOrFail(*again);
  orders = client->GetMap("orders");
  events = client->GetMap("events");
  cache = client->GetMap("cache");
  int missing = 0;
  for (int i = 0; i < 2000; ++i) {
    auto got = orders->Get("o" + std::to_string(i));
    REQUIRE(got);
    missing += *got == std::optional<std::string>("order-" + std::to_string(i)) ? 0 : 1;
  }
  CHECK(missing == 0);
  for (int i = 0; i < 500; ++i) {
    auto got = events->Get("e" + std::to_string(i));
    REQUIRE(got);
    missing += got->has_value() ? 0 : 1;
  }
  CHECK(missing == 0);
  CHECK(cache->Get("c1").value() == std::nullopt);
  CHECK(orders->Get("short").value() == std::nullopt);
  CHECK(orders->Get("long").value() == std::optional<std::string>("y"));
  client->Shutdown();
  CHECK(again->Stop() == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "grid-node --data-dir: a map log damaged in the middle stops the start with one line naming "
    "the file and offset, and --log-skip-damaged true starts without the damaged record",
    "[tools][node]") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("grid-node-damaged-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  TempFile config("maps:\n  orders: {persistence: always}\n");
  // NodeProcess runs 2 shards (--threads 2): the log has two folders.
  const std::vector<std::string> args = {"--data-dir", dir.string(), "--config", config.path()};
  {
    auto node = NodeProcess::StartOrFail(args);
    auto client = ConnectOrFail(*node);
    for (int i = 0; i < 1000; ++i) {
      REQUIRE(client->GetMap("orders")->Set("o" + std::to_string(i), "order-" + std::to_string(i)));
    }
    client->Shutdown();
    CHECK(node->Stop(SIGKILL) == 128 + SIGKILL);
  }
  // The largest segment (one shard's half of the writes), a byte in its middle flipped.
  std::filesystem::path segment;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir / "maps")) {
    if (e.path().extension() != ".log") continue;
    if (segment.empty() || e.file_size() > std::filesystem::file_size(segment)) segment = e.path();
  }
  REQUIRE(!segment.empty());
  std::string bytes;
  {
    std::ifstream in(segment, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  REQUIRE(bytes.size() > 5'000);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x5a);
  std::ofstream(segment, std::ios::binary | std::ios::trunc) << bytes;

  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), args.begin(), args.end());
    return extra;
  };
  auto refused =
      RunProcess(GRID_NODE_PATH, with({"--threads", "2", "--port", "0", "--log-level", "error"}));
  RequireOneLineError(refused, 1, "damaged at offset");
  CHECK(refused.err.find(segment.filename().string()) != std::string::npos);
  CHECK(refused.err.find("--log-skip-damaged") != std::string::npos);

  auto node = NodeProcess::StartOrFail(with({"--log-skip-damaged", "true"}));
  auto client = ConnectOrFail(*node);
  int missing = 0;
  for (int i = 0; i < 1000; ++i) {
    auto got = client->GetMap("orders")->Get("o" + std::to_string(i));
    REQUIRE(got);
    if (got->has_value()) {
      CHECK(**got == "order-" + std::to_string(i));  // what is there is right
    } else {
      ++missing;
    }
  }
  CHECK(missing == 1);  // the one record the flipped byte was in
  client->Shutdown();
  CHECK(node->Stop() == 0);
  std::filesystem::remove_all(dir);
}

}  // namespace tessera::integration

namespace tessera::integration {
namespace {

// A small tmpfs mounted at a fresh folder for the life of the object (a file system this test
// can fill up without filling the machine's). Needs CAP_SYS_ADMIN (the tests run as root).
class SmallFileSystem {
 public:
  explicit SmallFileSystem(std::uint64_t bytes)
      : path_(std::filesystem::temp_directory_path() /
              ("grid-node-small-fs-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path_);
    const std::string data = "size=" + std::to_string(bytes);
    if (::mount("tmpfs", path_.c_str(), "tmpfs", 0, data.c_str()) != 0) {
      error_ = std::string("cannot mount a tmpfs at ") + path_.string() + ": " +
               std::strerror(errno) + " (this test needs CAP_SYS_ADMIN: run it as root)";
    }
  }
  ~SmallFileSystem() {
    if (error_.empty()) ::umount2(path_.c_str(), MNT_DETACH);
    std::filesystem::remove_all(path_);
  }
  const std::string& error() const { return error_; }
  const std::filesystem::path& path() const { return path_; }
  std::uint64_t Free() const {
    struct statvfs fs {};
    return ::statvfs(path_.c_str(), &fs) == 0 ? std::uint64_t{fs.f_bavail} * fs.f_frsize : 0;
  }

 private:
  std::filesystem::path path_;
  std::string error_;
};

}  // namespace

TEST_CASE(
    "grid-node --data-dir on a file system short of its reserve refuses writes to persisting "
    "maps with a clear error while reads go on, takes them again once space is freed, and "
    "keeps every acknowledged write through a restart",
    "[tools][node]") {
  SmallFileSystem fs(32ull << 20);
  REQUIRE(fs.error().empty());
  const auto dir = fs.path() / "member";
  // `default` holds RESP's string keys.
  TempFile config("maps:\n  orders: {persistence: always}\n  default: {persistence: always}\n");
  const std::vector<std::string> args = {"--data-dir",
                                         dir.string(),
                                         "--config",
                                         config.path(),
                                         "--log-min-free-bytes",
                                         std::to_string(8 << 20),
                                         "--resp-port",
                                         "0"};
  auto node = NodeProcess::StartOrFail(args);
  auto client = ConnectOrFail(*node);
  auto orders = client->GetMap("orders");
  const std::string value(1000, 'v');
  int acknowledged = 0;
  for (; acknowledged < 1000; ++acknowledged) {
    REQUIRE(orders->Set("o" + std::to_string(acknowledged), value));
  }
  // Something else on the disk leaves it 4 MiB free.
  const auto filler = fs.path() / "filler";
  {
    std::ofstream out(filler, std::ios::binary);
    const std::string chunk(1 << 20, 'f');
    while (fs.Free() > (5ull << 20)) {
      out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      out.flush();
    }
  }
  // Within the member's next reading of the free space (every 250 ms), writes are refused.
  base::Result<void> refused;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    refused = orders->Set("o" + std::to_string(acknowledged), value);
    if (!refused) break;
    ++acknowledged;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == base::ErrorCode::kStorage);
  CHECK(refused.error().reason() == base::ErrorReason::kDiskLow);
  CHECK(refused.error().message().find("under its reserve of 8.0 MiB") != std::string::npos);
  // The refused write was not applied; reads go on, so do maps that do not persist.
  CHECK(orders->Get("o" + std::to_string(acknowledged)).value() == std::nullopt);
  CHECK(orders->Get("o0").value() == std::optional<std::string>(value));
  CHECK(client->GetMap("cache")->Set("c", "v"));
  // Over RESP, as from a Redis that cannot write its AOF.
  std::smatch m;
  REQUIRE(std::regex_search(node->ready_line(), m, std::regex(R"(resp 127\.0\.0\.1:([0-9]+))")));
  const auto cli = RunProcess("/usr/bin/redis-cli", {"-p", m[1].str(), "SET", "r", "v"});
  CHECK(cli.out.rfind("MISCONF the file system of this member's map log", 0) == 0);
  const auto status =
      RunProcess(GRID_CLI_PATH, {"--address", node->address(), "persistence", "status"});
  CHECK(status.out.find("writes refused: its data directory has") != std::string::npos);
  // Space freed: writes are taken again.
  std::filesystem::remove(filler);
  base::Result<void> taken = refused;
  const auto again_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!taken && std::chrono::steady_clock::now() < again_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    taken = orders->Set("o" + std::to_string(acknowledged), value);
  }
  REQUIRE(taken);
  ++acknowledged;
  client->Shutdown();
  CHECK(node->Stop(SIGKILL) == 128 + SIGKILL);

  auto restarted = NodeProcess::StartOrFail(args);
  client = ConnectOrFail(*restarted);
  orders = client->GetMap("orders");
  int missing = 0;
  for (int i = 0; i < acknowledged; ++i) {
    auto got = orders->Get("o" + std::to_string(i));
    REQUIRE(got);
    missing += *got == std::optional<std::string>(value) ? 0 : 1;
  }
  CHECK(missing == 0);
  client->Shutdown();
  CHECK(restarted->Stop() == 0);
}

}  // namespace tessera::integration
