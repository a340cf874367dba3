#include "tessera/base/bytes.h"

#include <catch2/catch.hpp>

using namespace tessera::base;  // NOLINT

// These bytes are the wire and stored formats (lean frames, merge entries, inline hashes):
// the expected strings are written out, not computed.
TEST_CASE("Little-endian fields and varints write the bytes of the formats that use them",
          "[base][bytes]") {
  std::string out;
  PutLE(out, std::uint32_t{0x01020304});
  PutLE(out, std::int64_t{-2});
  PutLE(out, std::uint8_t{0xab});
  CHECK(out == std::string("\x04\x03\x02\x01\xfe\xff\xff\xff\xff\xff\xff\xff\xab", 13));
  CHECK(LoadLE<std::uint32_t>(out.data()) == 0x01020304U);
  CHECK(LoadLE<std::int64_t>(out.data() + 4) == -2);
  char at[4];
  CHECK(StoreLE(at, std::uint32_t{7}) == at + 4);
  CHECK(std::string(at, 4) == std::string("\x07\0\0\0", 4));

  std::string v;
  PutVarint(v, 0);
  PutVarint(v, 127);
  PutVarint(v, 128);
  PutVarint(v, 300);
  CHECK(v == std::string("\x00\x7f\x80\x01\xac\x02", 6));
  std::string_view in = v;
  std::size_t n = 99;
  REQUIRE(GetVarint(in, n));
  CHECK(n == 0);
  REQUIRE(GetVarint(in, n));
  CHECK(n == 127);
  REQUIRE(GetVarint(in, n));
  CHECK(n == 128);
  REQUIRE(GetVarint(in, n));
  CHECK(n == 300);
  CHECK(in.empty());
}

TEST_CASE("Cut, overlong or oversized input is refused without reading past it", "[base][bytes]") {
  std::string_view cut("\x80", 1);
  std::size_t n = 0;
  CHECK_FALSE(GetVarint(cut, n));
  std::string_view overlong("\xff\xff\xff\xff\xff\x01", 6);  // more than 5 bytes
  CHECK_FALSE(GetVarint(overlong, n));
  std::string_view claims_more(
      "\x05"
      "abc",
      4);  // a length beyond the buffer
  std::string_view bytes;
  CHECK_FALSE(GetVarintBytes(claims_more, bytes));

  std::string good;
  PutU32String(good, "hello");
  PutLE(good, std::uint16_t{9});
  ByteReader r(good);
  CHECK(r.GetView() == "hello");
  CHECK(r.Get<std::uint16_t>() == 9);
  CHECK(r.ok());
  CHECK(r.rest().empty());

  std::string forged;
  PutLE(forged, std::uint32_t{1'000'000});  // a string of a million bytes, in 6 bytes
  forged += "ab";
  ByteReader bad(forged);
  CHECK(bad.GetView().empty());
  CHECK_FALSE(bad.ok());
  CHECK(bad.Get<std::uint64_t>() == 0);  // and nothing after it
  std::string count;
  PutLE(count, std::uint32_t{1'000'000});
  ByteReader counted(count);
  CHECK(counted.GetCount<std::uint32_t>(8) == 0);  // a count the rest cannot hold
  CHECK_FALSE(counted.ok());
}
