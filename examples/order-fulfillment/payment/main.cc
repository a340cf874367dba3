// payment-service: customer accounts, charged and refunded for the fulfillment saga (commands
// ChargeCard and RefundCard on the shared stream "payment.commands", consumer group
// "payment"). An order's charge lives beside its customer's account (map "charges", key
// "<order>@<customer>", in the account's partition), so the charge and the balance change in
// one partition transaction, guarded by preconditions (the balance and the charge as read).
// A charge moves one way only:
//
//   absent -> "charged:A" (balance - A) -> "refunded:A" (balance + A);   absent -> "void"
//
// so a command delivered twice is applied once, a refund that comes before its charge (the
// charge timed out) voids it, and a charge that comes after its order was cancelled refuses.
//
// Declines (refusals, not retried): an amount over --decline-over (cents, 0 = no limit), a
// customer in --decline-customers, or a balance short of the amount. --latency-ms delays
// every command (a slow dependency). Accounts open with --initial-balance on first use.
//
// REST: GET /accounts/{customer}, PUT /accounts/{customer} {"balance": N}, GET /charges
// (every charge), GET /health.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "common/service.h"
#include "tessera/grid/map.h"
#include "tessera/saga/consumer.h"
#include "tessera/saga/inbox.h"
#include "tessera/saga/outbox.h"
#include "tessera/saga/participant.h"

namespace {

using nlohmann::json;
using tessera::base::ErrorCode;
using tessera::base::Fail;
using tessera::base::Result;
using tessera::http::Request;
using tessera::http::Response;
namespace examples = tessera::examples;
namespace saga = tessera::saga;
namespace grid = tessera::grid;

constexpr const char* kAccounts = "accounts";
constexpr const char* kCharges = "charges";

const char* kUsage =
    "usage: payment-service --shared HOST:PORT [common flags] [--initial-balance CENTS]\n"
    "         [--decline-over CENTS] [--decline-customers C1,C2] [--latency-ms MS]\n"
    "         [--concurrency N]\n"
    "common flags: --port P --join HOST:PORT --shared-cluster NAME --http-port P --threads N\n"
    "              --heartbeat-ms MS --failure-timeout-ms MS --log-level LEVEL\n"
    "              --min-cluster-size N --fault-injection true|false --data-dir DIR\n"
    "See examples/order-fulfillment/README.md.\n";

struct ChargeOf {
  std::string customer;
  std::int64_t amount = 0;
  std::string key;  // "<order>@<customer>"
};

Result<ChargeOf> Parse(const saga::Event& command) {
  auto customer = command.payload.GetString("customer");
  auto amount = command.payload.GetInt64("amount");
  if (!customer || !amount || !examples::ValidName(*customer) || *amount < 0) {
    return Fail(ErrorCode::kBadRequest,
                "command " + command.type + " has no valid customer and amount");
  }
  return ChargeOf{*customer, *amount, saga::SagaParticipant::SagaId(command) + "@" + *customer};
}

}  // namespace

