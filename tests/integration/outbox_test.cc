// The saga outbox across real processes: two outbox-node processes (grid-node with the outbox
// relay) form a service cluster; a grid-node is the shared cluster their events go to.
#include <signal.h>
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <thread>

#include "child_process.h"
#include "tessera/grid/id_generator.h"
#include "tessera/grid/map.h"
#include "tessera/grid/stream.h"
#include "tessera/partition/partitioner.h"
#include "tessera/saga/outbox.h"

namespace tessera::integration {
namespace {

using Clock = std::chrono::steady_clock;

grid::StreamConfig OrderEventsConfig() {
  grid::StreamConfig c;
  c.sub_streams = 4;
  return c;
}

// Every event of the shared stream "order-events", by sub-stream in offset order.
std::vector<saga::Event> SharedEvents(grid::Client& shared) {
  auto stream = shared.GetStream("order-events", OrderEventsConfig());
  std::vector<saga::Event> out;
  for (std::uint32_t sub = 0; sub < 4; ++sub) {
    auto slice = stream->Read(sub, 1, 10'000);
    if (!slice) continue;
    for (const auto& e : slice->events) {
      if (auto event = saga::DecodeEvent(e.payload)) out.push_back(*event);
    }
  }
  return out;
}

}  // namespace

TEST_CASE(
    "Outbox: events staged while the shared cluster is stopped for 10 s, by a member "
    "then SIGKILLed, are all published once, in per-key order, by the survivor",
    "[tools][saga][outbox]") {
  auto shared = NodeProcess::StartOrFail({"--cluster-name", "shared"});
  setenv("OUTBOX_SHARED", shared->address().c_str(), 1);
  auto x = NodeProcess::StartProgramOrFail(OUTBOX_NODE_PATH, FastClusterArgs({}));
  auto y =
      NodeProcess::StartProgramOrFail(OUTBOX_NODE_PATH, FastClusterArgs({"--join", x->address()}));
  WaitForMembers(*x, 2);
  WaitForMembers(*y, 2);

  const auto stopped = Clock::now();
  kill(shared->pid(), SIGSTOP);
  grid::IdGenerator ids(3);
  std::vector<std::int64_t> staged;
  {
    auto service = ConnectOrFail(*x);
    for (int n = 0; n < 100; ++n) {
      const std::string customer = "cust-" + std::to_string(n % 20);
      saga::Event e;
      e.id = ids.Next();
      e.type = "OrderCreated";
      e.key = "order-" + std::to_string(n) + "@" + customer;
      e.time_ms = 1'795'600'000'000 + n;
      grid::Transaction tx(customer);
      tx.Set("orders", e.key, "placed");
      REQUIRE(saga::Outbox::Stage(tx, e));
      auto r = service->Transact(tx);
      REQUIRE(r);
      REQUIRE(r->committed);
      staged.push_back(e.id);
    }
    // Some of the entries are in partitions x owns: those only y's promotion can publish.
    auto view = service->FetchClusterView();
    REQUIRE(view);
    std::string x_uuid;
    for (const auto& m : view->members.members) {
      if (m.address == x->address()) x_uuid = m.uuid;
    }
    int on_x = 0;
    for (int c = 0; c < 20; ++c) {
      const auto p = partition::Partitioner(271).PartitionOf("cust-" + std::to_string(c));
      on_x += view->partitions.replicas[p].front() == x_uuid;
    }
    REQUIRE(on_x > 0);
  }
  x->Stop(SIGKILL);  // half the outbox entries were x's: y's backups take them over
  WaitForMembers(*y, 1);
  std::this_thread::sleep_until(stopped + 10s);
  kill(shared->pid(), SIGCONT);

  auto on_shared = grid::Client::Connect([&] {
    auto o = ClientOptionsFor(*shared);
    o.cluster_name = "shared";
    return o;
  }());
  REQUIRE(on_shared);
  const auto deadline = Clock::now() + 30s;
  std::vector<saga::Event> events;
  while (Clock::now() < deadline) {
    events = SharedEvents(**on_shared);
    if (events.size() >= staged.size()) break;
    std::this_thread::sleep_for(100ms);
  }
  std::map<std::int64_t, int> count;
  std::map<std::string, std::vector<std::int64_t>> by_customer;
  for (const auto& e : events) {
    ++count[e.id];
    by_customer[e.key.substr(e.key.find('@') + 1)].push_back(e.id);
  }
  CHECK(events.size() == staged.size());
  int missing = 0, duplicated = 0;
  for (auto id : staged) {
    missing += count[id] == 0;
    duplicated += count[id] > 1;
  }
  CHECK(missing == 0);
  CHECK(duplicated == 0);
  for (const auto& [customer, list] : by_customer) {
    INFO(customer);
    CHECK(std::is_sorted(list.begin(), list.end()));
  }
  auto survivor = ConnectOrFail(*y);
  CHECK(survivor->GetMap(saga::kOutboxMap)->Size().value() == 0);
}

}  // namespace tessera::integration
