#include "tessera/map/stream_format.h"

#include <algorithm>
#include <charconv>

#include "tessera/base/sized_text.h"

namespace tessera::map {

using base::PutSized;
using base::TakeNumber;
using base::TakeSized;

// "<time>;<n>:<id><n>:<key><payload>": the time first so StoredEventTime reads only that.
void EncodeStoredEventInto(std::string& out, std::string_view id, std::string_view key,
                           std::int64_t time_ms, std::string_view payload) {
  out.clear();
  out.reserve(id.size() + key.size() + payload.size() + 48);
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, time_ms).ptr);
  out += ';';
  PutSized(out, id);
  PutSized(out, key);
  out += payload;
}

std::string EncodeStoredEvent(std::string_view id, std::string_view key, std::int64_t time_ms,
                              std::string_view payload) {
  std::string out;
  EncodeStoredEventInto(out, id, key, time_ms, payload);
  return out;
}

std::size_t StoredEventSize(std::string_view id, std::string_view key, std::int64_t time_ms,
                            std::string_view payload) {
  char buf[24];
  auto digits = [&](auto n) {
    return static_cast<std::size_t>(std::to_chars(buf, buf + sizeof buf, n).ptr - buf);
  };
  return digits(time_ms) + 1 + digits(id.size()) + 1 + id.size() + digits(key.size()) + 1 +
         key.size() + payload.size();
}

std::string EncodeStoredEvent(const StoredEvent& e) {
  return EncodeStoredEvent(e.id, e.key, e.time_ms, e.payload);
}

std::optional<StoredEvent> DecodeStoredEvent(std::string_view in) {
  StoredEvent e;
  auto time = TakeNumber(in, ';');
  if (!time) return std::nullopt;
  e.time_ms = *time;
  auto id = TakeSized(in);
  if (!id) return std::nullopt;
  auto key = TakeSized(in);
  if (!key) return std::nullopt;
  e.id = std::string(*id);
  e.key = std::string(*key);
  e.payload = std::string(in);
  return e;
}

std::int64_t StoredEventTime(std::string_view bytes) { return TakeNumber(bytes, ';').value_or(0); }

std::optional<std::string_view> StoredEventKey(std::string_view in) {
  if (!TakeNumber(in, ';') || !TakeSized(in)) return std::nullopt;
  return TakeSized(in);
}

std::int64_t* StreamMeta::CursorOf(std::string_view group) {
  for (auto& [name, cursor] : groups) {
    if (name == group) return &cursor;
  }
  return nullptr;
}

const std::int64_t* StreamMeta::CursorOf(std::string_view group) const {
  for (const auto& [name, cursor] : groups) {
    if (name == group) return &cursor;
  }
  return nullptr;
}

const std::pair<std::string, std::int64_t>* StreamMeta::Slowest() const {
  const std::pair<std::string, std::int64_t>* slowest = nullptr;
  for (const auto& g : groups) {
    if (slowest == nullptr || g.second < slowest->second) slowest = &g;
  }
  return slowest;
}

// "<head> <tail> <bytes>\n" then "<cursor> <group>\n" per group.
std::string StreamMetaText(const StreamMeta& m) {
  std::string out;
  std::size_t size = 3 * 21;
  for (const auto& g : m.groups) size += 22 + g.first.size();
  out.reserve(size);
  char buf[24];
  auto number = [&](std::int64_t n, char after) {
    out.append(buf, std::to_chars(buf, buf + sizeof buf, n).ptr);
    out += after;
  };
  number(m.head, ' ');
  number(m.tail, ' ');
  number(m.bytes, '\n');
  for (const auto& [group, cursor] : m.groups) {
    number(cursor, ' ');
    out += group;
    out += '\n';
  }
  return out;
}

StreamMeta ParseStreamMeta(std::string_view in) {
  StreamMeta m;
  auto head = TakeNumber(in, ' ');
  auto tail = head ? TakeNumber(in, ' ') : std::nullopt;
  auto bytes = tail ? TakeNumber(in, '\n') : std::nullopt;
  if (!bytes) return StreamMeta{};
  m.head = *head;
  m.tail = *tail;
  m.bytes = *bytes;
  while (!in.empty()) {
    auto cursor = TakeNumber(in, ' ');
    auto end = in.find('\n');
    if (!cursor || end == std::string_view::npos) break;
    m.groups.emplace_back(std::string(in.substr(0, end)), *cursor);
    in.remove_prefix(end + 1);
  }
  return m;
}

namespace {

// a + b + c in one allocation (keys are built on every stream operation).
std::string Concat(std::string_view a, std::string_view b, std::string_view c = {},
                   std::string_view d = {}) {
  std::string out;
  out.reserve(a.size() + b.size() + c.size() + d.size());
  out.append(a).append(b).append(c).append(d);
  return out;
}

std::string_view Digits(std::int64_t n, char (&buf)[24]) {
  auto end = std::to_chars(buf, buf + sizeof buf, n).ptr;
  return {buf, static_cast<std::size_t>(end - buf)};
}

}  // namespace

std::string SubStreamName(std::string_view stream, std::uint32_t index) {
  char buf[24];
  return Concat(stream, "#", Digits(index, buf));
}

std::string StreamMetaKey(std::string_view sub) { return Concat("meta@", sub); }

std::string StreamEventKey(std::string_view sub, std::int64_t offset) {
  char buf[24];
  return Concat(Digits(offset, buf), "@", sub);
}

std::string StreamIdKey(std::string_view sub, std::string_view event_id) {
  return Concat("id:", event_id, "@", sub);
}

void StreamEventKeyInto(std::string& out, std::string_view sub, std::int64_t offset) {
  char buf[24];
  out.assign(Digits(offset, buf)).append("@").append(sub);
}

void StreamIdKeyInto(std::string& out, std::string_view sub, std::string_view event_id) {
  out.assign("id:").append(event_id).append("@").append(sub);
}

std::string StreamLeaseKey(std::string_view sub, std::string_view group) {
  return Concat("lease:", group, "@", sub);
}

std::string StreamGroupStateKey(std::string_view sub, std::string_view group) {
  return Concat("xgroup:", group, "@", sub);
}

std::string StreamLeaseEpochKey(std::string_view sub, std::string_view group) {
  return Concat("lease-epoch:", group, "@", sub);
}

std::string StreamConfigKey(std::string_view stream) { return Concat("stream@", stream); }

std::string StreamConsumersKey(std::string_view stream, std::string_view group) {
  return Concat("consumers:", group, "@", stream);
}

std::string StreamNameProblem(std::string_view what, std::string_view name) {
  const std::string w(what);
  if (name.empty()) return "the " + w + " name is empty; give it a name";
  if (name.size() > 200) {
    return "the " + w + " name is " + std::to_string(name.size()) + " bytes long; use at most 200";
  }
  auto bad = std::find_if(name.begin(), name.end(), [](char c) {
    return c == '@' || c == '#' || c == ' ' || c == '\n' || c == '\t' || c == '\r';
  });
  if (bad != name.end()) {
    return "the " + w + " name '" + std::string(name) +
           "' contains a space, '@' or '#'; use letters, digits, '-', '_', '.', ':' or '/'";
  }
  return "";
}

}  // namespace tessera::map
