#include <algorithm>
#include <charconv>

#include "redis_stream_state.h"
#include "tessera/base/sized_text.h"
#include "tessera/map/family.h"
#include "tessera/map/stream_format.h"

namespace tessera::streams {
namespace {

bool ParseU64(std::string_view text, std::uint64_t& out) {
  if (text.empty()) return false;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && p == text.data() + text.size();
}

void Put(std::string& out, std::string_view s) { base::PutSized(out, s); }

void PutInt(std::string& out, std::int64_t v) { Put(out, std::to_string(v)); }

// Reads "<n>:<bytes>" tokens from the front of a record; any malformed one makes ok() false.
class Tokens {
 public:
  explicit Tokens(std::string_view in) : in_(in) {}
  bool ok() const { return ok_; }
  bool empty() const { return in_.empty(); }
  std::string_view Next() {
    auto token = base::TakeSized(in_);
    if (!token) {
      ok_ = false;
      in_ = {};
      return {};
    }
    return *token;
  }
  std::int64_t Int() {
    std::string_view t = Next();
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc() || p != t.data() + t.size()) ok_ = false;
    return v;
  }
  StreamId Id() {
    auto id = ParseStreamId(Next());
    if (!id) ok_ = false;
    return id.value_or(StreamId{});
  }

 private:
  std::string_view in_;
  bool ok_ = true;
};

}  // namespace

std::optional<StreamId> ParseStreamId(std::string_view text, std::uint64_t missing_seq) {
  StreamId id;
  const auto dash = text.find('-');
  if (dash == std::string_view::npos) {
    if (!ParseU64(text, id.ms)) return std::nullopt;
    id.seq = missing_seq;
    return id;
  }
  if (!ParseU64(text.substr(0, dash), id.ms) || !ParseU64(text.substr(dash + 1), id.seq)) {
    return std::nullopt;
  }
  return id;
}

std::string EncodeStreamFields(const std::vector<std::string_view>& fields_and_values) {
  std::string out;
  std::size_t size = 0;
  for (auto f : fields_and_values) size += f.size() + 8;
  out.reserve(size);
  for (auto f : fields_and_values) Put(out, f);
  return out;
}

std::optional<std::vector<std::string_view>> DecodeStreamFields(std::string_view bytes) {
  std::vector<std::string_view> out;
  Tokens in(bytes);
  while (!in.empty()) {
    out.push_back(in.Next());
    if (!in.ok()) return std::nullopt;
  }
  return out;
}

std::string RedisStreamMetaKey(std::string_view sub) { return "xmeta@" + std::string(sub); }

std::string RedisStreamGroupKey(std::string_view sub, std::string_view group) {
  return map::StreamGroupStateKey(sub, group);
}

