// Instance::Transact on the embedded member and through a client (real loopback sockets): the
// same all-or-nothing semantics, results and errors either way.
#include "tessera/grid/transaction.h"

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "tessera/grid/client.h"
#include "tessera/grid/member.h"

using namespace tessera;  // NOLINT
using grid::Transaction;
using map::TxConflict;

namespace {

grid::MemberOptions Served() {
  grid::MemberOptions o;
  o.port = 0;
  o.threads = 2;
  o.cluster_name = "tx";
  return o;
}

grid::ClientOptions To(const grid::Member& member) {
  grid::ClientOptions o;
  o.addresses = {"127.0.0.1:" + std::to_string(member.native_port())};
  o.cluster_name = "tx";
  return o;
}

// What a service does with both kinds of instance: an order and its outbox event together.
void ExerciseTransactions(grid::Instance& instance) {
  auto orders = instance.GetMap("orders");
  REQUIRE(
      orders->Set("stock@cust-9", record::GenericRecord::Build().Int64("n", 5).Done().Encode()));

  Transaction create("cust-9");
  create.Set("orders", "order-17@cust-9", "pending")
      .IfAbsent()
      .PutIfAbsent("outbox", "evt-1@cust-9", "OrderCreated")
      .ExecuteOnKey("orders", "stock@cust-9", "increment",
                    record::GenericRecord::Build().String("field", "n").Int64("delta", -2).Done())
      .Get("orders", "order-17@cust-9");
  auto committed = instance.Transact(create);
  REQUIRE(committed);
  CHECK(committed->committed);
  REQUIRE(committed->results.size() == 4);
  CHECK(committed->results[2].processor_result->GetInt64("value") == 3);
  CHECK(committed->results[3].value == "pending");
  CHECK(instance.GetMap("outbox")->Get("evt-1@cust-9").value() == "OrderCreated");

  // The same Transaction again: applied once, the first result again.
  auto again = instance.Transact(create);
  REQUIRE(again);
  CHECK(again->committed);
  CHECK(again->results[2].processor_result->GetInt64("value") == 3);

  // A new batch that conflicts: nothing applied, the conflict named.
  Transaction duplicate("cust-9");
  duplicate.Set("outbox", "evt-2@cust-9", "OrderCreated")
      .Set("orders", "order-17@cust-9", "pending")
      .IfAbsent();
  auto conflict = instance.Transact(duplicate);
  REQUIRE(conflict);
  CHECK_FALSE(conflict->committed);
  CHECK(conflict->conflict ==
        TxConflict{1, "orders", "order-17@cust-9", "value of 7 bytes, version 1"});
  CHECK_FALSE(instance.GetMap("outbox")->Get("evt-2@cust-9").value().has_value());

  // Bad input: a key outside the partition, a precondition before any operation.
  Transaction stray("cust-9");
  stray.Set("orders", "order-18@cust-8", "x");
  auto refused = instance.Transact(stray);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == base::ErrorCode::kBadRequest);
  CHECK_THAT(refused.error().message(), Catch::Contains("key 'order-18@cust-8' of operation 0"));
  Transaction early("cust-9");
  early.IfAbsent().Set("orders", "x@cust-9", "x");
  auto misbuilt = instance.Transact(early);
  REQUIRE_FALSE(misbuilt);
  CHECK_THAT(misbuilt.error().message(), Catch::Contains("before any operation"));
  CHECK_FALSE(orders->Get("x@cust-9").value().has_value());
}

}  // namespace

TEST_CASE("An embedded member applies a transaction all-or-nothing", "[grid][tx]") {
  grid::Member member(Served());
  REQUIRE(member.Start());
  ExerciseTransactions(member);
  member.Shutdown();
}

TEST_CASE("A client's transaction has the embedded member's semantics", "[grid][tx][client]") {
  grid::Member member(Served());
  REQUIRE(member.Start());
  auto client = grid::Client::Connect(To(member));
  REQUIRE(client);
  ExerciseTransactions(**client);
  (*client)->Shutdown();
  member.Shutdown();
}

TEST_CASE("Transactions get distinct random ids and a forked child draws new ones", "[grid][tx]") {
  // An id is 128 random bits in 32 hex digits; two Transactions never share one, including
  // across fork() (the child's generator would otherwise repeat the parent's ids: a retry
  // of one batch would be answered with the other's result).
  Transaction first("p");
  Transaction second("p");
  CHECK(first.id().size() == 32);
  CHECK(first.id().find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(first.id() != second.id());
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    Transaction in_child("p");
    const std::string& id = in_child.id();
    const auto written = write(fds[1], id.data(), id.size());
    _exit(written == static_cast<ssize_t>(id.size()) ? 0 : 1);
  }
  close(fds[1]);
  Transaction in_parent("p");
  std::string child_id(32, '\0');
  std::size_t got = 0;
  while (got < child_id.size()) {
    const auto n = read(fds[0], child_id.data() + got, child_id.size() - got);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  REQUIRE(got == 32);
  CHECK(child_id != in_parent.id());
  CHECK(child_id.find_first_not_of("0123456789abcdef") == std::string::npos);
  // A Transaction about to go gives its request up whole (for an asynchronous call).
  Transaction batch("cust-1");
  batch.Set("orders", "o-1@cust-1", "v").Get("orders", "o-1@cust-1");
  const std::string id = batch.id();
  map::MapRequest request = std::move(batch).request();
  CHECK(request.op == map::MapOp::kTransact);
  CHECK(request.transaction_id == id);
  REQUIRE(request.transaction.size() == 2);
  CHECK(request.transaction[0].request.key == "o-1@cust-1");
}
