#pragma once
// The body of grid-node: parse flags and config, start a Member, print the ready line, serve
// until SIGINT/SIGTERM, shut down. Shared by grid-node's main() and by test programs that
// embed a member the same way (tests/integration/work_node.cc).

#include <functional>

#include "tessera/base/error.h"
#include "tessera/grid/member.h"

namespace tessera::tools::node {

// Returns the process exit code: 0 after a clean stop, 1 when the member could not start,
// 2 for bad flags or config (one line on stderr naming the problem). `prepare`, when given,
// runs on the constructed member before it starts (to register entry processors or
// partition work); `stopping`, when given, runs on a stop signal before the member shuts down
// (to stop what uses the member, e.g. a saga::Outbox); `started`, when given, runs once the
// member started, before the ready line (an error stops the process with exit code 1).
int RunNode(int argc, const char* const argv[],
            const std::function<void(grid::Member&)>& prepare = {},
            const std::function<void()>& stopping = {},
            const std::function<base::Result<void>(grid::Member&)>& started = {});

}  // namespace tessera::tools::node
