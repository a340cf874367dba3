#pragma once
// grid-cli's cluster commands (members, partitions, cluster): render the connected member's
// view of the cluster as text for people and JSON for scripts.
//
// Thread-safety: plain functions over values; thread-compatible.

#include <optional>

#include "cli_runner.h"
#include "tessera/membership/cluster_view.h"

namespace tessera::tools::cli {

// REQUIRES: kind is kMembers, kPartitions or kCluster. `migrations_pending` (kCluster): the
// migration copies not yet arrived on all members, nullopt when some member could not say.
CommandOutput RenderClusterView(CommandKind kind, const membership::ClusterView& view,
                                std::optional<std::int64_t> migrations_pending = std::nullopt);

}  // namespace tessera::tools::cli
