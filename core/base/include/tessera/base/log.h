#pragma once
// Named loggers shared by every component of one process.

#include <spdlog/logger.h>

#include <memory>
#include <string_view>

namespace tessera::base {

// Returns the process-wide spdlog logger called `name` (stderr, colour when a terminal),
// creating and registering it on first use. Thread-safe: any number of members and clients
// created concurrently get the same logger; a logger registered earlier under `name` by the
// application (e.g. with its own sinks) is returned as is.
std::shared_ptr<spdlog::logger> NamedLogger(std::string_view name);

}  // namespace tessera::base
