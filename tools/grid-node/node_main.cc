// RunNode: the body of grid-node's main (see node_main.h).
//
// It parses the config, builds the logger and the Member, prints the ready line tests and
// scripts wait for, and blocks in sigwait(). The signals are blocked before any thread starts,
// so every shard thread inherits the mask and the only place they are ever received is that
// sigwait() — no handler, no global flag.
#include "node_main.h"

#include <pthread.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "node_config.h"
#include "tessera/admin/admin_api.h"

namespace tessera::tools::node {
namespace {

std::shared_ptr<spdlog::logger> MakeLogger(const std::string& level) {
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto log = std::make_shared<spdlog::logger>("grid-node", std::move(sink));
  log->set_level(spdlog::level::from_str(level));
  return log;
}

std::string ReadyLine(const grid::Member& member, const NodeConfig& config) {
  const std::string& host = config.member.host;
  std::string resp = member.resp_port() == 0 ? std::string("off")
                                             : host + ":" + std::to_string(member.resp_port());
  std::string http = member.http_port() == 0 ? std::string("off")
                                             : host + ":" + std::to_string(member.http_port());
  return "grid-node ready: native " + host + ":" + std::to_string(member.native_port()) + " resp " +
         resp + " http " + http + " cluster '" + config.member.cluster_name + "' member " +
         member.uuid();
}

int Serve(const NodeConfig& config, const std::function<void(grid::Member&)>& prepare,
          const std::function<void()>& stopping,
          const std::function<base::Result<void>(grid::Member&)>& started_hook) {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto log = MakeLogger(config.log_level);
  // A failed log (a full disk; with a file size limit, EFBIG rather than SIGXFSZ) stops the
  // member: it must not go on acknowledging writes it cannot keep.
  std::signal(SIGXFSZ, SIG_IGN);
  auto storage_failure = std::make_shared<std::optional<std::string>>();
  auto storage_mu = std::make_shared<std::mutex>();
  grid::MemberOptions options = config.member;
  options.on_storage_failure = [storage_failure, storage_mu](const base::Error& error) {
    {
      std::lock_guard lock(*storage_mu);
      *storage_failure = error.message();
    }
    kill(getpid(), SIGTERM);  // sigwait below wakes
  };
  grid::Member member(options, log);  // registers the built-in entry processors
  if (config.member.http_port) admin::RegisterAdminApi(member);  // REST API and console
  if (prepare) prepare(member);
  if (auto started = member.Start(); !started) {
    std::fprintf(stderr, "grid-node: %s\n", started.error().message().c_str());
    member.Shutdown();
    return 1;
  }
  for (const auto& [name, map_config] : config.member.maps) {
    log->info("map '{}': default_ttl_ms={} max_idle_ms={} max_entries={}", name,
              map_config.default_ttl_ms, map_config.default_max_idle_ms, map_config.max_entries);
  }
  if (started_hook) {
    if (auto ok = started_hook(member); !ok) {
      std::fprintf(stderr, "grid-node: %s\n", ok.error().message().c_str());
      if (stopping) stopping();
      member.Shutdown();
      return 1;
    }
  }
  std::cout << ReadyLine(member, config) << std::endl;  // flushed: readers wait for it

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  std::optional<std::string> failed;
  {
    std::lock_guard lock(*storage_mu);
    failed = *storage_failure;
  }
  if (!failed) log->info("received {}, shutting down", strsignal(signal_number));
  if (stopping) stopping();
  member.Shutdown();
  if (failed) {
    std::fprintf(stderr,
                 "grid-node: stopped: the data directory's log failed (%s); free or fix the "
                 "disk and start the member again on its data directory\n",
                 failed->c_str());
    return 1;
  }
  log->info("stopped");
  return 0;
}

}  // namespace

int RunNode(int argc, const char* const argv[], const std::function<void(grid::Member&)>& prepare,
            const std::function<void()>& stopping,
            const std::function<base::Result<void>(grid::Member&)>& started) {
  auto config = ParseNodeConfig(argc, argv);
  if (!config) {
    std::fprintf(stderr, "grid-node: %s\n", config.error().message().c_str());
    return 2;
  }
  if (config->help) {
    std::cout << HelpText();
    return 0;
  }
  return Serve(*config, prepare, stopping, started);
}

}  // namespace tessera::tools::node
