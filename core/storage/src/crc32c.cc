#include "tessera/storage/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace tessera::storage {
namespace {

constexpr std::uint32_t kPolynomial = 0x82F63B78;  // Castagnoli, reflected

constexpr std::array<std::uint32_t, 256> MakeTable() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = (c & 1) ? (c >> 1) ^ kPolynomial : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr std::array<std::uint32_t, 256> kTable = MakeTable();

#if defined(__x86_64__)
// The same steps as the table's, by the crc32 instruction (its polynomial is Castagnoli's).
__attribute__((target("sse4.2"))) std::uint32_t HardwareSteps(std::string_view bytes,
                                                              std::uint32_t crc) {
  const char* p = bytes.data();
  std::size_t n = bytes.size();
  std::uint64_t wide = crc;
  for (; n >= 8; p += 8, n -= 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    wide = _mm_crc32_u64(wide, word);
  }
  crc = static_cast<std::uint32_t>(wide);
  for (; n > 0; ++p, --n) crc = _mm_crc32_u8(crc, static_cast<unsigned char>(*p));
  return crc;
}

const bool kHardware = __builtin_cpu_supports("sse4.2");
#endif

}  // namespace

std::uint32_t Crc32c(std::string_view bytes, std::uint32_t crc) {
#if defined(__x86_64__)
  if (kHardware) return ~HardwareSteps(bytes, ~crc);
#endif
  crc = ~crc;
  for (unsigned char b : bytes) crc = kTable[(crc ^ b) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

}  // namespace tessera::storage
