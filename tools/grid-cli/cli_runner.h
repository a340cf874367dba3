#pragma once
// RunCommand: executes a parsed grid-cli command against a member through
// tessera::grid::Client and renders the answer twice: text for people, JSON for scripts.
//
// Thread-safety: each call uses its own Client; safe from any thread.

#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include <spdlog/logger.h>

#include "cli_command.h"
#include "tessera/base/error.h"

namespace tessera::tools::cli {

struct CommandOutput {
  std::string text;     // printed without --json (ends with a newline)
  nlohmann::json json;  // printed with --json, on one line
};

// Connects, runs `command` and shuts the client down. REQUIRES: command.kind != kHelp.
// Errors: whatever the client reports (kConnectionFailed, kAuthFailed, kTimeout, ...) and the
// operation's own errors; the caller prints one line and exits with code 1.
base::Result<CommandOutput> RunCommand(const CliCommand& command);

// topic subscribe: connects, prints each message of command.topic_name to `out` as it arrives
// (the payload, or a JSON line with --json) until command.count messages, command.for_ms, or
// `interrupted`. Errors: the client's (connect, subscribe).
base::Result<void> RunSubscribe(const CliCommand& command, std::ostream& out,
                                const std::atomic<bool>& interrupted);

// A logger that drops everything (the CLI prints its own one-line errors).
std::shared_ptr<spdlog::logger> SilentLogger();

// A short "what to do" for errors whose message may not say it, or "" if none is needed.
std::string HintFor(const base::Error& error, const CliCommand& command);

}  // namespace tessera::tools::cli
