// MapService with a log (MapService::OpenLog, map_persistence.cc): what persisting maps held
// comes back after a restart, with absolute TTL deadlines; what does not persist does not.
#include <catch2/catch.hpp>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <thread>

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
                std::size_t shards = 3, MapServiceOptions options = ServiceFixture::Fast())
      : fixture(std::make_unique<ServiceFixture>(shards, options)) {
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

// Small segments and an early first compaction, so a test sees many of both.
MapServiceOptions Compacting(std::uint64_t segment_bytes, std::uint64_t compact_bytes) {
  MapServiceOptions o = ServiceFixture::Fast();
  o.log_segment_bytes = segment_bytes;
  o.log_compact_bytes = compact_bytes;
  o.log_sync_ms = 20;
  return o;
}

// Waits (at most 20 s) until `done(stats)`; the last stats either way.
template <typename Done>
MapService::LogStats AwaitLogStats(MapService& service, Done done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto stats = service.GetLogStats();
  while (!done(stats) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    stats = service.GetLogStats();
  }
  return stats;
}

// The log's bytes on disk. REQUIRES: no service has the log open.
std::uint64_t FolderBytes(const std::filesystem::path& dir) {
  std::uint64_t bytes = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.path().extension() == ".log") bytes += e.file_size();
  }
  return bytes;
}

// A key of partition `p` (the default partitioner's), starting with `prefix`.
std::string KeyIn(std::uint32_t p, const std::string& prefix) {
  const tessera::partition::Partitioner partitioner;
  for (int i = 0;; ++i) {
    std::string key = prefix + std::to_string(i);
    if (partitioner.PartitionOf(key) == p) return key;
  }
}

std::string Value(int round) { return "r" + std::to_string(round) + std::string(100, 'v'); }

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

namespace {

// The records in the log files under `dir`, read while the service runs.
std::size_t LoggedRecords(const std::filesystem::path& dir) {
  std::size_t records = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.path().extension() != ".log") continue;
    auto contents = tessera::storage::ReadSegment(e.path());
    if (contents) records += contents->records.size();
  }
  return records;
}

}  // namespace

