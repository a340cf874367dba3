// Event stream operations (kStreamAppend .. kStreamJoin) on one sub-stream's partition; the
// records they use are described in stream_format.h. Each operation reads the sub-stream's
// meta record once and writes it at most once, so a backup receives one update per record.
//
// Retention: an event is removed once every group of the sub-stream committed it (and, with
// max_age_ms, once it is also that old); without groups nobody is owed an event, so events
// stay until max_age_ms passes or room is needed (then the oldest go). Removal happens as
// part of appends and commits, at most kTrimStep events per operation.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <numeric>
#include <tuple>

#include "op_support.h"
#include "stream_support.h"
#include "tessera/map/stream_format.h"

namespace tessera::map {

WriteOptions Forever() {
  WriteOptions o;
  o.ttl_ms = 0;
  o.max_idle_ms = 0;
  return o;
}

WriteOptions Lasting(base::Millis ttl_ms) {
  WriteOptions o;
  o.ttl_ms = ttl_ms;
  o.max_idle_ms = 0;
  return o;
}

LoadedMeta LoadMeta(RecordStore& store, std::string_view sub, OpContext& ctx) {
  LoadedMeta out;
  out.key = StreamMetaKey(sub);
  if (Record* r = FindLive(store, out.key, ctx)) {
    out.meta = ParseStreamMeta(r->value());
    out.existed = true;
  }
  if (ctx.stream_meta != nullptr && out.existed) *ctx.stream_meta = out.meta;
  return out;
}

void SaveMeta(RecordStore& store, std::string_view sub, const LoadedMeta& loaded, OpContext& ctx) {
  WriteLive(store, loaded.key.empty() ? StreamMetaKey(sub) : loaded.key,
            StreamMetaText(loaded.meta), Forever(), ctx, loaded.existed, std::nullopt);
  if (ctx.stream_meta != nullptr) *ctx.stream_meta = loaded.meta;
}

void DropHead(RecordStore& store, std::string_view sub, StreamMeta& m, OpContext& ctx,
              std::string_view key) {
  std::string built;
  if (key.empty()) {
    built = StreamEventKey(sub, m.head);
    key = built;
  }
  if (Record* r = FindLive(store, key, ctx)) {
    m.bytes -= static_cast<std::int64_t>(r->value().size());
    RemoveLive(store, *r, ctx, EntryEventType::kEvicted);
  }
  ++m.head;
  if (m.head > m.tail) m.bytes = 0;  // guards against drift from damaged records
}

std::string StreamOfSub(std::string_view sub) { return std::string(sub.substr(0, sub.rfind('#'))); }

}  // namespace tessera::map

