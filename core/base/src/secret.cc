#include "tessera/base/secret.h"

#include <algorithm>
#include <cstddef>

namespace tessera::base {

bool ConstantTimeEquals(std::string_view given, std::string_view expected) {
  // Every byte of the longer one is visited whatever the contents; volatile keeps the
  // compiler from stopping at the first difference.
  volatile unsigned difference = given.size() == expected.size() ? 0 : 1;
  const std::size_t length = std::max(given.size(), expected.size());
  for (std::size_t i = 0; i < length; ++i) {
    const unsigned char x = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    const unsigned char y = i < expected.size() ? static_cast<unsigned char>(expected[i]) : 0;
    difference = difference | static_cast<unsigned>(x ^ y);
  }
  return difference == 0;
}

}  // namespace tessera::base
