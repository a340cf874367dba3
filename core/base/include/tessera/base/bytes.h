#pragma once
// The byte encodings Tessera writes by hand, in one place: little-endian fixed-width integers,
// LEB128 varints, and strings prefixed by their length (a u32 or a varint). The lean wire
// codec, the frame header, the merge entry header and a hash's inline fields use them; their
// bytes are part of the wire format and the stored format, so these functions never change
// what they write.
//
// ByteReader reads from the front of a buffer and never reads past it: a shortfall makes
// ok() false, every later read returns a zero value, and nothing is allocated from a length
// the buffer cannot hold.
//
// Free functions and a value type; thread-compatible.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace tessera::base {

// Appends `value` as sizeof(T) little-endian bytes.
template <typename T>
void PutLE(std::string& out, T value) {
  static_assert(std::is_integral_v<T>);
  const auto bits = static_cast<std::make_unsigned_t<T>>(value);
  for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>(bits >> (8 * i)));
}

// Writes `value` as sizeof(T) little-endian bytes at `at` (which must hold them); returns the
// byte after them.
template <typename T>
char* StoreLE(char* at, T value) {
  static_assert(std::is_integral_v<T>);
  const auto bits = static_cast<std::make_unsigned_t<T>>(value);
  for (std::size_t i = 0; i < sizeof(T); ++i) *at++ = static_cast<char>(bits >> (8 * i));
  return at;
}

// Reads sizeof(T) little-endian bytes at `at` (which must hold them).
template <typename T>
T LoadLE(const char* at) {
  static_assert(std::is_integral_v<T>);
  std::make_unsigned_t<T> bits = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    bits |= static_cast<std::make_unsigned_t<T>>(static_cast<unsigned char>(at[i])) << (8 * i);
  }
  return static_cast<T>(bits);
}

// Appends `n` as an unsigned LEB128 varint (7 bits a byte, low first; 1 byte below 128).
inline void PutVarint(std::string& out, std::uint64_t n) {
  while (n >= 0x80) {
    out.push_back(static_cast<char>((n & 0x7f) | 0x80));
    n >>= 7;
  }
  out.push_back(static_cast<char>(n));
}

// Reads a varint of at most 5 bytes (values below 2^35) from the front of `in` into `n`;
// false (and `in` partly consumed) when it is cut short or longer.
inline bool GetVarint(std::string_view& in, std::size_t& n) {
  n = 0;
  for (int shift = 0; shift < 35; shift += 7) {
    if (in.empty()) return false;
    const auto byte = static_cast<unsigned char>(in.front());
    in.remove_prefix(1);
    n |= static_cast<std::size_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

// Reads a varint length and that many bytes (a view into `in`) from the front of `in`.
inline bool GetVarintBytes(std::string_view& in, std::string_view& out) {
  std::size_t n = 0;
  if (!GetVarint(in, n) || n > in.size()) return false;
  out = in.substr(0, n);
  in.remove_prefix(n);
  return true;
}

// Appends `s` prefixed by its length as a little-endian u32.
inline void PutU32String(std::string& out, std::string_view s) {
  PutLE(out, static_cast<std::uint32_t>(s.size()));
  out += s;
}

// Reads little-endian fields and u32-prefixed strings from the front of a buffer.
class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}
  bool ok() const { return ok_; }
  std::string_view rest() const { return in_; }

  template <typename T>
  T Get() {
    if (in_.size() < sizeof(T)) {
      Bad();
      return T{};
    }
    const T value = LoadLE<T>(in_.data());
    in_.remove_prefix(sizeof(T));
    return value;
  }
  // A u32-prefixed string as a view into the input ("" and not ok when it does not fit).
  std::string_view GetView() {
    const auto size = Get<std::uint32_t>();
    if (!ok_ || size > in_.size()) {
      Bad();
      return {};
    }
    const std::string_view out = in_.substr(0, size);
    in_.remove_prefix(size);
    return out;
  }
  void GetString(std::string& out) { out.assign(GetView()); }
  // A count of items each at least `min_bytes` long; 0 (and not ok) when the rest cannot hold
  // them, so a forged count never reserves memory. Zero is refused too (a writer that has no
  // items sends no count).
  template <typename T>
  std::size_t GetCount(std::size_t min_bytes) {
    const std::size_t n = Get<T>();
    if (!ok_ || n == 0 || n > in_.size() / min_bytes) {
      Bad();
      return 0;
    }
    return n;
  }
  // Marks the input bad: ok() is false and nothing more is read.
  void Bad() {
    ok_ = false;
    in_ = {};
  }

 private:
  std::string_view in_;
  bool ok_ = true;
};

}  // namespace tessera::base
