#include "tessera/record/generic_record.h"

#include <catch2/catch.hpp>

#include <stdexcept>

namespace tessera::record {
namespace {

using base::ErrorCode;

GenericRecord Address(std::string city) {
  return GenericRecord::Build("Address").String("city", std::move(city)).Int32("zip", 1234).Done();
}

GenericRecord Order() {
  GenericRecord customer = GenericRecord::Build("Customer")
                               .String("name", "Ada")
                               .Record("address", Address("Oslo"))
                               .Done();
  return GenericRecord::Build("Order")
      .Int64("id", 7)
      .String("state", "NEW")
      .Float64("total", 12.5)
      .Bool("paid", false)
      .Null("note")
      .Record("customer", customer)
      .List("tags", {Value("a"), Value("b")})
      .Done();
}

TEST_CASE("builder keeps field order and replaces same-name fields in place") {
  GenericRecord r = GenericRecord::Build("T").Int32("a", 1).Int32("b", 2).Int32("a", 3).Done();
  REQUIRE(r.type_name() == "T");
  REQUIRE(r.fields().size() == 2);
  CHECK(r.fields()[0].name == "a");
  CHECK(r.fields()[0].value.AsInt32() == 3);
  CHECK(r.fields()[1].name == "b");
}

TEST_CASE("Value reports its type and typed access checks it") {
  CHECK(Value().type() == FieldType::kNull);
  CHECK(Value().is_null());
  CHECK(Value(std::int32_t{1}).type() == FieldType::kInt32);
  CHECK(Value(std::int64_t{1}).type() == FieldType::kInt64);
  CHECK(Value(1.0).type() == FieldType::kFloat64);
  CHECK(Value(true).type() == FieldType::kBool);
  CHECK(Value("x").type() == FieldType::kString);
  CHECK(Value(Bytes{"x"}).type() == FieldType::kBytes);
  CHECK(Value(GenericRecord()).type() == FieldType::kRecord);
  CHECK(Value(std::vector<Value>{}).type() == FieldType::kList);
  CHECK_THROWS_AS(Value("x").AsInt64(), std::logic_error);
  CHECK(Value(std::int64_t{1}) != Value(std::int32_t{1}));
  CHECK(Value("x") != Value(Bytes{"x"}));
  CHECK(FieldTypeName(FieldType::kFloat64) == "float64");
}

TEST_CASE("records compare by content, including nested records") {
  CHECK(Order() == Order());
  GenericRecord other = Order();
  REQUIRE(other.SetPath("customer.address.city", Value("Bergen")));
  CHECK_FALSE(other == Order());
}

TEST_CASE("Find and typed getters follow dotted paths") {
  GenericRecord r = Order();
  REQUIRE(r.Find("customer.address.city") != nullptr);
  CHECK(r.Find("customer.address.city")->AsString() == "Oslo");
  CHECK(r.Find("customer.missing") == nullptr);
  CHECK(r.Find("state.x") == nullptr);
  CHECK(r.GetInt64("id").value() == 7);
  CHECK(r.GetString("state").value() == "NEW");
  CHECK(r.GetFloat64("total").value() == 12.5);
  CHECK(r.GetBool("paid").value() == false);
  CHECK(r.GetInt32("customer.address.zip").value() == 1234);
  CHECK(r.GetRecord("customer.address").value() == Address("Oslo"));
}

TEST_CASE("typed getter errors name the field and both types") {
  GenericRecord r = Order();
  auto missing = r.GetInt64("nope");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code() == ErrorCode::kNotFound);
  CHECK_THAT(missing.error().message(), Catch::Contains("'nope'"));

  auto nested_missing = r.GetString("customer.address.street");
  REQUIRE_FALSE(nested_missing);
  CHECK(nested_missing.error().code() == ErrorCode::kNotFound);
  CHECK_THAT(nested_missing.error().message(), Catch::Contains("'street'"));

  auto wrong = r.GetInt64("state");
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().code() == ErrorCode::kWrongType);
  CHECK_THAT(wrong.error().message(), Catch::Contains("'state'"));
  CHECK_THAT(wrong.error().message(), Catch::Contains("string"));
  CHECK_THAT(wrong.error().message(), Catch::Contains("int64"));

  auto null = r.GetString("note");
  REQUIRE_FALSE(null);
  CHECK(null.error().code() == ErrorCode::kWrongType);
  CHECK_THAT(null.error().message(), Catch::Contains("'note' is null"));

  auto through_scalar = r.GetString("state.inner");
  REQUIRE_FALSE(through_scalar);
  CHECK(through_scalar.error().code() == ErrorCode::kWrongType);
  CHECK_THAT(through_scalar.error().message(), Catch::Contains("'state' is string"));
}

TEST_CASE("SetPath replaces nested fields without touching the original") {
  GenericRecord original = Order();
  GenericRecord r = original;
  REQUIRE(r.SetPath("customer.address.city", Value("Tromsø")));
  REQUIRE(r.SetPath("customer.vip", Value(true)));
  REQUIRE(r.SetPath("state", Value("PAID")));
  CHECK(r.GetString("customer.address.city").value() == "Tromsø");
  CHECK(r.GetBool("customer.vip").value());
  CHECK(r.GetString("state").value() == "PAID");
  CHECK(original.GetString("customer.address.city").value() == "Oslo");
  CHECK(r.fields().size() == original.fields().size());

  auto missing = r.SetPath("customer.phone.number", Value("1"));
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code() == ErrorCode::kNotFound);
  CHECK_THAT(missing.error().message(), Catch::Contains("'customer.phone'"));

  auto scalar = r.SetPath("state.x", Value(1));
  REQUIRE_FALSE(scalar);
  CHECK(scalar.error().code() == ErrorCode::kWrongType);
  CHECK_THAT(scalar.error().message(), Catch::Contains("'state'"));
}

TEST_CASE("Remove and ToBuilder") {
  GenericRecord r = Order();
  CHECK(r.Remove("state"));
  CHECK_FALSE(r.Remove("state"));
  CHECK(r.Find("state") == nullptr);
  GenericRecord derived = r.ToBuilder().Int64("id", 8).Done();
  CHECK(derived.GetInt64("id").value() == 8);
  CHECK(r.GetInt64("id").value() == 7);
  CHECK(derived.type_name() == "Order");
}

TEST_CASE("ToJson renders fields in order with @type and base64 bytes") {
  GenericRecord r = GenericRecord::Build("Order")
                        .Int64("id", 7)
                        .String("s", "a\"b")
                        .Null("n")
                        .BytesField("raw", std::string("\x00\xff\x10", 3))
                        .List("l", {Value(std::int32_t{1}), Value(true)})
                        .Record("c", GenericRecord::Build().Float64("x", 1.5).Done())
                        .Done();
  CHECK(r.ToJson() == R"({"@type":"Order","id":7,"s":"a\"b","n":null,"raw":{"@bytes":"AP8Q"},)"
                      R"("l":[1,true],"c":{"x":1.5}})");
  CHECK(GenericRecord().ToJson() == "{}");
  // Invalid UTF-8 must not throw.
  CHECK_NOTHROW(GenericRecord::Build().String("bad", "\xff\xfe").Done().ToJson());
}

}  // namespace
}  // namespace tessera::record
