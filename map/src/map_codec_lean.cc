// The lean encoding of map_codec.h: fixed little-endian fields, length-prefixed strings.
#include <cstring>

#include "tessera/map/map_codec.h"
#include "tessera/wire/message.h"

namespace tessera::map {
namespace {

using base::ErrorCode;
using base::Fail;

constexpr std::uint8_t kTtl = 1, kMaxIdle = 2, kKeepTtl = 4, kEntries = 8, kKeys = 16,
                       kIntArgs = 32;
constexpr std::uint8_t kHasValue = 1, kFlag = 2, kResultEntries = 4;

template <typename T>
void Put(std::string& out, T value) {
  const auto bits = static_cast<std::make_unsigned_t<T>>(value);
  for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>(bits >> (8 * i)));
}

void PutString(std::string& out, std::string_view s) {
  Put(out, static_cast<std::uint32_t>(s.size()));
  out += s;
}

void PutEntries(std::string& out, const std::vector<std::pair<std::string, std::string>>& in) {
  Put(out, static_cast<std::uint32_t>(in.size()));
  for (const auto& [k, v] : in) {
    PutString(out, k);
    PutString(out, v);
  }
}

std::size_t EntriesSize(const std::vector<std::pair<std::string, std::string>>& in) {
  std::size_t n = 4;
  for (const auto& [k, v] : in) n += 8 + k.size() + v.size();
  return n;
}

// Reads fields from the front of a lean payload; any shortfall makes ok() false.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool ok() const { return ok_; }
  std::string_view rest() const { return in_; }
  template <typename T>
  T Get() {
    if (in_.size() < sizeof(T)) {
      Bad();
      return T{};
    }
    std::make_unsigned_t<T> bits = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) {
      bits |= static_cast<std::make_unsigned_t<T>>(static_cast<unsigned char>(in_[i])) << (8 * i);
    }
    in_.remove_prefix(sizeof(T));
    return static_cast<T>(bits);
  }
  void GetString(std::string& out) { out.assign(GetView()); }
  // A string as a view into the input ("" and not ok when it does not fit).
  std::string_view GetView() {
    const auto size = Get<std::uint32_t>();
    if (!ok_ || size > in_.size()) {
      Bad();
      return {};
    }
    const std::string_view out = in_.substr(0, size);
    in_.remove_prefix(size);
    return out;
  }
  // A count of items each at least `min_bytes` long; 0 (and not ok) when the rest cannot
  // hold them, so a forged count never reserves memory. Zero is refused too: an empty list
  // is sent without its flag.
  template <typename T>
  std::size_t GetCount(std::size_t min_bytes) {
    const std::size_t n = Get<T>();
    if (!ok_ || n == 0 || n > in_.size() / min_bytes) {
      Bad();
      return 0;
    }
    return n;
  }
  void GetEntries(std::vector<std::pair<std::string, std::string>>& out) {
    const std::size_t n = GetCount<std::uint32_t>(8);
    out.resize(n);
    for (auto& [k, v] : out) {
      GetString(k);
      GetString(v);
    }
  }
  void Bad() {
    ok_ = false;
    in_ = {};
  }

 private:
  std::string_view in_;
  bool ok_ = true;
};

bool KeyedOp(MapOp op) {
  switch (op) {
    case MapOp::kGet:
    case MapOp::kSet:
    case MapOp::kPut:
    case MapOp::kPutIfAbsent:
    case MapOp::kRemove:
    case MapOp::kDelete:
    case MapOp::kContainsKey:
    case MapOp::kReplace:
      return true;
    default:
      return false;
  }
}

bool IntArguments(const record::GenericRecord& argument) {
  if (!argument.type_name().empty() || argument.fields().size() > 255) return false;
  for (const auto& field : argument.fields()) {
    if (field.value.type() != record::FieldType::kInt64) return false;
  }
  return true;
}

}  // namespace

bool LeanEncodable(const MapRequest& r, std::uint32_t protocol_version) {
  if (protocol_version < wire::kLeanProtocolVersion || !r.expected.empty() ||
      !r.processor.empty() || r.predicate.kind() != Predicate::Kind::kTrue ||
      r.projection != Projection::kEntries || !r.transaction.empty() || !r.transaction_id.empty()) {
    return false;
  }
  if (KeyedOp(r.op)) {
    return r.entries.empty() && r.keys.empty() && r.argument.fields().empty() &&
           r.argument.type_name().empty();
  }
  return r.op == MapOp::kStreamAppend && protocol_version >= wire::kLeanEntriesProtocolVersion &&
         IntArguments(r.argument);
}

