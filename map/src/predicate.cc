// Predicate evaluation, validation, wire form and text form (the parser lives in
// predicate_parser.cc).
//
// Matching resolves the attribute path to a Scalar view (number, bool, text, or nothing)
// without copying the field, then compares views: integers and doubles compare exactly by
// numeric value (no int64 -> double rounding), text bytewise. Anything else is "not
// comparable", which makes the comparison false, as the header promises. Matches(key, value)
// decodes the value once, and only if some path other than __key needs it.
//
// `like` works on code points: both the pattern and the text are decoded as UTF-8 (a byte
// that is not part of a valid sequence counts as one character), so '_' matches "ø".
#include "tessera/map/predicate.h"

#include <charconv>
#include <cmath>
#include <compare>
#include <optional>
#include <string>
#include <utility>

#include "predicate_parser.h"

namespace tessera::map {
namespace {

using record::FieldType;
using record::GenericRecord;
using record::Value;

constexpr int kMaxKind = static_cast<int>(Predicate::Kind::kNot);

// ---- Resolving attribute paths -----------------------------------------------------------

// The entry being matched. `record` is null when the value is not a GenericRecord.
class Entry {
 public:
  Entry(std::string_view key, std::string_view raw, const GenericRecord* record)
      : key_(key), raw_(raw), record_(record) {}

  std::string_view key() const { return key_; }
  std::string_view raw() const { return raw_; }
  const GenericRecord* Record() const { return record_; }

 private:
  std::string_view key_;
  std::string_view raw_;
  const GenericRecord* record_;
};

struct Scalar {
  enum class Kind : std::uint8_t { kNone, kInt, kFloat, kBool, kText };
  Kind kind = Kind::kNone;
  std::int64_t i = 0;
  double d = 0;
  bool b = false;
  std::string_view text;
};

Scalar FromValue(const Value& v) {
  Scalar s;
  switch (v.type()) {
    case FieldType::kInt32:
      s.kind = Scalar::Kind::kInt;
      s.i = v.AsInt32();
      break;
    case FieldType::kInt64:
      s.kind = Scalar::Kind::kInt;
      s.i = v.AsInt64();
      break;
    case FieldType::kFloat64:
      s.kind = Scalar::Kind::kFloat;
      s.d = v.AsFloat64();
      break;
    case FieldType::kBool:
      s.kind = Scalar::Kind::kBool;
      s.b = v.AsBool();
      break;
    case FieldType::kString:
      s.kind = Scalar::Kind::kText;
      s.text = v.AsString();
      break;
    case FieldType::kBytes:
      s.kind = Scalar::Kind::kText;
      s.text = v.AsBytes().data;
      break;
    default:
      break;  // null, record, list: not comparable
  }
  return s;
}

Scalar Text(std::string_view text) {
  Scalar s;
  s.kind = Scalar::Kind::kText;
  s.text = text;
  return s;
}

Scalar Resolve(const std::string& path, const Entry& entry) {
  if (path == "__key") return Text(entry.key());
  const GenericRecord* record = entry.Record();
  if (path == "this") return record == nullptr ? Text(entry.raw()) : Scalar{};
  if (record == nullptr) return Scalar{};
  const Value* value = record->Find(path);
  return value == nullptr ? Scalar{} : FromValue(*value);
}

// ---- Comparing ---------------------------------------------------------------------------

// Exact comparison of an integer with a double (casting the int would round above 2^53).
std::partial_ordering CompareIntDouble(std::int64_t i, double d) {
  if (std::isnan(d)) return std::partial_ordering::unordered;
  if (d >= 9223372036854775808.0) return std::partial_ordering::less;
  if (d < -9223372036854775808.0) return std::partial_ordering::greater;
  double floor = std::floor(d);
  auto whole = static_cast<std::int64_t>(floor);
  if (i != whole) return i < whole ? std::partial_ordering::less : std::partial_ordering::greater;
  return floor == d ? std::partial_ordering::equivalent : std::partial_ordering::less;
}

bool IsNumber(const Scalar& s) {
  return s.kind == Scalar::Kind::kInt || s.kind == Scalar::Kind::kFloat;
}

// Ordering of numbers and of text; unordered for everything else.
std::partial_ordering Order(const Scalar& a, const Scalar& b) {
  using K = Scalar::Kind;
  if (a.kind == K::kText && b.kind == K::kText) return a.text <=> b.text;
  if (!IsNumber(a) || !IsNumber(b)) return std::partial_ordering::unordered;
  if (a.kind == K::kInt && b.kind == K::kInt) return a.i <=> b.i;
  if (a.kind == K::kFloat && b.kind == K::kFloat) return a.d <=> b.d;
  if (a.kind == K::kInt) return CompareIntDouble(a.i, b.d);
  return 0 <=> CompareIntDouble(b.i, a.d);
}

// nullopt when the two cannot be compared (then both = and != are false).
std::optional<bool> Equals(const Scalar& a, const Scalar& b) {
  if (a.kind == Scalar::Kind::kBool && b.kind == Scalar::Kind::kBool) return a.b == b.b;
  std::partial_ordering order = Order(a, b);
  if (order == std::partial_ordering::unordered) return std::nullopt;
  return order == std::partial_ordering::equivalent;
}

// ---- like --------------------------------------------------------------------------------

constexpr char32_t kRawByteBase = 0x110000;  // beyond Unicode: bytes outside valid UTF-8

std::u32string DecodeUtf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    auto lead = static_cast<unsigned char>(s[i]);
    std::size_t len = lead < 0x80         ? 1
                      : (lead >> 5) == 6  ? 2
                      : (lead >> 4) == 14 ? 3
                      : (lead >> 3) == 30 ? 4
                                          : 0;
    char32_t cp = len == 1 ? lead : len == 2 ? lead & 0x1F : len == 3 ? lead & 0x0F : lead & 0x07;
    bool valid = len != 0 && i + len <= s.size();
    for (std::size_t k = 1; valid && k < len; ++k) {
      auto next = static_cast<unsigned char>(s[i + k]);
      valid = (next & 0xC0) == 0x80;
      cp = (cp << 6) | (next & 0x3F);
    }
    if (!valid) {
      out.push_back(kRawByteBase + lead);
      ++i;
    } else {
      out.push_back(cp);
      i += len;
    }
  }
  return out;
}

