#include "tessera/map/map_request.h"

namespace tessera::map {

namespace {

// The op table's rows agree with each other (map_op.h): only keyed ops go in a transaction,
// touch a stream or have a lean keyed form; a lean transaction carries only ops a transaction
// may; names are unique. Checked over every code at compile time.
constexpr bool OpRowsConsistent() {
  for (int code = 0; code < 256; ++code) {
    const MapOpSpec s = SpecOf(static_cast<MapOp>(code));
    if (s.scope == OpScope::kUnknown) {
      if (s.name != "unknown") return false;
      continue;
    }
    const bool keyed_only = s.in_transaction || s.stream || s.lean != OpLean::kNo;
    if (keyed_only && s.scope != OpScope::kKeyed) return false;
    if (s.lean_in_transaction && !s.in_transaction) return false;
    for (int other = 0; other < code; ++other) {
      if (SpecOf(static_cast<MapOp>(other)).name == s.name) return false;
    }
  }
  return true;
}
static_assert(OpRowsConsistent(), "map_op.h: a row of SpecOf contradicts the others");

}  // namespace

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

}  // namespace tessera::map
