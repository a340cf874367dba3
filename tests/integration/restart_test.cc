// A member SIGKILLed and started again at the same address, as a supervisor (systemd
// Restart=always, a pod restarted in place) does within a second: the new process has none of
// the old one's data, and the cluster must treat the old one as dead (its partitions stay with
// their backups) and the new one as a joiner (it gets copies). Counted by address, the new
// process was taken for the old holder and a quarter of a 3-member cluster's keys were gone.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <thread>

#include "child_process.h"
#include "tessera/partition/partitioner.h"

namespace tessera::integration {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kKeys = 10'000;
constexpr base::Millis kFailureTimeoutMs = 3000;

std::string Key(int i) { return "key-" + std::to_string(i); }
std::string Value(int i) { return "value-" + std::to_string(i); }

// A member with fixed native and HTTP ports, so it can be started again where it was.
struct Slot {
  std::uint16_t port = UnusedPort();
  std::uint16_t http_port = UnusedPort();
  std::vector<std::string> join;
  std::unique_ptr<NodeProcess> node;

  bool fault_injection = false;
  // With a data directory (and a config whose "orders" map persists, always).
  std::string data_dir, config;
  std::vector<std::string> extra;  // more grid-node flags
  std::string log_level = "warn";

  void Start() {
    std::vector<std::string> args = {"--port",
                                     std::to_string(port),
                                     "--http-port",
                                     std::to_string(http_port),
                                     "--log-level",
                                     log_level,
                                     "--threads",
                                     "2",
                                     "--heartbeat-ms",
                                     "200",
                                     "--failure-timeout-ms",
                                     std::to_string(kFailureTimeoutMs),
                                     "--join-timeout-ms",
                                     "1500"};
    args.insert(args.end(), join.begin(), join.end());
    if (fault_injection) args.insert(args.end(), {"--fault-injection", "true"});
    if (!data_dir.empty()) args.insert(args.end(), {"--data-dir", data_dir, "--config", config});
    args.insert(args.end(), extra.begin(), extra.end());
    auto started = NodeProcess::Start(args);
    if (!started) FAIL(started.error().message());
    node = std::move(*started);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
  std::string Uuid() const {
    auto client = ConnectOrFail(*node);
    auto info = client->FetchMemberInfoJson();
    REQUIRE(info);
    return nlohmann::json::parse(*info)["uuid"].get<std::string>();
  }
};

// A counter of `slot`'s member since it started (its /metrics).
std::int64_t Counter(const Slot& slot, const std::string& counter) {
  const std::string metrics = HttpGet(slot.http_port, "/metrics").body;
  const std::string name = "\n" + counter + " ";
  const auto at = metrics.find(name);
  REQUIRE(at != std::string::npos);
  return std::stoll(metrics.substr(at + name.size()));
}

// The bytes of partition copies `slot`'s member sent since it started (its /metrics).
std::int64_t CopyBytesSent(const Slot& slot) {
  return Counter(slot, "tessera_migration_bytes_sent_total");
}

// Waits until `via`'s view lists exactly `uuids`, then until its /health/safe says every
// partition has all its replicas copied; returns how long that took. FAILs after 30 s.
std::chrono::milliseconds WaitSafeWith(const Slot& via, const std::vector<std::string>& uuids) {
  const auto start = Clock::now();
  const auto deadline = start + 30s;
  for (;;) {
    auto client = grid::Client::Connect(ClientOptionsFor(*via.node));
    if (client) {
      auto view = (*client)->FetchClusterView();
      bool listed = view && view->members.members.size() == uuids.size();
      for (const auto& uuid : uuids) listed = listed && view->members.Find(uuid) != nullptr;
      if (listed && HttpGet(via.http_port, "/health/safe").status == 200) break;
    }
    if (Clock::now() > deadline) {
      FAIL("the cluster was not safe with the restarted member within 30 s: "
           << HttpGet(via.http_port, "/health/safe").body);
    }
    std::this_thread::sleep_for(50ms);
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

// Every key reads back with its value through `via` (a client that knows only that member),
// and the map's size is the number of keys.
void VerifyThrough(const Slot& via, const std::string& phase) {
  INFO(phase << ", through " << via.address());
  auto client = ConnectOrFail(*via.node);
  auto map = client->GetMap("orders");
  int missing = 0, wrong = 0;
  for (int start = 0; start < kKeys; start += 1000) {
    std::vector<std::string> keys;
    for (int i = start; i < std::min(kKeys, start + 1000); ++i) keys.push_back(Key(i));
    auto values = map->GetAll(keys);
    REQUIRE(values);
    for (int i = start; i < std::min(kKeys, start + 1000); ++i) {
      auto it = values->find(Key(i));
      missing += it == values->end();
      wrong += it != values->end() && it->second != Value(i);
    }
  }
  CHECK(missing == 0);
  CHECK(wrong == 0);
  auto size = map->Size();
  REQUIRE(size);
  CHECK(*size == kKeys);
}

// Three members (the first the master), 10,000 acknowledged writes, then the member at
// `victim` is SIGKILLed and started again after `down` at the same address and ports.
void RunRestart(int victim, std::chrono::milliseconds down) {
  std::vector<Slot> slots(3);
  slots[0].Start();
  for (int i = 1; i < 3; ++i) {
    slots[i].join = {"--join", slots[0].address()};
    slots[i].Start();
  }
  WaitForMembers(*slots[0].node, 3);
  {
    auto client = ConnectOrFail(*slots[0].node);
    auto map = client->GetMap("orders");
    for (int start = 0; start < kKeys; start += 500) {
      std::vector<std::pair<std::string, std::string>> entries;
      for (int i = start; i < start + 500; ++i) entries.emplace_back(Key(i), Value(i));
      REQUIRE(map->PutAll(entries));  // acknowledged: on the owner and its backup
    }
  }
  const Slot& witness = slots[victim == 0 ? 1 : 0];
  const std::string old_uuid = slots[victim].Uuid();
  std::int64_t copied_before = 0;  // by the members that stay up
  for (int i = 0; i < 3; ++i) copied_before += i == victim ? 0 : CopyBytesSent(slots[i]);
  slots[victim].node->Stop(SIGKILL);
  std::this_thread::sleep_for(down);
  // Restarted as a supervisor's unit file would start it: seeded with the other members (the
  // first member started the cluster without seeds; a restarted master joins its old cluster).
  if (victim == 0) slots[0].join = {"--join", slots[1].address() + "," + slots[2].address()};
  const auto restarted = Clock::now();
  slots[victim].Start();
  const std::string new_uuid = slots[victim].Uuid();
  REQUIRE(new_uuid != old_uuid);
  std::vector<std::string> uuids;
  for (int i = 0; i < 3; ++i) uuids.push_back(i == victim ? new_uuid : slots[i].Uuid());
  WaitSafeWith(witness, uuids);
  const auto safe_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - restarted);
  std::int64_t copied = -copied_before;
  for (const auto& slot : slots) copied += CopyBytesSent(slot);
  // Figures, not limits: docs/reliability.md reports them.
  WARN("member " << victim << " restarted after " << down.count() << " ms: the cluster was safe "
                 << safe_ms.count() << " ms after the new process started; " << copied
                 << " bytes of entries copied");
  for (const auto& slot : slots) VerifyThrough(slot, "after the restart");
  // The new process holds full replicas: with the other two gone in turn it serves every key.
  for (int other = 0; other < 3; ++other) {
    if (other == victim) continue;
    slots[other].node->Stop(SIGKILL);
    std::vector<std::string> left;
    for (int i = 0; i < 3; ++i) {
      if (slots[i].node->running()) left.push_back(i == victim ? new_uuid : slots[i].Uuid());
    }
    WaitSafeWith(slots[victim], left);
    VerifyThrough(slots[victim], "after the other members died");
  }
}

// How many members `slot`'s member lists (0 when it cannot be asked).
std::size_t ViewSize(const Slot& slot) {
  auto client = grid::Client::Connect(ClientOptionsFor(*slot.node));
  if (!client) return 0;
  auto view = (*client)->FetchClusterView();
  return view ? view->members.members.size() : 0;
}

// Cuts `slot`'s member off from `peers` (empty: heals it).
void Block(const Slot& slot, const std::vector<std::string>& peers) {
  auto client = ConnectOrFail(*slot.node);
  REQUIRE(client->SetBlockedPeers(peers));
}

}  // namespace

// The table (its failure timeout was 5 s; here 3 s): 0.5 s and 2 s lost about a
// quarter of the keys before, 4.5 s (after the timeout) lost none.
TEST_CASE("A member SIGKILLed and restarted after 0.5 s at its address loses no acknowledged write",
          "[tools][cluster][restart]") {
  RunRestart(1, 500ms);
}

TEST_CASE("A member restarted after 2 s, before the failure timeout, loses no acknowledged write",
          "[tools][cluster][restart]") {
  RunRestart(1, 2000ms);
}

TEST_CASE("A member restarted after 4.5 s, after the failure timeout, loses no acknowledged write",
          "[tools][cluster][restart]") {
  RunRestart(1, 4500ms);
}

TEST_CASE(
    "The master SIGKILLed and restarted after 0.5 s at its address loses no acknowledged write",
    "[tools][cluster][restart]") {
  RunRestart(0, 500ms);
}

TEST_CASE(
    "A member SIGKILLed and restarted while it merges back after a network partition loses no "
    "write the other side acknowledged",
    "[tools][cluster][restart][split]") {
  // The minority member rejoins, takes its entries out (LeaveCluster) and is killed while the
  // majority's copies and its merge batches are in flight; its new process starts empty at the
  // same address. The majority's partitions must stay with the majority: nothing it
  // acknowledged, before or during the partition, may be replaced by the empty process.
  std::vector<Slot> slots(3);
  for (auto& slot : slots) slot.fault_injection = true;
  slots[0].Start();
  for (int i = 1; i < 3; ++i) {
    slots[i].join = {"--join", slots[0].address()};
    slots[i].Start();
  }
  WaitForMembers(*slots[0].node, 3);
  auto write = [&](const Slot& via, int from, int to) {
    auto client = ConnectOrFail(*via.node);
    auto map = client->GetMap("orders");
    for (int start = from; start < to; start += 500) {
      std::vector<std::pair<std::string, std::string>> entries;
      for (int i = start; i < std::min(to, start + 500); ++i)
        entries.emplace_back(Key(i), Value(i));
      REQUIRE(map->PutAll(entries));
    }
  };
  write(slots[0], 0, kKeys / 2);
  Block(slots[2], {slots[0].address(), slots[1].address()});
  Block(slots[0], {slots[2].address()});
  Block(slots[1], {slots[2].address()});
  const auto deadline = Clock::now() + 30s;
  while (ViewSize(slots[0]) != 2 || ViewSize(slots[2]) != 1) {
    if (Clock::now() > deadline) FAIL("the partition did not split the cluster within 30 s");
    std::this_thread::sleep_for(50ms);
  }
  WaitSafeWith(slots[0], {slots[0].Uuid(), slots[1].Uuid()});
  write(slots[0], kKeys / 2, kKeys);  // acknowledged by the majority during the partition
  for (const auto& slot : slots) Block(slot, {});
  // Killed as soon as it is listed by the majority again: merging, copies arriving.
  while (ViewSize(slots[0]) != 3) {
    if (Clock::now() > deadline + 30s) FAIL("the partition did not heal within 30 s");
    std::this_thread::sleep_for(10ms);
  }
  slots[2].node->Stop(SIGKILL);
  slots[2].Start();
  WaitSafeWith(slots[0], {slots[0].Uuid(), slots[1].Uuid(), slots[2].Uuid()});
  for (const auto& slot : slots) VerifyThrough(slot, "after the restart during the merge");
}

}  // namespace tessera::integration

namespace tessera::integration {
namespace {

// A value of about 100 bytes, of write round `round`.
std::string BigValue(int i, int round) {
  return "r" + std::to_string(round) + "-" + std::to_string(i) + std::string(100, 'v');
}

// `n` slots on data directories under a fresh folder (removed at the end), with a config whose
// "orders" map persists (always); slot 0 starts the cluster and the others join it. Not
// started.
struct DataSlots {
  DataSlots(const std::string& name, int n)
      : base((std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid())))
                 .string()),
        config("maps:\n  orders: {persistence: always}\n"),
        slots(static_cast<std::size_t>(n)) {
    std::filesystem::remove_all(base);
    for (int i = 0; i < n; ++i) {
      slots[i].data_dir = base + "/m" + std::to_string(i);
      slots[i].config = config.path();
      if (i > 0) slots[i].join = {"--join", slots[0].address()};
    }
  }
  ~DataSlots() {
    for (auto& slot : slots) {
      if (slot.node && slot.node->running()) slot.node->Stop(SIGKILL);
    }
    std::filesystem::remove_all(base);
  }
  std::string base;
  TempFile config;
  std::vector<Slot> slots;
};

// Three members with data directories, 10,000 acknowledged writes of about 100 bytes; the
// member at `victim` is SIGKILLed and started again on its directory after `down`, while a
// writer overwrites keys through the others (500 while it is down, 500 more while it rejoins).
// Every acknowledged value is on every member afterwards, and what was copied to the
// restarted member is the updates it missed, not its replicas whole.
// `backlog_bytes`: each member's --catch-up-backlog-bytes (0: the default).
void RunRestartWithData(int victim, std::chrono::milliseconds down,
                        std::uint64_t backlog_bytes = 0) {
  DataSlots cluster("restart-data", 3);
  std::vector<Slot>& slots = cluster.slots;
  for (auto& slot : slots) {
    if (backlog_bytes != 0) {
      slot.extra = {"--catch-up-backlog-bytes", std::to_string(backlog_bytes)};
    }
    slot.Start();
  }
  WaitForMembers(*slots[0].node, 3);
  std::vector<int> round(kKeys, 0);  // the round of each key's acknowledged value
  {
    auto client = ConnectOrFail(*slots[0].node);
    auto map = client->GetMap("orders");
    for (int start = 0; start < kKeys; start += 500) {
      std::vector<std::pair<std::string, std::string>> entries;
      for (int i = start; i < start + 500; ++i) entries.emplace_back(Key(i), BigValue(i, 0));
      REQUIRE(map->PutAll(entries));
    }
  }
  const Slot& witness = slots[victim == 0 ? 1 : 0];
  std::vector<std::string> survivors;
  for (int i = 0; i < 3; ++i) {
    if (i != victim) survivors.push_back(slots[i].Uuid());
  }
  // Overwrites keys [from, to) as round `r` through the witness, each retried until it is
  // acknowledged (a write may fail while the partition moves; bounded by 60 s).
  std::string write_error;
  auto overwrite = [&](int from, int to, int r) {
    auto client = grid::Client::Connect(ClientOptionsFor(*witness.node));
    if (!client) {
      write_error = client.error().ToString();
      return;
    }
    auto map = (*client)->GetMap("orders");
    const auto deadline = Clock::now() + 60s;
    for (int i = from; i < to; ++i) {
      while (!map->Set(Key(i), BigValue(i, r))) {
        if (Clock::now() > deadline) {
          write_error = "a write was not acknowledged within 60 s";
          return;
        }
        std::this_thread::sleep_for(20ms);
      }
      round[i] = r;
    }
  };
  slots[victim].node->Stop(SIGKILL);
  const auto killed = Clock::now();
  overwrite(0, 500, 1);
  std::this_thread::sleep_until(killed + down);
  // Down past the failure timeout: the others re-replicated its partitions among themselves
  // first (copies between them, not to it).
  if (down.count() > kFailureTimeoutMs) WaitSafeWith(witness, survivors);
  std::int64_t copied_before = 0, caught_up_before = 0, catch_up_bytes_before = 0;
  for (int i = 0; i < 3; ++i) {
    if (i == victim) continue;
    copied_before += CopyBytesSent(slots[i]);
    caught_up_before += Counter(slots[i], "tessera_catch_up_partitions_sent_total");
    catch_up_bytes_before += Counter(slots[i], "tessera_catch_up_bytes_sent_total");
  }
  if (victim == 0) slots[0].join = {"--join", slots[1].address() + "," + slots[2].address()};
  slots[victim].Start();
  std::thread writer([&] { overwrite(500, 1000, 2); });  // while it rejoins
  std::vector<std::string> uuids;
  for (int i = 0; i < 3; ++i) uuids.push_back(slots[i].Uuid());
  WaitSafeWith(witness, uuids);
  writer.join();
  REQUIRE(write_error.empty());
  WaitSafeWith(witness, uuids);
  std::int64_t copied = -copied_before, caught_up = -caught_up_before,
               catch_up_bytes = -catch_up_bytes_before;
  for (const auto& slot : slots) {
    copied += CopyBytesSent(slot);
    caught_up += Counter(slot, "tessera_catch_up_partitions_sent_total");
    catch_up_bytes += Counter(slot, "tessera_catch_up_bytes_sent_total");
  }
  // What a whole copy of the restarted member's replicas would have been: two replicas of
  // each entry over three members.
  std::int64_t data_bytes = 0;
  for (int i = 0; i < kKeys; ++i) data_bytes += Key(i).size() + BigValue(i, round[i]).size();
  const std::int64_t its_share = data_bytes * 2 / 3;
  WARN("member " << victim << " restarted with its data after " << down.count() << " ms: " << copied
                 << " bytes of entries copied since (" << catch_up_bytes << " in catch-ups of "
                 << caught_up << " partitions); a whole copy of its "
                 << "replicas is about " << its_share << " bytes");
  if (backlog_bytes == 0) {
    CHECK(caught_up >= 271 * 2 / 3 / 2);  // most of its partitions (about 180) caught up
    CHECK(copied <= its_share / 4);       // the 1,000 overwrites (and moves), not 10,000 entries
  } else {
    // Backlogs of a few updates: the partitions it missed more of are copied whole.
    CHECK(caught_up < 180);
    CHECK(copied > catch_up_bytes);
  }
  for (const auto& slot : slots) {
    INFO("through " << slot.address());
    auto client = ConnectOrFail(*slot.node);
    auto map = client->GetMap("orders");
    int wrong = 0;
    std::string example;
    for (int start = 0; start < kKeys; start += 1000) {
      std::vector<std::string> keys;
      for (int i = start; i < start + 1000; ++i) keys.push_back(Key(i));
      auto values = map->GetAll(keys);
      REQUIRE(values);
      for (int i = start; i < start + 1000; ++i) {
        auto it = values->find(Key(i));
        if (it == values->end() || it->second != BigValue(i, round[i])) {
          ++wrong;
          example = Key(i);
        }
      }
    }
    INFO("e.g. " << example);
    CHECK(wrong == 0);
  }
  // The restarted member's replicas are whole: with the other two gone in turn it serves
  // every acknowledged value.
  for (int other = 0; other < 3; ++other) {
    if (other == victim) continue;
    slots[other].node->Stop(SIGKILL);
    std::vector<std::string> left;
    for (int i = 0; i < 3; ++i) {
      if (slots[i].node->running()) left.push_back(slots[i].Uuid());
    }
    WaitSafeWith(slots[victim], left);
  }
  auto client = ConnectOrFail(*slots[victim].node);
  auto map = client->GetMap("orders");
  int wrong = 0;
  for (int i = 0; i < kKeys; ++i) {
    auto got = map->Get(Key(i));
    REQUIRE(got);
    wrong += *got != std::optional<std::string>(BigValue(i, round[i]));
  }
  CHECK(wrong == 0);
  client->Shutdown();
}

}  // namespace

