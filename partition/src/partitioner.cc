#include "tessera/partition/partitioner.h"

#include <xxhash.h>

#include "tessera/base/check.h"

namespace tessera::partition {

Partitioner::Partitioner(std::uint32_t partition_count) : count_(partition_count) {
  TESSERA_CHECK(partition_count >= 1, "partition count must be at least 1");
}

std::string_view Partitioner::PartitionKey(std::string_view key) {
  auto at = key.rfind('@');
  if (at == std::string_view::npos || at + 1 == key.size()) return key;
  return key.substr(at + 1);
}

std::uint32_t Partitioner::PartitionOf(std::string_view key) const {
  std::string_view pk = PartitionKey(key);
  return static_cast<std::uint32_t>(XXH3_64bits(pk.data(), pk.size()) % count_);
}

}  // namespace tessera::partition
