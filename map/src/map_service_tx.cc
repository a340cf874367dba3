// Partition transactions (MapOp::kTransact): a batch of keyed operations on any maps, every key
// in one partition, applied all-or-nothing on that partition's shard.
//
// Atomicity without locks: the whole batch runs in one handler on the partition's shard, so no
// other operation, query or replica update of this member interleaves with it. Each store the
// batch touches is attached to one UndoLog (record_store.h), which saves an entry before its
// first change (including hits, access times, TTLs and counters, and entries evicted or
// expired on the way); a failed precondition or a failing operation rolls every store back.
//
// Events: each operation's events are kept until the batch committed, then delivered, so a
// listener never sees a batch that did not commit. Replication: the events of the whole batch
// become one list of replica updates under one replica version, sent to each backup as one
// message (map_service_cluster.cc, ReplicateThen) and applied there in one handler; a promoted
// backup therefore has all of a committed batch or none of it.
//
// Ids: a batch with a transaction id leaves a marker (kTransactionIdMap) holding its result in
// the same partition, written in the batch and replicated with it; the same id again returns
// that result without applying anything. Only committed batches leave a marker, so a batch
// that failed its preconditions runs afresh when sent again.
#include <algorithm>
#include <array>
#include <optional>
#include <string>

#include "map_service_impl.h"
#include "tessera/map/map_codec.h"

