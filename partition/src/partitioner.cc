#include "tessera/partition/partitioner.h"

#include <xxhash.h>
#include <cstring>

#include "tessera/base/check.h"

namespace tessera::partition {

Partitioner::Partitioner(std::uint32_t partition_count) : count_(partition_count) {
  TESSERA_CHECK(partition_count >= 1, "partition count must be at least 1");
}

std::string_view Partitioner::PartitionKey(std::string_view key) {
  // memrchr scans a word at a time; a byte loop (rfind) was ~80 instructions per 16-byte key.
  const void* hit = key.empty() ? nullptr : ::memrchr(key.data(), '@', key.size());
  if (hit == nullptr) return key;
  const auto at = static_cast<std::size_t>(static_cast<const char*>(hit) - key.data());
  if (at + 1 == key.size()) return key;
  return key.substr(at + 1);
}

std::uint32_t Partitioner::PartitionOf(std::string_view key) const {
  std::string_view pk = PartitionKey(key);
  return static_cast<std::uint32_t>(XXH3_64bits(pk.data(), pk.size()) % count_);
}

}  // namespace tessera::partition