struct LikeToken {
  enum class Kind : std::uint8_t { kChar, kOne, kAny };
  Kind kind;
  char32_t ch = 0;
};

// nullopt if the pattern ends in a lone escape character.
std::optional<std::vector<LikeToken>> CompileLike(std::string_view pattern) {
  std::u32string chars = DecodeUtf8(pattern);
  std::vector<LikeToken> tokens;
  for (std::size_t i = 0; i < chars.size(); ++i) {
    if (chars[i] == U'\\') {
      if (++i == chars.size()) return std::nullopt;
      tokens.push_back({LikeToken::Kind::kChar, chars[i]});
    } else if (chars[i] == U'%') {
      tokens.push_back({LikeToken::Kind::kAny});
    } else if (chars[i] == U'_') {
      tokens.push_back({LikeToken::Kind::kOne});
    } else {
      tokens.push_back({LikeToken::Kind::kChar, chars[i]});
    }
  }
  return tokens;
}

// Greedy wildcard match that backtracks only to the last '%': O(text * pattern) worst case.
bool LikeMatches(const std::vector<LikeToken>& pattern, std::string_view text_bytes) {
  std::u32string text = DecodeUtf8(text_bytes);
  std::size_t t = 0, p = 0, star = std::string::npos, star_t = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p].kind == LikeToken::Kind::kAny) {
      star = p++;
      star_t = t;
    } else if (p < pattern.size() &&
               (pattern[p].kind == LikeToken::Kind::kOne || pattern[p].ch == text[t])) {
      ++p;
      ++t;
    } else if (star != std::string::npos) {
      p = star + 1;
      t = ++star_t;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p].kind == LikeToken::Kind::kAny) ++p;
  return p == pattern.size();
}