namespace tessera::map {
namespace {

const std::string& TransactionIdMap() {
  static const std::string name(kTransactionIdMap);
  return name;
}

// The key of a batch's marker: "<id>@<partition key>" (the form every build has written), or,
// for an id that contains '@', "@<id's length>:<id>@<partition key>": otherwise id "a@b" with
// key "c" and id "a" with key "b@c" (the same partition) would share a marker, and the second
// batch would be answered with the first's result and not applied. An id without '@' cannot
// start with '@', so the two forms never meet. Empty: no id, no marker.
std::string MarkerKey(const std::string& id, const std::string& partition_key) {
  if (id.empty()) return {};
  if (id.find('@') == std::string::npos) return id + "@" + partition_key;
  return "@" + std::to_string(id.size()) + ":" + id + "@" + partition_key;
}

std::string Describe(const Record* r) {
  if (r == nullptr) return "absent";
  return "value of " + std::to_string(r->value().size()) + " bytes, version " +
         std::to_string(r->version());
}

// Whether `op`'s precondition holds for the live entry `r` (nullptr: absent).
bool Holds(const TxOp& op, const Record* r) {
  switch (op.condition) {
    case TxCondition::kNone:
      return true;
    case TxCondition::kAbsent:
      return r == nullptr;
    case TxCondition::kPresent:
      return r != nullptr;
    case TxCondition::kValueEquals:  // a hash's encoding is not a value to compare
      return r != nullptr && r->kind() == ValueKind::kPlain && r->value() == op.condition_value;
    case TxCondition::kVersionEquals:
      return op.condition_version == 0
                 ? r == nullptr
                 : r != nullptr && static_cast<std::int64_t>(r->version()) == op.condition_version;
  }
  return false;
}

}  // namespace

base::Result<void> MapService::Impl::CheckTransaction(const MapRequest& request) const {
  if (request.transaction.size() > options.max_transaction_ops) {
    return Fail(ErrorCode::kBadRequest,
                "the transaction has " + std::to_string(request.transaction.size()) +
                    " operations, more than the limit of " +
                    std::to_string(options.max_transaction_ops) +
                    " (MapServiceOptions::max_transaction_ops); split it into smaller batches");
  }
  const std::uint32_t partition_id = partitioner.PartitionOf(request.key);
  for (std::size_t i = 0; i < request.transaction.size(); ++i) {
    const MapRequest& op = request.transaction[i].request;
    const std::uint32_t p = partitioner.PartitionOf(op.key);
    if (p != partition_id) {
      return Fail(ErrorCode::kBadRequest,
                  "key '" + op.key + "' of operation " + std::to_string(i) + " (map '" +
                      op.map_name + "') is in partition " + std::to_string(p) +
                      ", not in the transaction's partition " + std::to_string(partition_id) +
                      " (partition key '" + request.key +
                      "'); give every key of a transaction the same partition key, e.g. '" +
                      op.key + "@" + request.key + "'; nothing was applied");
    }
  }
  return {};
}

base::Result<MapResult> MapService::Impl::RunTransaction(std::size_t shard,
                                                         std::uint32_t partition_id,
                                                         const MapRequest& request,
                                                         std::vector<ReplicaUpdate>* replica_out) {
  const base::Clock::Times times = clock.NowAndWallMs();  // one reading for every operation
  const base::Millis now = times.now_ms;
  // The batch's entries are fetched into the cache together before any runs: with random
  // keys each lookup otherwise waits for its table slot and then its entry in turn (a third
  // of a member's time on 3-operation batches).
  // So is the id's marker, looked up first (a new key each time, in a table that keeps every
  // id for transaction_id_ttl_ms: a cache miss of its own).
  const std::string id_key = MarkerKey(request.transaction_id, request.key);
  std::array<KeyRef, kMaxPrefetchKeys> keys;
  std::size_t prefetched = 0;
  if (!id_key.empty()) keys[prefetched++] = {TransactionIdMap(), id_key};
  for (const TxOp& op : request.transaction) {
    if (prefetched == keys.size()) break;
    keys[prefetched++] = {op.request.map_name, op.request.key};
  }
  PrefetchKeys(shard, std::span(keys.data(), prefetched), partition_id);
  if (!id_key.empty()) {
    MapTable& ids = TableOn(shard, TransactionIdMap());
    const RecordStore& store = StoreOf(ids, partition_id);
    const Record* marker = store.Find(id_key);
    if (marker != nullptr && !marker->ExpiredAt(now)) {
      auto first = DecodeResult(marker->value());
      if (first) return first;  // committed before: its result, nothing applied again
      log->warn("transaction id '{}' has an unreadable marker ({}); running the batch",
                request.transaction_id, first.error().message());
    }
  }

  struct Step {
    MapTable* table;
    std::vector<EntryEvent> events;
  };
  std::vector<Step> steps;
  steps.reserve(request.transaction.size() + 1);
  ShardState& state = *states[shard];
  std::optional<UndoLog> own_undo;
  if (state.undo_in_use) own_undo.emplace();
  UndoLog& undo = own_undo ? *own_undo : state.undo;
  // Other maps an operation keeps data in (companion maps, family.h): they join the undo log
  // and their changes are replicated with the batch's.
  ShardPartitionMaps sides(*this, shard, partition_id, now, replica_out != nullptr, &undo);
  struct DropAtEnd {  // every return has committed or rolled back `undo` first
    ShardPartitionMaps& sides;
    ~DropAtEnd() { sides.DropEmpty(); }
  } drop_at_end{sides};
  // Declared after DropAtEnd, so that on an exception's way out the log rolls back before
  // DropEmpty frees a side map it may hold entries of. After a Commit it holds nothing.
  struct ReleaseUndo {
    UndoLog& undo;
    ShardState& state;
    bool shared;
    ~ReleaseUndo() {
      undo.RollBack();
      if (shared) state.undo_in_use = false;
    }
  } release_undo{undo, state, !own_undo};
  state.undo_in_use = true;
  std::vector<MapRequest> follow_ups;  // sent only if the batch commits
  MapResult out;
  out.results.reserve(request.transaction.size());
  // Runs one operation with the batch's time, collecting its events; the store joins `undo`.
  auto run = [&](MapTable& table, const MapRequest& op) -> base::Result<MapResult> {
    RecordStore& store = StoreOf(table, partition_id);
    store.AttachUndo(undo);
    Step& step = steps.emplace_back(Step{&table, {}});
    OpContext ctx = ContextFor(table, partition_id, &step.events, &times);
    if (replica_out != nullptr) ctx.events = &step.events;
    ctx.maps = &sides;
    ctx.follow_ups = &follow_ups;
    return ExecuteOnStore(store, op, ctx);
  };
  for (std::size_t i = 0; i < request.transaction.size(); ++i) {
    const TxOp& op = request.transaction[i];
    MapTable& table = TableOn(shard, op.request.map_name);
    if (op.condition != TxCondition::kNone) {
      const RecordStore& store = StoreOf(table, partition_id);
      const Record* r = store.Find(op.request.key);
      if (r != nullptr && r->ExpiredAt(now)) r = nullptr;
      if (!Holds(op, r)) {
        MapResult conflict;  // before the rollback, which may free the block `r` points to
        conflict.conflict = TxConflict{static_cast<std::uint32_t>(i), op.request.map_name,
                                       op.request.key, Describe(r)};
        undo.RollBack();
        return conflict;
      }
    }
    auto result = run(table, op.request);
    if (!result) {
      undo.RollBack();
      return std::unexpected(result.error().WithContext(
          "operation " + std::to_string(i) + " of the transaction (" +
          std::string(MapOpName(op.request.op)) + " on map '" + op.request.map_name + "', key '" +
          op.request.key + "') failed, so nothing was applied: "));
    }
    out.results.push_back(std::move(*result));
  }
  out.flag = true;
  if (!id_key.empty()) {
    MapRequest marker;
    marker.op = MapOp::kSet;
    marker.map_name = TransactionIdMap();
    marker.key = id_key;
    marker.value = EncodeStoredResult(out);
    marker.options.ttl_ms = std::max<base::Millis>(1, options.transaction_id_ttl_ms);
    marker.options.max_idle_ms = 0;
    if (auto written = run(TableOn(shard, TransactionIdMap()), marker); !written) {
      undo.RollBack();
      return std::unexpected(written.error());
    }
  }
  undo.Commit();

  if (replica_out != nullptr) {
    const bool changed =
        sides.changed() ||
        std::any_of(steps.begin(), steps.end(), [](const Step& s) { return !s.events.empty(); });
    if (changed) {
      const std::uint64_t version = flags[partition_id].version.fetch_add(1) + 1;
      for (const Step& s : steps) {
        AppendUpdates(*s.table, partition_id, now, s.events, *replica_out, version);
      }
      sides.AppendSideUpdates(*replica_out, version);
    }
  }
  for (const Step& s : steps) {
    if (!s.table->listeners) continue;
    for (const auto& event : s.events) ListenerRegistry::Deliver(s.table->listeners, event);
  }
  if (!follow_ups.empty()) RunFollowUps(std::move(follow_ups));
  return out;
}

}  // namespace tessera::map
