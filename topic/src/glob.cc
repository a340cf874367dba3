// Iterative glob matcher with single-star backtracking: O(pattern * text) in the worst case,
// no recursion, so hostile patterns such as "*a*a*a*a*b" cannot blow the stack.
#include "tessera/topic/glob.h"

#include <cstddef>
#include <utility>

namespace tessera::topic {

namespace {

// Matches one character against the class starting at pattern[p] == '['. Sets `next` to the
// index after the class.
bool MatchClass(std::string_view pattern, std::size_t p, char c, std::size_t& next) {
  ++p;  // skip '['
  bool negate = false;
  if (p < pattern.size() && (pattern[p] == '^' || pattern[p] == '!')) {
    negate = true;
    ++p;
  }
  bool matched = false;
  while (p < pattern.size() && pattern[p] != ']') {
    if (pattern[p] == '\\' && p + 1 < pattern.size()) {
      ++p;
      if (pattern[p] == c) matched = true;
      ++p;
    } else if (p + 2 < pattern.size() && pattern[p + 1] == '-' && pattern[p + 2] != ']') {
      unsigned char low = static_cast<unsigned char>(pattern[p]);
      unsigned char high = static_cast<unsigned char>(pattern[p + 2]);
      if (low > high) std::swap(low, high);
      const auto uc = static_cast<unsigned char>(c);
      if (uc >= low && uc <= high) matched = true;
      p += 3;
    } else {
      if (pattern[p] == c) matched = true;
      ++p;
    }
  }
  next = p < pattern.size() ? p + 1 : p;  // past ']' (or the end if unterminated)
  return matched != negate;
}

}  // namespace

bool GlobMatch(std::string_view pattern, std::string_view text) {
  std::size_t p = 0;
  std::size_t t = 0;
  std::size_t star_p = std::string_view::npos;  // pattern index after the last '*'
  std::size_t star_t = 0;                       // text index that '*' currently absorbs up to
  while (t < text.size()) {
    if (p < pattern.size()) {
      const char pc = pattern[p];
      if (pc == '*') {
        while (p < pattern.size() && pattern[p] == '*') ++p;
        if (p == pattern.size()) return true;
        star_p = p;
        star_t = t;
        continue;
      }
      std::size_t next = p + 1;
      bool ok = false;
      if (pc == '?') {
        ok = true;
      } else if (pc == '[') {
        ok = MatchClass(pattern, p, text[t], next);
      } else if (pc == '\\' && p + 1 < pattern.size()) {
        ok = pattern[p + 1] == text[t];
        next = p + 2;
      } else {
        ok = pc == text[t];
      }
      if (ok) {
        p = next;
        ++t;
        continue;
      }
    }
    if (star_p == std::string_view::npos) return false;
    p = star_p;  // let the last '*' absorb one more character and retry
    t = ++star_t;
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool GlobIsLiteral(std::string_view pattern) {
  return pattern.find_first_of("*?[\\") == std::string_view::npos;
}

}  // namespace tessera::topic