TEST_CASE(
    "A write run on its shard with a log ticket is applied at once, logged, and acknowledged by "
    "WhenLogged once its record is in the log file (a map that does not persist: no wait)",
    "[map][persistence]") {
  TempDir tmp;
  LoggedService s(tmp.path, 1'000'000, 1);
  REQUIRE(s.recovery);
  MapService& service = s.fixture->service;
  struct Seen {
    bool ran = false;
    Persistence wait = Persistence::kNone;
    bool value = false;            // the write's result: the key's new value, read at once
    std::size_t records_then = 0;  // records in the log files when WhenLogged answered
    bool logged = false;
  };
  auto run = [&](const std::string& map) {
    auto seen = std::make_shared<Seen>();
    std::promise<void> answered;
    auto done = answered.get_future();
    s.fixture->shards.InvokeOn(0, [&, seen] {
      MapService::LogTicket ticket;
      auto result = service.ExecuteIfLocal(ServiceFixture::Rq(MapOp::kSet, map, "k", "v"), ticket);
      seen->ran = result.has_value() && result->has_value();
      seen->wait = ticket.wait;
      auto read = service.ExecuteIfLocal(ServiceFixture::Rq(MapOp::kGet, map, "k"));
      seen->value = read && *read && (*read)->value == std::optional<std::string>("v");
      if (ticket.wait == Persistence::kNone) return answered.set_value();
      service.WhenLogged(ticket, [&, seen](tessera::base::Result<void> ok) {
        seen->logged = ok.has_value();
        seen->records_then = LoggedRecords(tmp.path);
        answered.set_value();
      });
    });
    REQUIRE(done.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
    return *seen;
  };
  const Seen always = run("orders");
  CHECK(always.ran);
  CHECK(always.wait == Persistence::kAlways);
  CHECK(always.value);
  CHECK(always.logged);
  CHECK(always.records_then == 1);
  const Seen periodic = run("events");
  CHECK(periodic.ran);
  CHECK(periodic.wait == Persistence::kPeriodic);
  CHECK(periodic.value);
  CHECK(periodic.logged);
  CHECK(periodic.records_then == 2);
  const Seen none = run("cache");
  CHECK(none.ran);
  CHECK(none.wait == Persistence::kNone);
  CHECK(none.value);
  CHECK(LoggedRecords(tmp.path) == 2);
  // What was acknowledged comes back after a restart.
  s.fixture.reset();
  LoggedService again(tmp.path, 1'000'000, 1);
  REQUIRE(again.recovery);
  CHECK(again.Get("orders", "k") == std::optional<std::string>("v"));
  CHECK(again.Get("events", "k") == std::optional<std::string>("v"));
  CHECK(again.Get("cache", "k") == std::nullopt);
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

namespace {

// Applies `updates` as a backup would (ApplyReplica) and waits for it.
void Apply(LoggedService& s, std::vector<ReplicaUpdate> updates) {
  std::promise<void> applied;
  s.fixture->service.ApplyReplica(std::move(updates),
                                  [&](tessera::base::Result<ReplicaAck>) { applied.set_value(); });
  applied.get_future().wait();
}

// Keys of the partitions the replica history names (so reads find them).
struct HistoryKeys {
  std::string k3 = KeyIn(3, "a"), k3b = KeyIn(3, "b"), k4 = KeyIn(4, "a"), k5 = KeyIn(5, "a");
};

// Partition 3: a complete copy at version 40, then two writes (41, 42). Partition 4: a copy
// whose end never came. Partition 5: held, then cleared by a resync that never ended.
void ApplyReplicaHistory(LoggedService& s, const HistoryKeys& k) {
  using Kind = ReplicaUpdate::Kind;
  Apply(s, {{Kind::kClearPartition, "", 3, "", "", 0, 0, 0},
            {Kind::kCopySet, "orders", 3, k.k3, "copied", 0, 0, 0},
            {Kind::kPartitionComplete, "", 3, "master", "", 0, 0, 40}});
  Apply(s, {{Kind::kSet, "orders", 3, k.k3, "written", 0, 0, 41}});
  Apply(s, {{Kind::kSet, "orders", 3, k.k3b, "written", 0, 0, 42}});
  Apply(s, {{Kind::kClearPartition, "", 4, "", "", 0, 0, 0},
            {Kind::kCopySet, "orders", 4, k.k4, "part", 0, 0, 0}});
  Apply(s, {{Kind::kSet, "orders", 5, k.k5, "v", 0, 0, 7}});
  Apply(s, {{Kind::kResyncBegin, "", 5, "", "", 0, 0, 0}});
}

// What a replay of ApplyReplicaHistory reports.
void CheckReplicaHistory(const LogRecovery& r) {
  CHECK(r.versions[3] == 42);
  CHECK(r.held[3]);
  CHECK(!r.held[4]);
  CHECK(r.versions[4] == 0);
  CHECK(!r.held[5]);
  CHECK(r.held[6]);  // never mentioned: a complete, empty replica
  CHECK(r.versions[6] == 0);
}

}  // namespace

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
    ApplyReplicaHistory(s, HistoryKeys());
  }
  LoggedService again(tmp.path, 1'000'100);
  REQUIRE(again.recovery);
  CheckReplicaHistory(*again.recovery);
}

