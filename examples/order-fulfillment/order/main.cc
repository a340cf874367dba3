// order-service: takes orders over REST and orchestrates the fulfillment saga for each one:
// reserve the stock (inventory-service, one reservation per line: several partitions), then
// charge the customer (payment-service). A refused step compensates what was done, in reverse
// (release the stock, refund); a step without a reply past its timeout times the saga out and
// compensates it too. The order and its saga start in one transaction of this service's
// embedded member; the saga record is the order's state:
//
//   saga STARTED -> "pending"; COMPENSATING or TIMED_OUT -> "cancelling";
//   COMPLETED -> "confirmed"; COMPENSATED -> "cancelled"; FAILED -> "failed" (a compensation
//   failed for good: an operator looks at it).
//
// REST:
//   POST /orders  {"id": optional, "customer": "...", "lines": [{"product", "quantity", "price"}]}
//       201 with the order; the same id again with the same order: 200 (a retried POST),
//       with another order: 409.
//   GET /orders/{id}           the order, its status and the saga's steps
//   GET /orders?status=S&limit=N   counts by status, and ids of orders in status S (default 100)
//   GET /health
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "common/service.h"
#include "tessera/base/clock.h"
#include "tessera/grid/id_generator.h"
#include "tessera/grid/map.h"
#include "tessera/saga/inbox.h"
#include "tessera/saga/orchestrator.h"
#include "tessera/saga/outbox.h"

namespace {

using nlohmann::json;
using tessera::http::Request;
using tessera::http::Response;
namespace examples = tessera::examples;
namespace saga = tessera::saga;
namespace grid = tessera::grid;

constexpr const char* kOrders = "orders";

const char* kUsage =
    "usage: order-service --shared HOST:PORT [common flags] [--reserve-timeout-ms MS]\n"
    "         [--charge-timeout-ms MS] [--saga-timeout-ms MS] [--max-attempts N]\n"
    "         [--compensation-timeout-ms MS] [--compensation-attempts N]\n"
    "         [--retry-delay-ms MS] [--concurrency N]\n"
    "common flags: --port P --join HOST:PORT --shared-cluster NAME --http-port P --threads N\n"
    "              --heartbeat-ms MS --failure-timeout-ms MS --log-level LEVEL\n"
    "              --min-cluster-size N --fault-injection true|false --data-dir DIR\n"
    "See examples/order-fulfillment/README.md.\n";

std::string OrderStatus(saga::SagaStatus s) {
  switch (s) {
    case saga::SagaStatus::kStarted:
      return "pending";
    case saga::SagaStatus::kCompensating:
    case saga::SagaStatus::kTimedOut:
      return "cancelling";
    case saga::SagaStatus::kCompleted:
      return "confirmed";
    case saga::SagaStatus::kCompensated:
      return "cancelled";
    case saga::SagaStatus::kFailed:
      return "failed";
  }
  return "unknown";
}

// The order as stored (canonical: a retried POST compares equal).
struct Order {
  std::string id, customer;
  std::vector<examples::OrderLine> lines;
  std::int64_t amount = 0;

  json ToJson() const {
    json l = json::array();
    for (const auto& line : lines) {
      l.push_back({{"product", line.product}, {"quantity", line.quantity}, {"price", line.price}});
    }
    return {{"id", id}, {"customer", customer}, {"lines", l}, {"amount", amount}};
  }
};

tessera::base::Result<Order> ParseOrder(const std::string& body) {
  using tessera::base::ErrorCode;
  using tessera::base::Fail;
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    return Fail(ErrorCode::kBadRequest, std::string("the body is not JSON: ") + e.what());
  }
  if (!j.is_object()) return Fail(ErrorCode::kBadRequest, "the body must be a JSON object");
  Order o;
  if (j.contains("id")) {
    if (!j["id"].is_string() || !examples::ValidName(j["id"].get<std::string>())) {
      return Fail(ErrorCode::kBadRequest,
                  "\"id\" must be 1..64 letters, digits, '-' or '_' (or left out)");
    }
    o.id = j["id"].get<std::string>();
  }
  if (!j.contains("customer") || !j["customer"].is_string() ||
      !examples::ValidName(j["customer"].get<std::string>())) {
    return Fail(ErrorCode::kBadRequest,
                "\"customer\" is required: 1..64 letters, digits, '-' or '_'");
  }
  o.customer = j["customer"].get<std::string>();
  if (!j.contains("lines") || !j["lines"].is_array() || j["lines"].empty() ||
      j["lines"].size() > 100) {
    return Fail(ErrorCode::kBadRequest, "\"lines\" is required: an array of 1..100 lines");
  }
  for (std::size_t i = 0; i < j["lines"].size(); ++i) {
    const json& l = j["lines"][i];
    const std::string where = "lines[" + std::to_string(i) + "]";
    if (!l.is_object() || !l.contains("product") || !l["product"].is_string() ||
        !examples::ValidName(l["product"].get<std::string>())) {
      return Fail(ErrorCode::kBadRequest, where + ".product must be a product name");
    }
    if (!l.contains("quantity") || !l["quantity"].is_number_integer() ||
        l["quantity"].get<std::int64_t>() <= 0 || l["quantity"].get<std::int64_t>() > 1'000'000) {
      return Fail(ErrorCode::kBadRequest, where + ".quantity must be a whole number 1..1000000");
    }
    const std::int64_t price =
        l.value("price", json(0)).is_number_integer() ? l.value("price", std::int64_t{0}) : -1;
    if (price < 0 || price > 100'000'000) {
      return Fail(ErrorCode::kBadRequest, where + ".price must be whole cents 0..100000000");
    }
    const std::string product = l["product"].get<std::string>();
    for (const auto& seen : o.lines) {
      if (seen.product == product) {
        return Fail(ErrorCode::kBadRequest, where + ": product '" + product +
                                                "' is on another line already; one line each");
      }
    }
    o.lines.push_back({product, l["quantity"].get<std::int64_t>(), price});
    o.amount += o.lines.back().quantity * price;
  }
  return o;
}

