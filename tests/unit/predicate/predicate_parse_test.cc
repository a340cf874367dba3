#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>

#include "tessera/map/predicate.h"

namespace tessera::map {
namespace {

using record::GenericRecord;
using record::Value;

std::string Person(std::int64_t age, std::string city, std::string name, double price) {
  return GenericRecord::Build("Person")
      .Int64("age", age)
      .String("city", std::move(city))
      .String("name", std::move(name))
      .Float64("price", price)
      .Bool("active", true)
      .Record("address", GenericRecord::Build().String("zip", "0150").Done())
      .Done()
      .Encode();
}

Predicate MustParse(std::string_view text) {
  auto parsed = Predicate::Parse(text);
  INFO(text);
  if (!parsed) FAIL(parsed.error().message());
  return *parsed;
}

TEST_CASE("Parse: the documented examples") {
  Predicate p = MustParse(
      "age >= 18 AND (city = 'Oslo' OR city IN ('Bergen','Tromsø')) AND NOT name LIKE 'A%'");
  CHECK(p.kind() == Predicate::Kind::kAnd);
  CHECK(p.Matches("k", Person(30, "Oslo", "Bob", 1)));
  CHECK(p.Matches("k", Person(18, "Tromsø", "Bob", 1)));
  CHECK_FALSE(p.Matches("k", Person(17, "Oslo", "Bob", 1)));
  CHECK_FALSE(p.Matches("k", Person(30, "Trondheim", "Bob", 1)));
  CHECK_FALSE(p.Matches("k", Person(30, "Oslo", "Anna", 1)));

  Predicate between = MustParse("price BETWEEN 10 AND 20.5");
  CHECK(between.Matches("k", Person(1, "", "", 20.5)));
  CHECK(between.Matches("k", Person(1, "", "", 10)));
  CHECK_FALSE(between.Matches("k", Person(1, "", "", 20.6)));

  CHECK(MustParse("__key LIKE 'order-%'").Matches("order-7", "v"));
  CHECK_FALSE(MustParse("__key LIKE 'order-%'").Matches("user-7", "v"));
  CHECK(MustParse("active = true").Matches("k", Person(1, "", "", 0)));
  CHECK_FALSE(MustParse("active = false").Matches("k", Person(1, "", "", 0)));
}

TEST_CASE("Parse: operators, keywords and literals") {
  std::string person = Person(40, "Oslo", "O'Neil", 2.5);
  for (const char* text : {"age = 40",
                           "age == 40",
                           "age != 41",
                           "age <> 41",
                           "age < 41",
                           "age <= 40",
                           "age > 39",
                           "age >= 40",
                           "age=40",
                           "age = 40.0",
                           "price > 2",
                           "price = 2.5",
                           "price < 2.5e1",
                           "name = 'O''Neil'",
                           "address.zip = '0150'",
                           "age not between 1 and 39",
                           "age NOT IN (1, 2)",
                           "name not like 'A%'",
                           "not age = 1",
                           "NOT NOT age = 40",
                           "true",
                           "TRUE AND age > -1",
                           "age IN (40)",
                           "\"age\" = 40",
                           "\"address.zip\" LIKE '01__'",
                           "(((age = 40)))",
                           "age = 1 OR age = 2 OR age = 40",
                           "false OR age = 40",
                           "this = 'x' OR __key = 'k'"}) {
    CAPTURE(text);
    CHECK(MustParse(text).Matches("k", person));
  }
  for (const char* text : {"age = 41", "age < 40", "name = 'ONeil'", "false", "NOT TRUE",
                           "age BETWEEN 41 AND 50", "age = '40'", "this = 'x'"}) {
    CAPTURE(text);
    CHECK_FALSE(MustParse(text).Matches("k", person));
  }
}

TEST_CASE("Parse: AND binds tighter than OR, NOT tighter than AND") {
  // a OR b AND c  ==  a OR (b AND c)
  Predicate p = MustParse("age = 40 OR age = 1 AND city = 'Nowhere'");
  CHECK(p.kind() == Predicate::Kind::kOr);
  CHECK(p.Matches("k", Person(40, "Oslo", "", 0)));
  // NOT a AND b  ==  (NOT a) AND b
  Predicate q = MustParse("NOT age = 1 AND city = 'Oslo'");
  CHECK(q.kind() == Predicate::Kind::kAnd);
  CHECK(q.Matches("k", Person(40, "Oslo", "", 0)));
}

TEST_CASE("Parse: number literal types") {
  CHECK(MustParse("x = 9223372036854775807").ToString() == "x = 9223372036854775807");
  CHECK(MustParse("x = -9223372036854775808").ToString() == "x = -9223372036854775808");
  CHECK(MustParse("x = 20.50").ToString() == "x = 20.5");
  CHECK(MustParse("x = 3.0").ToString() == "x = 3.0");
  CHECK(MustParse("x = 1e3").ToString() == "x = 1000.0");
}

TEST_CASE("Parse errors say what was expected and where") {
  struct Case {
    const char* text;
    const char* expected;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"", "expected an attribute path, '(', NOT or TRUE at column 1, found the end"},
           {"age",
            "expected a comparison (=, !=, <, <=, >, >=, BETWEEN, IN, LIKE) after 'age' "
            "at column 4, found the end"},
           {"age >= ", "expected a value (a number, a 'string', true or false) at column 8"},
           {"age >= 18 AND", "at column 14"},
           {"age >= 18 city = 'x'", "expected AND, OR or the end at column 11, found 'city'"},
           {"(age = 1", "expected ')' at column 9"},
           {"name = 'Oslo", "unterminated string starting at column 8"},
           {"age # 3", "unexpected character '#' at column 5"},
           {"age BETWEEN 1 OR 2", "expected AND between the BETWEEN bounds at column 15"},
           {"age IN 1, 2", "expected '(' after IN at column 8"},
           {"age IN (1 2)", "expected ',' or ')' in the IN list at column 11"},
           {"name LIKE 5", "expected a 'quoted' pattern after LIKE at column 11"},
           {"name NOT = 'x'", "expected BETWEEN, IN or LIKE after NOT at column 10"},
           {"x = 99999999999999999999", "out of range"},
           {"x = 1.", "expected a digit after '.' at column 7"},
           {"x = 12ab", "unexpected 'a' in a number at column 7"},
           {"a..b = 1", "empty segment"},
           {"AND = 1", "expected an attribute path"},
           {"name LIKE 'x\\'", "lone"},
       }) {
    CAPTURE(c.text);
    auto result = Predicate::Parse(c.text);
    REQUIRE_FALSE(result);
    CHECK(result.error().code() == base::ErrorCode::kBadPredicate);
    CHECK_THAT(result.error().message(), Catch::Contains(c.expected));
  }
}

