// MapService with a log (MapService::OpenLog, map_persistence.cc): what persisting maps held
// comes back after a restart, with absolute TTL deadlines; what does not persist does not.
#include <catch2/catch.hpp>

#include <filesystem>
#include <future>
#include <memory>
#include <string>

#include "../storage/temp_dir.h"
#include "service_fixture.h"
#include "tessera/storage/log_segment.h"

using namespace tessera::map;  // NOLINT
using tessera::base::ErrorCode;
using tessera::map::testing::ServiceFixture;
using tessera::storage::testing::TempDir;

namespace {

// A service on `shards` shards whose clock starts at `start_ms`, with "orders" (always),
// "events" (periodic) and "cache" (none) configured, its log opened under `dir`.
struct LoggedService {
  LoggedService(const std::filesystem::path& dir, tessera::base::Millis start_ms,
                std::size_t shards = 3)
      : fixture(std::make_unique<ServiceFixture>(shards)) {
    fixture->clock.Set(start_ms);
    MapConfig always;
    always.persistence = Persistence::kAlways;
    MapConfig periodic;
    periodic.persistence = Persistence::kPeriodic;
    fixture->service.Configure("orders", always);
    fixture->service.Configure("events", periodic);
    fixture->service.Configure("cache", MapConfig{});
    recovery = fixture->service.OpenLog(dir.string());
  }
  MapResult Run(MapRequest rq) { return fixture->Run(std::move(rq)); }
  std::optional<std::string> Get(const std::string& map, const std::string& key) {
    return Run(ServiceFixture::Rq(MapOp::kGet, map, key)).value;
  }
  std::unique_ptr<ServiceFixture> fixture;
  tessera::base::Result<LogRecovery> recovery;
};

MapRequest WithTtl(MapRequest rq, tessera::base::Millis ttl_ms) {
  rq.options.ttl_ms = ttl_ms;
  return rq;
}

}  // namespace

