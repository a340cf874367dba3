// Partition transactions on one member's MapService (map_service_tx.cc): all-or-nothing,
// preconditions, events after commit, ids, bad input. Backups: map_cluster_test.cc.
#include <catch2/catch.hpp>
#include <thread>

#include "service_fixture.h"
#include "tessera/map/map_service.h"

using namespace tessera::map;  // NOLINT
using tessera::base::ErrorCode;
using tessera::map::testing::EventLog;
using tessera::map::testing::ServiceFixture;
using tessera::map::testing::WaitFor;
using tessera::record::GenericRecord;

namespace {

// A transaction in the partition of `partition_key`, built op by op.
struct Tx {
  MapRequest request;
  explicit Tx(std::string partition_key, std::string id = "") {
    request.op = MapOp::kTransact;
    request.key = std::move(partition_key);
    request.transaction_id = std::move(id);
  }
  Tx& Op(MapOp op, std::string map, std::string key, std::string value = "") {
    TxOp& added = request.transaction.emplace_back();
    added.request = ServiceFixture::Rq(op, std::move(map), std::move(key), std::move(value));
    return *this;
  }
  Tx& If(TxCondition condition, std::string value = "", std::int64_t version = 0) {
    request.transaction.back().condition = condition;
    request.transaction.back().condition_value = std::move(value);
    request.transaction.back().condition_version = version;
    return *this;
  }
  Tx& Increment(std::string map, std::string key, std::int64_t delta = 1) {
    Op(MapOp::kExecuteOnKey, std::move(map), std::move(key));
    request.transaction.back().request.processor = "incrementRaw";
    request.transaction.back().request.argument =
        GenericRecord::Build().Int64("delta", delta).Done();
    return *this;
  }
};

std::optional<std::string> Get(ServiceFixture& f, const std::string& map, const std::string& key) {
  return f.Run(ServiceFixture::Rq(MapOp::kGet, map, key)).value;
}

}  // namespace

TEST_CASE("A transaction commits operations on several maps of one partition together",
          "[map][tx]") {
  ServiceFixture f(3);
  f.Run(ServiceFixture::Rq(MapOp::kSet, "stock", "sku-1@cust-9", "5"));
  Tx tx("cust-9");
  tx.Op(MapOp::kSet, "orders", "order-17@cust-9", "pending")
      .If(TxCondition::kAbsent)
      .Op(MapOp::kPutIfAbsent, "outbox", "evt-1@cust-9", "OrderCreated")
      .Increment("stock", "sku-1@cust-9", -2)
      .Op(MapOp::kGet, "orders", "order-17@cust-9")
      .Op(MapOp::kRemove, "stock", "missing@cust-9");
  MapResult r = f.Run(tx.request);
  REQUIRE(r.flag);
  CHECK_FALSE(r.conflict.has_value());
  REQUIRE(r.results.size() == 5);
  CHECK(r.results[1].flag);  // putIfAbsent stored
  CHECK(r.results[2].processor_result->GetInt64("value") == 3);
  CHECK(r.results[3].value == "pending");  // sees the batch's own earlier write
  CHECK_FALSE(r.results[4].value.has_value());
  CHECK(Get(f, "orders", "order-17@cust-9") == "pending");
  CHECK(Get(f, "outbox", "evt-1@cust-9") == "OrderCreated");
  CHECK(Get(f, "stock", "sku-1@cust-9") == "3");
}

