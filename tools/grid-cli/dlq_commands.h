#pragma once
// grid-cli's dead letter commands (saga/dead_letter.h): list, count, show and discard a
// consumer group's dead letters in the shared cluster. Replay runs the group's handler, so it
// belongs to the group's consumers (saga::Consumer::Replay), not to this tool.
//
// Thread-safety: each call uses the client it is given; safe from any thread.

#include "cli_command.h"
#include "cli_runner.h"

namespace tessera::tools::cli {

// kDlqList, kDlqCount, kDlqShow, kDlqDiscard. Errors: the client's; kNotFound for an event id
// the group has no dead letter of.
base::Result<CommandOutput> RunDlqCommand(grid::Client& client, const CliCommand& command);

}  // namespace tessera::tools::cli
