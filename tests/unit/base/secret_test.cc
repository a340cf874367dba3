#include "tessera/base/secret.h"

#include <catch2/catch.hpp>

#include <string>

using tessera::base::ConstantTimeEquals;

TEST_CASE("ConstantTimeEquals is true only for the same bytes of the same length", "[base]") {
  CHECK(ConstantTimeEquals("s3cret", "s3cret"));
  CHECK(ConstantTimeEquals("", ""));
  CHECK_FALSE(ConstantTimeEquals("s3cret", "s3creT"));
  CHECK_FALSE(ConstantTimeEquals("x3cret", "s3cret"));
  CHECK_FALSE(ConstantTimeEquals("s3cre", "s3cret"));    // a prefix
  CHECK_FALSE(ConstantTimeEquals("s3cret!", "s3cret"));  // longer
  CHECK_FALSE(ConstantTimeEquals("", "s3cret"));
  CHECK_FALSE(ConstantTimeEquals("s3cret", ""));
  // Bytes past the shorter one and zero bytes count.
  CHECK_FALSE(ConstantTimeEquals(std::string("s3cret\0", 7), "s3cret"));
  CHECK(ConstantTimeEquals(std::string("a\0b", 3), std::string("a\0b", 3)));
  CHECK_FALSE(ConstantTimeEquals(std::string("a\0b", 3), std::string("a\0c", 3)));
}
