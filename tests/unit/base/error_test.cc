#include "tessera/base/error.h"

#include <catch2/catch.hpp>

#include "tessera/base/check.h"

using tessera::base::Error;
using tessera::base::ErrorCode;
using tessera::base::Fail;
using tessera::base::Result;

namespace {
Result<int> ParsePositive(int v) {
  if (v <= 0) return Fail(ErrorCode::kBadRequest, "value must be positive");
  return v;
}
}  // namespace

TEST_CASE("Result carries a value or an error naming the problem", "[base]") {
  auto ok = ParsePositive(3);
  REQUIRE(ok.has_value());
  CHECK(*ok == 3);
  auto bad = ParsePositive(-1);
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().code() == ErrorCode::kBadRequest);
  CHECK(bad.error().ToString() == "BadRequest: value must be positive");
}

TEST_CASE("TESSERA_CHECK throws on a broken invariant", "[base]") {
  auto broken = [] { TESSERA_CHECK(1 == 2, "math"); };
  auto sound = [] { TESSERA_CHECK(1 == 1, "math"); };
  CHECK_THROWS_AS(broken(), std::logic_error);
  CHECK_NOTHROW(sound());
}