TEST_CASE(
    "A map service with a log brings back what its persisting maps held after a restart, TTL "
    "deadlines absolute, and nothing of a map that does not persist",
    "[map][persistence]") {
  TempDir tmp;
  {
    LoggedService s(tmp.path, 1'000'000);
    REQUIRE(s.recovery);
    CHECK(s.recovery->records == 0);
    CHECK(s.fixture->service.logging());
    for (int i = 0; i < 100; ++i) {
      s.Run(ServiceFixture::Rq(MapOp::kSet, "orders", "o" + std::to_string(i),
                               "v" + std::to_string(i)));
    }
    s.Run(ServiceFixture::Rq(MapOp::kSet, "orders", "o7", "v7-changed"));
    s.Run(ServiceFixture::Rq(MapOp::kRemove, "orders", "o5"));
    s.Run(WithTtl(ServiceFixture::Rq(MapOp::kSet, "orders", "short", "x"), 10'000));
    s.Run(WithTtl(ServiceFixture::Rq(MapOp::kSet, "orders", "long", "y"), 100'000));
    auto put_all = ServiceFixture::Rq(MapOp::kPutAll, "orders");
    for (int i = 0; i < 50; ++i) put_all.entries.emplace_back("b" + std::to_string(i), "bulk");
    s.Run(put_all);
    s.Run(ServiceFixture::Rq(MapOp::kSet, "events", "e1", "periodic"));
    s.Run(ServiceFixture::Rq(MapOp::kSet, "cache", "c1", "memory only"));
    // A partition transaction writing two persisting maps: one record.
    MapRequest tx = ServiceFixture::Rq(MapOp::kTransact, "", "order-9");
    tx.transaction.emplace_back().request =
        ServiceFixture::Rq(MapOp::kSet, "orders", "order-9", "placed");
    tx.transaction.emplace_back().request =
        ServiceFixture::Rq(MapOp::kSet, "events", "order-9@order-9", "OrderPlaced");
    CHECK(s.Run(tx).flag);
  }
  // 50 s later (the wall clock moves with the manual clock): "short" (10 s) is gone, "long"
  // has 50 s left.
  LoggedService s(tmp.path, 1'050'000);
  REQUIRE(s.recovery);
  CHECK(s.recovery->records >= 100);
  for (int i = 0; i < 100; ++i) {
    INFO("o" << i);
    if (i == 5) {
      CHECK_FALSE(s.Get("orders", "o5").has_value());
    } else if (i == 7) {
      CHECK(s.Get("orders", "o7") == "v7-changed");
    } else {
      CHECK(s.Get("orders", "o" + std::to_string(i)) == "v" + std::to_string(i));
    }
  }
  for (int i = 0; i < 50; ++i) CHECK(s.Get("orders", "b" + std::to_string(i)) == "bulk");
  CHECK_FALSE(s.Get("orders", "short").has_value());
  CHECK(s.Get("orders", "long") == "y");
  auto view = s.Run(ServiceFixture::Rq(MapOp::kGetEntryView, "orders", "long")).view;
  REQUIRE(view);
  CHECK(view->expire_at_ms == 1'100'000);  // the deadline it was written with
  CHECK(s.Get("events", "e1") == "periodic");
  CHECK(s.Get("orders", "order-9") == "placed");
  CHECK(s.Get("events", "order-9@order-9") == "OrderPlaced");
  CHECK_FALSE(s.Get("cache", "c1").has_value());
  CHECK(s.Run(ServiceFixture::Rq(MapOp::kSize, "orders")).count == 99 + 50 + 1 + 1);
  CHECK(s.recovery->entries == 99 + 50 + 1 + 1 + 2);

  // Writes after a replay go on in the same log; a third start has both.
  s.Run(ServiceFixture::Rq(MapOp::kSet, "orders", "after", "restart"));
  s.Run(ServiceFixture::Rq(MapOp::kClear, "events"));
  s.fixture.reset();
  LoggedService third(tmp.path, 1'060'000);
  REQUIRE(third.recovery);
  CHECK(third.Get("orders", "after") == "restart");
  CHECK(third.Get("orders", "o1") == "v1");
  CHECK_FALSE(third.Get("events", "e1").has_value());
  CHECK(third.Run(ServiceFixture::Rq(MapOp::kSize, "events")).count == 0);
}

TEST_CASE("A write to a persisting map is in its log file when it is acknowledged",
          "[map][persistence]") {
  TempDir tmp;
  LoggedService s(tmp.path, 1'000'000, 1);
  REQUIRE(s.recovery);
  for (const char* map : {"orders", "events"}) {
    INFO(map);
    s.Run(ServiceFixture::Rq(MapOp::kSet, map, "k", "v"));
    // Read by another reader while the service runs: the record is in the file.
    std::size_t records = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(tmp.path)) {
      if (e.path().extension() != ".log") continue;
      auto contents = tessera::storage::ReadSegment(e.path());
      REQUIRE(contents);
      records += contents->records.size();
    }
    CHECK(records == (std::string(map) == "orders" ? 1u : 2u));
  }
  // A map that does not persist writes nothing.
  s.Run(ServiceFixture::Rq(MapOp::kSet, "cache", "k", "v"));
  std::size_t records = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(tmp.path)) {
    if (e.path().extension() == ".log") {
      records += tessera::storage::ReadSegment(e.path())->records.size();
    }
  }
  CHECK(records == 2);
}

TEST_CASE("A map log written with another shard count is refused with a clear error",
          "[map][persistence]") {
  TempDir tmp;
  {
    LoggedService s(tmp.path, 1'000'000, 2);
    REQUIRE(s.recovery);
    s.Run(ServiceFixture::Rq(MapOp::kSet, "orders", "k", "v"));
  }
  LoggedService s(tmp.path, 1'000'000, 3);
  REQUIRE_FALSE(s.recovery);
  CHECK(s.recovery.error().code() == ErrorCode::kConflict);
  CHECK(s.recovery.error().message().find("with 2 shards, and this member runs 3: start it "
                                          "with --threads 2") != std::string::npos);
  CHECK_FALSE(s.fixture->service.logging());
}

TEST_CASE(
    "Replay reports per partition the replica version its log ends at, and a partition copy "
    "cut off before its end as not held",
    "[map][persistence]") {
  TempDir tmp;
  {
    LoggedService s(tmp.path, 1'000'000);
    REQUIRE(s.recovery);
    CHECK(s.recovery->held.size() == 271);
    CHECK(s.recovery->versions == std::vector<std::uint64_t>(271, 0));
    auto apply = [&](std::vector<ReplicaUpdate> updates) {
      std::promise<void> applied;
      s.fixture->service.ApplyReplica(
          std::move(updates), [&](tessera::base::Result<StalePartitions>) { applied.set_value(); });
      applied.get_future().wait();
    };
    using Kind = ReplicaUpdate::Kind;
    // Partition 3: a complete copy at version 40, then two writes (41, 42).
    apply({{Kind::kClearPartition, "", 3, "", "", 0, 0, 0},
           {Kind::kCopySet, "orders", 3, "k3", "copied", 0, 0, 0},
           {Kind::kPartitionComplete, "", 3, "master", "", 0, 0, 40}});
    apply({{Kind::kSet, "orders", 3, "k3", "written", 0, 0, 41}});
    apply({{Kind::kSet, "orders", 3, "k3b", "written", 0, 0, 42}});
    // Partition 4: a copy whose end never came.
    apply({{Kind::kClearPartition, "", 4, "", "", 0, 0, 0},
           {Kind::kCopySet, "orders", 4, "k4", "part", 0, 0, 0}});
    // Partition 5: held, then cleared by a resync that never ended.
    apply({{Kind::kSet, "orders", 5, "k5", "v", 0, 0, 7}});
    apply({{Kind::kResyncBegin, "", 5, "", "", 0, 0, 0}});
  }
  LoggedService again(tmp.path, 1'000'100);
  REQUIRE(again.recovery);
  const LogRecovery& r = *again.recovery;
  CHECK(r.versions[3] == 42);
  CHECK(r.held[3]);
  CHECK(!r.held[4]);
  CHECK(r.versions[4] == 0);
  CHECK(!r.held[5]);
  CHECK(r.held[6]);  // never mentioned: a complete, empty replica
  CHECK(r.versions[6] == 0);
}
