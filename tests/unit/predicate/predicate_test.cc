#include "tessera/map/predicate.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <random>
#include <string>

namespace tessera::map {
namespace {

using record::Bytes;
using record::GenericRecord;
using record::Value;

std::string OrderBytes() {
  GenericRecord address = GenericRecord::Build("Address").String("city", "Oslo").Done();
  return GenericRecord::Build("Order")
      .Int32("qty", 3)
      .Int64("id", 9007199254740993)  // 2^53 + 1: not representable as a double
      .Float64("price", 10.5)
      .Bool("paid", true)
      .String("name", "Anna")
      .String("city", "Tromsø")
      .BytesField("raw", "abc")
      .Null("note")
      .Record("address", address)
      .List("tags", {Value("x")})
      .Done()
      .Encode();
}

bool M(const Predicate& p) { return p.Matches("order-1", OrderBytes()); }

TEST_CASE("comparison operators on each field type") {
  CHECK(M(Predicate::Equal("qty", Value(std::int32_t{3}))));
  CHECK_FALSE(M(Predicate::Equal("qty", Value(std::int32_t{4}))));
  CHECK(M(Predicate::NotEqual("qty", Value(std::int32_t{4}))));
  CHECK_FALSE(M(Predicate::NotEqual("qty", Value(std::int32_t{3}))));
  CHECK(M(Predicate::Less("price", Value(11.0))));
  CHECK_FALSE(M(Predicate::Less("price", Value(10.5))));
  CHECK(M(Predicate::LessEqual("price", Value(10.5))));
  CHECK(M(Predicate::Greater("name", Value("Ann"))));
  CHECK_FALSE(M(Predicate::Greater("name", Value("B"))));
  CHECK(M(Predicate::GreaterEqual("name", Value("Anna"))));
  CHECK(M(Predicate::Equal("paid", Value(true))));
  CHECK(M(Predicate::NotEqual("paid", Value(false))));
  CHECK(M(Predicate::Equal("raw", Value("abc"))));
  CHECK(M(Predicate::Equal("raw", Value(Bytes{"abc"}))));
}

TEST_CASE("bools support only equality") {
  CHECK_FALSE(M(Predicate::Less("paid", Value(false))));
  CHECK_FALSE(M(Predicate::GreaterEqual("paid", Value(true))));
  CHECK_FALSE(M(Predicate::Between("paid", Value(false), Value(true))));
}

TEST_CASE("numbers compare by value across int32, int64 and float64") {
  CHECK(M(Predicate::Equal("qty", Value(std::int64_t{3}))));
  CHECK(M(Predicate::Equal("qty", Value(3.0))));
  CHECK(M(Predicate::Less("qty", Value(3.5))));
  CHECK(M(Predicate::Greater("price", Value(std::int64_t{10}))));
  CHECK(M(Predicate::Less("price", Value(std::int32_t{11}))));
  CHECK(M(Predicate::Between("qty", Value(2.5), Value(std::int64_t{3}))));
  CHECK(M(Predicate::In("qty", {Value("3"), Value(3.0)})));
  // Exact, not via double: 2^53+1 is greater than the double 2^53.
  CHECK(M(Predicate::Greater("id", Value(9007199254740992.0))));
  CHECK_FALSE(M(Predicate::Equal("id", Value(9007199254740992.0))));
  CHECK(M(Predicate::Less("id", Value(1e300))));
  CHECK(M(Predicate::Greater("id", Value(-1e300))));
  // A string never equals a number, and != is false too (not comparable).
  CHECK_FALSE(M(Predicate::Equal("qty", Value("3"))));
  CHECK_FALSE(M(Predicate::NotEqual("qty", Value("3"))));
}

TEST_CASE("missing fields, nulls and non-scalars make every comparison false") {
  for (const char* path : {"missing", "note", "address", "tags", "address.zip", "name.x"}) {
    CAPTURE(path);
    CHECK_FALSE(M(Predicate::Equal(path, Value(std::int64_t{1}))));
    CHECK_FALSE(M(Predicate::NotEqual(path, Value(std::int64_t{1}))));
    CHECK_FALSE(M(Predicate::Less(path, Value(std::int64_t{1}))));
    CHECK_FALSE(M(Predicate::GreaterEqual(path, Value(std::int64_t{1}))));
    CHECK_FALSE(M(Predicate::In(path, {Value(std::int64_t{1})})));
    CHECK_FALSE(M(Predicate::Like(path, "%")));
    CHECK(M(Predicate::Not(Predicate::Equal(path, Value(std::int64_t{1})))));
  }
}

TEST_CASE("dotted paths reach nested records") {
  CHECK(M(Predicate::Equal("address.city", Value("Oslo"))));
  CHECK_FALSE(M(Predicate::Equal("address.city", Value("Bergen"))));
}

TEST_CASE("between is inclusive and in matches any listed value") {
  CHECK(M(Predicate::Between("price", Value(10.5), Value(20.0))));
  CHECK(M(Predicate::Between("price", Value(1.0), Value(10.5))));
  CHECK_FALSE(M(Predicate::Between("price", Value(10.6), Value(20.0))));
  CHECK_FALSE(M(Predicate::Between("price", Value(20.0), Value(1.0))));
  CHECK(M(Predicate::In("city", {Value("Bergen"), Value("Tromsø")})));
  CHECK_FALSE(M(Predicate::In("city", {Value("Bergen"), Value("Oslo")})));
}

TEST_CASE("__key and this") {
  CHECK(M(Predicate::Equal("__key", Value("order-1"))));
  CHECK(M(Predicate::Like("__key", "order-%")));
  CHECK(M(Predicate::Greater("__key", Value("order-0"))));
  // A plain string value: `this` is the string, field paths never match.
  CHECK(Predicate::Equal("this", Value("hello")).Matches("k", "hello"));
  CHECK(Predicate::Like("this", "h_llo").Matches("k", "hello"));
  CHECK_FALSE(Predicate::Equal("this", Value("hello")).Matches("k", "world"));
  CHECK_FALSE(Predicate::Equal("name", Value("hello")).Matches("k", "hello"));
  CHECK(Predicate::Equal("__key", Value("k")).Matches("k", "not a record"));
  // A record value: `this` is not a string.
  CHECK_FALSE(M(Predicate::Like("this", "%")));
}

TEST_CASE("Matches with a pre-decoded value agrees with decoding itself") {
  auto decoded = GenericRecord::Decode(OrderBytes());
  REQUIRE(decoded);
  Predicate p = Predicate::And(
      {Predicate::Equal("address.city", Value("Oslo")), Predicate::Like("__key", "order-_")});
  CHECK(p.Matches("order-1", OrderBytes(), &*decoded));
  CHECK_FALSE(p.Matches("order-1", OrderBytes(), nullptr));
  CHECK(Predicate::Equal("this", Value("v")).Matches("k", "v", nullptr));
}

TEST_CASE("like wildcards, escapes and UTF-8") {
  auto like = [](std::string pattern, std::string text) {
    return Predicate::Like("this", std::move(pattern)).Matches("k", text, nullptr);
  };
  CHECK(like("", ""));
  CHECK_FALSE(like("", "a"));
  CHECK(like("%", ""));
  CHECK(like("%", "anything"));
  CHECK(like("a%", "abc"));
  CHECK_FALSE(like("a%", "bac"));
  CHECK(like("%c", "abc"));
  CHECK(like("%b%", "abc"));
  CHECK(like("a_c", "abc"));
  CHECK_FALSE(like("a_c", "ac"));
  CHECK_FALSE(like("a_c", "abbc"));
  CHECK(like("a%b%c", "aXbYbZc"));
  CHECK_FALSE(like("a%b%c", "aXcYb"));
  CHECK(like("%%a", "ba"));
  CHECK(like("100\\%", "100%"));
  CHECK_FALSE(like("100\\%", "1000"));
  CHECK(like("a\\_b", "a_b"));
  CHECK_FALSE(like("a\\_b", "axb"));
  CHECK(like("a\\\\b", "a\\b"));
  CHECK(like("Troms_", "Tromsø"));  // '_' is one character, even when it is 2 bytes
  CHECK_FALSE(like("Troms__", "Tromsø"));
  CHECK(like("%ø", "Tromsø"));
  CHECK_FALSE(like("%__", "€"));  // 3 bytes, one character
  CHECK(like("ABC", "ABC"));
  CHECK_FALSE(like("ABC", "abc"));      // case-sensitive
  CHECK_FALSE(like("abc\\", "abc\\"));  // invalid pattern never matches
}

TEST_CASE("and, or, not") {
  Predicate yes = Predicate::Equal("qty", Value(std::int32_t{3}));
  Predicate no = Predicate::Equal("qty", Value(std::int32_t{4}));
  CHECK(M(Predicate::And({yes, yes})));
  CHECK_FALSE(M(Predicate::And({yes, no})));
  CHECK(M(Predicate::Or({no, yes})));
  CHECK_FALSE(M(Predicate::Or({no, no})));
  CHECK(M(Predicate::Not(no)));
  CHECK_FALSE(M(Predicate::Not(yes)));
  CHECK(M(Predicate::True()));
  CHECK(M(Predicate()));
  CHECK(Predicate().Matches("", ""));
}

TEST_CASE("Validate reports structural problems as kBadPredicate") {
  CHECK(Predicate::Equal("a", Value(std::int64_t{1})).Validate());
  struct Case {
    Predicate predicate;
    std::string expected;
  };
  std::vector<Case> cases = {
      {Predicate::Equal("", Value(std::int64_t{1})), "empty attribute path"},
      {Predicate::Equal("a..b", Value(std::int64_t{1})), "empty segment"},
      {Predicate::Equal("a", Value()), "null operand"},
      {Predicate::Equal("a", Value(GenericRecord())), "record operand"},
      {Predicate::Less("a", Value(std::numeric_limits<double>::quiet_NaN())), "non-finite"},
      {Predicate::In("a", {}), "at least 1 value"},
      {Predicate::Like("a", "x\\"), "lone"},
      {Predicate::And({}), "and predicate needs at least 1 operand"},
      {Predicate::Or({Predicate::Equal("", Value(std::int64_t{1}))}), "empty attribute path"},
      {Predicate::Not(Predicate::Like("", "x")), "empty attribute path"},
  };
  for (const Case& c : cases) {
    auto result = c.predicate.Validate();
    REQUIRE_FALSE(result);
    CHECK(result.error().code() == base::ErrorCode::kBadPredicate);
    CHECK_THAT(result.error().message(), Catch::Contains(c.expected));
  }
}

std::vector<Predicate> Samples() {
  return {
      Predicate(),
      Predicate::Equal("qty", Value(std::int32_t{3})),
      Predicate::NotEqual("address.city", Value("O'Neil")),
      Predicate::Less("price", Value(10.5)),
      Predicate::LessEqual("price", Value(100.0)),
      Predicate::Greater("id", Value(std::numeric_limits<std::int64_t>::min())),
      Predicate::GreaterEqual("paid", Value(false)),
      Predicate::Between("price", Value(1e-7), Value(1e20)),
      Predicate::In("city", {Value("Bergen"), Value("Tromsø"), Value(std::int64_t{7})}),
      Predicate::Like("__key", "order-\\%_%"),
      Predicate::Equal("weird name.and", Value("x")),
      Predicate::Equal("and", Value(Bytes{"raw"})),
      Predicate::And({Predicate::Or({Predicate::Equal("a", Value(std::int64_t{1})),
                                     Predicate::Equal("b", Value(std::int64_t{2}))}),
                      Predicate::Not(Predicate::Like("this", "A%")),
                      Predicate::Not(Predicate::And({Predicate::True(), Predicate::True()}))}),
  };
}

TEST_CASE("Encode/Decode round-trips every kind") {
  for (const Predicate& p : Samples()) {
    CAPTURE(p.ToString());
    auto decoded = Predicate::Decode(p.Encode());
    REQUIRE(decoded);
    CHECK(decoded->kind() == p.kind());
    CHECK(decoded->ToString() == p.ToString());
    CHECK(decoded->Encode() == p.Encode());
  }
}

TEST_CASE("Decode rejects invalid predicates and garbage without crashing") {
  auto invalid = Predicate::Decode(Predicate::In("a", {}).Encode());
  REQUIRE_FALSE(invalid);
  CHECK(invalid.error().code() == base::ErrorCode::kBadPredicate);

  auto not_predicate =
      Predicate::Decode(GenericRecord::Build("Order").Int32("kind", 1).Done().Encode());
  REQUIRE_FALSE(not_predicate);
  CHECK(not_predicate.error().code() == base::ErrorCode::kBadPredicate);

  auto bad_kind =
      Predicate::Decode(GenericRecord::Build("Predicate").Int32("kind", 99).Done().Encode());
  REQUIRE_FALSE(bad_kind);
  CHECK_THAT(bad_kind.error().message(), Catch::Contains("unknown kind 99"));

  auto wrong_type =
      Predicate::Decode(GenericRecord::Build("Predicate").String("kind", "1").Done().Encode());
  REQUIRE_FALSE(wrong_type);
  CHECK(wrong_type.error().code() == base::ErrorCode::kBadPredicate);

  std::mt19937_64 rng(7);
  std::string valid = Samples().back().Encode();
  for (int i = 0; i < 1000; ++i) {
    std::string bytes = valid;
    for (int flips = 0; flips < 2; ++flips) bytes[rng() % bytes.size()] ^= char(1 << (rng() % 8));
    auto result = Predicate::Decode(bytes);
    if (result) {
      CHECK(result->Validate());
      CHECK_NOTHROW(result->Matches("k", OrderBytes()));
    } else {
      bool expected_code = result.error().code() == base::ErrorCode::kBadPredicate ||
                           result.error().code() == base::ErrorCode::kBadRequest;
      CHECK(expected_code);
    }
  }
}

}  // namespace
}  // namespace tessera::map