TEST_CASE("A failed precondition applies nothing and names the operation, key and what it found",
          "[map][tx]") {
  ServiceFixture f(2);
  f.Run(ServiceFixture::Rq(MapOp::kSet, "a", "x@p", "old-x"));
  f.Run(ServiceFixture::Rq(MapOp::kSet, "b", "y@p", "old-y"));
  auto view_before = f.Run(ServiceFixture::Rq(MapOp::kGetEntryView, "a", "x@p")).view;
  Tx tx("p");
  tx.Op(MapOp::kSet, "a", "x@p", "new-x")
      .Op(MapOp::kRemove, "b", "y@p")
      .Op(MapOp::kSet, "c", "z@p", "new-z")
      .Op(MapOp::kSet, "b", "w@p", "w")
      .If(TxCondition::kValueEquals, "not-this");
  MapResult r = f.Run(tx.request);
  CHECK_FALSE(r.flag);
  CHECK(r.results.empty());
  REQUIRE(r.conflict.has_value());
  CHECK(r.conflict->index == 3);
  CHECK(r.conflict->map_name == "b");
  CHECK(r.conflict->key == "w@p");
  CHECK(r.conflict->found == "absent");
  CHECK(Get(f, "a", "x@p") == "old-x");
  CHECK(Get(f, "b", "y@p") == "old-y");
  CHECK_FALSE(Get(f, "c", "z@p").has_value());
  // The entry is as it was, metadata included (the version did not move).
  auto view_after = f.Run(ServiceFixture::Rq(MapOp::kGetEntryView, "a", "x@p")).view;
  CHECK(view_after->version == view_before->version);
  CHECK(f.Run(ServiceFixture::Rq(MapOp::kSize, "c")).count == 0);
}

TEST_CASE("A conflict on a key the batch already wrote names what the batch left there",
          "[map][tx]") {
  ServiceFixture f(2);
  f.Run(ServiceFixture::Rq(MapOp::kSet, "m", "a@p", "old"));
  Tx tx("p");
  tx.Op(MapOp::kSet, "m", "a@p", "12345")
      .Op(MapOp::kSet, "m", "a@p", "x")
      .If(TxCondition::kValueEquals, "other");
  MapResult r = f.Run(tx.request);  // the rollback frees the block the check looked at
  REQUIRE(r.conflict.has_value());
  CHECK(r.conflict->found == "value of 5 bytes, version 2");
  CHECK(Get(f, "m", "a@p") == "old");
}

TEST_CASE("Preconditions see the batch's earlier operations and treat expired entries as absent",
          "[map][tx]") {
  ServiceFixture f(2);
  f.Run(ServiceFixture::Rq(MapOp::kSet, "m", "k@p", "v1"));  // version 1
  f.Run(ServiceFixture::Rq(MapOp::kSet, "m", "k@p", "v2"));  // version 2
  {
    Tx tx("p");
    tx.Op(MapOp::kGet, "m", "k@p").If(TxCondition::kVersionEquals, "", 2);
    tx.Op(MapOp::kSet, "m", "k@p", "v3").If(TxCondition::kValueEquals, "v2");
    tx.Op(MapOp::kGet, "m", "k@p").If(TxCondition::kVersionEquals, "", 3);
    tx.Op(MapOp::kSet, "m", "fresh@p", "f").If(TxCondition::kVersionEquals, "", 0);
    tx.Op(MapOp::kGet, "m", "fresh@p").If(TxCondition::kPresent);
    MapResult r = f.Run(tx.request);
    CHECK(r.flag);
    CHECK(r.results[2].value == "v3");
  }
  {
    Tx tx("p");
    tx.Op(MapOp::kSet, "m", "k@p", "v4").If(TxCondition::kVersionEquals, "", 2);  // now 3
    MapResult r = f.Run(tx.request);
    CHECK_FALSE(r.flag);
    CHECK(r.conflict->found == "value of 2 bytes, version 3");
  }
  {
    auto ttl = ServiceFixture::Rq(MapOp::kSet, "m", "short@p", "s");
    ttl.options.ttl_ms = 100;
    f.Run(ttl);
    f.clock.Advance(150);
    Tx tx("p");
    tx.Op(MapOp::kSet, "m", "short@p", "again").If(TxCondition::kAbsent);
    tx.Op(MapOp::kGet, "never-created", "k@p").If(TxCondition::kAbsent);
    CHECK(f.Run(tx.request).flag);
    CHECK(Get(f, "m", "short@p") == "again");
  }
}

