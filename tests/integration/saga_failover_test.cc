// Orchestrated sagas across real processes: two saga-node processes (grid-node orchestrating
// "fulfillment") form the orders service; the participants run in this test process; a
// grid-node is the shared cluster. An orchestrating process is SIGKILLed mid-saga.
#include <signal.h>
#include <stdlib.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "child_process.h"
#include "tessera/grid/map.h"
#include "tessera/grid/member.h"
#include "tessera/partition/partitioner.h"
#include "tessera/saga/consumer.h"
#include "tessera/saga/orchestrator.h"
#include "tessera/saga/outbox.h"
#include "tessera/saga/participant.h"

namespace tessera::integration {

TEST_CASE(
    "Sagas whose orchestrating process is SIGKILLed mid-saga complete on the survivor, every "
    "participant effect once",
    "[tools][saga][orchestrator]") {
  using Clock = std::chrono::steady_clock;
  auto shared = NodeProcess::StartOrFail({"--cluster-name", "shared"});
  setenv("SAGA_SHARED", shared->address().c_str(), 1);
  unsetenv("SAGA_BEGIN");
  auto x = NodeProcess::StartProgramOrFail(SAGA_NODE_PATH, FastClusterArgs({}));
  const int sagas = 20;
  setenv("SAGA_BEGIN", std::to_string(sagas).c_str(), 1);
  auto y =
      NodeProcess::StartProgramOrFail(SAGA_NODE_PATH, FastClusterArgs({"--join", x->address()}));
  unsetenv("SAGA_BEGIN");
  WaitForMembers(*x, 2);

  // The participants: inventory, payment, shipping (held until x is gone).
  grid::ClientOptions so = ClientOptionsFor(*shared);
  so.cluster_name = "shared";
  auto shared_client = grid::Client::Connect(so);
  REQUIRE(shared_client);
  std::shared_ptr<grid::Instance> client = std::move(*shared_client);
  grid::MemberOptions mo;
  mo.listen = false;
  mo.threads = 1;
  mo.cluster_name = "shop";
  grid::Member shop(mo);
  saga::Outbox outbox(shop, client, saga::OutboxOptions{});
  REQUIRE(shop.Start());
  saga::Inbox inbox(shop);
  saga::SagaParticipant participant(shop, client);
  std::atomic<bool> hold{true};
  auto count = [&](const std::string& what) -> base::Result<saga::StepWork> {
    grid::Transaction tx("shop");
    tx.ExecuteOnKey("ledger", what + "@shop", "incrementRaw",
                    record::GenericRecord::Build().Int64("delta", 1).Done());
    return saga::StepWork{std::move(tx), saga::StepReply{true, false, "", what}};
  };
  std::vector<std::unique_ptr<saga::Consumer>> consumers;
  auto consumer = [&](const std::string& group, const std::string& stream) -> saga::Consumer& {
    saga::ConsumerOptions co;
    co.group = group;
    co.streams = {stream};
    co.dead_letters = false;  // a held event comes again
    co.retry.max_attempts = 1;
    co.subscribe.retry_delay_ms = 50;
    co.subscribe.max_idle_poll_ms = 5;
    consumers.push_back(std::make_unique<saga::Consumer>(client, shop, inbox, co));
    return *consumers.back();
  };
  participant.On(consumer("inventory", "inventory.commands"), "ReserveStock",
                 [&](const saga::Event&) { return count("reserved"); });
  participant.On(consumer("payment", "payment.commands"), "ChargeCard",
                 [&](const saga::Event&) { return count("charged"); });
  participant.On(consumer("shipping", "shipping.commands"), "Ship",
                 [&](const saga::Event&) -> base::Result<saga::StepWork> {
                   if (hold) return base::Fail(base::ErrorCode::kOverloaded, "held by the test");
                   return count("shipped");
                 });
  for (auto& c : consumers) REQUIRE(c->Start());

  auto orders = ConnectOrFail(*y);
  saga::SagaStore store(*orders);
  auto wait_all = [&](const std::function<bool(const saga::SagaRecord&)>& done,
                      std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
      auto all = store.List();
      if (all && static_cast<int>(all->size()) == sagas &&
          std::all_of(all->begin(), all->end(), done)) {
        return true;
      }
      std::this_thread::sleep_for(100ms);
    }
    return false;
  };
  REQUIRE(wait_all([](const saga::SagaRecord& s) { return s.current_step == 2; }, 30s));

  // Some sagas live in partitions x owns: only y's promoted backups can finish them.
  auto view = orders->FetchClusterView();
  REQUIRE(view);
  std::string x_uuid;
  for (const auto& m : view->members.members) {
    if (m.address == x->address()) x_uuid = m.uuid;
  }
  int on_x = 0;
  for (int i = 0; i < sagas; ++i) {
    const auto p = partition::Partitioner(271).PartitionOf("cust-" + std::to_string(i));
    on_x += view->partitions.replicas[p].front() == x_uuid;
  }
  REQUIRE(on_x > 0);
  x->Stop(SIGKILL);
  WaitForMembers(*y, 1);
  hold = false;
  const bool completed = wait_all(
      [](const saga::SagaRecord& s) { return s.status == saga::SagaStatus::kCompleted; }, 60s);
  {
    auto all = store.List();
    std::string states;
    if (all) {
      for (const auto& s : *all) {
        states += s.id + "=" + std::string(saga::SagaStatusName(s.status)) + " ";
      }
    }
    INFO(states);
    REQUIRE(completed);
  }
  auto ledger = [&](const std::string& k) {
    auto v = shop.GetMap("ledger")->Get(k + "@shop").value();
    return v ? std::stoll(*v) : 0;
  };
  CHECK(ledger("reserved") == sagas);  // every effect once, across the kill
  CHECK(ledger("charged") == sagas);
  CHECK(ledger("shipped") == sagas);
  for (auto& c : consumers) c->Stop();
}

}  // namespace tessera::integration
