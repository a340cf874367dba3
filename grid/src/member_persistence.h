#pragma once
// What a member with a data directory keeps of its cluster besides its map log: the last
// partition table it installed (its members by persistent id, the partitions it owned), in
// DIR/cluster.state, and the RecoveryReport a full-cluster restart decides by (membership.h,
// "Recovery").
//
// Format of cluster.state (text, written whole by storage::DataDir::WriteChecked):
//   tessera-cluster-state 1
//   table-version <n>
//   member <persistent id>        one line per listed member that has one
//   owned <p>,<p>,...             the partitions this member owned (may be empty)
//
// Thread-compatible functions.

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "tessera/base/error.h"
#include "tessera/map/map_service.h"
#include "tessera/membership/cluster_message.h"
#include "tessera/membership/cluster_view.h"
#include "tessera/storage/data_dir.h"

namespace tessera::grid {

inline constexpr std::string_view kClusterStateFile = "cluster.state";

// Writes `view`'s table as this member (`self_uuid`) saw it. A view without a table writes
// nothing. Errors: kStorage (DataDir::WriteChecked).
base::Result<void> PersistClusterState(const storage::DataDir& dir,
                                       const membership::ClusterView& view,
                                       const std::string& self_uuid);

// The report of a member restarted on `dir` that replayed `replayed`: nullopt when the
// directory holds no cluster.state (no table was ever installed: nothing to recover).
// Errors: kStorage naming the file (damaged, unreadable, malformed).
base::Result<std::optional<membership::RecoveryReport>> LoadRecoveryReport(
    const storage::DataDir& dir, const map::LogRecovery& replayed, std::uint32_t partition_count);

// The "persistence" object of a member's info (Member::InfoJson; grid-cli persistence status,
// /api/v1/cluster): its data directory ("" without one), persistent id, whether it logs, the
// log's figures (MapService::GetLogStats), what its start replayed (null without a data
// directory) and why it waits in a full-cluster restart ("" when it does not).
nlohmann::json PersistenceJson(const std::string& data_dir, const std::string& member_id,
                               const map::MapService& maps,
                               const std::optional<map::LogRecovery>& replayed,
                               const std::string& recovery_status);

// A backup of a running member's data directory `dir` into TARGET/<member id>, consistent as
// of the call: its identity and cluster.state files, then its map log
// (MapService::BackupLog: every write acknowledged before the call, as whole records). It is
// written into TARGET/<member id>.partial, synced, and renamed once whole, so a folder named
// by the member's id is a complete backup; a member started on it (on this machine or another)
// is this member as of the backup. Returns JSON {member_id, dir, bytes, took_ms}. Errors:
// kBadRequest (a relative TARGET, or one inside the data directory), kConflict (the folder
// exists), kStorage (naming the file).
base::Result<std::string> BackupDataDir(const storage::DataDir& dir, const map::MapService& maps,
                                        const std::string& target);

}  // namespace tessera::grid