bool MatchLike(const std::string& pattern, const Scalar& value) {
  if (value.kind != Scalar::Kind::kText) return false;
  // TODO(perf): compile once per predicate instead of once per entry.
  auto compiled = CompileLike(pattern);
  return compiled && LikeMatches(*compiled, value.text);
}

// ---- Validation and text helpers ---------------------------------------------------------

std::string_view KindName(Predicate::Kind kind) {
  static constexpr std::string_view kNames[] = {
      "true",    "equal", "notEqual", "less", "lessEqual", "greater", "greaterEqual",
      "between", "in",    "like",     "and",  "or",        "not"};
  auto index = static_cast<std::size_t>(kind);
  return index < std::size(kNames) ? kNames[index] : "unknown";
}

base::Result<void> BadPredicate(std::string message) {
  return base::Fail(base::ErrorCode::kBadPredicate, std::move(message));
}

base::Result<void> ValidatePath(const std::string& path, Predicate::Kind kind) {
  std::string where = std::string(KindName(kind)) + " predicate";
  if (path.empty()) return BadPredicate(where + " has an empty attribute path");
  if (path.front() == '.' || path.back() == '.' || path.find("..") != std::string::npos) {
    return BadPredicate(where + " on '" + path +
                        "': attribute path has an empty segment (check the dots)");
  }
  return {};
}

base::Result<void> ValidateOperand(const Value& v, const std::string& path, Predicate::Kind kind) {
  std::string where = std::string(KindName(kind)) + " predicate on '" + path + "'";
  switch (v.type()) {
    case FieldType::kNull:
      return BadPredicate(where + " has a null operand, which never matches");
    case FieldType::kRecord:
    case FieldType::kList:
      return BadPredicate(where + " has a " + std::string(record::FieldTypeName(v.type())) +
                          " operand; operands must be numbers, strings, bools or bytes");
    case FieldType::kFloat64:
      if (!std::isfinite(v.AsFloat64())) {
        return BadPredicate(where + " has a non-finite float64 operand");
      }
      return {};
    default:
      return {};
  }
}

std::string QuoteText(std::string_view text, char quote) {
  std::string out(1, quote);
  for (char c : text) {
    if (c == quote) out += quote;
    out += c;
  }
  out += quote;
  return out;
}

std::string PathText(const std::string& path) {
  return internal::IsBarePath(path) ? path : QuoteText(path, '"');
}

std::string DoubleText(double d) {
  char buffer[32];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), d);
  std::string text(buffer, ec == std::errc() ? end : buffer);
  // Keep it a float64 when parsed back: the text syntax reads "100" as an int64.
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

std::string LiteralText(const Value& v) {
  switch (v.type()) {
    case FieldType::kInt32:
      return std::to_string(v.AsInt32());
    case FieldType::kInt64:
      return std::to_string(v.AsInt64());
    case FieldType::kFloat64:
      return DoubleText(v.AsFloat64());
    case FieldType::kBool:
      return v.AsBool() ? "true" : "false";
    case FieldType::kString:
      return QuoteText(v.AsString(), '\'');
    case FieldType::kBytes:
      return QuoteText(v.AsBytes().data, '\'');
    default:
      return "null";  // not valid; Validate() rejects such operands
  }
}

}  // namespace

// ---- Factories ---------------------------------------------------------------------------

Predicate Predicate::True() { return Predicate(); }

Predicate Predicate::Equal(std::string path, record::Value v) {
  Predicate p;
  p.kind_ = Kind::kEqual;
  p.path_ = std::move(path);
  p.operands_.push_back(std::move(v));
  return p;
}

Predicate Predicate::NotEqual(std::string path, record::Value v) {
  Predicate p = Equal(std::move(path), std::move(v));
  p.kind_ = Kind::kNotEqual;
  return p;
}

Predicate Predicate::Less(std::string path, record::Value v) {
  Predicate p = Equal(std::move(path), std::move(v));
  p.kind_ = Kind::kLess;
  return p;
}

