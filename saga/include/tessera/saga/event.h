#pragma once
// Event: the unit the framework moves between services (outbox -> shared stream -> consumers
// -> inbox, dead letter queue, sagas). Its encoding is a GenericRecord of type
// "tessera.Event", so the grid can read events server-side (predicates over a DLQ, grid-cli):
//
//   id           int64   cluster-unique id (grid::IdGenerator), > 0
//   type         string  what happened, e.g. "OrderCreated"; routes it to handlers
//   key          string  ordering and partition key: events of one key stay in order (the
//                        stream's sub-stream and the outbox's partition follow its
//                        partition key, grid's key@partition-key rule)
//   source       string  the service that produced it
//   correlation  string  the flow it belongs to (a saga id); "" = none
//   causation    string  the id of the event that caused it, as decimal text; "" = none
//   time         int64   wall-clock ms since 1970 when it was created
//   attempt      int32   delivery attempt, 1 the first (set by consumers, not stored by them)
//   headers      list of records {name: string, value: string}, in order
//   payload      record  the business content
//
// A decoder accepts what the encoder writes and refuses anything else with a message naming
// the field. Unknown extra fields are ignored (later versions may add some).
//
// Value type; thread-compatible.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/record/generic_record.h"

namespace tessera::saga {

inline constexpr std::string_view kEventTypeName = "tessera.Event";

struct Event {
  std::int64_t id = 0;
  std::string type;
  std::string key;
  std::string source;
  std::string correlation_id;
  std::string causation_id;
  std::int64_t time_ms = 0;
  std::int32_t attempt = 1;
  std::vector<std::pair<std::string, std::string>> headers;
  record::GenericRecord payload;

  // The value of header `name`, or "" when absent.
  std::string Header(std::string_view name) const;
  friend bool operator==(const Event&, const Event&) = default;
};

// Errors: kBadRequest naming the first field that is wrong: id not positive, empty type or
// key, time negative, attempt below 1, an empty header name, and what to do about it.
base::Result<void> ValidateEvent(const Event& event);

// The event as a GenericRecord (above) and its bytes. REQUIRES: ValidateEvent(event) passed.
record::GenericRecord EventToRecord(const Event& event);
std::string EncodeEvent(const Event& event);
// Errors: kBadRequest for bytes that are not a GenericRecord, a record of another type, a
// missing or mistyped field (named), or an event ValidateEvent refuses.
base::Result<Event> EventFromRecord(const record::GenericRecord& record);
base::Result<Event> DecodeEvent(std::string_view bytes);

}  // namespace tessera::saga
