#include "common/service.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "tessera/admin/admin_api.h"
#include "tessera/base/log.h"
#include "tessera/grid/client.h"

namespace tessera::examples {

namespace {

sigset_t StopSignals() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGINT);
  sigaddset(&s, SIGTERM);
  return s;
}

const std::map<std::string, std::string> kCommonFlags = {
    {"port", "0"},
    {"shared-cluster", "shared"},
    {"http-port", "0"},
    {"threads", "1"},
    {"heartbeat-ms", "1000"},
    {"failure-timeout-ms", "5000"},
    {"log-level", "info"},
    {"idle-poll-us", "50"},
    {"member-http-port", "off"},
    {"min-cluster-size", "0"},
    {"fault-injection", "false"},
    {"data-dir", ""},
};

}  // namespace

Service::Service(std::string program, int argc, char** argv,
                 std::map<std::string, std::string> own_flags, std::string usage)
    : program_(std::move(program)), usage_(std::move(usage)) {
  const sigset_t stop = StopSignals();
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before any thread starts
  flags_ = kCommonFlags;
  flags_.insert(own_flags.begin(), own_flags.end());
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::printf("%s", usage_.c_str());
      std::exit(0);
    }
    if (arg.rfind("--", 0) != 0) Usage("unexpected argument '" + arg + "'");
    const std::string name = arg.substr(2);
    if (i + 1 >= argc) Usage(arg + " needs a value");
    const std::string value = argv[++i];
    if (name == "join") {
      join_.push_back(value);
    } else if (name == "shared") {
      shared_addresses_.push_back(value);
    } else if (flags_.contains(name)) {
      flags_[name] = value;
    } else {
      Usage("unknown option '" + arg + "'");
    }
  }
  if (shared_addresses_.empty())
    Usage("--shared HOST:PORT (a member of the shared cluster) is required");
  for (const char* n : {"port", "http-port", "threads", "heartbeat-ms", "failure-timeout-ms",
                        "idle-poll-us", "min-cluster-size"}) {
    IntFlag(n);  // validates
  }
  if (IntFlag("port") > 65535 || IntFlag("http-port") > 65535) Usage("a port is 0..65535");
  if (Flag("fault-injection") != "true" && Flag("fault-injection") != "false") {
    Usage("invalid --fault-injection '" + Flag("fault-injection") + "': use true or false");
  }
  const auto level = spdlog::level::from_str(Flag("log-level"));
  if (level == spdlog::level::off && Flag("log-level") != "off") {
    Usage("unknown --log-level '" + Flag("log-level") + "': trace|debug|info|warn|error");
  }
  spdlog::set_level(level);
}

void Service::Usage(const std::string& problem) const {
  std::fprintf(stderr, "%s: %s\n%s", program_.c_str(), problem.c_str(), usage_.c_str());
  std::exit(2);
}

const std::string& Service::Flag(const std::string& name) const { return flags_.at(name); }

std::int64_t Service::IntFlag(const std::string& name) const {
  const std::string& v = Flag(name);
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n < 0) {
    Usage("invalid --" + name + " '" + v + "': expected a whole number >= 0");
  }
  return n;
}