Predicate Predicate::LessEqual(std::string path, record::Value v) {
  Predicate p = Equal(std::move(path), std::move(v));
  p.kind_ = Kind::kLessEqual;
  return p;
}

Predicate Predicate::Greater(std::string path, record::Value v) {
  Predicate p = Equal(std::move(path), std::move(v));
  p.kind_ = Kind::kGreater;
  return p;
}

Predicate Predicate::GreaterEqual(std::string path, record::Value v) {
  Predicate p = Equal(std::move(path), std::move(v));
  p.kind_ = Kind::kGreaterEqual;
  return p;
}

Predicate Predicate::Between(std::string path, record::Value low, record::Value high) {
  Predicate p;
  p.kind_ = Kind::kBetween;
  p.path_ = std::move(path);
  p.operands_.push_back(std::move(low));
  p.operands_.push_back(std::move(high));
  return p;
}

Predicate Predicate::In(std::string path, std::vector<record::Value> values) {
  Predicate p;
  p.kind_ = Kind::kIn;
  p.path_ = std::move(path);
  p.operands_ = std::move(values);
  return p;
}

Predicate Predicate::Like(std::string path, std::string pattern) {
  Predicate p;
  p.kind_ = Kind::kLike;
  p.path_ = std::move(path);
  p.pattern_ = std::move(pattern);
  return p;
}

Predicate Predicate::And(std::vector<Predicate> operands) {
  Predicate p;
  p.kind_ = Kind::kAnd;
  p.children_ = std::move(operands);
  return p;
}

Predicate Predicate::Or(std::vector<Predicate> operands) {
  Predicate p = And(std::move(operands));
  p.kind_ = Kind::kOr;
  return p;
}

Predicate Predicate::Not(Predicate operand) {
  std::vector<Predicate> children;
  children.push_back(std::move(operand));
  Predicate p = And(std::move(children));
  p.kind_ = Kind::kNot;
  return p;
}

// ---- Matching ----------------------------------------------------------------------------

bool Predicate::Matches(std::string_view key, std::string_view value) const {
  // A local class has the member function's access to Predicate's private members.
  struct Walk {
    static bool NeedsRecord(const Predicate& p) {
      for (const Predicate& child : p.children_) {
        if (NeedsRecord(child)) return true;
      }
      return p.children_.empty() && p.kind_ != Kind::kTrue && p.path_ != "__key";
    }
  };
  if (!Walk::NeedsRecord(*this)) return Matches(key, value, nullptr);
  auto decoded = GenericRecord::Decode(value);
  return Matches(key, value, decoded ? &*decoded : nullptr);
}

bool Predicate::Matches(std::string_view key, std::string_view raw_value,
                        const record::GenericRecord* decoded) const {
  struct Evaluator {
    static bool Eval(const Predicate& p, Entry& entry) {
      switch (p.kind_) {
        case Kind::kTrue:
          return true;
        case Kind::kAnd:
          for (const Predicate& child : p.children_) {
            if (!Eval(child, entry)) return false;
          }
          return true;
        case Kind::kOr:
          for (const Predicate& child : p.children_) {
            if (Eval(child, entry)) return true;
          }
          return false;
        case Kind::kNot:
          return p.children_.size() == 1 && !Eval(p.children_[0], entry);
        default:
          return Compare(p, Resolve(p.path_, entry));
      }
    }

    static bool Compare(const Predicate& p, const Scalar& v) {
      const std::vector<Value>& ops = p.operands_;
      if (p.kind_ == Kind::kLike) return MatchLike(p.pattern_, v);
      if (p.kind_ == Kind::kIn) {
        for (const Value& op : ops) {
          if (Equals(v, FromValue(op)) == true) return true;
        }
        return false;
      }
      if (p.kind_ == Kind::kBetween) {
        return ops.size() == 2 && Order(v, FromValue(ops[0])) >= 0 &&
               Order(v, FromValue(ops[1])) <= 0;
      }
      if (ops.size() != 1) return false;
      Scalar op = FromValue(ops[0]);
      switch (p.kind_) {
        case Kind::kEqual:
          return Equals(v, op) == true;
        case Kind::kNotEqual:
          return Equals(v, op) == false;
        case Kind::kLess:
          return Order(v, op) < 0;
        case Kind::kLessEqual:
          return Order(v, op) <= 0;
        case Kind::kGreater:
          return Order(v, op) > 0;
        case Kind::kGreaterEqual:
          return Order(v, op) >= 0;
        default:
          return false;
      }
    }
  };
  Entry entry(key, raw_value, decoded);
  return Evaluator::Eval(*this, entry);
}