namespace tessera::map::detail {

namespace {

using base::ErrorCode;
using base::Fail;

constexpr std::int64_t kTrimStep = 4096;

// Reads and trims look events up kPrefetchRun at a time: the table slots of all of them
// first, then their records, then the lookups themselves. In a sub-stream larger than the
// cache each lookup is two cache misses (slot, record); this way a run's misses overlap
// instead of coming one after another.
constexpr std::int64_t kPrefetchRun = 32;

// The keys of a run of events, built once for the prefetch passes and the lookups.
using EventKeys = std::array<std::string, kPrefetchRun>;

// Builds the keys of events [from, min(last, from + kPrefetchRun - 1)] into keys[0..] and
// prefetches them; returns how many (0 when last < from).
std::int64_t PrefetchEvents(const RecordStore& store, std::string_view sub, std::int64_t from,
                            std::int64_t last, EventKeys& keys) {
  if (last < from) return 0;
  const std::size_t n =
      last - from < kPrefetchRun ? static_cast<std::size_t>(last - from + 1) : keys.size();
  std::array<std::uint64_t, kPrefetchRun> hashes;
  for (std::size_t i = 0; i < n; ++i) {
    StreamEventKeyInto(keys[i], sub, from + static_cast<std::int64_t>(i));
    hashes[i] = store.Prefetch(keys[i]);
  }
  for (std::size_t i = 0; i < n; ++i) store.PrefetchRecord(hashes[i]);
  return static_cast<std::int64_t>(n);
}

// Removes what retention allows from the front (see the file comment). Returns events removed.
std::int64_t Trim(RecordStore& store, std::string_view sub, StreamMeta& m, OpContext& ctx,
                  base::Millis max_age_ms) {
  const auto* slowest = m.Slowest();
  std::int64_t removed = 0;
  EventKeys keys;
  // What the groups committed is what goes: fetched ahead. (With max_age_ms an event may stay
  // for its age, and an append would fetch what it then does not drop: not fetched.)
  const std::int64_t last =
      slowest != nullptr && max_age_ms <= 0 ? std::min(m.tail, slowest->second) : 0;
  std::int64_t built = 0;  // keys of the current run built by PrefetchEvents
  while (m.head <= m.tail && removed < kTrimStep) {
    const std::int64_t in_run = removed % kPrefetchRun;
    if (in_run == 0) {
      built = PrefetchEvents(store, sub, m.head, last, keys);  // kPrefetchRun of them at most
    }
    if (slowest == nullptr && max_age_ms <= 0) break;  // no groups: kept until room is needed
    if (slowest != nullptr && m.head > slowest->second) break;  // someone has not committed it
    if (max_age_ms > 0) {
      Record* r = FindLive(store, StreamEventKey(sub, m.head), ctx);
      if (r != nullptr && ctx.wall_ms - StoredEventTime(r->value()) < max_age_ms) break;
    }
    // The key the prefetch built (once per event), when this event was in its run.
    DropHead(store, sub, m, ctx,
             in_run < built ? std::string_view(keys[static_cast<std::size_t>(in_run)])
                            : std::string_view());
    ++removed;
  }
  return removed;
}

base::Result<void> CheckName(std::string_view what, std::string_view name) {
  auto problem = StreamNameProblem(what, name);
  if (problem.empty()) return {};
  return Fail(ErrorCode::kBadRequest, problem);
}

base::Result<std::int64_t*> GroupCursor(StreamMeta& m, std::string_view sub,
                                        const std::string& group) {
  if (std::int64_t* c = m.CursorOf(group)) return c;
  return Fail(ErrorCode::kNotFound, "consumer group '" + group +
                                        "' does not exist on sub-stream '" + std::string(sub) +
                                        "'; subscribe with the group (it creates it) first");
}

}  // namespace

base::Result<MapResult> OpStreamAppend(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  const std::string_view sub = AfterFirstAt(rq.key);
  const std::int64_t max_events = IntArg(rq, "max_events", 100'000);
  const std::int64_t max_bytes = IntArg(rq, "max_bytes", 64 << 20);
  const base::Millis max_age_ms = IntArg(rq, "max_age_ms", 0);
  const base::Millis dedup_ms = IntArg(rq, "dedup_ms", 600'000);
  if (max_events < 1 || max_bytes < 1 || dedup_ms < 0 || max_age_ms < 0) {
    return Fail(ErrorCode::kBadRequest,
                "a stream needs max_events and max_bytes of at least 1 and non-negative "
                "max_age_ms and dedup_ms");
  }
  if (!rq.keys.empty() && rq.keys.size() != rq.entries.size()) {
    return Fail(ErrorCode::kBadRequest, "an append names either no event ids or one per event (" +
                                            std::to_string(rq.entries.size()) + " events, " +
                                            std::to_string(rq.keys.size()) + " ids)");
  }
  LoadedMeta loaded = LoadMeta(store, sub, ctx);
  StreamMeta& m = loaded.meta;
  // Whatever is removed, the meta record must say so, even when the append then fails.
  bool changed = Trim(store, sub, m, ctx, max_age_ms) > 0;
  auto fail = [&](ErrorCode code, std::string message) -> base::Result<MapResult> {
    if (changed) SaveMeta(store, sub, loaded, ctx);
    return Fail(code, std::move(message));
  };

  // Which events are new: an id seen within the dedup window (or earlier in this batch)
  // answers with the offset it got then.
  MapResult out;
  out.entries.resize(rq.entries.size());
  struct Fresh {
    std::string_view id;
    std::size_t bytes;  // of the encoded event
    std::size_t index;  // in rq.entries
  };
  std::vector<Fresh> fresh;
  fresh.reserve(rq.entries.size());
  std::int64_t fresh_bytes = 0;
  // In a batch with ids: whether event i repeats an id an earlier event of the batch has.
  std::vector<char> repeats;
  if (rq.keys.size() > 1) {
    std::vector<std::size_t> order(rq.keys.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return std::tie(rq.keys[a], a) < std::tie(rq.keys[b], b);
    });
    repeats.assign(rq.keys.size(), 0);
    for (std::size_t j = 1; j < order.size(); ++j) {
      if (rq.keys[order[j]] == rq.keys[order[j - 1]]) repeats[order[j]] = 1;
    }
  }
  std::string key;  // the keys this append looks up and writes, built in one buffer
  // Every table line the lookups below need (each id, each new offset) is fetched first: in a
  // large sub-stream each lookup is a cache miss, and these then overlap.
  for (std::size_t i = 0; i < rq.keys.size(); ++i) {
    if (rq.keys[i].empty()) continue;
    StreamIdKeyInto(key, sub, rq.keys[i]);
    store.Prefetch(key);
  }
  for (std::size_t i = 0; i < rq.entries.size(); ++i) {
    StreamEventKeyInto(key, sub, m.tail + 1 + static_cast<std::int64_t>(i));
    store.Prefetch(key);
  }
  for (std::size_t i = 0; i < rq.entries.size(); ++i) {
    const std::string_view id = rq.keys.empty() ? std::string_view() : rq.keys[i];
    if (!id.empty()) {
      StreamIdKeyInto(key, sub, id);
      if (Record* seen = FindLive(store, key, ctx)) {
        out.entries[i] = {std::string(seen->value()), "dup"};
        continue;
      }
      if (!repeats.empty() && repeats[i]) {
        out.entries[i].second = "dup";  // offset filled below from its first occurrence
        continue;
      }
    }
    const std::size_t bytes =
        StoredEventSize(id, rq.entries[i].first, ctx.wall_ms, rq.entries[i].second);
    fresh_bytes += static_cast<std::int64_t>(bytes);
    fresh.push_back({id, bytes, i});
  }
  const auto count = static_cast<std::int64_t>(fresh.size());
  if (count > max_events || fresh_bytes > max_bytes) {
    return fail(ErrorCode::kBadRequest,
                "a batch of " + std::to_string(count) + " events (" + std::to_string(fresh_bytes) +
                    " bytes) is larger than the sub-stream may hold (" +
                    std::to_string(max_events) + " events, " + std::to_string(max_bytes) +
                    " bytes); append it in smaller batches or configure larger limits");
  }
  auto full = [&] {
    return m.tail - m.head + 1 + count > max_events || m.bytes + fresh_bytes > max_bytes;
  };
  if (const auto* slowest = m.Slowest()) {
    // Room first from events every group committed but max_age_ms still keeps, as many as
    // the new events need.
    while (full() && m.head <= m.tail && m.head <= slowest->second) {
      DropHead(store, sub, m, ctx);
      changed = true;
    }
  }
  if (full()) {
    if (const auto* slowest = m.Slowest()) {
      return fail(ErrorCode::kOverloaded,
                  "stream '" + StreamOfSub(sub) + "' is full (sub-stream '" + std::string(sub) +
                      "' holds " + std::to_string(m.tail - m.head + 1) + " events, " +
                      std::to_string(m.bytes) + " bytes); the slowest group is '" + slowest->first +
                      "', " + std::to_string(m.tail - slowest->second) +
                      " events behind: let its consumers catch up, delete the group, or "
                      "configure larger limits");
    }
    while (full() && m.head <= m.tail) {  // nobody is owed them
      DropHead(store, sub, m, ctx);
      changed = true;
    }
  }
  std::string value;  // each event's encoding, built in one buffer
  for (std::size_t j = 0; j < fresh.size(); ++j) {
    const std::int64_t offset = ++m.tail;
    if (m.head > offset) m.head = offset;
    const Fresh& e = fresh[j];
    std::string offset_text = std::to_string(offset);
    StreamEventKeyInto(key, sub, offset);
    EncodeStoredEventInto(value, e.id, rq.entries[e.index].first, ctx.wall_ms,
                          rq.entries[e.index].second);
    WriteLive(store, key, value, Forever(), ctx, false, std::nullopt);
    if (!e.id.empty() && dedup_ms > 0) {
      StreamIdKeyInto(key, sub, e.id);
      WriteLive(store, key, offset_text, Lasting(dedup_ms), ctx, false, std::nullopt);
    }
    out.entries[e.index].first = std::move(offset_text);
  }
  m.bytes += fresh_bytes;
  // In-batch duplicates take the offset of their first occurrence.
  for (std::size_t i = 0; i < out.entries.size(); ++i) {
    if (!out.entries[i].first.empty()) continue;
    for (const Fresh& e : fresh) {
      if (e.id == rq.keys[i]) out.entries[i].first = out.entries[e.index].first;
    }
  }
  if (count > 0 || changed || !loaded.existed) SaveMeta(store, sub, loaded, ctx);
  out.count = count;
  out.value = std::to_string(m.head) + " " + std::to_string(m.tail);
  return out;
}

base::Result<MapResult> OpStreamMerge(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  const std::string_view sub = AfterFirstAt(rq.key);
  const base::Millis dedup_ms = IntArg(rq, "dedup_ms", 600'000);
  LoadedMeta loaded = LoadMeta(store, sub, ctx);
  StreamMeta& m = loaded.meta;
  bool changed = !loaded.existed;
  for (const auto& group : rq.keys) {
    if (!StreamNameProblem("group", group).empty() || m.CursorOf(group) != nullptr) continue;
    m.groups.emplace_back(group, m.head - 1);  // everything stored is owed to it
    std::sort(m.groups.begin(), m.groups.end());
    changed = true;
  }
  MapResult out;
  std::int64_t discarded = 0;
  for (const auto& [offset_text, bytes] : rq.entries) {
    auto event = DecodeStoredEvent(bytes);
    if (!event) {
      return Fail(ErrorCode::kBadRequest,
                  "streamMerge entry at offset '" + offset_text + "' is not a stored event");
    }
    std::int64_t offset = 0;
    std::from_chars(offset_text.data(), offset_text.data() + offset_text.size(), offset);
    // The same event on both sides: appended before the split (same bytes at the same
    // offset), or known by its id.
    const Record* same = offset > 0 ? FindLive(store, StreamEventKey(sub, offset), ctx) : nullptr;
    if ((same != nullptr && same->value() == bytes) ||
        (!event->id.empty() && FindLive(store, StreamIdKey(sub, event->id), ctx) != nullptr)) {
      ++discarded;
      continue;
    }
    const std::int64_t at = ++m.tail;
    if (m.head > at) m.head = at;
    WriteLive(store, StreamEventKey(sub, at), bytes, Forever(), ctx, false, std::nullopt);
    if (!event->id.empty() && dedup_ms > 0) {
      WriteLive(store, StreamIdKey(sub, event->id), std::to_string(at), Lasting(dedup_ms), ctx,
                false, std::nullopt);
    }
    m.bytes += static_cast<std::int64_t>(bytes.size());
    ++out.count;
    changed = true;
  }
  if (changed) SaveMeta(store, sub, loaded, ctx);
  out.entries.emplace_back("discarded", std::to_string(discarded));
  return out;
}

base::Result<MapResult> OpStreamRead(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  const std::string_view sub = AfterFirstAt(rq.key);
  const std::int64_t from = IntArg(rq, "from", 1);
  const std::int64_t max = std::max<std::int64_t>(1, IntArg(rq, "max", 100));
  const std::int64_t max_bytes = std::max<std::int64_t>(1, IntArg(rq, "max_bytes", 4 << 20));
  LoadedMeta loaded = LoadMeta(store, sub, ctx);
  const StreamMeta& m = loaded.meta;
  MapResult out;
  out.value = std::to_string(m.head) + " " + std::to_string(m.tail);
  out.count = m.head;
  out.flag = from < m.head;
  std::int64_t bytes = 0;
  EventKeys keys;
  std::int64_t built = 0;  // keys of the current run built by PrefetchEvents
  const std::int64_t first = std::max(from, m.head);
  for (std::int64_t offset = first;
       offset <= m.tail && static_cast<std::int64_t>(out.entries.size()) < max && bytes < max_bytes;
       ++offset) {
    const std::int64_t in_run = (offset - first) % kPrefetchRun;
    if (in_run == 0) {
      const std::int64_t wanted = max - static_cast<std::int64_t>(out.entries.size());
      built =
          PrefetchEvents(store, sub, offset, offset + std::min(wanted - 1, m.tail - offset), keys);
    }
    // Past the events wanted when the run began (some were missing): its key is built here.
    std::string& key = keys[static_cast<std::size_t>(in_run)];
    if (in_run >= built) StreamEventKeyInto(key, sub, offset);
    if (Record* r = FindLive(store, key, ctx)) {
      bytes += static_cast<std::int64_t>(r->value().size());
      out.entries.emplace_back(std::to_string(offset), std::string(r->value()));
    }
  }
  return out;
}

namespace {

// The group's lease epoch on `sub` (0: never taken).
std::int64_t LeaseEpoch(RecordStore& store, std::string_view sub, std::string_view group,
                        OpContext& ctx) {
  const Record* r = FindLive(store, StreamLeaseEpochKey(sub, group), ctx);
  std::int64_t epoch = 0;
  if (r != nullptr)
    std::from_chars(r->value().data(), r->value().data() + r->value().size(), epoch);
  return epoch;
}

}  // namespace

base::Result<MapResult> OpStreamCommit(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  const std::string_view sub = AfterFirstAt(rq.key);
  const std::string group = StringArg(rq, "group");
  const std::string consumer = StringArg(rq, "consumer");
  const std::int64_t offset = IntArg(rq, "offset", 0);
  if (auto ok = CheckName("group", group); !ok) return std::unexpected(ok.error());
  LoadedMeta loaded = LoadMeta(store, sub, ctx);
  StreamMeta& m = loaded.meta;
  auto cursor = GroupCursor(m, sub, group);
  if (!cursor) return std::unexpected(cursor.error());
  if (offset > m.tail) {
    return Fail(ErrorCode::kBadRequest, "cannot commit offset " + std::to_string(offset) +
                                            " of sub-stream '" + std::string(sub) +
                                            "': its last offset is " + std::to_string(m.tail));
  }
  if (!consumer.empty()) {
    Record* lease = FindLive(store, StreamLeaseKey(sub, group), ctx);
    if (lease == nullptr || lease->value() != consumer) {
      return Fail(ErrorCode::kConflict,
                  "consumer '" + consumer + "' no longer holds group '" + group +
                      "''s lease on sub-stream '" + std::string(sub) + "' (" +
                      (lease ? "'" + std::string(lease->value()) + "' holds it" : "it expired") +
                      "); its uncommitted events will be delivered again");
    }
    // The holding that read these events: a lease that lapsed and was taken again (by another
    // consumer meanwhile, or by this one) is a later holding, whose view this commit is not.
    const std::int64_t epoch = IntArg(rq, "epoch", 0);
    if (const std::int64_t now = LeaseEpoch(store, sub, group, ctx); epoch != 0 && epoch != now) {
      return Fail(ErrorCode::kConflict,
                  fmt::format("consumer '{}' read these events of sub-stream '{}' under group "
                              "'{}''s lease epoch {}, but the lease lapsed and was taken again "
                              "since (epoch {}); its uncommitted events will be delivered again",
                              consumer, sub, group, epoch, now));
    }
  }
  MapResult out;
  if (Record* lease = FindLive(store, StreamLeaseKey(sub, group), ctx);
      lease != nullptr && !consumer.empty() && rq.argument.GetInt64("ttl_ms")) {
    // A commit renews the committer's lease: a consumer busy with a long batch keeps it.
    WriteLive(store, StreamLeaseKey(sub, group), consumer,
              Lasting(std::max<base::Millis>(1, IntArg(rq, "ttl_ms", 10'000))), ctx, true,
              std::nullopt);
  }
  out.flag = offset > **cursor;
  if (out.flag) {
    **cursor = offset;
    Trim(store, sub, m, ctx, IntArg(rq, "max_age_ms", 0));
    SaveMeta(store, sub, loaded, ctx);
  }
  out.count = *m.CursorOf(group);
  return out;
}

base::Result<MapResult> OpStreamLease(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  const std::string_view sub = AfterFirstAt(rq.key);
  const std::string group = StringArg(rq, "group");
  const std::string consumer = StringArg(rq, "consumer");
  const base::Millis ttl_ms = IntArg(rq, "ttl_ms", 10'000);
  if (auto ok = CheckName("group", group); !ok) return std::unexpected(ok.error());
  if (auto ok = CheckName("consumer", consumer); !ok) return std::unexpected(ok.error());
  if (ttl_ms < 1) return Fail(ErrorCode::kBadRequest, "a lease needs a TTL of at least 1 ms");
  LoadedMeta loaded = LoadMeta(store, sub, ctx);
  auto cursor = GroupCursor(loaded.meta, sub, group);
  if (!cursor) return std::unexpected(cursor.error());
  const std::string key = StreamLeaseKey(sub, group);
  Record* lease = FindLive(store, key, ctx);
  MapResult out;
  out.count = **cursor;
  if (rq.argument.GetBool("release").value_or(false)) {
    if (lease != nullptr && lease->value() == consumer)
      RemoveLive(store, *lease, ctx, EntryEventType::kRemoved);
    out.value = "-";
    return out;
  }
  if (lease != nullptr && lease->value() != consumer) {
    out.value = std::string(lease->value());
    return out;
  }
  std::int64_t epoch = LeaseEpoch(store, sub, group, ctx);
  if (lease == nullptr) {  // taken (not renewed): a new epoch
    const std::string epoch_key = StreamLeaseEpochKey(sub, group);
    ++epoch;
    WriteLive(store, epoch_key, std::to_string(epoch), Forever(), ctx, epoch > 1, std::nullopt);
  }
  WriteLive(store, key, consumer, Lasting(ttl_ms), ctx, lease != nullptr, std::nullopt);
  out.flag = true;
  out.value = consumer;
  out.entries.emplace_back("epoch", std::to_string(epoch));
  return out;
}

base::Result<MapResult> OpStreamGroup(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  const std::string_view sub = AfterFirstAt(rq.key);
  const std::string group = StringArg(rq, "group");
  const std::string action = StringArg(rq, "action");
  if (auto ok = CheckName("group", group); !ok) return std::unexpected(ok.error());
  LoadedMeta loaded = LoadMeta(store, sub, ctx);
  StreamMeta& m = loaded.meta;
  MapResult out;
  if (action == "delete") {
    auto it = std::find_if(m.groups.begin(), m.groups.end(),
                           [&](const auto& g) { return g.first == group; });
    if (it == m.groups.end()) return out;
    m.groups.erase(it);
    if (Record* lease = FindLive(store, StreamLeaseKey(sub, group), ctx)) {
      RemoveLive(store, *lease, ctx, EntryEventType::kRemoved);
    }
    if (Record* state = FindLive(store, StreamGroupStateKey(sub, group), ctx)) {
      RemoveLive(store, *state, ctx, EntryEventType::kRemoved);  // another API's group
    }
    Trim(store, sub, m, ctx, IntArg(rq, "max_age_ms", 0));
    SaveMeta(store, sub, loaded, ctx);
    out.flag = true;
    return out;
  }
  if (action != "oldest" && action != "latest") {
    return Fail(ErrorCode::kBadRequest,
                "unknown stream group action '" + action + "'; use oldest, latest or delete");
  }
  if (std::int64_t* cursor = m.CursorOf(group)) {
    out.count = *cursor;
    return out;
  }
  const std::int64_t cursor = action == "oldest" ? m.head - 1 : m.tail;
  auto at = std::lower_bound(m.groups.begin(), m.groups.end(), group,
                             [](const auto& g, const std::string& name) { return g.first < name; });
  m.groups.emplace(at, group, cursor);
  SaveMeta(store, sub, loaded, ctx);
  out.flag = true;
  out.count = cursor;
  return out;
}

base::Result<MapResult> OpStreamInfo(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  const std::string_view sub = AfterFirstAt(rq.key);
  LoadedMeta loaded = LoadMeta(store, sub, ctx);
  const StreamMeta& m = loaded.meta;
  auto time_at = [&](std::int64_t offset) -> std::int64_t {
    if (offset < m.head || offset > m.tail) return 0;
    Record* r = FindLive(store, StreamEventKey(sub, offset), ctx);
    return r ? StoredEventTime(r->value()) : 0;
  };
  MapResult out;
  out.value = StreamMetaText(m);
  out.count = time_at(m.head);
  for (const auto& [group, cursor] : m.groups) {
    Record* lease = FindLive(store, StreamLeaseKey(sub, group), ctx);
    out.entries.emplace_back(group, std::to_string(cursor) + " " +
                                        std::to_string(time_at(std::max(cursor + 1, m.head))) +
                                        " " + (lease ? std::string(lease->value()) : "-"));
  }
  return out;
}

base::Result<MapResult> OpStreamJoin(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  const std::string consumer = StringArg(rq, "consumer");
  const base::Millis ttl_ms = IntArg(rq, "ttl_ms", 10'000);
  if (auto ok = CheckName("consumer", consumer); !ok) return std::unexpected(ok.error());
  if (ttl_ms < 1) return Fail(ErrorCode::kBadRequest, "a consumer needs a TTL of at least 1 ms");
  // "<expiry_ms> <consumer>\n" per live consumer.
  std::vector<std::pair<std::string, std::int64_t>> live;
  Record* r = FindLive(store, rq.key, ctx);
  const bool existed = r != nullptr;
  if (r != nullptr) {
    std::string_view in = r->value();
    while (!in.empty()) {
      auto end = in.find('\n');
      if (end == std::string_view::npos) break;
      std::string_view line = in.substr(0, end);
      in.remove_prefix(end + 1);
      auto space = line.find(' ');
      std::int64_t expiry = 0;
      if (space == std::string_view::npos) continue;
      std::from_chars(line.data(), line.data() + space, expiry);
      std::string name(line.substr(space + 1));
      if (expiry > ctx.wall_ms && name != consumer) live.emplace_back(std::move(name), expiry);
    }
  }
  if (!rq.argument.GetBool("leave").value_or(false))
    live.emplace_back(consumer, ctx.wall_ms + ttl_ms);
  std::sort(live.begin(), live.end());
  std::string text;
  std::int64_t last = 0;
  for (const auto& [name, expiry] : live) {
    text += std::to_string(expiry) + " " + name + "\n";
    last = std::max(last, expiry);
  }
  MapResult out;
  if (live.empty()) {
    if (r != nullptr) RemoveLive(store, *r, ctx, EntryEventType::kRemoved);
  } else {  // the record goes by itself when its last consumer's time is up
    WriteLive(store, rq.key, text, Lasting(std::max<base::Millis>(1, last - ctx.wall_ms)), ctx,
              existed, std::nullopt);
  }
  for (auto& [name, expiry] : live)
    out.entries.emplace_back(std::move(name), std::to_string(expiry));
  return out;
}

}  // namespace tessera::map::detail
