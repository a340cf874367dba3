// What the event stream operations served here as owner did, for metrics: each operation on
// a sub-stream refreshes that sub-stream's state from its meta record (stream_format.h) and
// counts appends, duplicates, deliveries, redeliveries and commits; StreamStats sums them per
// stream and group, with the gauges (stored events, lag, leases) over the sub-streams this
// member owns now.
#include <charconv>

#include "map_service_impl.h"
#include "op_support.h"
#include "tessera/map/family.h"
#include "tessera/map/stream_format.h"

namespace tessera::map {
namespace {

std::int64_t EventTime(RecordStore& store, std::string_view sub, std::int64_t offset) {
  const Record* r = store.Find(StreamEventKey(sub, offset));
  return r ? StoredEventTime(r->value()) : 0;
}

}  // namespace

void MapService::Impl::TrackStream(MapTable& table, std::uint32_t partition_id,
                                   const MapRequest& request, const MapResult& result,
                                   base::Millis wall_ms, const std::optional<StreamMeta>& left) {
  if (request.op == MapOp::kStreamJoin || request.op == MapOp::kStreamInfo) return;
  const auto at = request.key.find('@');
  if (at == std::string::npos) return;
  const std::string_view sub = std::string_view(request.key).substr(at + 1);
  RecordStore& store = StoreOf(table, partition_id);
  const std::string group = detail::StringArg(request, "group");
  if (FamilyOfOp(request.op) != nullptr && store.Find(StreamMetaKey(sub)) == nullptr) {
    // A family's command on no such stream (an EXISTS or TYPE of any key asks), or one it
    // just deleted: no state.
    std::lock_guard lock(stream_mu);
    if (auto it = stream_state.find(sub); it != stream_state.end()) stream_state.erase(it);
    return;
  }

  std::lock_guard lock(stream_mu);
  auto it = stream_state.find(sub);
  if (it == stream_state.end()) it = stream_state.emplace(std::string(sub), SubStreamState{}).first;
  auto& s = it->second;
  if (s.stream.empty()) s.stream = std::string(sub.substr(0, sub.rfind('#')));
  s.partition = partition_id;
  if (request.op == MapOp::kStreamRead) {  // reads change nothing stored: count deliveries
    if (group.empty() || result.entries.empty()) return;
    auto& g = s.groups[group];
    for (const auto& [offset_text, bytes] : result.entries) {
      std::int64_t offset = 0;
      std::from_chars(offset_text.data(), offset_text.data() + offset_text.size(), offset);
      ++g.delivered;
      if (offset <= g.served) ++g.redelivered;
      g.served = std::max(g.served, offset);
    }
    return;
  }
  if (request.op == MapOp::kStreamMerge) s.appended += result.count;
  if (const FamilySpec* family = FamilyOfOp(request.op);
      family != nullptr && family->appended != nullptr && family->appended(request, result)) {
    ++s.appended;  // a family's append
  }
  if (request.op == MapOp::kStreamAppend) {
    for (const auto& [offset, dup] : result.entries) (dup.empty() ? s.appended : s.duplicates)++;
  }
  if (request.op == MapOp::kStreamLease && !group.empty()) {
    auto& g = s.groups[group];
    if (request.argument.GetBool("release").value_or(false)) {
      g.lease_expiry_ms = 0;
    } else if (result.flag) {
      g.lease_expiry_ms = wall_ms + detail::IntArg(request, "ttl_ms", 10'000);
    }
  }
  // Refresh from the meta record the operation left.
  StreamMeta read;
  if (!left) {
    const Record* meta_record = store.Find(StreamMetaKey(sub));
    if (meta_record == nullptr) return;
    read = ParseStreamMeta(meta_record->value());
  }
  const StreamMeta& meta = left ? *left : read;
  s.head = meta.head;
  s.tail = meta.tail;
  s.bytes = meta.bytes;
  for (auto it = s.groups.begin(); it != s.groups.end();) {  // deleted groups go
    it = meta.CursorOf(it->first) ? std::next(it) : s.groups.erase(it);
  }
  for (const auto& [name, cursor] : meta.groups) {
    auto& g = s.groups[name];
    // A group first seen here (a new owner) starts counting from its cursor now.
    if (g.known && cursor > g.cursor) g.committed += cursor - g.cursor;
    const std::int64_t first = std::max(cursor + 1, meta.head);
    if (cursor != g.cursor || g.oldest_ms == 0 || first > meta.tail || !g.known) {
      g.oldest_ms = first <= meta.tail ? EventTime(store, sub, first) : 0;
    }
    g.cursor = cursor;
    g.known = true;
  }
}

std::vector<StreamCounters> MapService::StreamStats() const {
  const auto wall_ms = impl_->clock.WallMs();
  std::lock_guard lock(impl_->stream_mu);
  std::map<std::string, StreamCounters> by_stream;
  std::map<std::pair<std::string, std::string>, StreamGroupCounters> by_group;
  for (const auto& [sub, s] : impl_->stream_state) {
    auto& c = by_stream[s.stream];
    c.stream = s.stream;
    c.appended += s.appended;
    c.duplicates += s.duplicates;
    const bool owned = impl_->IsLocal(s.partition);
    if (owned) {
      c.events += std::max<std::int64_t>(0, s.tail - s.head + 1);
      c.bytes += s.bytes;
    }
    for (const auto& [name, g] : s.groups) {
      auto& gc = by_group[{s.stream, name}];
      gc.group = name;
      gc.delivered += g.delivered;
      gc.redelivered += g.redelivered;
      gc.committed += g.committed;
      if (!owned) continue;
      const std::int64_t lag = std::max<std::int64_t>(0, s.tail - std::max(g.cursor, s.head - 1));
      gc.lag += lag;
      if (lag > 0 && g.oldest_ms > 0 &&
          (gc.oldest_uncommitted_ms == 0 || g.oldest_ms < gc.oldest_uncommitted_ms)) {
        gc.oldest_uncommitted_ms = g.oldest_ms;
      }
      if (g.lease_expiry_ms > wall_ms) ++gc.leases_held;
    }
  }
  std::vector<StreamCounters> out;
  for (auto& [name, c] : by_stream) {
    for (auto& [key, g] : by_group) {
      if (key.first == name) c.groups.push_back(std::move(g));
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace tessera::map
