#pragma once
// Partitioner: key -> partition id. partition id = XXH3_64bits(partition key) % count.
// The partition key is the whole key, unless the key names one after its last '@'
// ("order-17@cust-9" -> "cust-9"), or, without an '@', in a Redis Cluster hash tag: the text
// between the first '{' and the first '}' after it when not empty ("{user1}:cart" ->
// "user1"), so keys written for Redis Cluster co-locate the same way. Related entries of
// different maps thus share a partition.
// A small strategy object: another front-end may need another hash.
//
// Value type; immutable; thread-safe.

#include <cstdint>
#include <string_view>

namespace tessera::partition {

inline constexpr std::uint32_t kDefaultPartitionCount = 271;

class Partitioner {
 public:
  // REQUIRES: partition_count >= 1.
  explicit Partitioner(std::uint32_t partition_count = kDefaultPartitionCount);

  std::uint32_t partition_count() const { return count_; }

  // The partition of `key` (see the partition-key rule above).
  std::uint32_t PartitionOf(std::string_view key) const;

  // The part of `key` that is hashed: the text after the last '@' if that text is
  // non-empty, else the whole key; of that, its hash tag's text if it has a non-empty one.
  // So "X@K" always lands with "K", whatever K is.
  static std::string_view PartitionKey(std::string_view key);

 private:
  std::uint32_t count_;
};

}  // namespace tessera::partition