TEST_CASE("An operation that fails undoes the batch and is the call's error", "[map][tx]") {
  ServiceFixture f(2);
  f.Run(ServiceFixture::Rq(MapOp::kSet, "m", "n@p", "not-a-number"));
  Tx tx("p");
  tx.Op(MapOp::kSet, "m", "a@p", "1").Increment("m", "n@p");
  auto r = f.service.ExecuteSync(tx.request);
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == ErrorCode::kWrongType);
  CHECK_THAT(r.error().message(),
             Catch::Contains("operation 1 of the transaction (executeOnKey on map 'm', key "
                             "'n@p') failed, so nothing was applied"));
  CHECK_FALSE(Get(f, "m", "a@p").has_value());
  CHECK(Get(f, "m", "n@p") == "not-a-number");
}

TEST_CASE("A rolled-back batch restores entries its inserts evicted", "[map][tx]") {
  MapServiceOptions options = ServiceFixture::Fast();
  options.default_config.max_entries = 271 * 2;  // two entries per partition
  ServiceFixture f(1, options);
  f.Run(ServiceFixture::Rq(MapOp::kSet, "m", "one@p", "1"));
  f.Run(ServiceFixture::Rq(MapOp::kSet, "m", "two@p", "2"));
  Tx tx("p");
  tx.Op(MapOp::kSet, "m", "three@p", "3").Op(MapOp::kSet, "m", "four@p", "4");
  tx.Op(MapOp::kGet, "m", "nothing@p").If(TxCondition::kPresent);
  CHECK_FALSE(f.Run(tx.request).flag);
  CHECK(Get(f, "m", "one@p") == "1");
  CHECK(Get(f, "m", "two@p") == "2");
  CHECK_FALSE(Get(f, "m", "three@p").has_value());
  CHECK(f.Run(ServiceFixture::Rq(MapOp::kStats, "m")).stats.evictions == 0);
}

TEST_CASE("Listeners see a batch's events once it committed, and none of one that did not",
          "[map][tx]") {
  ServiceFixture f(2);
  EventLog log;
  f.service.AddEntryListener("m", {}, log.Listener());
  Tx aborted("p");
  aborted.Op(MapOp::kSet, "m", "a@p", "1")
      .Op(MapOp::kSet, "m", "b@p", "2")
      .If(TxCondition::kPresent);
  CHECK_FALSE(f.Run(aborted.request).flag);
  Tx committed("p");
  committed.Op(MapOp::kSet, "m", "a@p", "1").Op(MapOp::kSet, "m", "b@p", "2");
  CHECK(f.Run(committed.request).flag);
  REQUIRE(WaitFor([&] { return log.Snapshot().size() >= 2; }));
  auto events = log.Snapshot();
  REQUIRE(events.size() == 2);
  CHECK(events[0].key == "a@p");
  CHECK(events[0].type == EntryEventType::kAdded);
  CHECK(events[1].key == "b@p");
}