// ---- Validation --------------------------------------------------------------------------

base::Result<void> Predicate::Validate() const {
  struct Checker {
    static base::Result<void> Check(const Predicate& p) {
      switch (p.kind_) {
        case Kind::kTrue:
          return {};
        case Kind::kAnd:
        case Kind::kOr:
        case Kind::kNot:
          return CheckChildren(p);
        case Kind::kLike:
          return CheckLike(p);
        default:
          return CheckComparison(p);
      }
    }

    static base::Result<void> CheckChildren(const Predicate& p) {
      std::string name(KindName(p.kind_));
      if (p.kind_ == Kind::kNot && p.children_.size() != 1) {
        return BadPredicate("not predicate needs exactly 1 operand, got " +
                            std::to_string(p.children_.size()));
      }
      if (p.children_.empty()) return BadPredicate(name + " predicate needs at least 1 operand");
      for (const Predicate& child : p.children_) {
        auto ok = Check(child);
        if (!ok) return ok;
      }
      return {};
    }

    static base::Result<void> CheckLike(const Predicate& p) {
      auto ok = ValidatePath(p.path_, p.kind_);
      if (!ok) return ok;
      if (!CompileLike(p.pattern_)) {
        return BadPredicate("like pattern '" + p.pattern_ + "' on '" + p.path_ +
                            "' ends in a lone '\\'; write '\\\\' for a literal backslash");
      }
      return {};
    }

    static base::Result<void> CheckComparison(const Predicate& p) {
      auto ok = ValidatePath(p.path_, p.kind_);
      if (!ok) return ok;
      std::size_t count = p.operands_.size();
      std::string name(KindName(p.kind_));
      if (p.kind_ == Kind::kBetween && count != 2) {
        return BadPredicate("between predicate on '" + p.path_ +
                            "' needs 2 operands (low, high), got " + std::to_string(count));
      }
      if (p.kind_ == Kind::kIn && count == 0) {
        return BadPredicate("in predicate on '" + p.path_ + "' needs at least 1 value");
      }
      if (p.kind_ != Kind::kBetween && p.kind_ != Kind::kIn && count != 1) {
        return BadPredicate(name + " predicate on '" + p.path_ + "' needs 1 operand, got " +
                            std::to_string(count));
      }
      for (const Value& op : p.operands_) {
        ok = ValidateOperand(op, p.path_, p.kind_);
        if (!ok) return ok;
      }
      return {};
    }
  };
  return Checker::Check(*this);
}

// ---- Wire form ---------------------------------------------------------------------------

std::string Predicate::Encode() const {
  struct Writer {
    static GenericRecord ToRecord(const Predicate& p) {
      auto builder = GenericRecord::Build("Predicate");
      builder.Int32("kind", static_cast<std::int32_t>(p.kind_));
      if (!p.path_.empty()) builder.String("path", p.path_);
      if (!p.operands_.empty()) builder.List("operands", p.operands_);
      if (p.kind_ == Kind::kLike) builder.String("pattern", p.pattern_);
      if (!p.children_.empty()) {
        std::vector<Value> children;
        for (const Predicate& child : p.children_) children.emplace_back(ToRecord(child));
        builder.List("children", std::move(children));
      }
      return builder.Done();
    }
  };
  return Writer::ToRecord(*this).Encode();
}