json SagaJson(const saga::SagaRecord& s) {
  json steps = json::array();
  for (const auto& st : s.steps) {
    steps.push_back({{"name", st.name},
                     {"status", saga::StepStatusName(st.status)},
                     {"result", st.result},
                     {"attempts", st.attempts},
                     {"compensation_attempts", st.compensation_attempts}});
  }
  return {{"status", saga::SagaStatusName(s.status)},
          {"current_step", s.current_step},
          {"failure_reason", s.failure_reason},
          {"created_ms", s.created_ms},
          {"updated_ms", s.updated_ms},
          {"steps", steps}};
}

}  // namespace

int main(int argc, char** argv) {
  examples::Service svc("order-service", argc, argv,
                        {{"reserve-timeout-ms", "30000"},
                         {"charge-timeout-ms", "10000"},
                         {"saga-timeout-ms", "0"},
                         {"compensation-timeout-ms", "10000"},
                         {"compensation-attempts", "5"},
                         {"max-attempts", "3"},
                         {"retry-delay-ms", "200"},
                         {"concurrency", "2"}},
                        kUsage);
  auto fail = [&](const tessera::base::Error& e) {
    std::fprintf(stderr, "order-service: %s\n", e.message().c_str());
    return 1;
  };
  if (auto ok = svc.Prepare(); !ok) return fail(ok.error());
  auto& member = svc.member();
  saga::OutboxOptions oo;
  oo.service = "orders";
  auto outbox = std::make_unique<saga::Outbox>(member, svc.shared(), oo);
  saga::Inbox inbox(member);
  saga::OrchestratorOptions opt;
  opt.service = "orders";
  opt.concurrency = static_cast<int>(svc.IntFlag("concurrency"));
  auto orchestrator = std::make_unique<saga::Orchestrator>(member, svc.shared(), inbox, opt);
  saga::SagaDefinition def;
  def.type = "fulfillment";
  def.timeout_ms = svc.IntFlag("saga-timeout-ms");
  // How long to wait for each compensation's reply, and how many to send before the saga ends
  // FAILED: a compensation waits behind the participant's backlog like any command.
  def.compensation_timeout_ms = svc.IntFlag("compensation-timeout-ms");
  def.compensation_attempts =
      static_cast<int>(std::max<std::int64_t>(1, svc.IntFlag("compensation-attempts")));
  auto step = [&](const char* name, const char* stream, const char* command,
                  const char* compensation, const char* timeout_flag) {
    saga::SagaStepDef s;
    s.name = name;
    s.stream = stream;
    s.command = command;
    s.compensation = compensation;
    s.timeout_ms = svc.IntFlag(timeout_flag);
    s.max_attempts = static_cast<int>(std::max<std::int64_t>(1, svc.IntFlag("max-attempts")));
    s.retry_delay_ms = svc.IntFlag("retry-delay-ms");
    return s;
  };
  def.steps = {
      step("reserve", "inventory.commands", "ReserveStock", "ReleaseStock", "reserve-timeout-ms"),
      step("charge", "payment.commands", "ChargeCard", "RefundCard", "charge-timeout-ms")};
  orchestrator->Define(def);
  if (auto ok = svc.StartMember(); !ok) return fail(ok.error());
  if (auto ok = orchestrator->Start(); !ok) return fail(ok.error());
  auto ids = grid::IdGenerator::Create(*svc.shared());
  if (!ids) return fail(ids.error());
  auto orders = member.GetMap(kOrders);

  auto& http = svc.http();
  http.Route("POST", "/orders", [&](const Request& r) {
    auto order = ParseOrder(r.body);
    if (!order) return Response::FromError(order.error());
    if (order->id.empty()) order->id = "o-" + std::to_string((*ids)->Next());
    const std::string stored = order->ToJson().dump();
    grid::Transaction tx(order->id);  // the order and its saga share the order's partition
    tx.Set(kOrders, order->id, stored);
    auto data = tessera::record::GenericRecord::Build("Order")
                    .String("customer", order->customer)
                    .String("lines", examples::EncodeLines(order->lines))
                    .Int64("amount", order->amount)
                    .Done();
    auto staged = orchestrator->Stage(tx, order->id, "fulfillment", data);
    if (!staged) return Response::FromError(staged.error());
    auto committed = member.Transact(tx);
    if (committed && committed->committed) {
      orchestrator->Started(*staged);
      json out = order->ToJson();
      out["status"] = "pending";
      return Response::Json(201, out.dump());
    }
    if (!committed && committed.error().code() != tessera::base::ErrorCode::kConflict) {
      return Response::FromError(committed.error());
    }
    // The saga exists: a retried POST of the same order, or another order with this id.
    auto existing = orders->Get(order->id);
    if (!existing) return Response::FromError(existing.error());
    if (existing->has_value() && **existing == stored) {
      json out = order->ToJson();
      out["status"] = "exists";
      return Response::Json(200, out.dump());
    }
    return Response::Error(409, "conflict",
                           "order '" + order->id + "' exists with other contents; use a new id");
  });
  http.Route("GET", "/orders/{id}", [&](const Request& r) {
    const std::string& id = r.params.at("id");
    auto stored = orders->Get(id);
    if (!stored) return Response::FromError(stored.error());
    if (!stored->has_value()) return Response::Error(404, "not_found", "no order '" + id + "'");
    json out = json::parse(**stored);
    auto s = orchestrator->store().Get(id);
    if (!s) return Response::FromError(s.error());
    if (s->has_value()) {
      out["status"] = OrderStatus((*s)->status);
      out["reason"] = (*s)->failure_reason;
      out["saga"] = SagaJson(**s);
    } else {
      out["status"] = "unknown";
    }
    return Response::Json(200, out.dump());
  });
  http.Route("GET", "/orders", [&](const Request& r) {
    // Ids only, one query per saga status: what a large cluster can answer in one frame.
    const std::string want = r.Query("status");
    char* end = nullptr;
    const std::string limit_text = r.Query("limit", "100");
    const long long limit = std::strtoll(limit_text.c_str(), &end, 10);
    if (*end != '\0' || limit < 0) {
      return Response::Error(400, "bad_request", "limit must be a whole number >= 0");
    }
    auto sagas = member.GetMap(saga::kSagaMap);
    json counts = json::object();
    json listed = json::array();
    std::int64_t total = 0;
    for (auto status :
         {saga::SagaStatus::kStarted, saga::SagaStatus::kCompleted, saga::SagaStatus::kCompensating,
          saga::SagaStatus::kCompensated, saga::SagaStatus::kTimedOut, saga::SagaStatus::kFailed}) {
      auto ids = sagas->KeySet(tessera::map::Predicate::Equal(
          "status", tessera::record::Value(std::string(saga::SagaStatusName(status)))));
      if (!ids) return Response::FromError(ids.error());
      if (ids->empty()) continue;
      const std::string name = OrderStatus(status);
      counts[name] = counts.value(name, std::int64_t{0}) + static_cast<std::int64_t>(ids->size());
      total += static_cast<std::int64_t>(ids->size());
      for (const auto& id : *ids) {
        if (name != want || static_cast<long long>(listed.size()) >= limit) break;
        listed.push_back({{"id", id}, {"status", name}});
      }
    }
    return Response::Json(200,
                          json{{"total", total}, {"counts", counts}, {"orders", listed}}.dump());
  });
  if (auto ok = svc.StartHttp(); !ok) return fail(ok.error());
  svc.WaitForStop();
  orchestrator->Stop();
  orchestrator.reset();
  outbox.reset();
  member.Shutdown();
  return 0;
}
