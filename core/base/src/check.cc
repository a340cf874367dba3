#include "tessera/base/check.h"

#include <spdlog/spdlog.h>

#include <stdexcept>

namespace tessera::base {

void CheckFailed(const char* condition, const char* file, int line, const std::string& message) {
  spdlog::critical("check failed: {} at {}:{}: {}", condition, file, line, message);
  throw std::logic_error(std::string("check failed: ") + condition + ": " + message);
}

}  // namespace tessera::base
