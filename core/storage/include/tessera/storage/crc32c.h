#pragma once
// CRC-32C (Castagnoli), the checksum of everything a member writes to its data directory: it
// detects torn and flipped bytes (every burst up to 32 bits, and more than CRC-32 for short
// records). With the CPU's crc32 instruction (x86-64 SSE4.2, checked at start) 8 bytes at a
// time, else table-driven, a byte at a time (the shard thread checksums every record it logs:
// the table took 12% of a shard under a write load).
//
// Thread-safety: pure functions.

#include <cstdint>
#include <string_view>

namespace tessera::storage {

// The CRC-32C of `bytes`, continuing from `crc` (the value of the bytes before; 0 to start).
// Crc32c("123456789") == 0xE3069283.
std::uint32_t Crc32c(std::string_view bytes, std::uint32_t crc = 0);

}  // namespace tessera::storage
