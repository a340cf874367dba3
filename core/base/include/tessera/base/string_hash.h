#pragma once
// StringHash: a transparent hash for unordered containers keyed by std::string, so that a
// lookup by std::string_view (or const char*) builds no std::string:
//
//   std::unordered_map<std::string, V, base::StringHash, std::equal_to<>> by_name;
//   by_name.find(std::string_view("orders"));
//
// Insertion still takes a std::string (or what converts to one).

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace tessera::base {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    return std::hash<std::string_view>{}(s);
  }
};

}  // namespace tessera::base
