#include "tessera/partition/partitioner.h"

#include <catch2/catch.hpp>

using tessera::partition::Partitioner;

// Golden values pin PartitionOf: changing them breaks every stored cluster and client.
TEST_CASE("PartitionOf golden values (XXH3_64bits % 271)", "[partition]") {
  Partitioner p;
  CHECK(p.partition_count() == 271);
  CHECK(p.PartitionOf("") == 209u);
  CHECK(p.PartitionOf("key") == 52u);
  CHECK(p.PartitionOf("order-17") == 198u);
  CHECK(p.PartitionOf("cust-9") == 248u);
}

TEST_CASE("A partition key after '@' groups related keys", "[partition]") {
  Partitioner p;
  CHECK(p.PartitionOf("order-17@cust-9") == p.PartitionOf("cust-9"));
  CHECK(p.PartitionOf("payment-3@cust-9") == p.PartitionOf("cust-9"));
  CHECK(Partitioner::PartitionKey("trailing@") == "trailing@");
  CHECK(Partitioner::PartitionKey("a@b@c") == "c");
  // Redis Cluster hash tags, when the key names no partition key with '@'.
  CHECK(Partitioner::PartitionKey("{user1}:cart") == "user1");
  CHECK(Partitioner::PartitionKey("cart:{user1}") == "user1");
  CHECK(Partitioner::PartitionKey("a{b}c{d}") == "b");       // the first tag
  CHECK(Partitioner::PartitionKey("{}x{y}") == "{}x{y}");    // empty first tag: the whole key
  CHECK(Partitioner::PartitionKey("a{b") == "a{b");          // no closing brace
  CHECK(Partitioner::PartitionKey("{t}x@p") == "p");         // '@' first
  CHECK(Partitioner::PartitionKey("{t}x@") == "t");          // an empty '@' part: the tag
  CHECK(Partitioner::PartitionKey("id@{u1}:cart") == "u1");  // a tag in the '@' part
  // "X@K" lands with "K" for any K: composite keys (outbox, inbox, transaction markers).
  for (const char* k : {"{u1}:cart", "cust-9", "a{b}c", "{}x"}) {
    CHECK(p.PartitionOf(std::string("event-1@") + k) == p.PartitionOf(k));
  }
}

TEST_CASE("Partition ids stay below the count", "[partition]") {
  Partitioner p(7);
  for (int i = 0; i < 1000; ++i) CHECK(p.PartitionOf("k" + std::to_string(i)) < 7);
}