namespace {

// Op, flags (the options' bits and `more_flags`), map name, key, value and the options: the
// whole of a keyed request, the start of a stream append. Returns the flags written.
std::uint8_t PutHead(std::string& out, MapOp op, std::uint8_t more_flags, std::string_view map_name,
                     std::string_view key, std::string_view value, const WriteOptions& options) {
  Put(out, static_cast<std::uint8_t>(op));
  const std::uint8_t flags = (options.ttl_ms ? kTtl : 0) | (options.max_idle_ms ? kMaxIdle : 0) |
                             (options.keep_ttl ? kKeepTtl : 0) | more_flags;
  Put(out, flags);
  PutString(out, map_name);
  PutString(out, key);
  PutString(out, value);
  if (options.ttl_ms) Put(out, static_cast<std::int64_t>(*options.ttl_ms));
  if (options.max_idle_ms) Put(out, static_cast<std::int64_t>(*options.max_idle_ms));
  return flags;
}

}  // namespace

std::string EncodeLeanRequest(const MapRequest& r, std::size_t room) {
  std::string out;
  std::size_t size = 2 + 12 + r.map_name.size() + r.key.size() + r.value.size() + 16;
  if (!r.entries.empty()) size += EntriesSize(r.entries);
  for (const auto& k : r.keys) size += 4 + k.size();
  for (const auto& f : r.argument.fields()) size += 12 + f.name.size();
  out.reserve(room + size + 5);  // one allocation, room included
  out.resize(room);
  const std::uint8_t flags =
      PutHead(out, r.op,
              (r.entries.empty() ? 0 : kEntries) | (r.keys.empty() ? 0 : kKeys) |
                  (r.argument.fields().empty() ? 0 : kIntArgs),
              r.map_name, r.key, r.value, r.options);
  if (flags & kEntries) PutEntries(out, r.entries);
  if (flags & kKeys) {
    Put(out, static_cast<std::uint32_t>(r.keys.size()));
    for (const auto& k : r.keys) PutString(out, k);
  }
  if (flags & kIntArgs) {
    Put(out, static_cast<std::uint8_t>(r.argument.fields().size()));
    for (const auto& f : r.argument.fields()) {
      PutString(out, f.name);
      Put(out, f.value.AsInt64());
    }
  }
  return out;
}

std::string EncodeLeanKeyed(MapOp op, std::string_view map_name, std::string_view key,
                            std::string_view value, const WriteOptions& options, std::size_t room) {
  std::string out;
  out.reserve(room + 2 + 12 + map_name.size() + key.size() + value.size() + 16);
  out.resize(room);
  PutHead(out, op, 0, map_name, key, value, options);
  return out;
}

base::Result<MapRequest> DecodeLeanRequest(std::string_view bytes) {
  MapRequest r;
  if (auto ok = DecodeLeanRequestInto(bytes, r); !ok) return std::unexpected(ok.error());
  return r;
}

namespace {

// Reads `n` integer arguments into `kept` (the previous request's) when they have its names in
// its order: only the values change. Otherwise false, and `in` is where it was.
bool ReuseIntArguments(Reader& in, std::size_t n, record::GenericRecord& kept) {
  if (!kept.type_name().empty() || kept.fields().size() != n) return false;
  Reader probe = in;
  for (const auto& field : kept.fields()) {
    const std::string_view name = probe.GetView();
    probe.Get<std::int64_t>();
    if (!probe.ok() || name != field.name || field.value.type() != record::FieldType::kInt64) {
      return false;
    }
  }
  for (const auto& field : kept.fields()) {
    in.GetView();
    kept.Set(field.name, in.Get<std::int64_t>());
  }
  return true;
}

}  // namespace

std::optional<LeanKey> PeekLeanKey(std::string_view bytes) {
  Reader in(bytes);
  const auto op = static_cast<MapOp>(in.Get<std::uint8_t>());
  in.Get<std::uint8_t>();  // flags
  LeanKey out;
  out.map_name = in.GetView();
  out.key = in.GetView();
  if (!in.ok() || !KeyedOp(op)) return std::nullopt;
  return out;
}

