#pragma once
// The records a Redis stream keeps besides the Tessera stream's (redis_stream.h): the stream's
// Redis bookkeeping and one record per consumer group. Both are encoded as "<n>:<bytes>"
// tokens; a record that does not parse reads as empty (a damaged record never crashes a
// member).

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/map/map_ops.h"
#include "tessera/streams/redis_stream.h"

namespace tessera::streams::detail {

struct RedisStreamMeta {
  StreamId last_id;
  std::int64_t entries_added = 0;
  StreamId max_deleted;
  // The incarnation of the stream, as its keyspace entry names it (families/hash
  // "mark_stream"); 0: not known (made by an XADD that sent none). A removal sent for another
  // incarnation leaves this one alone.
  std::int64_t epoch = 0;
};
std::string EncodeRedisStreamMeta(const RedisStreamMeta& meta);
RedisStreamMeta DecodeRedisStreamMeta(std::string_view bytes);

struct StreamConsumer {
  std::string name;
  std::int64_t seen_ms = 0;    // last read or claim attempt (wall clock)
  std::int64_t active_ms = 0;  // last read or claim that returned entries (0: never)
};

struct PendingEntry {
  std::int64_t offset = 0;
  StreamId id;
  std::int64_t delivery_ms = 0;  // wall clock of the last delivery
  std::int64_t deliveries = 1;
  std::string consumer;
};

struct RedisStreamGroup {
  StreamId last_id;
  std::int64_t last_offset = 0;  // offset of the last entry delivered (or skipped at creation)
  // Whether last_offset counts the entries the group read: not for a group created at an
  // explicit ID until it reads (XINFO GROUPS shows entries-read nil then, as Redis).
  bool entries_read_known = true;
  std::vector<StreamConsumer> consumers;  // by name
  std::vector<PendingEntry> pending;      // by offset (and so by ID)

  StreamConsumer* FindConsumer(std::string_view name);
  // The consumer `name`, created if missing (`created` tells).
  StreamConsumer& Consumer(std::string_view name, std::int64_t now_ms, bool* created = nullptr);
  std::int64_t PendingOf(std::string_view consumer) const;
  // The pending entry with `id`, or nullptr.
  PendingEntry* FindPending(const StreamId& id);
  // Every entry up to this offset was acknowledged or never owed (the Tessera cursor). An
  // entry XCLAIM FORCE made pending may lie above last_offset: the floor stays below both.
  std::int64_t AckFloor() const {
    return pending.empty() ? last_offset : std::min(last_offset, pending.front().offset - 1);
  }
  // Makes the entry at `offset` pending for `consumer` (a new delivery: deliveries 1), keeping
  // the list in offset order; an entry already pending (XCLAIM FORCE) moves to `consumer`.
  void Deliver(std::int64_t offset, const StreamId& id, std::int64_t now_ms,
               const std::string& consumer);
};
std::string EncodeRedisStreamGroup(const RedisStreamGroup& group);
RedisStreamGroup DecodeRedisStreamGroup(std::string_view bytes);

// The family's handler (redis_stream_ops.cc): runs the command `request` names on the
// stream's partition store.
base::Result<map::MapResult> OpRedisStream(map::RecordStore& store, const map::MapRequest& request,
                                           map::OpContext& ctx);
// A stream's keyspace entry `key` (kind stream, `value` its epoch) left its store: asks, through
// ctx.follow_ups, for the removal of that incarnation's records.
void StreamKeyLeaving(map::OpContext& ctx, std::string_view key, std::string_view value);

}  // namespace tessera::streams::detail
