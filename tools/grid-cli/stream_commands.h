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

namespace tessera::tools::cli {

// kStreamList, kStreamInfo, kStreamGroups. Errors: the client's, and kNotFound for a stream
// that does not exist.
base::Result<CommandOutput> RunStreamCommand(grid::Client& client, const CliCommand& command);

// The streams of the connected cluster, by name.
base::Result<std::vector<std::string>> StreamNames(grid::Client& client);

// One consumer group of a stream, summed over its sub-streams.
struct GroupRow {
  grid::StreamGroupPosition position;  // lag and oldest uncommitted event, over the stream
  int leases = 0;                      // sub-streams leased to a consumer
  std::map<std::string, int> holders;  // consumer -> sub-streams it holds
  nlohmann::json sub_streams;          // per sub-stream: cursor, lag, holder
};
std::vector<GroupRow> GroupRows(const grid::StreamInfo& info);
// "holder (n), holder (n)" or "-".
std::string HoldersText(const GroupRow& row);
// Age in ms of a wall-clock time (0 stays 0: nothing there).
std::int64_t AgeMs(std::int64_t time_ms);

// stream tail: connects and prints "<sub-stream> <offset> <key> <payload>" per event (a JSON
// line with --json) until command.count events, command.for_ms, or `interrupted`. Without
// --group nothing is committed; with it, the events are consumed as group G (committed).
base::Result<void> RunStreamTail(const CliCommand& command, std::ostream& out,
                                 const std::atomic<bool>& interrupted);

}  // namespace tessera::tools::cli