TEST_CASE(
    "Compaction snapshots a shard's partitions into its log and deletes the segments before "
    "them, disk use stays bounded under overwrites, and a restart brings back the live data",
    "[map][persistence]") {
  TempDir tmp;
  constexpr std::uint64_t kSegment = 8 << 10;
  constexpr std::uint64_t kCompact = 64 << 10;
  constexpr int kKeys = 200;
  constexpr int kRounds = 60;
  {
    LoggedService s(tmp.path, 1'000'000, 2, Compacting(kSegment, kCompact));
    REQUIRE(s.recovery);
    // Written first, so later rounds carry it in their snapshots.
    s.Run(WithTtl(ServiceFixture::Rq(MapOp::kSet, "orders", "ttl", "x"), 100'000));
    for (int round = 0; round < kRounds; ++round) {
      for (int k = 0; k < kKeys; ++k) {
        s.Run(ServiceFixture::Rq(MapOp::kSet, "events", "k" + std::to_string(k), Value(round)));
      }
      s.Run(ServiceFixture::Rq(MapOp::kSet, "cache", "c" + std::to_string(round), "memory"));
    }
    for (int k = 0; k < 10; ++k) {
      s.Run(ServiceFixture::Rq(MapOp::kRemove, "events", "k" + std::to_string(k)));
    }
    s.Run(ServiceFixture::Rq(MapOp::kSet, "orders", "last", "always"));
    // Rounds run between requests; the segments go once a round is durable.
    const auto stats = AwaitLogStats(s.fixture->service, [](const MapService::LogStats& st) {
      return st.compactions >= 4 && st.segments_dropped >= 4;
    });
    CHECK(stats.compactions >= 4);
    CHECK(stats.segments_dropped >= 4);
    CHECK(stats.bytes > 1'000'000);  // about 1.4 MB logged; about 25 KB live
  }
  // Per shard the log holds at most two segments, two snapshots, and max(kCompact, a
  // snapshot) of writes plus what was written while its last round ran.
  const std::uint64_t on_disk = FolderBytes(tmp.path);
  INFO(on_disk << " bytes on disk");
  CHECK(on_disk <= 2 * (2 * kSegment + 3 * kCompact));
  LoggedService s(tmp.path, 1'050'000, 2, Compacting(kSegment, kCompact));
  REQUIRE(s.recovery);
  INFO("replayed " << s.recovery->records << " records");
  CHECK(s.recovery->records < kKeys * kRounds / 4);  // far fewer than were written
  for (int k = 0; k < kKeys; ++k) {
    INFO("k" << k);
    if (k < 10) {
      CHECK_FALSE(s.Get("events", "k" + std::to_string(k)).has_value());
    } else {
      CHECK(s.Get("events", "k" + std::to_string(k)) == Value(kRounds - 1));
    }
  }
  auto view = s.Run(ServiceFixture::Rq(MapOp::kGetEntryView, "orders", "ttl")).view;
  REQUIRE(view);
  CHECK(view->expire_at_ms == 1'100'000);  // its deadline, through the snapshots
  CHECK(s.Get("orders", "last") == "always");
  CHECK(s.Run(ServiceFixture::Rq(MapOp::kSize, "events")).count == kKeys - 10);
  CHECK(s.Run(ServiceFixture::Rq(MapOp::kSize, "cache")).count == 0);
}

TEST_CASE(
    "Compaction keeps each partition's replica version and whether its copy completed, and a "
    "partial copy's entries",
    "[map][persistence]") {
  TempDir tmp;
  using Kind = ReplicaUpdate::Kind;
  const HistoryKeys k;
  const std::string k10 = KeyIn(10, "a");
  {
    LoggedService s(tmp.path, 1'000'000, 1, Compacting(2 << 10, 4 << 10));
    REQUIRE(s.recovery);
    ApplyReplicaHistory(s, k);
    // Writes to partition 10 alone fill segments and start rounds; the first segments, which
    // held partitions 3 to 5's records, go.
    // (A round writes about 27 KB here, 100 bytes for each of 271 partitions: the next one
    // starts after as much.)
    for (std::uint64_t v = 1; v <= 1000; ++v) {
      Apply(s, {{Kind::kSet, "orders", 10, k10, Value(static_cast<int>(v)), 0, 0, v}});
    }
    const auto stats = AwaitLogStats(s.fixture->service, [](const MapService::LogStats& st) {
      return st.compactions >= 2 && st.segments_dropped >= 2;
    });
    CHECK(stats.compactions >= 2);
    REQUIRE(stats.segments_dropped >= 2);
    CHECK_FALSE(
        std::filesystem::exists(tmp.path / "shards-1" / "shard-0" / "00000000000000000001.log"));
  }
  LoggedService again(tmp.path, 1'000'100, 1, Compacting(2 << 10, 4 << 10));
  REQUIRE(again.recovery);
  CheckReplicaHistory(*again.recovery);
  CHECK(again.recovery->versions[10] == 1000);
  CHECK(again.Get("orders", k.k3) == "written");
  CHECK(again.Get("orders", k.k3b) == "written");
  CHECK(again.Get("orders", k.k4) == "part");  // what of the copy had arrived
  CHECK_FALSE(again.Get("orders", k.k5).has_value());
  CHECK(again.Get("orders", k10) == Value(1000));
}

TEST_CASE("A service killed at any moment of its compactions loses no acknowledged write",
          "[map][persistence]") {
  constexpr int kKeys = 50;
  // Killed after so many acknowledged writes (each about 110 bytes; a round starts every 4 KB
  // or a snapshot's size of writes, so each kill falls at another point of another round).
  for (int kill_after : {1000, 3000, 6000}) {
    INFO("killed after " << kill_after << " acknowledged writes");
    TempDir tmp;
    int acks[2];
    REQUIRE(pipe(acks) == 0);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {  // writes until killed, telling the parent each acknowledged one
      close(acks[0]);
      try {
        LoggedService s(tmp.path, 1'000'000, 2, Compacting(2 << 10, 4 << 10));
        if (!s.recovery) _exit(2);
        for (int i = 0;; ++i) {
          s.Run(
              ServiceFixture::Rq(MapOp::kSet, "events", "k" + std::to_string(i % kKeys), Value(i)));
          if (write(acks[1], &i, sizeof i) != sizeof i) _exit(3);
        }
      } catch (...) {
        _exit(4);  // a failed write: the parent sees the pipe close early
      }
    }
    close(acks[1]);
    int last = -1;
    int i = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (last < kill_after && std::chrono::steady_clock::now() < deadline) {
      pollfd readable{acks[0], POLLIN, 0};
      if (poll(&readable, 1, 1000) <= 0) continue;
      if (read(acks[0], &i, sizeof i) != sizeof i) break;
      last = i;
    }
    kill(child, SIGKILL);
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status));
    while (read(acks[0], &i, sizeof i) == sizeof i) last = i;
    close(acks[0]);
    REQUIRE(last >= kill_after);
    // Rounds ran and deleted segments: the first record's segment is gone from some shard.
    bool dropped = false;
    for (const char* shard : {"shard-0", "shard-1"}) {
      dropped = dropped || !std::filesystem::exists(tmp.path / "shards-2" / shard /
                                                    "00000000000000000001.log");
    }
    CHECK(dropped);
    LoggedService s(tmp.path, 1'000'000, 2, Compacting(2 << 10, 4 << 10));
    REQUIRE(s.recovery);
    for (int k = 0; k < kKeys; ++k) {
      // The key's last acknowledged write, or the one in flight when the kill came.
      const int acked = last - ((last - k) % kKeys + kKeys) % kKeys;
      INFO("k" << k << ": last acknowledged write " << acked);
      const auto got = s.Get("events", "k" + std::to_string(k));
      CHECK((got == Value(acked) || got == Value(acked + kKeys)));
    }
  }
}

