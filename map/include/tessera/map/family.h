#pragma once
// Families: data types whose shard side lives outside the engine (families/<name>/, a level
// above map), registered with it before any MapService runs. A family owns one MapOp (its
// row in map_op.h; the command travels in MapRequest::processor) and the value kinds of the
// entries it writes (map_request.h). The engine runs the op's handler on the key's partition
// owner, asks the family whether a request writes (a quorum map refuses writes without its
// quorum), and calls the hooks below when an entry of one of its kinds leaves a store or
// carries a companion map; it never names a family, its commands or its kinds itself.
//
// A family keeps its data as entries of ordinary maps (record_store.h). An entry may keep its
// parts in a companion map of the same partition (a large Redis hash's fields): the engine
// replicates a companion's changes with the entry's, copies it with its partition only while
// its owner entry holds a kind that has one (`has_companion`), clears it on a backup whose
// owner entry was replaced, and sends it back after a split as the family's `merge_command`
// on the owner's key.
//
// Thread-safety: any thread. Register a family before the first request of its op (a grid
// member and the RESP server register the families they serve in their constructors);
// registration publishes the spec with an atomic store and lookups are lock-free loads.

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "tessera/base/error.h"
#include "tessera/map/map_ops.h"
#include "tessera/map/map_request.h"
#include "tessera/map/record_store.h"

namespace tessera::map {

struct FamilySpec {
  std::string_view name;  // for logs and errors: "hash"
  MapOp op = MapOp::kGet;
  // Runs one request of `op` on the key's partition store. ctx.maps gives the partition's
  // other maps (companions); ctx.follow_ups takes requests for other partitions.
  base::Result<MapResult> (*run)(RecordStore& store, const MapRequest& request,
                                 OpContext& ctx) = nullptr;
  // Whether `request` (of `op`) may change data; an unknown command counts as a write.
  bool (*writes)(const MapRequest& request) = nullptr;
  // Whether `request` (of `op`), answered `result`, stored a new event of the stream its key
  // names (map/stream_format.h): it wakes the stream's blocked reads and counts as appended.
  // Null: never.
  bool (*appended)(const MapRequest& request, const MapResult& result) = nullptr;
  // The value kinds this family's entries hold (at most 4), and their name (ValueKindName:
  // what Redis's TYPE answers).
  ValueKind kinds[4] = {};
  std::size_t kind_count = 0;
  std::string_view kind_name;
  // An entry `key` of one of `kinds`, holding `value`, left its store through an operation
  // (removed, expired, evicted, cleared, replaced by another kind): what goes with it (its
  // companion's entries, records elsewhere through ctx.follow_ups: each is sent to its key's
  // owner once the operation is replicated, and sent again while its answer sets `flag`, for
  // work done in steps). Null: nothing.
  void (*leaving)(OpContext& ctx, std::string_view key, ValueKind kind,
                  std::string_view value) = nullptr;
  // Companion maps (all null when the family keeps none): whether an entry of `kind` has one,
  // the companion's name for entry `key` of map `map`, and back: (map, key) of a companion's
  // name, nullopt for a name that is not this family's companion.
  bool (*has_companion)(ValueKind kind) = nullptr;
  std::string (*companion_map)(std::string_view map, std::string_view key) = nullptr;
  std::optional<std::pair<std::string, std::string>> (*companion_owner)(std::string_view name) =
      nullptr;
  // The command (MapRequest::processor of `op`) that applies a companion's entries a member
  // leaving its cluster took out (merge.h): its owner entry's key, entries = the fields.
  std::string_view merge_command;
};

// Registers `spec` for its op and kinds; registering a family again does nothing. REQUIRES:
// spec.run and spec.writes set; its op not registered by another family.
void RegisterFamily(const FamilySpec& spec);
// The family serving `op` / owning entries of `kind`, or nullptr.
const FamilySpec* FamilyOfOp(MapOp op);
const FamilySpec* FamilyOfKind(ValueKind kind);
// Whether `name` is a companion map of some family; then its owner entry.
struct CompanionOwner {
  const FamilySpec* family = nullptr;
  std::string map;
  std::string key;
};
std::optional<CompanionOwner> CompanionOf(std::string_view map_name);
// Whether an entry of `kind` keeps a companion map.
bool HasCompanion(ValueKind kind);

// kWrongType, reason kWrongKind: "Operation against a key holding the wrong kind of value" (the
// text members that predate error reasons also send; front-ends write their own, by the
// reason): an operation on an entry of a kind it does not serve.
base::Error WrongKindError();
// Whether `error` is WrongKindError (and not a processor's own kWrongType).
bool IsWrongKindError(const base::Error& error);
// The one wrong-kind rule (Redis's WRONGTYPE), which every op that serves entries of given
// kinds applies to the live entry it loads: none (`r` null) or one of `kinds` passes, any
// other kind fails WrongKindError.
base::Result<void> RequireKind(const Record* r, std::initializer_list<ValueKind> kinds);

// Building blocks for a family's ops, as the engine's own ops use them (map_ops.cc): the same
// expiry, TTL rule, capacity limit, counters and events. Shard: the store's.
//
// The live entry for `key`, or nullptr. An expired entry is removed on the way (Expired event,
// expirations counter, its family's leaving hook).
Record* FindLive(RecordStore& store, std::string_view key, OpContext& ctx);
// Writes `value` under `key` applying the TTL rule with `options`, counts a put, fires
// Added/Updated (`old_value` is the previous live value when `existed`; read only when events
// carry values), and enforces the partition's capacity when the entry is new.
void WriteLive(RecordStore& store, std::string_view key, std::string_view value,
               const WriteOptions& options, OpContext& ctx, bool existed,
               const std::optional<std::string>& old_value);
// WriteLive for an entry of kind `kind`: writes, then sets the kind (an entry of another kind
// it replaces leaves through its family's hook).
void WriteLiveKind(RecordStore& store, std::string_view key, std::string_view value,
                   const WriteOptions& options, OpContext& ctx, bool existed,
                   const std::optional<std::string>& old_value, ValueKind kind);
// Removes the live entry `record` of `key`, counts a remove and fires `type` with its value.
void RemoveLive(RecordStore& store, const Record& record, OpContext& ctx, EntryEventType type);
// Removes every entry of `store` as the clear op does (one replica update).
void ClearLive(RecordStore& store, OpContext& ctx);

// Arguments of a family's command (MapRequest::argument), with a fallback when absent or of
// another type (probed with Find: no error text for an absent one).
inline std::int64_t IntArg(const MapRequest& rq, std::string_view name, std::int64_t fallback) {
  const record::Value* v = rq.argument.Find(name);
  return v != nullptr && v->type() == record::FieldType::kInt64 ? v->AsInt64() : fallback;
}
inline std::string StringArg(const MapRequest& rq, std::string_view name) {
  const record::Value* v = rq.argument.Find(name);
  return v != nullptr && v->type() == record::FieldType::kString ? v->AsString() : std::string();
}

}  // namespace tessera::map
