#pragma once
// grid-cli's stream commands: list, info and groups render a stream's state (text and JSON);
// tail prints events as they are appended, or consumes them as a member of a group.
//
// Thread-safety: each call uses the client it is given; safe from any thread.

#include <atomic>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "cli_command.h"
#include "cli_runner.h"
#include "tessera/admin/documents.h"

namespace tessera::tools::cli {

// kStreamList, kStreamInfo, kStreamGroups. Errors: the client's, and kNotFound for a stream
// that does not exist.
base::Result<CommandOutput> RunStreamCommand(grid::Client& client, const CliCommand& command);

// The documents grid-cli shares with the REST API (tessera/admin/documents.h).
using admin::AgeMs;
using admin::GroupJson;
using admin::GroupRow;
using admin::GroupRows;
using admin::StreamInfoJson;
using admin::StreamNames;

// "holder (n), holder (n)" or "-".
std::string HoldersText(const GroupRow& row);

// stream tail: connects and prints "<sub-stream> <offset> <key> <payload>" per event (a JSON
// line with --json) until command.count events, command.for_ms, or `interrupted`. Without
// --group nothing is committed; with it, the events are consumed as group G (committed).
base::Result<void> RunStreamTail(const CliCommand& command, std::ostream& out,
                                 const std::atomic<bool>& interrupted);

}  // namespace tessera::tools::cli