namespace detail {

std::string EncodeRedisStreamMeta(const RedisStreamMeta& m) {
  std::string out;
  Put(out, m.last_id.Text());
  PutInt(out, m.entries_added);
  Put(out, m.max_deleted.Text());
  if (m.epoch != 0) PutInt(out, m.epoch);
  return out;
}

RedisStreamMeta DecodeRedisStreamMeta(std::string_view bytes) {
  Tokens in(bytes);
  RedisStreamMeta m;
  m.last_id = in.Id();
  m.entries_added = in.Int();
  m.max_deleted = in.Id();
  if (in.ok() && !in.empty()) m.epoch = in.Int();  // absent in a meta without an epoch
  return in.ok() ? m : RedisStreamMeta{};
}

StreamConsumer* RedisStreamGroup::FindConsumer(std::string_view name) {
  auto it =
      std::lower_bound(consumers.begin(), consumers.end(), name,
                       [](const StreamConsumer& c, std::string_view n) { return c.name < n; });
  return it != consumers.end() && it->name == name ? &*it : nullptr;
}

StreamConsumer& RedisStreamGroup::Consumer(std::string_view name, std::int64_t now_ms,
                                           bool* created) {
  auto it =
      std::lower_bound(consumers.begin(), consumers.end(), name,
                       [](const StreamConsumer& c, std::string_view n) { return c.name < n; });
  const bool fresh = it == consumers.end() || it->name != name;
  if (fresh) it = consumers.insert(it, StreamConsumer{std::string(name), now_ms, 0});
  if (created != nullptr) *created = fresh;
  return *it;
}

std::int64_t RedisStreamGroup::PendingOf(std::string_view consumer) const {
  return std::count_if(pending.begin(), pending.end(),
                       [&](const PendingEntry& p) { return p.consumer == consumer; });
}

PendingEntry* RedisStreamGroup::FindPending(const StreamId& id) {
  auto it = std::lower_bound(pending.begin(), pending.end(), id,
                             [](const PendingEntry& p, const StreamId& i) { return p.id < i; });
  return it != pending.end() && it->id == id ? &*it : nullptr;
}

void RedisStreamGroup::Deliver(std::int64_t offset, const StreamId& id, std::int64_t now_ms,
                               const std::string& consumer) {
  auto it = std::lower_bound(pending.begin(), pending.end(), offset,
                             [](const PendingEntry& p, std::int64_t o) { return p.offset < o; });
  if (it != pending.end() && it->offset == offset) {
    *it = PendingEntry{offset, id, now_ms, 1, consumer};
  } else {
    pending.insert(it, PendingEntry{offset, id, now_ms, 1, consumer});
  }
}

std::string EncodeRedisStreamGroup(const RedisStreamGroup& g) {
  std::string out;
  Put(out, g.last_id.Text());
  PutInt(out, g.last_offset);
  PutInt(out, g.entries_read_known ? 1 : 0);
  PutInt(out, static_cast<std::int64_t>(g.consumers.size()));
  for (const auto& c : g.consumers) {
    Put(out, c.name);
    PutInt(out, c.seen_ms);
    PutInt(out, c.active_ms);
  }
  PutInt(out, static_cast<std::int64_t>(g.pending.size()));
  for (const auto& p : g.pending) {
    PutInt(out, p.offset);
    Put(out, p.id.Text());
    PutInt(out, p.delivery_ms);
    PutInt(out, p.deliveries);
    Put(out, p.consumer);
  }
  return out;
}

RedisStreamGroup DecodeRedisStreamGroup(std::string_view bytes) {
  Tokens in(bytes);
  RedisStreamGroup g;
  g.last_id = in.Id();
  g.last_offset = in.Int();
  g.entries_read_known = in.Int() != 0;
  for (std::int64_t n = in.Int(); in.ok() && n > 0; --n) {
    StreamConsumer c;
    c.name = std::string(in.Next());
    c.seen_ms = in.Int();
    c.active_ms = in.Int();
    g.consumers.push_back(std::move(c));
  }
  for (std::int64_t n = in.Int(); in.ok() && n > 0; --n) {
    PendingEntry p;
    p.offset = in.Int();
    p.id = in.Id();
    p.delivery_ms = in.Int();
    p.deliveries = in.Int();
    p.consumer = std::string(in.Next());
    g.pending.push_back(std::move(p));
  }
  return in.ok() ? g : RedisStreamGroup{};
}

}  // namespace detail

void Register() {
  map::FamilySpec spec;
  spec.name = "streams";
  spec.op = map::MapOp::kRedisStream;
  spec.run = detail::OpRedisStream;
  spec.writes = [](const MapRequest&) { return true; };
  spec.appended = [](const MapRequest& request, const map::MapResult& result) {
    return result.value.has_value() &&
           RedisStreamCommandAppends(map::StringArg(request, "cmd"));  // an XADD: its new ID
  };
  spec.kinds[0] = map::ValueKind::kStream;
  spec.kind_count = 1;
  spec.kind_name = "stream";
  spec.leaving = [](map::OpContext& ctx, std::string_view key, map::ValueKind,
                    std::string_view value) { detail::StreamKeyLeaving(ctx, key, value); };
  map::RegisterFamily(spec);
}

}  // namespace tessera::streams
