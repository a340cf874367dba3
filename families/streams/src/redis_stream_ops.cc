// MapOp::kRedisStream: the Redis stream commands on a stream's one sub-stream (the records and
// the request are described in redis_stream.h). Every command reads what it needs and writes
// each record it changes once, on the partition's owner, so each runs atomically and a
// backup receives one update per record.
//
// Entry IDs grow with offsets (XADD refuses an ID not above the last one), so an ID is found
// by binary search over the stored offsets [head, tail].
#include <algorithm>
#include <charconv>
#include <optional>

#include "redis_stream_state.h"
#include "tessera/map/family.h"
#include "tessera/map/stream_format.h"
#include "tessera/map/stream_storage.h"
#include "tessera/streams/redis_stream.h"

namespace tessera::streams::detail {

using map::AfterFirstAt;
using map::DecodeStoredEvent;
using map::DropHead;
using map::EncodeStoredEvent;
using map::EntryEventType;
using map::FindLive;
using map::Forever;
using map::IntArg;
using map::LoadedMeta;
using map::LoadMeta;
using map::MapOp;
using map::MapResult;
using map::OpContext;
using map::Record;
using map::RecordStore;
using map::RemoveLive;
using map::SaveMeta;
using map::StoredEvent;
using map::StoredEventKey;
using map::StoredEventTime;
using map::StreamEventKey;
using map::StreamLeaseKey;
using map::StreamMeta;
using map::StreamMetaKey;
using map::StreamNameProblem;
using map::StreamOfSub;
using map::StringArg;
using map::ValueKind;
using map::WriteLive;
using map::WriteOptions;

namespace {

using base::ErrorCode;
using base::Fail;

// The most entries one command removes (trim, DEL): a command's removals reach each backup as
// one message, which must stay well under the 16 MiB frame limit (~100 bytes per removal).
constexpr std::int64_t kMaxRemovals = 50'000;

constexpr const char* kNeedsKey =
    "The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use "
    "the MKSTREAM option to create an empty stream automatically.";

bool BoolArg(const MapRequest& rq, std::string_view name) {
  return rq.argument.GetBool(name).value_or(false);
}

// One stream as a command finds it.
struct XStream {
  RecordStore& store;
  OpContext& ctx;
  std::string_view sub;
  std::string name;  // the Redis key
  LoadedMeta meta;
  RedisStreamMeta x;
  bool x_existed = false;
  bool meta_changed = false;
  bool x_changed = false;

  StreamMeta& m() { return meta.meta; }
  bool exists() const { return meta.existed; }
  std::int64_t length() const { return meta.meta.tail - meta.meta.head + 1; }