TEST_CASE("Parse rejects hostile nesting without exhausting the stack") {
  std::string deep(100000, '(');
  auto result = Predicate::Parse(deep);
  REQUIRE_FALSE(result);
  CHECK_THAT(result.error().message(), Catch::Contains("nests deeper than"));
  std::string nots;
  for (int i = 0; i < 10000; ++i) nots += "NOT ";
  CHECK_FALSE(Predicate::Parse(nots + "a = 1"));
  // Within the limit is fine.
  CHECK(Predicate::Parse(std::string(30, '(') + "a = 1" + std::string(30, ')')));
}

TEST_CASE("Parse(ToString(p)) is equivalent to p") {
  std::vector<Predicate> samples = {
      Predicate(),
      Predicate::Equal("qty", Value(std::int64_t{3})),
      Predicate::NotEqual("address.city", Value("O'Neil")),
      Predicate::Less("price", Value(10.5)),
      Predicate::LessEqual("price", Value(100.0)),
      Predicate::Greater("id", Value(std::numeric_limits<std::int64_t>::min())),
      Predicate::GreaterEqual("paid", Value(false)),
      Predicate::Between("price", Value(1e-7), Value(1e20)),
      Predicate::Between("price", Value(0.1), Value(std::numeric_limits<double>::max())),
      Predicate::In("city", {Value("Bergen"), Value("Tromsø"), Value(std::int64_t{7})}),
      Predicate::Like("__key", "order-\\%_%"),
      Predicate::Equal("weird name.and", Value("x\ny")),
      Predicate::Equal("in", Value("x")),
      Predicate::Equal("say \"hi\"", Value("x")),
      Predicate::Equal("_9.0", Value(std::int64_t{-1})),
      Predicate::Not(Predicate::Not(Predicate::Equal("a", Value(true)))),
      Predicate::And({Predicate::Or({Predicate::Equal("a", Value(std::int64_t{1})),
                                     Predicate::Equal("b", Value(std::int64_t{2}))}),
                      Predicate::Not(Predicate::Like("this", "A%")),
                      Predicate::Not(Predicate::And({Predicate::True(), Predicate::True()}))}),
  };
  for (const Predicate& p : samples) {
    std::string text = p.ToString();
    CAPTURE(text);
    Predicate reparsed = MustParse(text);
    CHECK(reparsed.ToString() == text);
    CHECK(reparsed.Encode() == p.Encode());
  }
  // int32 operands come back as int64 (the text syntax has one integer type) and still match.
  Predicate p = Predicate::Equal("age", Value(std::int32_t{40}));
  CHECK(MustParse(p.ToString()).Matches("k", Person(40, "", "", 0)));
}

}  // namespace
}  // namespace tessera::map