TEST_CASE("A batch sent again with the same id is applied once and gets the first result",
          "[map][tx]") {
  ServiceFixture f(2);
  Tx tx("p", "batch-1");
  tx.Increment("counters", "c@p");
  MapResult first = f.Run(tx.request);
  MapResult again = f.Run(tx.request);
  CHECK(first.flag);
  CHECK(again.flag);
  CHECK(again.results[0].processor_result->GetInt64("value") == 1);
  CHECK(Get(f, "counters", "c@p") == "1");
  Tx other("p", "batch-2");
  other.Increment("counters", "c@p");
  CHECK(f.Run(other.request).results[0].processor_result->GetInt64("value") == 2);
  // A batch that did not commit leaves no id behind: sent again, it runs afresh.
  Tx guarded("p", "batch-3");
  guarded.Op(MapOp::kSet, "m", "gate@p", "open").If(TxCondition::kPresent);
  CHECK_FALSE(f.Run(guarded.request).flag);
  f.Run(ServiceFixture::Rq(MapOp::kSet, "m", "gate@p", "closed"));
  CHECK(f.Run(guarded.request).flag);
  CHECK(Get(f, "m", "gate@p") == "open");
  // The id is remembered for transaction_id_ttl_ms only (default 60 s).
  f.clock.Advance(60'001);
  CHECK(f.Run(tx.request).results[0].processor_result->GetInt64("value") == 3);
}

TEST_CASE("Ids with '@' in them are not taken for another batch's id", "[map][tx]") {
  ServiceFixture f(2);
  // "a@b" with partition key "c" and "a" with partition key "b@c": one partition, and
  // "<id>@<key>" would be "a@b@c" for both.
  Tx first("c", "a@b");
  first.Increment("counters", "n@c");
  Tx second("b@c", "a");
  second.Increment("counters", "n@c");
  auto value = [](const MapResult& r) {
    return r.results.at(0).processor_result->GetInt64("value");
  };
  CHECK(value(f.Run(first.request)) == 1);
  CHECK(value(f.Run(second.request)) == 2);  // applied, not answered with the first's result
  CHECK(value(f.Run(first.request)) == 1);   // each id still replays its own
  CHECK(value(f.Run(second.request)) == 2);
  CHECK(Get(f, "counters", "n@c") == "2");
}

TEST_CASE("Transaction id markers are written by their transactions only", "[map][tx]") {
  ServiceFixture f(2);
  Tx tx("p", "batch-1");
  tx.Increment("counters", "c@p");
  f.Run(tx.request);
  const std::string markers(tessera::map::kTransactionIdMap);
  // Readable: the marker is there.
  CHECK(f.Run(ServiceFixture::Rq(MapOp::kContainsKey, markers, "batch-1@p")).flag);
  // Not writable by hand: a forged marker would answer another batch, a removed one would let
  // a retry apply twice.
  for (const MapRequest& write : {ServiceFixture::Rq(MapOp::kSet, markers, "batch-2@p", "forged"),
                                  ServiceFixture::Rq(MapOp::kRemove, markers, "batch-1@p"),
                                  ServiceFixture::Rq(MapOp::kClear, markers, "")}) {
    auto refused = f.service.ExecuteSync(write);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code() == ErrorCode::kBadRequest);
    CHECK(refused.error().message().find("only their transactions write it") != std::string::npos);
  }
  Tx sneaky("p", "batch-3");
  sneaky.Op(MapOp::kDelete, markers, "batch-1@p");
  CHECK(f.service.ExecuteSync(sneaky.request).error().code() == ErrorCode::kBadRequest);
  // The marker still replays its batch; a new id still runs.
  CHECK(f.Run(tx.request).results[0].processor_result->GetInt64("value") == 1);
  Tx other("p", "batch-2");
  other.Increment("counters", "c@p");
  CHECK(f.Run(other.request).results[0].processor_result->GetInt64("value") == 2);
}

