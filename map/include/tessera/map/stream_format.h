#pragma once
// How an event stream is stored in the internal map "__streams" (map_ops_stream.cc runs the
// operations; grid::Stream is the API). One sub-stream P (named "<stream>#<index>") lives in
// one partition, the partition of P:
//   "meta@P"         StreamMeta: head, tail, bytes, and each group's committed cursor
//   "<offset>@P"     one event (StoredEvent), offsets 1, 2, ... in append order
//   "id:<event>@P"   the offset an event id was appended at (TTL = the dedup window)
//   "lease:<g>@P"    the consumer holding group g's lease on P (TTL = the lease TTL)
//   "xgroup:<g>@P"   what another API over the stream keeps for group g (the streams family's
//                    Redis consumer group: families/streams); removed with the group
// and per stream S, in the partition of S:
//   "stream@S"       the stream's configuration (StreamConfigText)
//   "consumers:<g>@S"  group g's live consumers with their expiry (kStreamJoin)
//
// Formats are text or length-prefixed so that an operator reading the map with grid-cli can
// follow them; every parser accepts what its writer produces and treats anything else as
// empty (a damaged record never crashes a member).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::map {

inline constexpr const char* kStreamMap = "__streams";

// One stored event.
struct StoredEvent {
  std::string id;            // the event id given to Append ("" = none)
  std::string key;           // the event's key (its partition key chose the sub-stream)
  std::int64_t time_ms = 0;  // wall-clock time the owner appended it
  std::string payload;
};
std::string EncodeStoredEvent(const StoredEvent& event);
std::string EncodeStoredEvent(std::string_view id, std::string_view key, std::int64_t time_ms,
                              std::string_view payload);
// The same bytes written into `out` (replacing what it held, its capacity reused), and their
// size without writing them.
void EncodeStoredEventInto(std::string& out, std::string_view id, std::string_view key,
                           std::int64_t time_ms, std::string_view payload);
std::size_t StoredEventSize(std::string_view id, std::string_view key, std::int64_t time_ms,
                            std::string_view payload);
// nullopt for bytes EncodeStoredEvent did not produce.
std::optional<StoredEvent> DecodeStoredEvent(std::string_view bytes);
// Only the time of an encoded event (0 if damaged), without copying the payload.
std::int64_t StoredEventTime(std::string_view bytes);
// Only the key of an encoded event (nullopt if damaged), a view into `bytes`.
std::optional<std::string_view> StoredEventKey(std::string_view bytes);

// A sub-stream's bookkeeping. Offsets [head, tail] may be stored (head = tail + 1: empty).
// A group's cursor is the last offset it committed (head - 1 when it committed nothing that
// is still stored).
struct StreamMeta {
  std::int64_t head = 1;
  std::int64_t tail = 0;
  std::int64_t bytes = 0;  // stored bytes of the events in [head, tail]
  std::vector<std::pair<std::string, std::int64_t>> groups;  // (group, cursor), by name

  std::int64_t* CursorOf(std::string_view group);
  const std::int64_t* CursorOf(std::string_view group) const;
  // The group whose cursor is lowest (nullptr without groups).
  const std::pair<std::string, std::int64_t>* Slowest() const;
};
std::string StreamMetaText(const StreamMeta& meta);
StreamMeta ParseStreamMeta(std::string_view text);

// Keys, for sub-stream `sub` ("<stream>#<index>") and stream `stream`.
std::string SubStreamName(std::string_view stream, std::uint32_t index);
std::string StreamMetaKey(std::string_view sub);
std::string StreamEventKey(std::string_view sub, std::int64_t offset);
std::string StreamIdKey(std::string_view sub, std::string_view event_id);
// The same two keys written into `out` (replacing what it held, its capacity reused): for
// operations that build one or two keys per event.
void StreamEventKeyInto(std::string& out, std::string_view sub, std::int64_t offset);
void StreamIdKeyInto(std::string& out, std::string_view sub, std::string_view event_id);
std::string StreamLeaseKey(std::string_view sub, std::string_view group);
std::string StreamGroupStateKey(std::string_view sub, std::string_view group);
// The group's lease epoch on the sub-stream: counts every taking of the lease (kStreamLease),
// never expires, so a holding's commits can be told from a later holding's.
std::string StreamLeaseEpochKey(std::string_view sub, std::string_view group);
std::string StreamConfigKey(std::string_view stream);
std::string StreamConsumersKey(std::string_view stream, std::string_view group);

// Names of streams, groups and consumers: non-empty, at most 200 bytes, no whitespace and no
// '@' or '#' (they would change which partition the keys fall in). Returns the problem, or
// "" when `name` is fine; `what` is "stream", "group" or "consumer".
std::string StreamNameProblem(std::string_view what, std::string_view name);

}  // namespace tessera::map
