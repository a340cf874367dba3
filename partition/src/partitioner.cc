#include "tessera/partition/partitioner.h"

#include <xxhash.h>
#include <cstring>

#include "tessera/base/check.h"

namespace tessera::partition {

Partitioner::Partitioner(std::uint32_t partition_count) : count_(partition_count) {
  TESSERA_CHECK(partition_count >= 1, "partition count must be at least 1");
}

namespace {
// Redis Cluster's rule: the text between the first '{' and the first '}' after it, if that
// text is not empty; else the whole key.
std::string_view HashTag(std::string_view key) {
  const void* open = key.empty() ? nullptr : std::memchr(key.data(), '{', key.size());
  if (open == nullptr) return key;
  const auto start = static_cast<std::size_t>(static_cast<const char*>(open) - key.data()) + 1;
  const auto close = key.find('}', start);
  if (close == std::string_view::npos || close == start) return key;
  return key.substr(start, close - start);
}
}  // namespace

std::string_view Partitioner::PartitionKey(std::string_view key) {
  // memrchr scans a word at a time; a byte loop (rfind) cost noticeably more per key.
  const void* hit = key.empty() ? nullptr : ::memrchr(key.data(), '@', key.size());
  if (hit == nullptr) return HashTag(key);
  const auto at = static_cast<std::size_t>(static_cast<const char*>(hit) - key.data());
  if (at + 1 == key.size()) return HashTag(key);
  // A partition key may carry a hash tag itself: "id@{u1}:cart" lands with "{u1}:cart".
  return HashTag(key.substr(at + 1));
}

std::uint32_t Partitioner::PartitionOf(std::string_view key) const {
  std::string_view pk = PartitionKey(key);
  return static_cast<std::uint32_t>(XXH3_64bits(pk.data(), pk.size()) % count_);
}

}  // namespace tessera::partition
