#pragma once
// The documents the tools show of a cluster's objects, as JSON: streams and their consumer
// groups, dead letters, sagas, the outbox. One definition for grid-cli (--json, and its tables
// are read from these) and the member's REST API and console (admin_api.h), so the three show
// the same fields under the same names.
//
// Every function reads through a grid::Instance (a client of the cluster, or a member of it):
// streams and dead letters live in the cluster whose streams they are (the shared cluster);
// sagas and the outbox in the service's own cluster (its embedded member).
//
// Thread-safety: stateless functions over the instance they are given; safe from any thread.

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/grid/instance.h"
#include "tessera/grid/stream.h"
#include "tessera/map/map_request.h"
#include "tessera/map/predicate.h"
#include "tessera/membership/cluster_view.h"
#include "tessera/saga/dead_letter.h"
#include "tessera/saga/saga_state.h"

namespace tessera::admin {

// Age in ms of a wall-clock time (0 stays 0: nothing there).
std::int64_t AgeMs(std::int64_t time_ms);

// ---- the cluster ------------------------------------------------------------------------
// The partition table: {version, backup_count, summary: [{address, owned, backups}] per
// member, partitions: [{partition, owner, backups: [address]}]}.
nlohmann::json PartitionsJson(const membership::ClusterView& view);

// ---- maps -------------------------------------------------------------------------------
// A map's statistics over the cluster (grid::Map::Stats): {map, entries, memory_bytes, hits,
// misses, gets, puts, removes, expirations, evictions, *_latency_ns}, in that order.
nlohmann::json MapStatsJson(const std::string& name, const map::MapStats& stats);
// The map names in a member's info document (Client::FetchMemberInfoJson); nullopt when it is
// not one.
std::optional<std::vector<std::string>> MapNamesOfInfo(const std::string& info_json);
// Internal maps (the framework's, the grid's): names starting with "__".
inline bool IsInternalMap(const std::string& name) { return name.rfind("__", 0) == 0; }

// ---- streams ----------------------------------------------------------------------------
// The streams of the cluster, by name.
base::Result<std::vector<std::string>> StreamNames(grid::Instance& instance);
// A stream: config, appended/stored totals, groups (lag, oldest uncommitted age), and each
// sub-stream's range and groups.
nlohmann::json StreamInfoJson(const grid::StreamInfo& info);
// A group's position over the whole stream: {group, lag, oldest_uncommitted_age_ms}.
nlohmann::json GroupJson(const grid::StreamGroupPosition& g);
// One consumer group of a stream, summed over its sub-streams.
struct GroupRow {
  grid::StreamGroupPosition position;  // lag and oldest uncommitted event, over the stream
  int leases = 0;                      // sub-streams leased to a consumer
  std::map<std::string, int> holders;  // consumer -> sub-streams it holds
  nlohmann::json sub_streams;          // per sub-stream: cursor, lag, holder
};
std::vector<GroupRow> GroupRows(const grid::StreamInfo& info);
// Every stream's consumer groups with their dead letter counts: {"groups": [{group, stream,
// lag, oldest_uncommitted_age_ms, leases, consumers, dead_letters}]}.
base::Result<nlohmann::json> ConsumersJson(grid::Instance& instance);

// ---- dead letters -----------------------------------------------------------------------
// Event ids are 64-bit: beside "event_id" (a number) "event_id_str" has it as text, for
// JavaScript, whose numbers hold 53 bits.
nlohmann::json DeadLetterJson(const saga::DeadLetter& letter);
// The filter of a dead letter listing over the tessera.DeadLetter records (all optional).
struct DeadLetterFilter {
  std::int64_t event_id = 0;                                 // 0: any
  std::string type, key;                                     // "": any
  std::optional<std::int64_t> older_than_ms, newer_than_ms;  // by last failure
};
map::Predicate DeadLetterPredicate(const DeadLetterFilter& filter);
// Leaves a replay request for the group's consumers (only they can run its handler) and
// waits up to `wait_ms` for its outcome. Errors: kTimeout naming what to do when no consumer
// took it (the request is withdrawn) or it still runs; kConflict when some replay failed (the
// outcome's counts and first error in the message).
// `waiting`, when given, is called about every 50 ms while the outcome is awaited.
base::Result<saga::ReplayRequest> ReplayDeadLetters(saga::DeadLetterQueue& dlq,
                                                    const DeadLetterFilter& which,
                                                    std::int64_t wait_ms,
                                                    const std::function<void()>& waiting = nullptr);

// ---- sagas and the outbox ---------------------------------------------------------------
// A saga: id, type, status, current step, ages, deadline, failure reason, version; with
// `with_steps` its steps and data too.
nlohmann::json SagaJson(const saga::SagaRecord& s, bool with_steps);
struct SagaFilter {
  std::string status, type;  // "": any
  std::optional<std::int64_t> older_than_ms;
};
map::Predicate SagaPredicate(const SagaFilter& filter);
// Counts by status and type, active and the oldest active's age, finished durations.
nlohmann::json SagaStatsJson(const std::vector<saga::SagaRecord>& sagas);
// What the outbox of a service's member has not published yet, per service and partition:
// {pending, unreadable, services: [{service, pending, oldest_age_ms, partitions: [...]}]}.
base::Result<nlohmann::json> OutboxJson(grid::Instance& instance, std::uint32_t partition_count);

}  // namespace tessera::admin
