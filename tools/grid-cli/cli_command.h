#pragma once
// CliCommand: one grid-cli invocation, fully parsed and validated before any connection is
// made, so every usage error (exit code 2) is found without touching the network.
//
// Thread-safety: plain functions over values; thread-compatible.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/base/clock.h"
#include "tessera/base/error.h"
#include "tessera/grid/client.h"
#include "tessera/map/predicate.h"

namespace tessera::tools::cli {

enum class CommandKind {
  kHelp,  // print help_text, exit 0
  kPing,
  kPut,
  kGet,
  kRemove,
  kSize,
  kEntries,
  kQuery,
  kPutIfAbsent,
  kClear,
  kStats,
  kMapList,     // every map of the cluster with its size and memory
  kMembers,     // member list of the connected member's view
  kPartitions,  // partition table: per-member summary and owner/backups per partition
  kCluster,     // health: members, master, migrations, safe
  kTopicPublish,
  kTopicSubscribe,  // prints messages as they arrive (streams; see RunSubscribe)
  kTopicStats,      // per-topic counters summed over every member
  kMetrics,         // the connected member's metrics, Prometheus text
  kStreamList,      // streams with their sub-streams, events and groups
  kStreamInfo,      // one stream: configuration, each sub-stream's range, each group's lag
  kStreamGroups,    // one stream's groups: lag, oldest uncommitted event, lease holders
  kStreamTail,      // prints events as they are appended (streams; see RunStreamTail)
  kFault,           // fault injection: the members the connected member stops sending to
  kDlqList,         // a consumer group's dead letters (saga), by event id
  kDlqCount,
  kDlqShow,            // one dead letter
  kDlqDiscard,         // removes one dead letter
  kDlqReplay,          // asks the group's consumers to replay dead letters, waits for the outcome
  kOutboxStatus,       // a service member's outbox: pending events per service and partition
  kPersistenceStatus,  // every member's data directory, log figures, replay and recovery
  kPersistenceBackup,  // every member copies its data directory into a folder (`value`)
  kRecoveryForce,      // the recovering cluster's master goes on without missing members
  kConsumers,          // every stream's consumer groups: lag, leases, dead letters
  kSagaList,           // a service member's sagas, filtered by status, type, age
  kSagaShow,           // one saga with its steps
  kSagaStats,          // sagas per status and type, durations of the finished ones
};

struct CliCommand {
  CommandKind kind = CommandKind::kHelp;
  std::string help_text;  // kHelp only
  grid::ClientOptions client;
  bool json = false;
  std::string map_name;
  std::string key;
  std::string value;  // bytes to store (a GenericRecord's encoding with --record)
  std::optional<base::Millis> ttl_ms;
  std::optional<std::int64_t> limit;          // entries/query: print at most this many
  map::Predicate predicate;                   // query, entries --where
  bool internal = false;                      // map list --internal: the framework's maps too
  std::string predicate_text;                 // query, as given
  std::string topic_name;                     // topic commands
  std::string message;                        // topic publish
  std::optional<std::int64_t> count;          // topic subscribe: exit after this many messages
  std::optional<std::int64_t> for_ms;         // topic subscribe: exit after this long
  bool reliable = false;                      // topic publish/subscribe: the reliable topic NAME
  std::optional<std::int64_t> from;           // topic subscribe --from: sequence (0 = oldest)
  std::string stream_name;                    // stream commands
  std::string group;                          // stream tail --group: consume (and commit) as G
  std::vector<std::string> blocked;           // fault block: addresses (empty: fault heal)
  std::int64_t event_id = 0;                  // dlq show/discard/replay (0: by filter)
  std::string event_type;                     // dlq list/count/replay --type
  std::string event_key;                      // dlq list/count/replay --key
  std::optional<std::int64_t> older_than_ms;  // dlq list/count: last failure at least this old
  std::optional<std::int64_t> newer_than_ms;  // dlq list/count: last failure at most this old
  bool all = false;                           // dlq replay --all
  std::string reason;                         // dlq discard --reason
  std::int64_t wait_ms = 30'000;              // dlq replay --wait
  std::string status;                         // saga list --status
};

// Parses argv (argv[0] is the program name). Errors: kBadRequest with one line naming the
// wrong argument and the help to read; the caller exits with code 2.
base::Result<CliCommand> ParseCommandLine(int argc, const char* const argv[]);

}  // namespace tessera::tools::cli