  // The stored bytes of the entry at `offset` (nullptr if not stored).
  const Record* RecordAt(std::int64_t offset) {
    if (offset < m().head || offset > m().tail) return nullptr;
    return FindLive(store, StreamEventKey(sub, offset), ctx);
  }
  // The stored entry at `offset` (nullopt if not stored).
  std::optional<StoredEvent> EntryAt(std::int64_t offset) {
    const Record* r = RecordAt(offset);
    return r == nullptr ? std::nullopt : DecodeStoredEvent(r->value());
  }
  // The ID of the entry at `offset`. An event appended through the Tessera API has none: it
  // reads as <append time>-<offset>. A missing or damaged record reads as 0-0, which keeps a
  // binary search from crashing, not right.
  StreamId IdAt(std::int64_t offset) {
    const Record* r = RecordAt(offset);
    if (r == nullptr) return {};
    if (auto key = StoredEventKey(r->value())) {
      if (auto id = ParseStreamId(*key)) return *id;
    }
    return {static_cast<std::uint64_t>(std::max<std::int64_t>(0, StoredEventTime(r->value()))),
            static_cast<std::uint64_t>(offset)};
  }
  // (ID, fields) of the entry at `offset` into `out`; false if it is not stored.
  bool AddEntry(MapResult& out, std::int64_t offset) {
    auto e = EntryAt(offset);
    if (!e) return false;
    out.entries.emplace_back(IdAt(offset).Text(), std::move(e->payload));
    return true;
  }
  // The first offset whose ID is above `id` (strictly, or at least with `inclusive`);
  // tail + 1 if none.
  std::int64_t FirstAbove(const StreamId& id, bool inclusive = false) {
    std::int64_t lo = m().head, hi = m().tail + 1;
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      const StreamId at = IdAt(mid);
      if (inclusive ? at >= id : at > id) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    return lo;
  }
  // Drops the oldest entry (trimming: as in Redis, max-deleted-entry-id does not move).
  void Drop() {
    DropHead(store, sub, m(), ctx);
    meta_changed = true;
  }
  // Entries every group acknowledged (all of them without groups) may go.
  bool HeadRemovable() const {
    const auto* slowest = meta.meta.Slowest();
    return meta.meta.head <= meta.meta.tail &&
           (slowest == nullptr || meta.meta.head <= slowest->second);
  }
  void Save() {
    if (meta_changed) SaveMeta(store, sub, meta, ctx);
    if (x_changed) {
      WriteLive(store, RedisStreamMetaKey(sub), EncodeRedisStreamMeta(x), Forever(), ctx, x_existed,
                std::nullopt);
    }
    meta.existed = meta.existed || meta_changed;
    x_existed = x_existed || x_changed;
    meta_changed = x_changed = false;
  }
};

XStream Load(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  const std::string_view sub = AfterFirstAt(rq.key);
  XStream s{store, ctx, sub, StreamOfSub(sub), LoadMeta(store, sub, ctx), {}};
  if (Record* r = FindLive(store, RedisStreamMetaKey(sub), ctx)) {
    s.x = DecodeRedisStreamMeta(r->value());
    s.x_existed = true;
  } else if (s.meta.existed && s.meta.meta.tail > 0) {
    s.x.last_id = s.IdAt(s.meta.meta.tail);  // written through the Tessera API
  }
  return s;
}

// Removes entries from the front as MAXLEN or MINID asks, as far as retention allows.
std::int64_t ApplyTrim(XStream& s, const MapRequest& rq) {
  const std::string trim = StringArg(rq, "trim");
  if (trim.empty()) return 0;
  const std::int64_t maxlen = IntArg(rq, "maxlen", 0);
  const auto minid = ParseStreamId(StringArg(rq, "minid"));
  // As Redis: `~` removes at most LIMIT entries per call (default 100 x its node size, 10,000);
  // `=` removes all it may, up to kMaxRemovals per call.
  const std::int64_t asked =
      IntArg(rq, "limit", rq.argument.GetBool("approximate").value_or(false) ? 10'000 : 0);
  const std::int64_t limit = asked > 0 ? std::min(asked, kMaxRemovals) : kMaxRemovals;
  std::int64_t removed = 0;
  while (s.HeadRemovable() && (limit <= 0 || removed < limit)) {
    if (trim == "maxlen" ? s.length() <= maxlen : (!minid || s.IdAt(s.m().head) >= *minid)) break;
    s.Drop();
    ++removed;
  }
  return removed;
}

base::Result<StreamId> NextId(const XStream& s, const std::string& arg, std::int64_t now_ms) {
  const StreamId last = s.x.last_id;
  constexpr const char* kSmaller =
      "The ID specified in XADD is equal or smaller than the target stream top item";
  if (last == StreamId::Max()) {
    return Fail(ErrorCode::kBadRequest,
                "The stream has exhausted the last possible ID, unable to add more items");
  }
  // The first ID of millisecond `ms` above the last (`carry`: or the next millisecond's).
  auto after_last = [&](std::uint64_t ms, bool carry) -> base::Result<StreamId> {
    if (ms > last.ms) return StreamId{ms, 0};
    if (ms < last.ms) return Fail(ErrorCode::kBadRequest, kSmaller);
    if (last.seq == ~std::uint64_t{0}) {
      return carry ? base::Result<StreamId>(StreamId{last.ms + 1, 0})
                   : Fail(ErrorCode::kBadRequest, kSmaller);
    }
    return StreamId{ms, last.seq + 1};
  };
  if (arg == "*") {
    const auto now = static_cast<std::uint64_t>(std::max<std::int64_t>(0, now_ms));
    return after_last(std::max(now, last.ms), true);
  }
  if (arg.size() > 2 && arg.ends_with("-*")) {
    auto ms = ParseStreamId(arg.substr(0, arg.size() - 2));
    if (!ms || arg.find('-') != arg.size() - 2) {
      return Fail(ErrorCode::kBadRequest, "Invalid stream ID specified as stream command argument");
    }
    auto id = after_last(ms->ms, false);
    if (id && *id == StreamId{}) return StreamId{0, 1};
    return id;
  }
  auto id = ParseStreamId(arg);
  if (!id) {
    return Fail(ErrorCode::kBadRequest, "Invalid stream ID specified as stream command argument");
  }
  if (*id == StreamId{}) {
    return Fail(ErrorCode::kBadRequest, "The ID specified in XADD must be greater than 0-0");
  }
  if (*id <= last) return Fail(ErrorCode::kBadRequest, kSmaller);
  return *id;
}

base::Result<MapResult> Add(XStream& s, const MapRequest& rq) {
  MapResult out;
  if (!s.exists() && BoolArg(rq, "nomkstream")) return out;
  const std::int64_t max_events = IntArg(rq, "max_events", 1'000'000);
  const std::int64_t max_bytes = IntArg(rq, "max_bytes", 256 << 20);
  if (max_events < 1 || max_bytes < 1) {
    return Fail(ErrorCode::kBadRequest, "a stream needs max_events and max_bytes of at least 1");
  }
  auto id = NextId(s, StringArg(rq, "id"), s.ctx.wall_ms);
  if (!id) return std::unexpected(id.error());
  const std::string bytes = EncodeStoredEvent(StoredEvent{"", id->Text(), s.ctx.wall_ms, rq.value});
  const auto size = static_cast<std::int64_t>(bytes.size());
  if (size > max_bytes) {
    return Fail(ErrorCode::kBadRequest, "an entry of " + std::to_string(size) +
                                            " bytes is larger than stream '" + s.name +
                                            "' may hold (" + std::to_string(max_bytes) + " bytes)");
  }
  StreamMeta& m = s.m();
  auto full = [&] { return s.length() + 1 > max_events || m.bytes + size > max_bytes; };
  while (full() && s.HeadRemovable()) s.Drop();  // room from what every group acknowledged
  if (full()) {
    s.Save();  // what was removed to make room stays removed: the meta record must say so
    const auto* slowest = m.Slowest();
    return Fail(ErrorCode::kOverloaded,
                "stream '" + s.name + "' is full (" + std::to_string(s.length()) + " entries, " +
                    std::to_string(m.bytes) + " bytes)" +
                    (slowest == nullptr ? std::string()
                                        : " and group '" + slowest->first + "' has " +
                                              std::to_string(m.tail - slowest->second) +
                                              " entries not yet read or acknowledged") +
                    "; let its consumers catch up (XREADGROUP, XACK), destroy the group, or "
                    "raise the stream limits");
  }
  const std::int64_t offset = ++m.tail;
  if (m.head > offset) m.head = offset;
  WriteLive(s.store, StreamEventKey(s.sub, offset), bytes, Forever(), s.ctx, false, std::nullopt);
  m.bytes += size;
  s.x.last_id = *id;
  ++s.x.entries_added;
  // The incarnation its keyspace entry names (an append that sent one adopts an unknown one).
  if (const std::int64_t epoch = IntArg(rq, "epoch", 0); epoch != 0 && s.x.epoch == 0) {
    s.x.epoch = epoch;
  }
  s.meta_changed = s.x_changed = true;
  out.flag = !s.exists();
  ApplyTrim(s, rq);
  s.Save();
  out.value = id->Text();
  out.count = s.x.epoch;  // the incarnation appended to (the RESP front-end matches its entry)
  return out;
}

base::Result<MapResult> Range(XStream& s, const MapRequest& rq) {
  MapResult out;
  auto start = ParseStreamId(StringArg(rq, "start"));
  auto end = ParseStreamId(StringArg(rq, "end"));
  const std::int64_t count = IntArg(rq, "count", 0);
  if (!start || !end) return Fail(ErrorCode::kBadRequest, "range needs start and end IDs");
  if (!s.exists() || *start > *end) return out;
  auto room = [&] { return count <= 0 || static_cast<std::int64_t>(out.entries.size()) < count; };
  if (!BoolArg(rq, "rev")) {
    for (std::int64_t off = s.FirstAbove(*start, true); off <= s.m().tail && room(); ++off) {
      if (s.IdAt(off) > *end) break;
      s.AddEntry(out, off);
    }
  } else {
    for (std::int64_t off = s.FirstAbove(*end) - 1; off >= s.m().head && room(); --off) {
      if (s.IdAt(off) < *start) break;
      s.AddEntry(out, off);
    }
  }
  return out;
}

base::Result<MapResult> Read(XStream& s, const MapRequest& rq) {
  MapResult out;
  out.flag = s.exists();
  out.value = s.x.last_id.Text();
  const std::string after = StringArg(rq, "after");
  const std::int64_t count = IntArg(rq, "count", 0);
  if (!s.exists() || after == "$") return out;
  auto id = ParseStreamId(after);
  if (!id) return Fail(ErrorCode::kBadRequest, "read needs an ID to read after");
  for (std::int64_t off = s.FirstAbove(*id);
       off <= s.m().tail && (count <= 0 || static_cast<std::int64_t>(out.entries.size()) < count);
       ++off) {
    s.AddEntry(out, off);
  }
  return out;
}

// A group as a command finds it.
struct XGroup {
  std::string name;
  RedisStreamGroup state;
  bool existed = false;
  bool changed = false;
};

std::optional<XGroup> LoadGroup(XStream& s, const std::string& name) {
  Record* r = FindLive(s.store, RedisStreamGroupKey(s.sub, name), s.ctx);
  if (r != nullptr) return XGroup{name, DecodeRedisStreamGroup(r->value()), true};
  const std::int64_t* cursor = s.m().CursorOf(name);
  if (cursor == nullptr) return std::nullopt;
  // A group the Tessera API created: everything up to its cursor counts as delivered.
  XGroup g{name, {}, false, true};
  g.state.last_offset = *cursor;
  if (*cursor >= s.m().head) g.state.last_id = s.IdAt(*cursor);
  return g;
}

// Saves the group and moves its Tessera cursor up to what it acknowledged.
void SaveGroup(XStream& s, XGroup& g) {
  if (!g.changed) return;
  WriteLive(s.store, RedisStreamGroupKey(s.sub, g.name), EncodeRedisStreamGroup(g.state), Forever(),
            s.ctx, g.existed, std::nullopt);
  if (std::int64_t* cursor = s.m().CursorOf(g.name)) {
    const std::int64_t floor = std::min(g.state.AckFloor(), s.m().tail);
    if (floor > *cursor) {
      *cursor = floor;
      s.meta_changed = true;
    }
  }
  s.Save();
}

base::Result<XGroup> NeedGroup(XStream& s, const MapRequest& rq, const std::string& what) {
  const std::string group = StringArg(rq, "group");
  std::optional<XGroup> g = s.exists() ? LoadGroup(s, group) : std::nullopt;
  if (!g) {
    return Fail(ErrorCode::kNotFound,
                "NOGROUP No such key '" + s.name + "' or consumer group '" + group + "'" + what);
  }
  return std::move(*g);
}

base::Result<MapResult> CreateGroup(XStream& s, const MapRequest& rq) {
  MapResult out;
  const std::string group = StringArg(rq, "group");
  if (auto problem = StreamNameProblem("group", group); !problem.empty()) {
    return Fail(ErrorCode::kBadRequest, problem);
  }
  if (!s.exists()) {
    if (!BoolArg(rq, "mkstream")) return Fail(ErrorCode::kBadRequest, kNeedsKey);
    out.flag = true;
    s.meta_changed = s.x_changed = true;
  }
  if (LoadGroup(s, group)) {
    return Fail(ErrorCode::kConflict, "BUSYGROUP Consumer Group name already exists");
  }
  XGroup g{group, {}, false, true};
  const std::string id = StringArg(rq, "id");
  if (id == "$") {
    g.state.last_id = s.x.last_id;
    g.state.last_offset = s.m().tail;
  } else {
    auto parsed = ParseStreamId(id);
    if (!parsed) {
      return Fail(ErrorCode::kBadRequest, "Invalid stream ID specified as stream command argument");
    }
    g.state.last_id = *parsed;
    g.state.last_offset = s.FirstAbove(*parsed) - 1;
    g.state.entries_read_known = false;
  }
  StreamMeta& m = s.m();
  const std::int64_t cursor = std::clamp(g.state.last_offset, m.head - 1, m.tail);
  auto at = std::lower_bound(m.groups.begin(), m.groups.end(), group,
                             [](const auto& e, const std::string& n) { return e.first < n; });
  m.groups.emplace(at, group, cursor);
  s.meta_changed = true;
  SaveGroup(s, g);
  return out;
}

base::Result<MapResult> DestroyGroup(XStream& s, const MapRequest& rq) {
  MapResult out;
  if (!s.exists()) return Fail(ErrorCode::kBadRequest, kNeedsKey);
  const std::string group = StringArg(rq, "group");
  if (!LoadGroup(s, group)) return out;
  for (const std::string& key : {RedisStreamGroupKey(s.sub, group), StreamLeaseKey(s.sub, group)}) {
    if (Record* r = FindLive(s.store, key, s.ctx)) {
      RemoveLive(s.store, *r, s.ctx, EntryEventType::kRemoved);
    }
  }
  std::erase_if(s.m().groups, [&](const auto& e) { return e.first == group; });
  s.meta_changed = true;
  s.Save();
  out.count = 1;
  return out;
}

base::Result<MapResult> Consumers(XStream& s, const MapRequest& rq, bool create) {
  MapResult out;
  if (!s.exists()) return Fail(ErrorCode::kBadRequest, kNeedsKey);
  const std::string group = StringArg(rq, "group");
  const std::string consumer = StringArg(rq, "consumer");
  auto g = LoadGroup(s, group);
  if (!g) {
    return Fail(ErrorCode::kNotFound,
                "NOGROUP No such consumer group '" + group + "' for key name '" + s.name + "'");
  }
  if (create) {
    bool created = false;
    g->state.Consumer(consumer, s.ctx.wall_ms, &created);
    out.count = created ? 1 : 0;
    g->changed = created;
  } else if (g->state.FindConsumer(consumer) != nullptr) {
    out.count = g->state.PendingOf(consumer);
    std::erase_if(g->state.pending, [&](const PendingEntry& p) { return p.consumer == consumer; });
    std::erase_if(g->state.consumers, [&](const StreamConsumer& c) { return c.name == consumer; });
    g->changed = true;
  }
  SaveGroup(s, *g);
  return out;
}

base::Result<MapResult> ReadGroup(XStream& s, const MapRequest& rq) {
  auto g = NeedGroup(s, rq, " in XREADGROUP with GROUP option");
  if (!g) return std::unexpected(g.error());
  RedisStreamGroup& st = g->state;
  const std::string consumer = StringArg(rq, "consumer");
  const std::string after = StringArg(rq, "after");
  const std::int64_t count = IntArg(rq, "count", 0);
  const std::int64_t now = s.ctx.wall_ms;
  MapResult out;
  auto room = [&] { return count <= 0 || static_cast<std::int64_t>(out.entries.size()) < count; };
  bool created = false;
  StreamConsumer& c = st.Consumer(consumer, now, &created);
  g->changed = created;
  if (after == ">") {
    const bool noack = BoolArg(rq, "noack");
    for (std::int64_t off = std::max(st.last_offset + 1, s.m().head); off <= s.m().tail && room();
         ++off) {
      st.last_offset = off;
      g->changed = true;
      const StreamId id = s.IdAt(off);
      if (id <= st.last_id) continue;  // below an ID the group was created at
      if (!s.AddEntry(out, off)) continue;
      st.last_id = id;
      st.entries_read_known = true;
      if (!noack) st.Deliver(off, id, now, consumer);
    }
  } else {
    auto from = ParseStreamId(after);
    if (!from) return Fail(ErrorCode::kBadRequest, "readgroup needs '>' or an ID to read after");
    for (auto& p : st.pending) {
      if (!room()) break;
      if (p.consumer != consumer || p.id <= *from) continue;
      if (!s.AddEntry(out, p.offset)) {
        out.entries.emplace_back(p.id.Text(), "");  // no longer stored: [ID, nil], as Redis
        continue;
      }
      p.delivery_ms = now;
      ++p.deliveries;
      g->changed = true;
    }
  }
  // Seen times are kept to the second unless something else changed: an idle consumer
  // polling with BLOCK does not rewrite the group on every poll.
  if (g->changed || now - c.seen_ms >= 1000) {
    c.seen_ms = now;
    if (!out.entries.empty()) c.active_ms = now;
    g->changed = true;
  }
  SaveGroup(s, *g);
  out.flag = true;
  return out;
}

base::Result<MapResult> Ack(XStream& s, const MapRequest& rq) {
  MapResult out;
  auto g = s.exists() ? LoadGroup(s, StringArg(rq, "group")) : std::nullopt;
  if (!g) return out;
  for (const auto& text : rq.keys) {
    auto id = ParseStreamId(text);
    if (PendingEntry* p = id ? g->state.FindPending(*id) : nullptr) {
      g->state.pending.erase(g->state.pending.begin() + (p - g->state.pending.data()));
      ++out.count;
      g->changed = true;
    }
  }
  SaveGroup(s, *g);
  return out;
}

base::Result<MapResult> Pending(XStream& s, const MapRequest& rq) {
  auto g = NeedGroup(s, rq, "");
  if (!g) return std::unexpected(g.error());
  const RedisStreamGroup& st = g->state;
  MapResult out;
  if (!rq.argument.GetString("start")) {  // the summary
    out.count = static_cast<std::int64_t>(st.pending.size());
    if (!st.pending.empty()) {
      out.value = st.pending.front().id.Text() + " " + st.pending.back().id.Text();
    }
    for (const auto& c : st.consumers) {
      if (auto n = st.PendingOf(c.name); n > 0) out.entries.emplace_back(c.name, std::to_string(n));
    }
    return out;
  }
  auto start = ParseStreamId(StringArg(rq, "start"));
  auto end = ParseStreamId(StringArg(rq, "end"));
  if (!start || !end) return Fail(ErrorCode::kBadRequest, "pending needs start and end IDs");
  const std::int64_t count = IntArg(rq, "count", 0);
  const std::string consumer = StringArg(rq, "consumer");
  const std::int64_t min_idle = IntArg(rq, "idle", 0);
  for (const auto& p : st.pending) {
    if (static_cast<std::int64_t>(out.entries.size()) >= count) break;
    if (p.id < *start || (!consumer.empty() && p.consumer != consumer)) continue;
    if (p.id > *end) break;
    const std::int64_t idle = std::max<std::int64_t>(0, s.ctx.wall_ms - p.delivery_ms);
    if (idle < min_idle) continue;
    out.entries.emplace_back(
        p.id.Text(), std::to_string(idle) + " " + std::to_string(p.deliveries) + " " + p.consumer);
  }
  return out;
}

// Gives the pending entry `p` to `consumer` (XCLAIM and XAUTOCLAIM); false when its entry is
// no longer stored (it leaves the pending list then).
bool ClaimOne(XStream& s, PendingEntry& p, const std::string& consumer, std::int64_t delivery_ms,
              std::int64_t retrycount, bool justid, MapResult& out) {
  const std::size_t before = out.entries.size();
  if (!s.AddEntry(out, p.offset)) return false;
  if (justid) out.entries[before].second.clear();
  p.consumer = consumer;
  p.delivery_ms = delivery_ms;
  if (retrycount >= 0) {
    p.deliveries = retrycount;
  } else if (!justid) {
    ++p.deliveries;
  }
  return true;
}

// The claiming consumer was seen now (and active, if it got entries); saves the group.
MapResult FinishClaim(XStream& s, XGroup& g, const std::string& consumer, std::int64_t now,
                      MapResult out) {
  StreamConsumer& c = g.state.Consumer(consumer, now);
  c.seen_ms = now;
  if (!out.entries.empty()) c.active_ms = now;
  g.changed = true;
  SaveGroup(s, g);
  return out;
}

base::Result<MapResult> Claim(XStream& s, const MapRequest& rq) {
  auto g = NeedGroup(s, rq, "");
  if (!g) return std::unexpected(g.error());
  RedisStreamGroup& st = g->state;
  const std::string consumer = StringArg(rq, "consumer");
  const std::int64_t now = s.ctx.wall_ms;
  const std::int64_t min_idle = IntArg(rq, "min_idle", 0);
  const std::int64_t retrycount = IntArg(rq, "retrycount", -1);
  const bool justid = BoolArg(rq, "justid");
  std::int64_t delivery_ms = now;
  if (auto t = rq.argument.GetInt64("time")) delivery_ms = std::min(*t, now);
  if (auto idle = rq.argument.GetInt64("idle")) delivery_ms = now - *idle;
  MapResult out;
  for (const auto& text : rq.keys) {
    auto id = ParseStreamId(text);
    if (!id) continue;
    PendingEntry* p = st.FindPending(*id);
    if (p == nullptr) {
      if (!BoolArg(rq, "force")) continue;
      const std::int64_t off = s.FirstAbove(*id, true);
      if (off > s.m().tail || s.IdAt(off) != *id) continue;
      st.Deliver(off, *id, now, consumer);
      p = st.FindPending(*id);
      // An entry the group had acknowledged is owed again: the cursor moves back before it
      // (it is still stored, so retention keeps it from now on).
      if (std::int64_t* cursor = s.m().CursorOf(g->name); cursor != nullptr && *cursor >= off) {
        *cursor = off - 1;
        s.meta_changed = true;
      }
    } else if (min_idle > 0 && now - p->delivery_ms < min_idle) {
      continue;
    }
    if (!ClaimOne(s, *p, consumer, delivery_ms, retrycount, justid, out)) {
      st.pending.erase(st.pending.begin() + (p - st.pending.data()));
    }
  }
  if (auto last = ParseStreamId(StringArg(rq, "lastid")); last && *last > st.last_id) {
    st.last_id = *last;
    st.last_offset = std::max(st.last_offset, s.FirstAbove(*last) - 1);
  }
  return FinishClaim(s, *g, consumer, now, std::move(out));
}

base::Result<MapResult> AutoClaim(XStream& s, const MapRequest& rq) {
  auto g = NeedGroup(s, rq, "");
  if (!g) return std::unexpected(g.error());
  RedisStreamGroup& st = g->state;
  const std::string consumer = StringArg(rq, "consumer");
  const std::int64_t now = s.ctx.wall_ms;
  const std::int64_t min_idle = IntArg(rq, "min_idle", 0);
  const std::int64_t count = std::max<std::int64_t>(1, IntArg(rq, "count", 100));
  const bool justid = BoolArg(rq, "justid");
  const StreamId start = ParseStreamId(StringArg(rq, "start")).value_or(StreamId{});
  std::int64_t attempts = count * 10;  // as Redis: at most COUNT * 10 pending entries looked at
  MapResult out;
  std::string deleted;
  auto it = std::lower_bound(st.pending.begin(), st.pending.end(), start,
                             [](const PendingEntry& p, const StreamId& id) { return p.id < id; });
  while (it != st.pending.end() && attempts-- > 0 &&
         static_cast<std::int64_t>(out.entries.size()) < count) {
    if (now - it->delivery_ms < min_idle) {
      ++it;
    } else if (ClaimOne(s, *it, consumer, now, -1, justid, out)) {
      ++it;
    } else {
      deleted += " " + it->id.Text();  // no longer stored: leaves the pending list
      it = st.pending.erase(it);
    }
  }
  out.value = (it == st.pending.end() ? "0-0" : it->id.Text()) + deleted;
  return FinishClaim(s, *g, consumer, now, std::move(out));
}

base::Result<MapResult> Info(XStream& s, const MapRequest& rq, const std::string& what) {
  if (!s.exists()) return Fail(ErrorCode::kNotFound, "no such key");
  MapResult out;
  auto add = [&](std::string field, std::string value) {
    out.entries.emplace_back(std::move(field), std::move(value));
  };
  const std::int64_t now = s.ctx.wall_ms;
  if (what == "stream") {
    const std::int64_t length = std::max<std::int64_t>(0, s.length());
    add("length", std::to_string(length));
    add("radix-tree-keys", std::to_string(length));  // Tessera keeps one record per entry
    add("radix-tree-nodes", std::to_string(length));
    add("last-generated-id", s.x.last_id.Text());
    add("max-deleted-entry-id", s.x.max_deleted.Text());
    add("entries-added", std::to_string(s.x.entries_added));
    add("recorded-first-entry-id", length > 0 ? s.IdAt(s.m().head).Text() : "0-0");
    add("groups", std::to_string(s.m().groups.size()));
    for (auto [field, offset] :
         {std::pair{"first-entry", s.m().head}, {"last-entry", s.m().tail}}) {
      auto e = s.EntryAt(offset);
      add(field, e ? e->key : "");
      add(std::string(field) + "-fields", e ? e->payload : "");
    }
    return out;
  }
  if (what == "groups") {
    for (const auto& [name, cursor] : s.m().groups) {
      auto g = LoadGroup(s, name);
      if (!g) continue;
      const RedisStreamGroup& st = g->state;
      add("name", name);
      add("consumers", std::to_string(st.consumers.size()));
      add("pending", std::to_string(st.pending.size()));
      add("last-delivered-id", st.last_id.Text());
      add("entries-read", st.entries_read_known ? std::to_string(st.last_offset) : "");
      add("lag", std::to_string(std::max<std::int64_t>(0, s.m().tail - st.last_offset)));
    }
    return out;
  }
  const std::string group = StringArg(rq, "group");
  auto g = LoadGroup(s, group);
  if (!g) {
    return Fail(ErrorCode::kNotFound,
                "NOGROUP No such consumer group '" + group + "' for key name '" + s.name + "'");
  }
  for (const auto& c : g->state.consumers) {
    add("name", c.name);
    add("pending", std::to_string(g->state.PendingOf(c.name)));
    add("idle", std::to_string(std::max<std::int64_t>(0, now - c.seen_ms)));
    add("inactive",
        std::to_string(c.active_ms > 0 ? std::max<std::int64_t>(0, now - c.active_ms) : -1));
  }
  return out;
}

}  // namespace

namespace {

// DEL: every record of the stream in this partition; count = existed.
base::Result<MapResult> Delete(XStream& s, const MapRequest& rq, RecordStore& store,
                               OpContext& ctx) {
  MapResult out;
  // A stream of the Tessera API is not a key, unless its keyspace entry says it is one (one
  // merged after a split brain no longer has the mark of XADD).
  if (!s.exists() || (!s.x_existed && !BoolArg(rq, "keyspace_entry"))) return out;
  // Sent for an incarnation whose keyspace entry went: a newer stream under the same key
  // (made since, with an epoch of its own) stays.
  if (const std::int64_t epoch = IntArg(rq, "epoch", 0);
      epoch != 0 && s.x.epoch != 0 && s.x.epoch != epoch) {
    return out;
  }
  if (s.length() > kMaxRemovals && BoolArg(rq, "all")) {
    // In steps: the oldest kMaxRemovals entries now, flag = call again for the rest.
    const std::int64_t last = s.m().head + kMaxRemovals - 1;
    for (std::int64_t off = s.m().head; off <= last; ++off) {
      if (Record* r = FindLive(store, StreamEventKey(s.sub, off), ctx)) {
        s.m().bytes -= static_cast<std::int64_t>(r->value().size());
        RemoveLive(store, *r, ctx, EntryEventType::kRemoved);
      }
    }
    s.m().head = last + 1;
    for (auto& [group, cursor] : s.m().groups) cursor = std::max(cursor, last);
    s.meta_changed = true;
    s.Save();
    out.count = 1;
    out.flag = true;
    return out;
  }
  if (s.length() > kMaxRemovals) {
    return Fail(ErrorCode::kBadRequest,
                "stream '" + s.name + "' holds " + std::to_string(s.length()) +
                    " entries; one command removes at most " + std::to_string(kMaxRemovals) +
                    " (each removal goes to the backups in one message): trim it first, e.g. "
                    "XTRIM " +
                    s.name + " MAXLEN = 0 until it is empty, then DEL it");
  }
  for (std::int64_t off = s.m().head; off <= s.m().tail; ++off) {
    if (Record* r = FindLive(store, StreamEventKey(s.sub, off), ctx)) {
      RemoveLive(store, *r, ctx, EntryEventType::kRemoved);
    }
  }
  std::vector<std::string> keys = {StreamMetaKey(s.sub), RedisStreamMetaKey(s.sub)};
  for (const auto& [group, cursor] : s.m().groups) {
    keys.push_back(RedisStreamGroupKey(s.sub, group));
    keys.push_back(StreamLeaseKey(s.sub, group));
  }
  for (const auto& key : keys) {
    if (Record* r = FindLive(store, key, ctx)) RemoveLive(store, *r, ctx, EntryEventType::kRemoved);
  }
  out.count = 1;
  return out;
}

using XCommandFn = base::Result<MapResult> (*)(XStream&, const MapRequest&, RecordStore&,
                                               OpContext&);

// A command that needs the stream and the request only.
template <base::Result<MapResult> (*F)(XStream&, const MapRequest&)>
base::Result<MapResult> OnStream(XStream& s, const MapRequest& rq, RecordStore&, OpContext&) {
  return F(s, rq);
}

struct XCommand {
  std::string_view name;
  bool appends;  // stores a new entry when it succeeds with a value (wakes blocked readers)
  XCommandFn run;
};

// Every kRedisStream command (redis_stream.h has their contracts).
constexpr XCommand kXCommands[] = {
    {"add", true, OnStream<Add>},
    {"set_epoch", false,  // the incarnation the keyspace entry names (see families/hash)
     [](XStream& s, const MapRequest& rq, RecordStore&, OpContext&) -> base::Result<MapResult> {
       MapResult out;
       if (!s.exists()) return out;
       s.x.epoch = IntArg(rq, "epoch", 0);
       s.x_changed = true;
       s.Save();
       out.flag = true;
       return out;
     }},
    {"trim", false,
     [](XStream& s, const MapRequest& rq, RecordStore&, OpContext&) -> base::Result<MapResult> {
       MapResult out;
       if (!s.exists()) return out;
       out.count = ApplyTrim(s, rq);
       s.Save();
       return out;
     }},
    {"delete", false, Delete},
    {"len", false,
     [](XStream& s, const MapRequest&, RecordStore&, OpContext&) -> base::Result<MapResult> {
       MapResult out;
       out.flag = s.exists();
       out.count = out.flag ? std::max<std::int64_t>(0, s.length()) : 0;
       return out;
     }},
    {"range", false, OnStream<Range>},
    {"read", false, OnStream<Read>},
    {"create_group", false, OnStream<CreateGroup>},
    {"destroy_group", false, OnStream<DestroyGroup>},
    {"create_consumer", false,
     [](XStream& s, const MapRequest& rq, RecordStore&, OpContext&) {
       return Consumers(s, rq, true);
     }},
    {"del_consumer", false,
     [](XStream& s, const MapRequest& rq, RecordStore&, OpContext&) {
       return Consumers(s, rq, false);
     }},
    {"readgroup", false, OnStream<ReadGroup>},
    {"ack", false, OnStream<Ack>},
    {"pending", false, OnStream<Pending>},
    {"claim", false, OnStream<Claim>},
    {"autoclaim", false, OnStream<AutoClaim>},
    {"info_stream", false,
     [](XStream& s, const MapRequest& rq, RecordStore&, OpContext&) {
       return Info(s, rq, "stream");
     }},
    {"info_groups", false,
     [](XStream& s, const MapRequest& rq, RecordStore&, OpContext&) {
       return Info(s, rq, "groups");
     }},
    {"info_consumers", false,
     [](XStream& s, const MapRequest& rq, RecordStore&, OpContext&) {
       return Info(s, rq, "consumers");
     }},
};

const XCommand* FindXCommand(std::string_view name) {
  for (const auto& c : kXCommands) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

}  // namespace

base::Result<MapResult> OpRedisStream(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  const std::string cmd = StringArg(rq, "cmd");
  const XCommand* c = FindXCommand(cmd);
  if (c == nullptr) {
    return Fail(ErrorCode::kBadRequest,
                "unknown redisStream command '" + cmd +
                    "'; the RESP front-end sends add, range, readgroup, ...");
  }
  XStream s = Load(store, rq, ctx);
  return c->run(s, rq, store, ctx);
}

void StreamKeyLeaving(OpContext& ctx, std::string_view key, std::string_view value) {
  if (ctx.follow_ups == nullptr) return;
  std::int64_t epoch = 0;  // the incarnation the entry named ("": none)
  std::from_chars(value.data(), value.data() + value.size(), epoch);
  ctx.follow_ups->push_back(RedisStreamDeleteRequest(key, /*keyspace_entry=*/true, epoch));
}

}  // namespace tessera::streams::detail

namespace tessera::streams {

using map::MapOp;

bool RedisStreamCommandAppends(std::string_view command) {
  const auto* c = detail::FindXCommand(command);
  return c != nullptr && c->appends;
}

MapRequest RedisStreamDeleteRequest(std::string_view key, bool keyspace_entry, std::int64_t epoch) {
  MapRequest request;
  request.op = MapOp::kRedisStream;
  request.map_name = map::kStreamMap;
  request.key = map::StreamMetaKey(std::string(key) + "#0");
  request.argument = record::GenericRecord::Build()
                         .String("cmd", "delete")
                         .Bool("all", true)
                         .Bool("keyspace_entry", keyspace_entry)
                         .Int64("epoch", epoch)
                         .Done();
  return request;
}

}  // namespace tessera::streams
