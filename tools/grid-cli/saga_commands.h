#pragma once
// grid-cli's views of the saga framework beyond the dead letter queue: a service member's
// outbox (what its relays have not published yet) and every stream's consumer groups.
//
// Thread-safety: each call uses the client it is given; safe from any thread.

#include "cli_command.h"
#include "cli_runner.h"

namespace tessera::tools::cli {

// kOutboxStatus: pending outbox events (map "__outbox" of the connected cluster, which is a
// service's embedded cluster) per source service and partition, with the oldest's age.
// kConsumers: for every stream, each group's lag, oldest uncommitted event, leases and lease
// holders, and the group's dead letters. Errors: the client's.
base::Result<CommandOutput> RunSagaCommand(grid::Client& client, const CliCommand& command);

}  // namespace tessera::tools::cli
