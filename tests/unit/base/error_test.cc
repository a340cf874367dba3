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

TEST_CASE("An error's reason tells its cases apart and survives added context", "[base]") {
  using tessera::base::ErrorReason;
  const Error plain(ErrorCode::kWrongType, "field 'n' is a string");
  const Error kind(ErrorCode::kWrongType, "a hash", ErrorReason::kWrongKind);
  CHECK(plain.reason() == ErrorReason::kNone);
  CHECK(kind.reason() == ErrorReason::kWrongKind);
  CHECK_FALSE(plain ==
              Error(ErrorCode::kWrongType, "field 'n' is a string", ErrorReason::kWrongKind));
  const Error wrapped = kind.WithContext("operation 1 of the transaction failed: ");
  CHECK(wrapped.code() == ErrorCode::kWrongType);
  CHECK(wrapped.reason() == ErrorReason::kWrongKind);
  CHECK(wrapped.message() == "operation 1 of the transaction failed: a hash");
  CHECK(tessera::base::ErrorReasonName(ErrorReason::kRetryLater) == "RetryLater");
  CHECK(tessera::base::ErrorReasonName(ErrorReason::kDiskLow) == "DiskLow");
  CHECK(tessera::base::ErrorReasonName(ErrorReason::kAlreadyHeld) == "AlreadyHeld");
  CHECK(tessera::base::ErrorReasonName(static_cast<ErrorReason>(999)) == "Unknown");
  auto failed = Fail(ErrorCode::kConflict, "stale", ErrorReason::kNotApplied);
  CHECK(failed.error().reason() == ErrorReason::kNotApplied);
}

TEST_CASE("TESSERA_CHECK throws on a broken invariant", "[base]") {
  auto broken = [] { TESSERA_CHECK(1 == 2, "math"); };
  auto sound = [] { TESSERA_CHECK(1 == 1, "math"); };
  CHECK_THROWS_AS(broken(), std::logic_error);
  CHECK_NOTHROW(sound());
}
