#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>

#include "tessera/record/generic_record.h"

namespace tessera::record {
namespace {

using base::ErrorCode;

GenericRecord EveryType() {
  GenericRecord inner = GenericRecord::Build("Inner").String("k", "v").Null("nothing").Done();
  return GenericRecord::Build("Every")
      .Int32("i32", std::numeric_limits<std::int32_t>::min())
      .Int64("i64", std::numeric_limits<std::int64_t>::max())
      .Float64("f64", -0.1)
      .Bool("yes", true)
      .Bool("no", false)
      .String("text", "Tromsø")
      .String("empty", "")
      .String("nul", std::string("a\0b", 3))
      .BytesField("raw", std::string("\x00\x01\xff", 3))
      .Null("null")
      .Record("inner", inner)
      .List("ints", {Value(std::int64_t{1}), Value(std::int64_t{-2})})
      .List("mixed", {Value(), Value("s"), Value(inner), Value(std::vector<Value>{Value(2.5)})})
      .List("none", {})
      .Done();
}

TEST_CASE("Encode/Decode round-trips every field type") {
  GenericRecord original = EveryType();
  std::string bytes = original.Encode();
  CHECK(bytes.size() % 8 == 0);
  auto decoded = GenericRecord::Decode(bytes);
  REQUIRE(decoded);
  CHECK(*decoded == original);
  // Types survive: a string stays a string, bytes stay bytes, int32 stays int32.
  CHECK(decoded->Find("text")->type() == FieldType::kString);
  CHECK(decoded->Find("raw")->type() == FieldType::kBytes);
  CHECK(decoded->Find("i32")->type() == FieldType::kInt32);
  CHECK(decoded->Find("null")->is_null());
  CHECK(decoded->GetString("nul").value() == std::string("a\0b", 3));
}

TEST_CASE("Encode/Decode round-trips empty records and special doubles") {
  auto empty = GenericRecord::Decode(GenericRecord().Encode());
  REQUIRE(empty);
  CHECK(*empty == GenericRecord());
  GenericRecord r = GenericRecord::Build()
                        .Float64("inf", std::numeric_limits<double>::infinity())
                        .Float64("nan", std::nan(""))
                        .Done();
  auto decoded = GenericRecord::Decode(r.Encode());
  REQUIRE(decoded);
  CHECK(std::isinf(decoded->GetFloat64("inf").value()));
  CHECK(std::isnan(decoded->GetFloat64("nan").value()));
}

TEST_CASE("deeply nested records round-trip up to the documented depth") {
  GenericRecord r = GenericRecord::Build("Leaf").Int32("depth", 0).Done();
  for (int i = 1; i <= 30; ++i) r = GenericRecord::Build("Node").Record("child", r).Done();
  auto decoded = GenericRecord::Decode(r.Encode());
  REQUIRE(decoded);
  CHECK(*decoded == r);
  std::string path = "child";
  for (int i = 1; i < 30; ++i) path += ".child";
  CHECK(decoded->GetInt32(path + ".depth").value() == 0);
}

TEST_CASE("Decode rejects malformed input with kBadRequest") {
  for (std::string bad : {std::string(), std::string("abc"), std::string(8, '\0'),
                          std::string(16, '\xff'), std::string("not a record at all!!!!!")}) {
    auto result = GenericRecord::Decode(bad);
    REQUIRE_FALSE(result);
    CHECK(result.error().code() == ErrorCode::kBadRequest);
    CHECK_THAT(result.error().message(), Catch::StartsWith("not a GenericRecord: "));
  }
  std::string valid = EveryType().Encode();
  CHECK_FALSE(GenericRecord::Decode(valid.substr(0, valid.size() - 8)));
  CHECK_FALSE(GenericRecord::Decode(valid + std::string(8, '\0')));
}

TEST_CASE("Decode bounds the work a small hostile message can cause") {
  // A 40-byte message whose field list claims 2^29 - 1 zero-sized elements. Without a
  // traversal limit proportional to the input, decoding would loop half a billion times.
  auto word = [](std::uint64_t w) { return std::string(reinterpret_cast<const char*>(&w), 8); };
  std::string message = word(std::uint64_t{4} << 32)          // 1 segment of 4 words
                        + word(std::uint64_t{2} << 48)        // root: struct, 0 data, 2 ptrs
                        + word(0)                             // typeName: null
                        + word(1 | (std::uint64_t{7} << 32))  // fields: composite list
                        + word(((std::uint64_t{1} << 29) - 1) << 2);  // tag: 2^29-1 elements
  auto result = GenericRecord::Decode(message);
  REQUIRE_FALSE(result);
  CHECK(result.error().code() == ErrorCode::kBadRequest);
}

TEST_CASE("Decode of random and corrupted buffers never crashes") {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int i = 0; i < 2000; ++i) {
    std::string buffer(8 * (1 + rng() % 16), '\0');
    for (char& c : buffer) c = static_cast<char>(byte(rng));
    // Half the buffers start with a plausible one-segment header so the reader gets past it.
    if (i % 2 == 0) {
      std::uint32_t words = static_cast<std::uint32_t>(buffer.size() / 8 - 1);
      buffer.replace(
          0, 8, std::string("\0\0\0\0", 4) + std::string(reinterpret_cast<const char*>(&words), 4));
    }
    auto result = GenericRecord::Decode(buffer);
    if (result) {
      CHECK_NOTHROW(result->ToJson());
    } else {
      CHECK(result.error().code() == ErrorCode::kBadRequest);
    }
  }
  std::string valid = EveryType().Encode();
  for (int i = 0; i < 2000; ++i) {
    std::string corrupted = valid;
    for (int flips = 0; flips < 3; ++flips) {
      corrupted[rng() % corrupted.size()] ^= static_cast<char>(1 << (rng() % 8));
    }
    auto result = GenericRecord::Decode(corrupted);
    if (!result) CHECK(result.error().code() == ErrorCode::kBadRequest);
  }
}

}  // namespace
}  // namespace tessera::record
