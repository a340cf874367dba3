#include "tessera/map/map_request.h"

namespace tessera::map {

void MapRequest::Clear() {
  static_assert(sizeof(MapRequest) == 504,
                "MapRequest changed: clear the new field in MapRequest::Clear, then update this "
                "size");
  op = MapOp::kGet;
  map_name.clear();
  key.clear();
  value.clear();
  expected.clear();
  options = {};
  entries.clear();
  keys.clear();
  processor.clear();
  if (!argument.fields().empty() || !argument.type_name().empty()) argument = {};
  if (predicate.kind() != Predicate::Kind::kTrue) predicate = {};
  projection = Projection::kEntries;
  transaction.clear();
  transaction_id.clear();
  local_only = false;
}

bool MapOpIsKeyed(MapOp op) {
  const auto code = static_cast<std::uint8_t>(op);
  return (code >= static_cast<std::uint8_t>(MapOp::kPut) &&
          code <= static_cast<std::uint8_t>(MapOp::kStreamCommit)) ||
         (code >= static_cast<std::uint8_t>(MapOp::kStreamLease) &&
          code <= static_cast<std::uint8_t>(MapOp::kRedisKey));
}

bool MapOpHasKeys(MapOp op) {
  return op == MapOp::kPutAll || op == MapOp::kGetAll || op == MapOp::kExecuteOnKeys ||
         op == MapOp::kMergeEntries;
}

bool MapOpIsStream(MapOp op) {
  switch (op) {
    case MapOp::kStreamAppend:
    case MapOp::kStreamRead:
    case MapOp::kStreamCommit:
    case MapOp::kStreamLease:
    case MapOp::kStreamGroup:
    case MapOp::kStreamInfo:
    case MapOp::kStreamJoin:
    case MapOp::kStreamMerge:
    case MapOp::kRedisStream:
      return true;
    default:
      return false;
  }
}

std::string_view ValueKindName(ValueKind kind) {
  switch (kind) {
    case ValueKind::kPlain:
      return "string";
    case ValueKind::kHash:
    case ValueKind::kSpilledHash:
      return "hash";
    case ValueKind::kStream:
      return "stream";
  }
  return "none";
}

std::string_view MapOpName(MapOp op) {
  switch (op) {
    case MapOp::kPut:
      return "put";
    case MapOp::kSet:
      return "set";
    case MapOp::kGet:
      return "get";
    case MapOp::kRemove:
      return "remove";
    case MapOp::kDelete:
      return "delete";
    case MapOp::kContainsKey:
      return "containsKey";
    case MapOp::kPutIfAbsent:
      return "putIfAbsent";
    case MapOp::kReplace:
      return "replace";
    case MapOp::kReplaceIfSame:
      return "replaceIfSame";
    case MapOp::kRemoveIfSame:
      return "removeIfSame";
    case MapOp::kRingAppend:
      return "ringAppend";
    case MapOp::kRingRead:
      return "ringRead";
    case MapOp::kTransact:
      return "transact";
    case MapOp::kStreamAppend:
      return "streamAppend";
    case MapOp::kStreamRead:
      return "streamRead";
    case MapOp::kStreamCommit:
      return "streamCommit";
    case MapOp::kStreamLease:
      return "streamLease";
    case MapOp::kStreamGroup:
      return "streamGroup";
    case MapOp::kStreamInfo:
      return "streamInfo";
    case MapOp::kStreamJoin:
      return "streamJoin";
    case MapOp::kStreamMerge:
      return "streamMerge";
    case MapOp::kRingMerge:
      return "ringMerge";
    case MapOp::kRedisStream:
      return "redisStream";
    case MapOp::kRedisKey:
      return "redisKey";
    case MapOp::kSetTtl:
      return "setTtl";
    case MapOp::kGetEntryView:
      return "getEntryView";
    case MapOp::kExecuteOnKey:
      return "executeOnKey";
    case MapOp::kPutAll:
      return "putAll";
    case MapOp::kGetAll:
      return "getAll";
    case MapOp::kExecuteOnKeys:
      return "executeOnKeys";
    case MapOp::kSize:
      return "size";
    case MapOp::kClear:
      return "clear";
    case MapOp::kQuery:
      return "query";
    case MapOp::kExecuteOnEntries:
      return "executeOnEntries";
    case MapOp::kStats:
      return "stats";
    case MapOp::kMergeEntries:
      return "mergeEntries";
  }
  return "unknown";
}

}  // namespace tessera::map
