#include "tessera/storage/crc32c.h"

#include <catch2/catch.hpp>

#include <string>

using tessera::storage::Crc32c;

TEST_CASE("CRC-32C matches the standard check values and continues across pieces", "[storage]") {
  CHECK(Crc32c("") == 0);
  CHECK(Crc32c("123456789") == 0xE3069283u);            // the catalogue's check value
  CHECK(Crc32c(std::string(32, '\0')) == 0x8A9136AAu);  // RFC 3720 B.4
  CHECK(Crc32c(std::string(32, '\xff')) == 0x62A8AB43u);
  CHECK(Crc32c("6789", Crc32c("12345")) == Crc32c("123456789"));
  CHECK(Crc32c("123456788") != Crc32c("123456789"));
}

TEST_CASE("CRC-32C of a whole buffer equals the CRC continued a byte at a time, at every length",
          "[storage]") {
  std::string bytes;
  for (int i = 0; i < 200; ++i) bytes.push_back(static_cast<char>((i * 131 + 7) & 0xff));
  for (std::size_t n = 0; n <= bytes.size(); ++n) {
    INFO("length " << n);
    std::uint32_t piecewise = 0;
    for (std::size_t i = 0; i < n; ++i)
      piecewise = Crc32c(std::string_view(bytes).substr(i, 1), piecewise);
    CHECK(Crc32c(std::string_view(bytes).substr(0, n)) == piecewise);
  }
}
