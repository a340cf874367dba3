#pragma once
// TESSERA_CHECK(cond, message): for bugs only. Logs the failed condition with its location
// through spdlog's default logger, then throws std::logic_error. Expected failures are
// base::Result values, never checks.

#include <string>

namespace tessera::base {
[[noreturn]] void CheckFailed(const char* condition, const char* file, int line,
                              const std::string& message);
}  // namespace tessera::base

#define TESSERA_CHECK(cond, message)                                      \
  do {                                                                    \
    if (!(cond)) [[unlikely]] {                                           \
      ::tessera::base::CheckFailed(#cond, __FILE__, __LINE__, (message)); \
    }                                                                     \
  } while (false)
