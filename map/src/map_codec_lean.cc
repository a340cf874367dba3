// The lean encoding of map_codec.h: fixed little-endian fields, length-prefixed strings.
#include <cstring>

#include "tessera/base/bytes.h"
#include "tessera/map/map_codec.h"
#include "tessera/wire/message.h"

namespace tessera::map {
namespace {

using base::ErrorCode;
using base::Fail;

constexpr std::uint8_t kTtl = 1, kMaxIdle = 2, kKeepTtl = 4, kEntries = 8, kKeys = 16,
                       kIntArgs = 32, kTx = 64, kExpected = 128;
constexpr std::uint8_t kHasValue = 1, kFlag = 2, kResultEntries = 4, kResults = 8, kConflict = 16;
// The smallest lean result: flags and count.
constexpr std::size_t kMinResultBytes = 9;
// The smallest operation of a lean transaction: op, flags, three empty strings, precondition.
constexpr std::size_t kMinTxOpBytes = 15;
// The most operations a lean transaction carries (a larger batch goes as Cap'n Proto): a
// decoded operation is a whole MapRequest (~550 bytes), so a forged count within a frame's
// bytes could otherwise make the decoder build 37 times the frame.
constexpr std::size_t kMaxLeanTxOps = 4'096;

template <typename T>
void Put(std::string& out, T value) {
  base::PutLE(out, value);
}

void PutString(std::string& out, std::string_view s) { base::PutU32String(out, s); }

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
class Reader : public base::ByteReader {
 public:
  using ByteReader::ByteReader;
  void GetEntries(std::vector<std::pair<std::string, std::string>>& out) {
    const std::size_t n = GetCount<std::uint32_t>(8);
    out.resize(n);
    for (auto& [k, v] : out) {
      GetString(k);
      GetString(v);
    }
  }
};

bool KeyedOp(MapOp op) { return SpecOf(op).lean == OpLean::kKeyed; }

// An operation a lean transaction may carry (LeanTransaction checks its fields).
bool LeanTxOp(MapOp op) { return SpecOf(op).lean_in_transaction; }

// Whether a request sets nothing but its op, map name, key, value, expected, options and
// transaction fields (what a lean transaction's operations and the batch itself carry).
bool OnlyKeyedFields(const MapRequest& r) {
  return r.processor.empty() && r.predicate.kind() == Predicate::Kind::kTrue &&
         r.projection == Projection::kEntries && r.entries.empty() && r.keys.empty() &&
         r.argument.fields().empty() && r.argument.type_name().empty();
}

bool LeanTransaction(const MapRequest& r) {
  if (!OnlyKeyedFields(r) || !r.expected.empty() || r.transaction.empty() ||
      r.transaction.size() > kMaxLeanTxOps) {
    return false;
  }
  for (const TxOp& op : r.transaction) {
    const MapRequest& q = op.request;
    if (!LeanTxOp(q.op) || !OnlyKeyedFields(q) || !q.transaction.empty() ||
        !q.transaction_id.empty() || op.condition > TxCondition::kVersionEquals) {
      return false;
    }
  }
  return true;
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
  if (r.op == MapOp::kTransact) {
    return protocol_version >= wire::kLeanTxProtocolVersion && LeanTransaction(r);
  }
  if (protocol_version < wire::kLeanProtocolVersion || !r.expected.empty() ||
      !r.processor.empty() || r.predicate.kind() != Predicate::Kind::kTrue ||
      r.projection != Projection::kEntries || !r.transaction.empty() || !r.transaction_id.empty()) {
    return false;
  }
  if (KeyedOp(r.op)) {
    return r.entries.empty() && r.keys.empty() && r.argument.fields().empty() &&
           r.argument.type_name().empty();
  }
  return SpecOf(r.op).lean == OpLean::kEntries &&
         protocol_version >= wire::kLeanEntriesProtocolVersion && IntArguments(r.argument);
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

// Reads what PutHead wrote into `r`'s op, map name, key, value and options; returns the flags.
std::uint8_t GetHead(Reader& in, MapRequest& r) {
  r.op = static_cast<MapOp>(in.Get<std::uint8_t>());
  const auto flags = in.Get<std::uint8_t>();
  in.GetString(r.map_name);
  in.GetString(r.key);
  in.GetString(r.value);
  if (flags & kTtl) r.options.ttl_ms = in.Get<std::int64_t>();
  if (flags & kMaxIdle) r.options.max_idle_ms = in.Get<std::int64_t>();
  r.options.keep_ttl = (flags & kKeepTtl) != 0;
  return flags;
}

// The batch of a lean transaction, after its head.
void PutTransaction(std::string& out, const MapRequest& r) {
  PutString(out, r.transaction_id);
  Put(out, static_cast<std::uint32_t>(r.transaction.size()));
  for (const TxOp& op : r.transaction) {
    const MapRequest& q = op.request;
    PutHead(out, q.op, q.expected.empty() ? 0 : kExpected, q.map_name, q.key, q.value, q.options);
    Put(out, static_cast<std::uint8_t>(op.condition));
    if (op.condition == TxCondition::kValueEquals) PutString(out, op.condition_value);
    if (op.condition == TxCondition::kVersionEquals) Put(out, op.condition_version);
    if (!q.expected.empty()) PutString(out, q.expected);
  }
}

std::size_t TransactionSize(const MapRequest& r) {
  std::size_t n = 8 + r.transaction_id.size();
  for (const TxOp& op : r.transaction) {
    const MapRequest& q = op.request;
    n += 2 + 12 + q.map_name.size() + q.key.size() + q.value.size() + 16 + 1 + 12 +
         op.condition_value.size() + 4 + q.expected.size();
  }
  return n;
}

// Reads a lean transaction's batch into `r` (its head read already).
void GetTransaction(Reader& in, MapRequest& r) {
  in.GetString(r.transaction_id);
  const std::size_t n = in.GetCount<std::uint32_t>(kMinTxOpBytes);
  if (n > kMaxLeanTxOps) return in.Bad();
  r.transaction.resize(n);
  constexpr std::uint8_t kOpFlags = kTtl | kMaxIdle | kKeepTtl | kExpected;
  for (TxOp& op : r.transaction) {
    if (!in.ok()) return;
    MapRequest& q = op.request;
    const std::uint8_t flags = GetHead(in, q);
    const auto condition = in.Get<std::uint8_t>();
    op.condition = static_cast<TxCondition>(condition);
    if (op.condition == TxCondition::kValueEquals) in.GetString(op.condition_value);
    if (op.condition == TxCondition::kVersionEquals) {
      op.condition_version = in.Get<std::int64_t>();
    }
    if (flags & kExpected) {
      in.GetString(q.expected);
      if (q.expected.empty()) in.Bad();  // sent without its bit
    }
    if ((flags & ~kOpFlags) != 0 || !LeanTxOp(q.op) ||
        condition > static_cast<std::uint8_t>(TxCondition::kVersionEquals)) {
      in.Bad();
    }
  }
}

}  // namespace

std::string EncodeLeanRequest(const MapRequest& r, std::size_t room) {
  std::string out;
  std::size_t size = 2 + 12 + r.map_name.size() + r.key.size() + r.value.size() + 16;
  if (r.op == MapOp::kTransact) size += TransactionSize(r);
  if (!r.entries.empty()) size += EntriesSize(r.entries);
  for (const auto& k : r.keys) size += 4 + k.size();
  for (const auto& f : r.argument.fields()) size += 12 + f.name.size();
  out.reserve(room + size + 5);  // one allocation, room included
  out.resize(room);
  const std::uint8_t flags = PutHead(
      out, r.op,
      (r.entries.empty() ? 0 : kEntries) | (r.keys.empty() ? 0 : kKeys) |
          (r.argument.fields().empty() ? 0 : kIntArgs) | (r.op == MapOp::kTransact ? kTx : 0),
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
  if (flags & kTx) PutTransaction(out, r);
  return out;
}

std::string EncodeLeanKeyed(MapOp op, std::string_view map_name, std::string_view key,
                            std::string_view value, const WriteOptions& options, std::size_t room) {
  std::string out;
  EncodeLeanKeyedInto(out, op, map_name, key, value, options, room);
  return out;
}

void EncodeLeanKeyedInto(std::string& out, MapOp op, std::string_view map_name,
                         std::string_view key, std::string_view value, const WriteOptions& options,
                         std::size_t room) {
  out.clear();
  out.reserve(room + 2 + 12 + map_name.size() + key.size() + value.size() + 16);
  out.resize(room);
  PutHead(out, op, 0, map_name, key, value, options);
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
  const std::uint8_t flags = GetHead(in, r);
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
  if (flags & kTx) GetTransaction(in, r);
  if (!in.ok() || !in.rest().empty()) {
    return Fail(ErrorCode::kBadRequest, "malformed lean map request (" +
                                            std::to_string(bytes.size()) +
                                            " bytes): its fields do not add up to its length");
  }
  constexpr std::uint8_t kKeyedFlags = kTtl | kMaxIdle | kKeepTtl;
  const bool fits = KeyedOp(r.op) ? (flags & ~kKeyedFlags) == 0
                    : r.op == MapOp::kTransact
                        ? (flags & ~(kKeyedFlags | kTx)) == 0 && (flags & kTx) != 0
                    : SpecOf(r.op).lean == OpLean::kEntries
                        ? (flags & ~(kKeyedFlags | kEntries | kKeys | kIntArgs)) == 0
                        : false;
  if (!fits) {
    return Fail(ErrorCode::kBadRequest, "lean map request with operation " +
                                            std::to_string(static_cast<int>(r.op)) + " or flags " +
                                            std::to_string(flags) +
                                            " it cannot carry; send it as a Cap'n Proto frame");
  }
  return {};
}

namespace {

// A result the lean encoding carries: no processor results, entry view or statistics.
bool LeanResult(const MapResult& r) {
  return !r.processor_result && r.processor_results.empty() && !r.view && r.stats == MapStats{};
}

void PutResult(std::string& out, const MapResult& r) {
  Put(out,
      static_cast<std::uint8_t>((r.value ? kHasValue : 0) | (r.flag ? kFlag : 0) |
                                (r.entries.empty() ? 0 : kResultEntries) |
                                (r.results.empty() ? 0 : kResults) | (r.conflict ? kConflict : 0)));
  Put(out, r.count);
  if (!r.entries.empty()) PutEntries(out, r.entries);
  if (!r.results.empty()) {
    Put(out, static_cast<std::uint32_t>(r.results.size()));
    for (const MapResult& nested : r.results) {  // each as a string: its length, then it
      const std::size_t at = out.size();
      Put(out, std::uint32_t{0});
      PutResult(out, nested);
      const auto length = static_cast<std::uint32_t>(out.size() - at - 4);
      base::StoreLE(out.data() + at, length);
    }
  }
  if (r.conflict) {
    Put(out, r.conflict->index);
    PutString(out, r.conflict->map_name);
    PutString(out, r.conflict->key);
    PutString(out, r.conflict->found);
  }
  if (r.value) out += *r.value;
}

std::size_t ResultSize(const MapResult& r) {
  std::size_t n = kMinResultBytes + (r.value ? r.value->size() : 0) +
                  (r.entries.empty() ? 0 : EntriesSize(r.entries));
  for (const MapResult& nested : r.results) n += 4 + ResultSize(nested);
  if (r.conflict) {
    n += 16 + r.conflict->map_name.size() + r.conflict->key.size() + r.conflict->found.size();
  }
  return n;
}

}  // namespace

std::optional<std::string> EncodeLeanResult(const MapResult& r, std::size_t room) {
  std::string out;
  if (!EncodeLeanResultInto(out, r, room)) return std::nullopt;
  return out;
}

bool EncodeLeanResultInto(std::string& out, const MapResult& r, std::size_t room) {
  if (!LeanResult(r)) return false;
  for (const MapResult& nested : r.results) {  // a transaction's: one level
    if (!LeanResult(nested) || !nested.results.empty() || nested.conflict) return false;
  }
  out.clear();
  out.reserve(room + ResultSize(r));
  out.resize(room);
  PutResult(out, r);
  return true;
}

namespace {

// DecodeLeanResult of `bytes`; with `owner` (the string `bytes` views), the value takes the
// owner's allocation instead of a copy. `nested`: a transaction's operation's result, which
// has no results or conflict of its own (refused before anything recurses: a forged chain of
// nested results would otherwise recurse as deep as the frame is long).
base::Result<MapResult> DecodeLeanResultOf(std::string_view bytes, std::string* owner,
                                           bool nested = false) {
  Reader in(bytes);
  MapResult r;
  const auto flags = in.Get<std::uint8_t>();
  if (nested && (flags & (kResults | kConflict)) != 0) in.Bad();
  r.count = in.Get<std::int64_t>();
  if (flags & kResultEntries) in.GetEntries(r.entries);
  if (flags & kResults) {
    const std::size_t n = in.GetCount<std::uint32_t>(4 + kMinResultBytes);
    if (n > kMaxLeanTxOps) in.Bad();  // a lean transaction has at most that many operations
    r.results.reserve(in.ok() ? n : 0);
    for (std::size_t i = 0; i < n && in.ok(); ++i) {
      const std::string_view nested_bytes = in.GetView();
      if (!in.ok()) break;
      auto decoded = DecodeLeanResultOf(nested_bytes, nullptr, /*nested=*/true);
      if (!decoded) return decoded;
      r.results.push_back(std::move(*decoded));
    }
  }
  if (flags & kConflict) {
    TxConflict& conflict = r.conflict.emplace();
    conflict.index = in.Get<std::uint32_t>();
    in.GetString(conflict.map_name);
    in.GetString(conflict.key);
    in.GetString(conflict.found);
  }
  if (!in.ok() || (flags & ~(kHasValue | kFlag | kResultEntries | kResults | kConflict)) != 0 ||
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