base::Result<void> DecodeLeanRequestInto(std::string_view bytes, MapRequest& r) {
  Reader in(bytes);
  // Kept from the previous request for this one (see the header).
  auto entries = std::move(r.entries);
  auto keys = std::move(r.keys);
  auto argument = std::move(r.argument);
  r.Clear();
  r.op = static_cast<MapOp>(in.Get<std::uint8_t>());
  const auto flags = in.Get<std::uint8_t>();
  in.GetString(r.map_name);
  in.GetString(r.key);
  in.GetString(r.value);
  if (flags & kTtl) r.options.ttl_ms = in.Get<std::int64_t>();
  if (flags & kMaxIdle) r.options.max_idle_ms = in.Get<std::int64_t>();
  r.options.keep_ttl = (flags & kKeepTtl) != 0;
  if (flags & kEntries) {
    r.entries = std::move(entries);
    in.GetEntries(r.entries);
  }
  if (flags & kKeys) {
    r.keys = std::move(keys);
    r.keys.resize(in.GetCount<std::uint32_t>(4));
    for (auto& k : r.keys) in.GetString(k);
  }
  if (flags & kIntArgs) {
    const std::size_t n = in.GetCount<std::uint8_t>(12);
    if (in.ok() && ReuseIntArguments(in, n, argument)) {
      r.argument = std::move(argument);
    } else {
      auto built = record::GenericRecord::Build();  // its fields in one allocation
      built.Reserve(n);
      for (std::size_t i = 0; i < n && in.ok(); ++i) {
        std::string name(in.GetView());
        const auto value = in.Get<std::int64_t>();
        built.Int64(std::move(name), value);  // a name given again replaces the first
      }
      r.argument = built.Done();
      if (r.argument.fields().size() != n) in.Bad();  // twice the same name: not ours
    }
  }
  if (!in.ok() || !in.rest().empty()) {
    return Fail(ErrorCode::kBadRequest, "malformed lean map request (" +
                                            std::to_string(bytes.size()) +
                                            " bytes): its fields do not add up to its length");
  }
  constexpr std::uint8_t kKeyedFlags = kTtl | kMaxIdle | kKeepTtl;
  const bool fits = KeyedOp(r.op) ? (flags & ~kKeyedFlags) == 0
                                  : r.op == MapOp::kStreamAppend &&
                                        (flags & ~(kKeyedFlags | kEntries | kKeys | kIntArgs)) == 0;
  if (!fits) {
    return Fail(ErrorCode::kBadRequest, "lean map request with operation " +
                                            std::to_string(static_cast<int>(r.op)) + " or flags " +
                                            std::to_string(flags) +
                                            " it cannot carry; send it as a Cap'n Proto frame");
  }
  return {};
}

std::optional<std::string> EncodeLeanResult(const MapResult& r, std::size_t room) {
  if (r.processor_result || !r.processor_results.empty() || r.view || !(r.stats == MapStats{}) ||
      !r.results.empty() || r.conflict) {
    return std::nullopt;
  }
  std::string out;
  out.reserve(room + 9 + (r.value ? r.value->size() : 0) +
              (r.entries.empty() ? 0 : EntriesSize(r.entries)));
  out.resize(room);
  Put(out, static_cast<std::uint8_t>((r.value ? kHasValue : 0) | (r.flag ? kFlag : 0) |
                                     (r.entries.empty() ? 0 : kResultEntries)));
  Put(out, r.count);
  if (!r.entries.empty()) PutEntries(out, r.entries);
  if (r.value) out += *r.value;
  return out;
}

namespace {

// DecodeLeanResult of `bytes`; with `owner` (the string `bytes` views), the value takes the
// owner's allocation instead of a copy.
base::Result<MapResult> DecodeLeanResultOf(std::string_view bytes, std::string* owner) {
  Reader in(bytes);
  MapResult r;
  const auto flags = in.Get<std::uint8_t>();
  r.count = in.Get<std::int64_t>();
  if (flags & kResultEntries) in.GetEntries(r.entries);
  if (!in.ok() || (flags & ~(kHasValue | kFlag | kResultEntries)) != 0 ||
      (!(flags & kHasValue) && !in.rest().empty())) {
    return Fail(ErrorCode::kBadRequest,
                "malformed lean map result (" + std::to_string(bytes.size()) + " bytes)");
  }
  r.flag = (flags & kFlag) != 0;
  if (flags & kHasValue) {
    if (owner == nullptr) {
      r.value.emplace(in.rest());
    } else {  // the value is the bytes' tail: keep their allocation, drop what is before it
      const std::size_t head = bytes.size() - in.rest().size();
      owner->erase(0, head);
      r.value.emplace(std::move(*owner));
    }
  }
  return r;
}

}  // namespace

base::Result<MapResult> DecodeLeanResult(std::string_view bytes) {
  return DecodeLeanResultOf(bytes, nullptr);
}

base::Result<MapResult> DecodeLeanResult(std::string&& bytes) {
  return DecodeLeanResultOf(bytes, &bytes);
}

}  // namespace tessera::map