base::Result<Predicate> Predicate::Decode(std::string_view bytes) {
  struct Reader {
    static base::Result<Predicate> Fail(const std::string& message) {
      return base::Fail(base::ErrorCode::kBadPredicate, "not a predicate: " + message);
    }

    static base::Result<Predicate> FromRecord(const GenericRecord& r) {
      if (r.type_name() != "Predicate") return Fail("record type is '" + r.type_name() + "'");
      auto kind = r.GetInt32("kind");
      if (!kind) return Fail(kind.error().message());
      if (*kind < 0 || *kind > kMaxKind) return Fail("unknown kind " + std::to_string(*kind));
      Predicate p;
      p.kind_ = static_cast<Kind>(*kind);
      if (r.Find("path") != nullptr) {
        auto path = r.GetString("path");
        if (!path) return Fail(path.error().message());
        p.path_ = std::move(*path);
      }
      if (r.Find("pattern") != nullptr) {
        auto pattern = r.GetString("pattern");
        if (!pattern) return Fail(pattern.error().message());
        p.pattern_ = std::move(*pattern);
      }
      if (const Value* ops = r.Find("operands")) {
        if (ops->type() != FieldType::kList) return Fail("field 'operands' is not a list");
        p.operands_ = ops->AsList();
      }
      if (const Value* children = r.Find("children")) {
        if (children->type() != FieldType::kList) return Fail("field 'children' is not a list");
        for (const Value& child : children->AsList()) {
          if (child.type() != FieldType::kRecord) return Fail("a child is not a record");
          auto decoded = FromRecord(child.AsRecord());
          if (!decoded) return decoded;
          p.children_.push_back(std::move(*decoded));
        }
      }
      return p;
    }
  };
  auto record = GenericRecord::Decode(bytes);
  if (!record) return std::unexpected(record.error());
  auto predicate = Reader::FromRecord(*record);
  if (!predicate) return predicate;
  auto valid = predicate->Validate();
  if (!valid) return std::unexpected(valid.error());
  return predicate;
}

// ---- Text form ---------------------------------------------------------------------------

base::Result<Predicate> Predicate::Parse(std::string_view text) {
  return internal::ParsePredicateText(text);
}

std::string Predicate::ToString() const {
  struct Printer {
    static std::string Print(const Predicate& p) {
      switch (p.kind_) {
        case Kind::kTrue:
          return "TRUE";
        case Kind::kAnd:
          return p.children_.empty() ? "TRUE" : Join(p, " AND ");
        case Kind::kOr:
          return p.children_.empty() ? "NOT TRUE" : Join(p, " OR ");
        case Kind::kNot:
          return p.children_.empty() ? "NOT TRUE" : "NOT " + Operand(p.children_[0]);
        default:
          return Comparison(p);
      }
    }

    // Children that are and/or get parentheses so precedence never matters.
    static std::string Operand(const Predicate& child) {
      bool group = child.kind_ == Kind::kAnd || child.kind_ == Kind::kOr;
      return group ? "(" + Print(child) + ")" : Print(child);
    }

    static std::string Join(const Predicate& p, std::string_view separator) {
      std::string out;
      for (const Predicate& child : p.children_) {
        if (!out.empty()) out += separator;
        out += Operand(child);
      }
      return out;
    }

    static std::string Comparison(const Predicate& p) {
      static constexpr std::string_view kOperators[] = {"", "=", "!=", "<", "<=", ">", ">="};
      std::string path = PathText(p.path_);
      const std::vector<Value>& ops = p.operands_;
      auto op_text = [&ops](std::size_t i) {
        return i < ops.size() ? LiteralText(ops[i]) : std::string("null");
      };
      switch (p.kind_) {
        case Kind::kLike:
          return path + " LIKE " + QuoteText(p.pattern_, '\'');
        case Kind::kBetween:
          return path + " BETWEEN " + op_text(0) + " AND " + op_text(1);
        case Kind::kIn: {
          std::string out = path + " IN (";
          for (std::size_t i = 0; i < ops.size(); ++i) out += (i ? ", " : "") + op_text(i);
          return out + ")";
        }
        default:
          return path + " " + std::string(kOperators[static_cast<int>(p.kind_)]) + " " + op_text(0);
      }
    }
  };
  return Printer::Print(*this);
}

}  // namespace tessera::map
