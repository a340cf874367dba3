#pragma once
// grid-cli's cluster commands (members, partitions, cluster): render the connected member's
// view of the cluster as text for people and JSON for scripts.
//
// Thread-safety: plain functions over values; thread-compatible.

#include "cli_runner.h"
#include "tessera/membership/cluster_view.h"

namespace tessera::tools::cli {

// REQUIRES: kind is kMembers, kPartitions or kCluster.
CommandOutput RenderClusterView(CommandKind kind, const membership::ClusterView& view);

}  // namespace tessera::tools::cli
