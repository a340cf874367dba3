#include "tessera/base/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <mutex>
#include <string>

namespace tessera::base {

std::shared_ptr<spdlog::logger> NamedLogger(std::string_view name) {
  // spdlog::get + create is check-then-act; creating a logger whose name another thread just
  // registered throws spdlog_ex. Serialize the pair.
  static std::mutex mu;
  std::lock_guard lock(mu);
  std::string key(name);
  if (auto existing = spdlog::get(key)) return existing;
  auto logger = std::make_shared<spdlog::logger>(
      key, std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  spdlog::register_logger(logger);
  return logger;
}

}  // namespace tessera::base
