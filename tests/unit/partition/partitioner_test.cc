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
}

TEST_CASE("Partition ids stay below the count", "[partition]") {
  Partitioner p(7);
  for (int i = 0; i < 1000; ++i) CHECK(p.PartitionOf("k" + std::to_string(i)) < 7);
}