namespace {

// The point a kProbe of `p` is answered with (MapService "Catch-up"), if any.
std::optional<ReplicaPoint> Probe(LoggedService& s, std::uint32_t p) {
  ReplicaUpdate probe;
  probe.kind = ReplicaUpdate::Kind::kProbe;
  probe.partition_id = p;
  std::promise<tessera::base::Result<ReplicaAck>> answered;
  s.fixture->service.ApplyReplica(
      {probe}, [&](tessera::base::Result<ReplicaAck> r) { answered.set_value(r); });
  auto ack = answered.get_future().get();
  REQUIRE(ack);
  for (const auto& point : ack->points) {
    if (point.partition_id == p) return point;
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE(
    "A restarted member answers a probe with the point its replay left a partition at: equal "
    "for replicas with the same history (also through a snapshot), different once one "
    "history took another write, and none once a copy replaced the partition",
    "[map][persistence][catch-up]") {
  const std::uint32_t p = 17;
  const std::string k1 = KeyIn(p, "a"), k2 = KeyIn(p, "b");
  TempDir same, compacted, other;
  auto write = [&](LoggedService& s, const std::string& last) {
    for (int round = 0; round < 40; ++round) {
      s.Run(ServiceFixture::Rq(MapOp::kSet, "orders", round % 2 ? k1 : k2, Value(round)));
    }
    s.Run(ServiceFixture::Rq(MapOp::kSet, "orders", k1, last));
    s.Run(ServiceFixture::Rq(MapOp::kSet, "cache", k2, "not logged"));  // not in the history
  };
  {
    LoggedService a(same.path, 1'000'000);
    LoggedService b(compacted.path, 1'000'000, 3, Compacting(4096, 2048));
    LoggedService c(other.path, 1'000'000);
    REQUIRE(a.recovery);
    REQUIRE(b.recovery);
    REQUIRE(c.recovery);
    write(a, "last");
    write(b, "last");
    write(c, "another last");
    // b's log has snapshotted the partition since (its history's point rides in it).
    AwaitLogStats(b.fixture->service, [](const auto& st) { return st.compactions >= 3; });
  }
  LoggedService a(same.path, 1'000'000);
  LoggedService b(compacted.path, 1'000'000, 3, Compacting(4096, 2048));
  LoggedService c(other.path, 1'000'000);
  REQUIRE(a.recovery);
  REQUIRE(b.recovery);
  REQUIRE(c.recovery);
  CHECK(b.fixture->service.GetLogStats().compactions == 0);  // counted since this start
  const auto at_a = Probe(a, p), at_b = Probe(b, p), at_c = Probe(c, p);
  REQUIRE(at_a);
  REQUIRE(at_b);
  REQUIRE(at_c);
  CHECK(at_a->version == a.recovery->versions[p]);
  CHECK(at_a->digest != 0);
  CHECK(at_a->digest == at_b->digest);  // same writes, one of them through a snapshot
  CHECK(at_a->digest != at_c->digest);  // the last write differs
  // A partition never written: its empty start, the same everywhere.
  REQUIRE(Probe(a, p + 1));
  CHECK(Probe(a, p + 1)->digest == Probe(c, p + 1)->digest);
  // A copy's start replaces what replay left: no point until a copy completes it.
  Apply(a, {{ReplicaUpdate::Kind::kClearPartition, "", p, "", "", 0, 0, 0}});
  CHECK_FALSE(Probe(a, p));
}