TEST_CASE(
    "A member restarted with its data after 0.5 s while the others take writes is sent only "
    "the updates it missed, and loses no acknowledged write",
    "[tools][cluster][restart][catch-up]") {
  RunRestartWithData(1, 500ms);
}

TEST_CASE(
    "A member restarted with its data after the failure timeout, once the others re-replicated "
    "without it, is given back the partitions it has data of and sent only what it missed",
    "[tools][cluster][restart][catch-up]") {
  RunRestartWithData(2, 4500ms);
}

TEST_CASE(
    "A member restarted with its data that missed more than the others' backlogs hold gets "
    "those partitions whole, and loses no acknowledged write",
    "[tools][cluster][restart][catch-up]") {
  RunRestartWithData(1, 500ms, 271 * 800);  // about 400 bytes, 2 updates, per generation
}

}  // namespace tessera::integration

namespace tessera::integration {
namespace {

// The entries `slot`'s member replayed at its start (grid-cli persistence status).
std::int64_t ReplayedEntries(const Slot& slot) {
  auto status =
      RunProcess(GRID_CLI_PATH, {"--address", slot.address(), "--json", "persistence", "status"});
  REQUIRE(status.exit_code == 0);
  const auto doc = nlohmann::json::parse(status.out);
  for (const auto& m : doc["members"]) {
    if (m["address"] == slot.address()) return m["replayed"]["entries"].get<std::int64_t>();
  }
  FAIL("persistence status does not list " << slot.address());
  return 0;
}

}  // namespace

TEST_CASE(
    "A member that rejoins a running cluster with its data drops what it replayed of the "
    "partitions it is not given, so its next start replays only what it holds",
    "[tools][cluster][restart][catch-up]") {
  DataSlots cluster("rejoin-drop", 4);
  std::vector<Slot>& slots = cluster.slots;
  for (int i = 0; i < 3; ++i) slots[i].Start();
  WaitForMembers(*slots[0].node, 3);
  {
    auto client = ConnectOrFail(*slots[0].node);
    auto map = client->GetMap("orders");
    for (int i = 0; i < 3000; ++i) REQUIRE(map->Set(Key(i), BigValue(i, 0)));
  }
  // Member 2 goes; once the others removed it, a fourth member joins, so member 2 comes back to
  // a cluster of four whose balance gives it fewer partitions than it replays. (A member that
  // joins before a dead one is removed can be left waiting for copies the dead one was to send:
  // see the stop note of 2026-12-02; not this test's subject.)
  slots[2].node->Stop(SIGKILL);
  WaitSafeWith(slots[0], {slots[0].Uuid(), slots[1].Uuid()});
  slots[3].Start();
  WaitSafeWith(slots[0], {slots[0].Uuid(), slots[1].Uuid(), slots[3].Uuid()});
  slots[2].Start();
  const std::int64_t first = ReplayedEntries(slots[2]);
  std::vector<std::string> all;
  for (const auto& slot : slots) all.push_back(slot.Uuid());
  WaitSafeWith(slots[0], all);
  slots[2].node->Stop(SIGKILL);
  slots[2].Start();
  const std::int64_t second = ReplayedEntries(slots[2]);
  // About 2/3 of 3,000 held before (two replicas over three members), about 2/4 after.
  WARN("member 2 replayed " << first << " entries, then " << second);
  CHECK(first >= 1800);
  CHECK(second <= first * 85 / 100);
  WaitSafeWith(slots[0], {slots[0].Uuid(), slots[1].Uuid(), slots[2].Uuid(), slots[3].Uuid()});
  auto client = ConnectOrFail(*slots[1].node);
  auto map = client->GetMap("orders");
  int wrong = 0;
  std::string examples;
  for (int i = 0; i < 3000; ++i) {
    auto got = map->Get(Key(i));
    REQUIRE(got);
    if (*got != std::optional<std::string>(BigValue(i, 0))) {
      if (++wrong < 20) {
        examples += Key(i) + "(p" + std::to_string(partition::Partitioner().PartitionOf(Key(i))) +
                    ")=" + (got->has_value() ? "other" : "none") + " ";
      }
    }
  }
  INFO(examples);
  CHECK(wrong == 0);
  client->Shutdown();
}

}  // namespace tessera::integration
