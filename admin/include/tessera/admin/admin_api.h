#pragma once
// The member's REST admin API (JSON under /api/v1/) and web console (/console), served on the
// member's HTTP port (MemberOptions::http_port, grid-node --http-port) beside its health
// probes and /metrics. docs/operations.md lists every endpoint with an example.
//
//   GET    /api/v1/cluster                     members, master, versions, this member's health
//   GET    /api/v1/partitions                  owner and backups of every partition, per member
//   GET    /api/v1/maps[?internal=true]        every map with its size, memory and counters
//   GET    /api/v1/maps/{map}                  one map's statistics (404: no such map)
//   GET    /api/v1/maps/{map}/entries[?where=PREDICATE&limit=N]   entries (values as JSON)
//   GET|PUT|DELETE /api/v1/maps/{map}/entries/{key}   one entry; PUT {"value": "text"} or
//                                                {"record": {...}}, optional "ttl_ms"
//   GET    /api/v1/topics                      per topic: published, delivered, dropped,
//                                                listener errors, listeners (every member)
//   GET    /api/v1/streams, /api/v1/streams/{stream}   streams, groups, lag, sub-streams
//   GET    /api/v1/consumers                   every consumer group: lag, leases, dead letters
//   GET    /api/v1/dlq/{group}[?type=&key=&older_than_ms=&newer_than_ms=]   dead letters
//   GET    /api/v1/dlq/{group}/{event_id}      one dead letter
//   POST   /api/v1/dlq/{group}/{event_id}/replay[?wait_ms=]   replay it (the group's running
//                                                consumers run it; 504 when none took it)
//   POST   /api/v1/dlq/{group}/replay?type=&key=   replay every matching dead letter
//   DELETE /api/v1/dlq/{group}/{event_id}[?reason=]   discard it
//   GET    /api/v1/sagas[?status=&type=&older_than_ms=&limit=], /api/v1/sagas/stats,
//          /api/v1/sagas/{id}                  sagas of an orchestrating service's member
//   GET    /api/v1/outbox                      what the member's outbox has not published
//
// Errors are JSON {"error": {"code", "message"}}: 400 for bad input (malformed JSON, a bad
// predicate or number), 404 for unknown names, 401 without the secret, 409 and 504 for a
// replay that failed or was not taken, 503 when the cluster cannot answer, never a crash.
// Streams and dead letters live in the cluster whose streams they are (serve this from the
// shared cluster's members); sagas and the outbox in the service's own member.
//
// Security: when the member has a secret (MemberOptions::secret, grid-node --secret), every
// /api/v1/ request needs "Authorization: Bearer <secret>" (the console asks for it once);
// the health probes, /metrics and the console's static files stay open.
//
// Thread-safety: handlers run on the member's HTTP threads and block on the grid there,
// never on a shard.

#include <cstdint>

#include "tessera/grid/member.h"

namespace tessera::admin {

struct AdminOptions {
  std::int64_t default_entry_limit = 100;  // entries listed without ?limit=
  std::int64_t max_entry_limit = 10'000;   // the most ?limit= may ask for
  std::int64_t replay_wait_ms = 30'000;    // how long a replay waits without ?wait_ms=
};

// Adds the API's and the console's routes to `member`. REQUIRES: before member.Start(); the
// member serves HTTP (its routes are ignored otherwise); `member` outlives its HTTP port.
void RegisterAdminApi(grid::Member& member, AdminOptions options = {});

}  // namespace tessera::admin