int main(int argc, char** argv) {
  examples::Service svc("payment-service", argc, argv,
                        {{"initial-balance", "100000000"},
                         {"decline-over", "0"},
                         {"decline-customers", ""},
                         {"latency-ms", "0"},
                         {"concurrency", "2"}},
                        kUsage);
  auto fail = [&](const tessera::base::Error& e) {
    std::fprintf(stderr, "payment-service: %s\n", e.message().c_str());
    return 1;
  };
  const std::int64_t initial_balance = svc.IntFlag("initial-balance");
  const std::int64_t decline_over = svc.IntFlag("decline-over");
  const std::int64_t latency_ms = svc.IntFlag("latency-ms");
  std::set<std::string> blocked;
  for (const std::string& c : examples::SplitCommas(svc.Flag("decline-customers"))) {
    blocked.insert(c);
  }
  if (auto ok = svc.Prepare(); !ok) return fail(ok.error());
  auto& member = svc.member();
  saga::OutboxOptions oo;
  oo.service = "payment";
  auto outbox = std::make_unique<saga::Outbox>(member, svc.shared(), oo);
  if (auto ok = svc.StartMember(); !ok) return fail(ok.error());
  auto accounts = member.GetMap(kAccounts);
  auto charges = member.GetMap(kCharges);
  saga::Inbox inbox(member);
  saga::SagaParticipant participant(member, svc.shared());
  saga::ConsumerOptions co;
  co.group = "payment";
  co.streams = {"payment.commands"};
  co.concurrency = static_cast<int>(svc.IntFlag("concurrency"));
  co.unknown_to_dlq = true;
  // A balance changed by another charge meanwhile: read it again, soon.
  co.retry.max_attempts = 8;
  co.retry.initial_delay_ms = 20;
  co.retry.max_delay_ms = 500;
  auto consumer = std::make_unique<saga::Consumer>(svc.shared(), member, inbox, co);
  auto slow = [latency_ms] {
    if (latency_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(latency_ms));
  };
  participant.On(*consumer, "ChargeCard", [&](const saga::Event& cmd) -> Result<saga::StepWork> {
    slow();
    auto c = Parse(cmd);
    if (!c) return std::unexpected(c.error());
    auto refuse = [](std::string why) {
      return saga::StepWork(std::nullopt, saga::StepReply{false, false, std::move(why), ""});
    };
    auto charge = charges->Get(c->key);
    if (!charge) return std::unexpected(charge.error());
    if (charge->has_value()) {
      if ((*charge)->rfind("charged:", 0) == 0) {
        return saga::StepWork(std::nullopt, saga::StepReply{true, false, "", **charge});
      }
      return refuse("the order was cancelled before it was charged");
    }
    if (blocked.contains(c->customer)) {
      return refuse("declined: customer " + c->customer + " may not be charged");
    }
    if (decline_over > 0 && c->amount > decline_over) {
      return refuse(fmt::format("declined: {} is over the limit of {}", c->amount, decline_over));
    }
    auto balance = accounts->Get(c->customer);
    if (!balance) return std::unexpected(balance.error());
    const std::int64_t before =
        balance->has_value() ? examples::ToNumber(**balance) : initial_balance;
    if (before < c->amount) {
      return refuse(
          fmt::format("declined: insufficient funds (balance {}, amount {})", before, c->amount));
    }
    grid::Transaction tx(c->customer);
    tx.Set(kAccounts, c->customer, std::to_string(before - c->amount));
    if (balance->has_value()) {
      tx.IfValue(**balance);
    } else {
      tx.IfAbsent();
    }
    tx.Set(kCharges, c->key, "charged:" + std::to_string(c->amount)).IfAbsent();
    return saga::StepWork(std::move(tx),
                          saga::StepReply{true, false, "", fmt::format("charged {}", c->amount)});
  });
  participant.On(*consumer, "RefundCard", [&](const saga::Event& cmd) -> Result<saga::StepWork> {
    slow();
    auto c = Parse(cmd);
    if (!c) return std::unexpected(c.error());
    auto charge = charges->Get(c->key);
    if (!charge) return std::unexpected(charge.error());
    grid::Transaction tx(c->customer);
    std::string result;
    if (!charge->has_value()) {  // never charged (the charge timed out): void it
      tx.Set(kCharges, c->key, "void", grid::WithTtl(examples::kTombstoneTtlMs)).IfAbsent();
      result = "nothing to refund";
    } else if ((*charge)->rfind("charged:", 0) == 0) {
      const std::int64_t amount = examples::ToNumber((*charge)->substr(8));
      auto balance = accounts->Get(c->customer);
      if (!balance) return std::unexpected(balance.error());
      const std::int64_t before =
          balance->has_value() ? examples::ToNumber(**balance) : initial_balance;
      tx.Set(kCharges, c->key, "refunded:" + std::to_string(amount)).IfValue(**charge);
      tx.Set(kAccounts, c->customer, std::to_string(before + amount));
      if (balance->has_value()) {
        tx.IfValue(**balance);
      } else {
        tx.IfAbsent();
      }
      result = fmt::format("refunded {}", amount);
    } else {
      return saga::StepWork(std::nullopt, saga::StepReply{true, false, "", "refunded before"});
    }
    return saga::StepWork(std::move(tx), saga::StepReply{true, false, "", result});
  });
  if (auto ok = consumer->Start(); !ok) return fail(ok.error());

  auto& http = svc.http();
  http.Route("GET", "/accounts/{customer}", [&](const Request& r) {
    const std::string& customer = r.params.at("customer");
    auto got = accounts->Get(customer);
    if (!got) return Response::FromError(got.error());
    const std::int64_t balance = got->has_value() ? examples::ToNumber(**got) : initial_balance;
    return Response::Json(
        200,
        json{{"customer", customer}, {"balance", balance}, {"opened", got->has_value()}}.dump());
  });
  http.Route("PUT", "/accounts/{customer}", [&](const Request& r) {
    const std::string& customer = r.params.at("customer");
    if (!examples::ValidName(customer)) {
      return Response::Error(400, "bad_request", "a customer is 1..64 letters, digits, '-' or '_'");
    }
    const json body = json::parse(r.body, nullptr, false);
    if (body.is_discarded() || !body.is_object() || !body.contains("balance") ||
        !body["balance"].is_number_integer() || body["balance"].get<std::int64_t>() < 0) {
      return Response::Error(400, "bad_request",
                             "expected a JSON object {\"balance\": N} with N >= 0 cents");
    }
    const std::int64_t n = body["balance"].get<std::int64_t>();
    if (auto ok = accounts->Set(customer, std::to_string(n)); !ok) {
      return Response::FromError(ok.error());
    }
    return Response::Json(200, json{{"customer", customer}, {"balance", n}}.dump());
  });
  http.Route("GET", "/charges", [&](const Request&) {
    return examples::ListStates(*charges, "charges", "customer", "amount");
  });
  if (auto ok = svc.StartHttp(); !ok) return fail(ok.error());
  svc.WaitForStop();
  consumer->Stop();
  consumer.reset();
  outbox.reset();
  member.Shutdown();
  return 0;
}