TEST_CASE("Concurrent batches with version preconditions lose no update", "[map][tx]") {
  ServiceFixture f(3);
  f.Run(ServiceFixture::Rq(MapOp::kSet, "m", "n@p", "0"));
  std::atomic<int> committed{0}, conflicts{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) {
        auto view = f.Run(ServiceFixture::Rq(MapOp::kGetEntryView, "m", "n@p"));
        const int n = std::stoi(*view.value);
        Tx tx("p");
        tx.Op(MapOp::kSet, "m", "n@p", std::to_string(n + 1))
            .If(TxCondition::kVersionEquals, "", view.view->version);
        tx.Op(MapOp::kSet, "log", std::to_string(n + 1) + "@p", "x").If(TxCondition::kAbsent);
        (f.Run(tx.request).flag ? committed : conflicts)++;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(committed + conflicts == 400);
  CHECK(Get(f, "m", "n@p") == std::to_string(committed.load()));
  CHECK(f.Run(ServiceFixture::Rq(MapOp::kSize, "log")).count == committed.load());
}

TEST_CASE("Bad transactions are refused with a clear error and nothing applied", "[map][tx]") {
  MapServiceOptions options = ServiceFixture::Fast();
  options.max_transaction_ops = 3;
  ServiceFixture f(2, options);
  auto error_of = [&](const MapRequest& rq) {
    auto r = f.service.ExecuteSync(rq);
    REQUIRE_FALSE(r);
    return r.error();
  };
  {
    Tx tx("cust-9");
    tx.Op(MapOp::kSet, "m", "a@cust-9", "1").Op(MapOp::kSet, "m", "order-1@cust-8", "2");
    auto e = error_of(tx.request);
    CHECK(e.code() == ErrorCode::kBadRequest);
    CHECK_THAT(e.message(), Catch::Contains("key 'order-1@cust-8' of operation 1"));
    CHECK_THAT(e.message(), Catch::Contains("'order-1@cust-8@cust-9'"));
    CHECK_FALSE(Get(f, "m", "a@cust-9").has_value());
  }
  CHECK_THAT(error_of(Tx("p").request).message(), Catch::Contains("has no operations"));
  {
    Tx tx("p");
    for (int i = 0; i < 4; ++i) tx.Op(MapOp::kSet, "m", std::to_string(i) + "@p", "v");
    CHECK_THAT(error_of(tx.request).message(),
               Catch::Contains("4 operations, more than the limit of 3"));
  }
  {
    Tx tx("p");
    tx.Op(MapOp::kExecuteOnKey, "m", "k@p");
    tx.request.transaction.back().request.processor = "no-such-processor";
    CHECK(error_of(tx.request).code() == ErrorCode::kUnknownProcessor);
  }
  {
    Tx tx("p");
    tx.Op(MapOp::kClear, "m", "k@p");
    CHECK_THAT(error_of(tx.request).message(),
               Catch::Contains("operation 0 of the transaction is clear, which a transaction "
                               "cannot run"));
    Tx nested("p");
    nested.Op(MapOp::kSet, "m", "k@p", "v");
    nested.request.transaction.back().request = Tx("p").request;
    CHECK(error_of(nested.request).code() == ErrorCode::kBadRequest);
    Tx empty_map("p");
    empty_map.Op(MapOp::kSet, "", "k@p", "v");
    CHECK_THAT(error_of(empty_map.request).message(), Catch::Contains("map name is empty"));
  }
}

TEST_CASE("A whole-map read never sees half of a batch", "[map][tx]") {
  ServiceFixture f(3);
  f.Run(ServiceFixture::Rq(MapOp::kSet, "token", "left@p", "t"));
  std::atomic<bool> done{false};
  std::thread mover([&] {
    for (int i = 0; i < 400; ++i) {
      const std::string from = i % 2 == 0 ? "left@p" : "right@p";
      const std::string to = i % 2 == 0 ? "right@p" : "left@p";
      Tx tx("p");
      tx.Op(MapOp::kDelete, "token", from).If(TxCondition::kPresent);
      tx.Op(MapOp::kSet, "token", to, "t").If(TxCondition::kAbsent);
      f.Run(tx.request);
    }
    done = true;
  });
  int reads = 0, wrong = 0;
  while (!done) {
    wrong += f.Run(ServiceFixture::Rq(MapOp::kSize, "token")).count != 1;
    MapRequest query = ServiceFixture::Rq(MapOp::kQuery, "token");
    wrong += f.Run(query).entries.size() != 1;
    ++reads;
  }
  mover.join();
  INFO(reads << " reads");
  CHECK(wrong == 0);
  CHECK(Get(f, "token", "left@p") == "t");
}
