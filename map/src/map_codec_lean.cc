// The lean encoding of map_codec.h: fixed little-endian fields, length-prefixed strings.
#include <cstring>

#include "tessera/map/map_codec.h"

namespace tessera::map {
namespace {

using base::ErrorCode;
using base::Fail;

constexpr std::uint8_t kTtl = 1, kMaxIdle = 2, kKeepTtl = 4;
constexpr std::uint8_t kHasValue = 1, kFlag = 2;

template <typename T>
void Put(std::string& out, T value) {
  const auto bits = static_cast<std::make_unsigned_t<T>>(value);
  for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>(bits >> (8 * i)));
}

void PutString(std::string& out, std::string_view s) {
  Put(out, static_cast<std::uint32_t>(s.size()));
  out += s;
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
      ok_ = false;
      in_ = {};
      return T{};
    }
    std::make_unsigned_t<T> bits = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) {
      bits |= static_cast<std::make_unsigned_t<T>>(static_cast<unsigned char>(in_[i])) << (8 * i);
    }
    in_.remove_prefix(sizeof(T));
    return static_cast<T>(bits);
  }
  void GetString(std::string& out) {
    const auto size = Get<std::uint32_t>();
    if (!ok_ || size > in_.size()) {
      ok_ = false;
      in_ = {};
      return;
    }
    out.assign(in_.substr(0, size));
    in_.remove_prefix(size);
  }

 private:
  std::string_view in_;
  bool ok_ = true;
};

bool LeanOp(MapOp op) {
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

}  // namespace

bool LeanEncodable(const MapRequest& r) {
  return LeanOp(r.op) && r.expected.empty() && r.entries.empty() && r.keys.empty() &&
         r.processor.empty() && r.argument.fields().empty() && r.argument.type_name().empty() &&
         r.predicate.kind() == Predicate::Kind::kTrue && r.projection == Projection::kEntries &&
         r.transaction.empty() && r.transaction_id.empty();
}

std::string EncodeLeanRequest(const MapRequest& r) {
  std::string out;
  out.reserve(2 + 12 + r.map_name.size() + r.key.size() + r.value.size() + 16);
  Put(out, static_cast<std::uint8_t>(r.op));
  const std::uint8_t flags = (r.options.ttl_ms ? kTtl : 0) |
                             (r.options.max_idle_ms ? kMaxIdle : 0) |
                             (r.options.keep_ttl ? kKeepTtl : 0);
  Put(out, flags);
  PutString(out, r.map_name);
  PutString(out, r.key);
  PutString(out, r.value);
  if (r.options.ttl_ms) Put(out, static_cast<std::int64_t>(*r.options.ttl_ms));
  if (r.options.max_idle_ms) Put(out, static_cast<std::int64_t>(*r.options.max_idle_ms));
  return out;
}

base::Result<MapRequest> DecodeLeanRequest(std::string_view bytes) {
  Reader in(bytes);
  MapRequest r;
  r.op = static_cast<MapOp>(in.Get<std::uint8_t>());
  const auto flags = in.Get<std::uint8_t>();
  in.GetString(r.map_name);
  in.GetString(r.key);
  in.GetString(r.value);
  if (flags & kTtl) r.options.ttl_ms = in.Get<std::int64_t>();
  if (flags & kMaxIdle) r.options.max_idle_ms = in.Get<std::int64_t>();
  r.options.keep_ttl = (flags & kKeepTtl) != 0;
  if (!in.ok() || !in.rest().empty()) {
    return Fail(ErrorCode::kBadRequest, "malformed lean map request (" +
                                            std::to_string(bytes.size()) +
                                            " bytes): its fields do not add up to its length");
  }
  if (!LeanOp(r.op) || (flags & ~(kTtl | kMaxIdle | kKeepTtl)) != 0) {
    return Fail(ErrorCode::kBadRequest, "lean map request with operation " +
                                            std::to_string(static_cast<int>(r.op)) + " or flags " +
                                            std::to_string(flags) +
                                            " it cannot carry; send it as a Cap'n Proto frame");
  }
  return r;
}

std::optional<std::string> EncodeLeanResult(const MapResult& r) {
  if (!r.entries.empty() || r.processor_result || !r.processor_results.empty() || r.view ||
      !(r.stats == MapStats{}) || !r.results.empty() || r.conflict) {
    return std::nullopt;
  }
  std::string out;
  out.reserve(9 + (r.value ? r.value->size() : 0));
  Put(out, static_cast<std::uint8_t>((r.value ? kHasValue : 0) | (r.flag ? kFlag : 0)));
  Put(out, r.count);
  if (r.value) out += *r.value;
  return out;
}

base::Result<MapResult> DecodeLeanResult(std::string_view bytes) {
  Reader in(bytes);
  MapResult r;
  const auto flags = in.Get<std::uint8_t>();
  r.count = in.Get<std::int64_t>();
  if (!in.ok() || (flags & ~(kHasValue | kFlag)) != 0 ||
      (!(flags & kHasValue) && !in.rest().empty())) {
    return Fail(ErrorCode::kBadRequest,
                "malformed lean map result (" + std::to_string(bytes.size()) + " bytes)");
  }
  r.flag = (flags & kFlag) != 0;
  if (flags & kHasValue) r.value.emplace(in.rest());
  return r;
}

}  // namespace tessera::map