base::Result<void> Service::Prepare() {
  auto log = base::NamedLogger(program_);
  log->set_level(spdlog::level::from_str(Flag("log-level")));
  grid::ClientOptions co;
  co.addresses = shared_addresses_;
  co.cluster_name = Flag("shared-cluster");
  co.client_name = program_;
  co.call_timeout = std::chrono::milliseconds(3000);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (true) {
    auto client = grid::Client::Connect(co, log);
    if (client) {
      shared_ = std::shared_ptr<grid::Instance>(std::move(*client));
      break;
    }
    if (std::chrono::steady_clock::now() > give_up) {
      return base::Fail(client.error().code(),
                        "cannot reach the shared cluster: " + client.error().message());
    }
    log->warn("shared cluster not reachable yet ({}); trying again", client.error().message());
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  grid::MemberOptions mo;
  mo.port = static_cast<std::uint16_t>(IntFlag("port"));
  mo.cluster_name = program_;
  mo.threads = static_cast<std::size_t>(IntFlag("threads"));
  mo.join = join_;
  mo.heartbeat_interval_ms = IntFlag("heartbeat-ms");
  mo.failure_timeout_ms = IntFlag("failure-timeout-ms");
  if (IntFlag("idle-poll-us") > 1'000'000) Usage("--idle-poll-us is 0..1000000");
  mo.idle_poll_us = static_cast<std::uint32_t>(IntFlag("idle-poll-us"));
  // Quorum for every map of the embedded member, the framework's outbox, inbox and sagas too:
  // an instance cut off from the others writes nothing that the merge would discard.
  mo.map_options.default_config.min_cluster_size =
      static_cast<std::uint32_t>(std::min<std::int64_t>(IntFlag("min-cluster-size"), 1000));
  mo.fault_injection = Flag("fault-injection") == "true";
  // With a data directory, every map of the service's member persists and acknowledges a
  // write once it is on disk (the framework's internal maps do so anyway): a restart of every
  // instance keeps its state, its outbox and its sagas.
  mo.data_dir = Flag("data-dir");
  if (!mo.data_dir.empty()) mo.map_options.default_config.persistence = map::Persistence::kAlways;
  // An instance started with --join must not found a cluster of its own because the machine
  // is slow to answer: it would take writes that its service's other instances do not see.
  mo.join_timeout_ms = std::max<std::int64_t>(10'000, 2 * mo.failure_timeout_ms);
  if (Flag("member-http-port") != "off") {  // the member's probes, metrics, REST API, console
    const auto port = IntFlag("member-http-port");
    if (port > 65535) Usage("--member-http-port is 0..65535 or off");
    mo.http_port = static_cast<std::uint16_t>(port);
  }
  member_ = std::make_unique<grid::Member>(mo, log);
  if (mo.http_port) admin::RegisterAdminApi(*member_);
  http::ServerOptions ho;
  ho.port = static_cast<std::uint16_t>(IntFlag("http-port"));
  ho.threads = 4;  // handlers block on the grid
  http_ = std::make_unique<http::Server>(ho);
  http_->Route("GET", "/health", [](const http::Request&) {
    return http::Response::Json(200, R"({"status":"ok"})");
  });
  return {};
}

base::Result<void> Service::StartMember() {
  if (auto ok = member_->Start(); !ok) return ok;
  const auto quorum = static_cast<std::size_t>(IntFlag("min-cluster-size"));
  const bool restarting = !Flag("data-dir").empty();
  if (join_.empty() && quorum <= 1 && !restarting) return {};
  // Serve (consumers, REST) only once in a cluster: a member serves at once and joins in the
  // background, and what it took before would be its own until the clusters merged. With a
  // quorum, only once the cluster has it: before, every write of the service would be refused.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool told = false;
  while (std::chrono::steady_clock::now() < give_up) {
    auto view = member_->cluster_view();
    // Listed: admitted by another instance, or alone after the join timeout (none answered).
    if (view && view->members.Find(member_->uuid())) {
      // The partition table writes are admitted against, which follows the view.
      const std::size_t size = member_->map_service().ClusterSize();
      // From a data directory: once its cluster has a partition table (after a restart of
      // every instance, once they are all back: until then every request is refused).
      const bool recovered = !restarting || member_->Health().ready.ok;
      if (size >= quorum && recovered) return {};
      if (!told) {
        base::NamedLogger(program_)->info(
            "waiting for {} instances in this service's cluster (--min-cluster-size) before "
            "serving; it has {}",
            quorum, size);
        told = true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return base::Fail(base::ErrorCode::kTimeout,
                    fmt::format("the member was not in a cluster of {} instances (--join, "
                                "--min-cluster-size; with --data-dir, every instance of its "
                                "last cluster back) within 60 s; start the other instances",
                                std::max<std::size_t>(quorum, 2)));
}

base::Result<void> Service::StartHttp() { return http_->Start(); }

void Service::WaitForStop() {
  std::cout << program_ << " ready: native 127.0.0.1:" << member_->native_port()
            << " http 127.0.0.1:" << http_->port();
  if (member_->http_port() != 0) std::cout << " member-http 127.0.0.1:" << member_->http_port();
  std::cout << std::endl;
  const sigset_t stop = StopSignals();
  int signal_number = 0;
  sigwait(&stop, &signal_number);
  base::NamedLogger(program_)->info("received {}, shutting down", strsignal(signal_number));
  http_->Stop();
}

std::string EncodeLines(const std::vector<OrderLine>& lines) {
  std::string out;
  for (const auto& l : lines) {
    if (!out.empty()) out += ',';
    out += l.product + ":" + std::to_string(l.quantity) + ":" + std::to_string(l.price);
  }
  return out;
}

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (unsigned char c : name) {
    if (!std::isalnum(c) && c != '-' && c != '_') return false;
  }
  return true;
}

base::Result<std::vector<OrderLine>> DecodeLines(const std::string& text) {
  std::vector<OrderLine> lines;
  std::size_t i = 0;
  while (i <= text.size() && !text.empty()) {
    const std::size_t comma = text.find(',', i);
    const std::string item =
        text.substr(i, comma == std::string::npos ? std::string::npos : comma - i);
    const std::size_t a = item.find(':'), b = item.rfind(':');
    OrderLine l;
    char* end = nullptr;
    bool ok = a != std::string::npos && b != a;
    if (ok) {
      l.product = item.substr(0, a);
      const std::string q = item.substr(a + 1, b - a - 1), p = item.substr(b + 1);
      l.quantity = std::strtoll(q.c_str(), &end, 10);
      ok = !q.empty() && *end == '\0';
      l.price = std::strtoll(p.c_str(), &end, 10);
      ok = ok && !p.empty() && *end == '\0' && ValidName(l.product) && l.quantity > 0 &&
           l.price >= 0;
    }
    if (!ok) {
      return base::Fail(base::ErrorCode::kBadRequest,
                        "bad order line '" + item + "': expected product:quantity:price");
    }
    lines.push_back(std::move(l));
    if (comma == std::string::npos) break;
    i = comma + 1;
  }
  if (lines.empty()) return base::Fail(base::ErrorCode::kBadRequest, "an order has no lines");
  return lines;
}

std::pair<std::string, std::int64_t> SplitState(const std::string& state) {
  const std::size_t colon = state.find(':');
  if (colon == std::string::npos) return {state, 0};
  return {state.substr(0, colon), ToNumber(state.substr(colon + 1))};
}

std::int64_t ToNumber(const std::string& text) { return std::strtoll(text.c_str(), nullptr, 10); }

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (!text.empty()) {
    const std::size_t comma = text.find(',', i);
    out.push_back(text.substr(i, comma == std::string::npos ? std::string::npos : comma - i));
    if (comma == std::string::npos) break;
    i = comma + 1;
  }
  return out;
}

http::Response ListStates(grid::Map& map, const char* array, const char* owner_field,
                          const char* number_field) {
  auto all = map.EntrySet();
  if (!all) return http::Response::FromError(all.error());
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [key, state] : *all) {
    const std::size_t at = key.rfind('@');
    const auto [name, number] = SplitState(state);
    out.push_back({{"order", key.substr(0, at)},
                   {owner_field, key.substr(at + 1)},
                   {"state", name},
                   {number_field, number}});
  }
  return http::Response::Json(200, nlohmann::json{{array, out}}.dump());
}

}  // namespace tessera::examples
