#pragma once
// The "<decimal length>:<bytes>" token encoding the stream records use (map's stored events,
// the streams family's Redis stream fields and group records).
//
// Pure functions; thread-safe.

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tessera::base {

// Reads "<decimal><end>" from the front of `in`; nullopt (and `in` unchanged) if it is not there.
inline std::optional<std::int64_t> TakeNumber(std::string_view& in, char end) {
  std::int64_t n = 0;
  auto [p, ec] = std::from_chars(in.data(), in.data() + in.size(), n);
  if (ec != std::errc() || p == in.data() + in.size() || *p != end) return std::nullopt;
  in.remove_prefix(static_cast<std::size_t>(p - in.data()) + 1);
  return n;
}

// Reads one "<n>:<n bytes>" token from the front of `in`; nullopt if it is not one.
inline std::optional<std::string_view> TakeSized(std::string_view& in) {
  auto n = TakeNumber(in, ':');
  if (!n || *n < 0 || static_cast<std::size_t>(*n) > in.size()) return std::nullopt;
  auto out = in.substr(0, static_cast<std::size_t>(*n));
  in.remove_prefix(static_cast<std::size_t>(*n));
  return out;
}

inline void PutSized(std::string& out, std::string_view s) {
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, s.size()).ptr);
  out += ':';
  out += s;
}

}  // namespace tessera::base
