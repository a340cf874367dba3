// inventory-service: stock per product, reserved and released for the fulfillment saga
// (commands ReserveStock and ReleaseStock on the shared stream "inventory.commands", consumer
// group "inventory"). An order's lines are products in several partitions; each line's
// reservation is one partition transaction of this service's embedded member that moves the
// line's hold (map "holds", key "<order>@<product>") one way only:
//
//   absent -> "held:Q"  (stock - Q)      absent -> "void"       (released before it was held)
//   "held:Q" -> "released:Q" (stock + Q)
//
// guarded by preconditions (the hold as read, the stock as read), so a command delivered
// twice, a reservation racing its release, and two orders racing for the last items each
// apply once and never take stock below zero. A reservation that finds an order's hold
// released or void refuses: the order was cancelled meanwhile.
//
// An order's reservation is decided once (map "reservations": reserved or refused, put if
// absent) before anything is released, so two deliveries of one command that saw different
// stock (one frozen mid-handler, the other on the instance that took over) agree.
//
// ReserveStock: every product must be in the catalog (map "stock"); an unknown product is an
// error, not a refusal (the catalog is behind: the command goes to the dead letter queue; add
// the product with PUT /stock/{product}, then replay it with grid-cli dlq replay inventory).
// Lines are held in order; when one is short, the order's holds are released and the step is
// refused ("out of stock"), not retried. ReleaseStock releases every line (nothing to release
// is fine: a timed-out reservation is compensated too).
//
// REST: GET /stock (every product: available and held), GET /stock/{product},
// PUT /stock/{product} {"available": N}, GET /holds (every hold), GET /health.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include <spdlog/spdlog.h>

#include "common/service.h"
#include "tessera/base/log.h"
#include "tessera/grid/map.h"
#include "tessera/saga/consumer.h"
#include "tessera/saga/inbox.h"
#include "tessera/saga/outbox.h"
#include "tessera/saga/participant.h"
#include "tessera/saga/retry.h"

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

constexpr const char* kStock = "stock";
constexpr const char* kHolds = "holds";
constexpr const char* kDecisions = "reservations";  // order -> its reservation's decision
constexpr int kMaxRaces = 100;  // optimistic attempts before the handler gives up (retried)

const char* kUsage =
    "usage: inventory-service --shared HOST:PORT [common flags] [--products P=N,...]\n"
    "         [--concurrency N]\n"
    "  --products  initial stock, set only for products not in the catalog yet\n"
    "common flags: --port P --join HOST:PORT --shared-cluster NAME --http-port P --threads N\n"
    "              --heartbeat-ms MS --failure-timeout-ms MS --log-level LEVEL\n"
    "              --min-cluster-size N --fault-injection true|false --data-dir DIR\n"
    "See examples/order-fulfillment/README.md.\n";

class Stock {
 public:
  explicit Stock(grid::Member& member)
      : member_(member),
        stock_(member.GetMap(kStock)),
        holds_(member.GetMap(kHolds)),
        decisions_(member.GetMap(kDecisions)),
        log_(tessera::base::NamedLogger("inventory-service")) {}

  // An order's reservation is decided once ("reserved:<what>" or "refused:<why>"), before any
  // release: two deliveries of one command (a redelivery to another instance while the first
  // was frozen mid-handler) may see different stock, and the one that stores its decision
  // first wins; the other adopts it. Returns the decision that stands.
  Result<std::string> Decide(const std::string& order, const std::string& decision) {
    auto put = decisions_->PutIfAbsent(order, decision, grid::WithTtl(examples::kTombstoneTtlMs));
    if (!put) return std::unexpected(put.error());
    log_->info("order {}: decided '{}'{}", order, decision,
               put->has_value() ? ", but '" + **put + "' stands" : "");
    return put->has_value() ? **put : decision;
  }

  enum class Held { kHeld, kShort, kCancelled };
  struct HoldOutcome {
    Held held = Held::kHeld;
    std::int64_t available = 0;  // when short
  };

  static std::string HoldKey(const std::string& order, const std::string& product) {
    return order + "@" + product;
  }

  // What a handler read before: the order's hold of a product and the product's stock (each
  // nullopt when absent). The first attempt goes on them; a race reads again.
  struct Read {
    std::optional<std::string> hold, stock;
  };

  // Holds `quantity` of `product` for `order` (once).
  Result<HoldOutcome> Hold(const std::string& order, const std::string& product,
                           std::int64_t quantity, Read read) {
    const std::string key = HoldKey(order, product);
    for (int race = 0; race < kMaxRaces; ++race) {
      if (race > 0) {
        auto hold = holds_->Get(key);
        if (!hold) return std::unexpected(hold.error());
        auto stock = stock_->Get(product);
        if (!stock) return std::unexpected(stock.error());
        read = Read{std::move(*hold), std::move(*stock)};
      }
      if (read.hold) {
        log_->info("hold {}: found '{}'", key, *read.hold);
        if (read.hold->rfind("held:", 0) == 0) return HoldOutcome{Held::kHeld, 0};
        return HoldOutcome{Held::kCancelled, 0};
      }
      if (!read.stock) return Fail(ErrorCode::kNotFound, "unknown product '" + product + "'");
      const std::int64_t available = examples::ToNumber(*read.stock);
      if (available < quantity) return HoldOutcome{Held::kShort, available};
      grid::Transaction tx(product);
      tx.Set(kStock, product, std::to_string(available - quantity)).IfValue(*read.stock);
      tx.Set(kHolds, key, "held:" + std::to_string(quantity)).IfAbsent();
      auto done = member_.Transact(tx);
      if (!done) return std::unexpected(done.error());
      if (done->committed) {
        log_->info("hold {}: held {} (stock {} -> {})", key, quantity, available,
                   available - quantity);
        return HoldOutcome{Held::kHeld, 0};
      }
    }
    return Fail(ErrorCode::kOverloaded, "product '" + product + "' changed under every attempt");
  }

  // Releases `order`'s hold of `product`, or voids it when there is none yet.
  Result<bool> Release(const std::string& order, const std::string& product) {
    const std::string key = HoldKey(order, product);
    for (int race = 0; race < kMaxRaces; ++race) {
      auto hold = holds_->Get(key);
      if (!hold) return std::unexpected(hold.error());
      grid::Transaction tx(product);
      bool released = false;
      if (!hold->has_value()) {
        tx.Set(kHolds, key, "void", grid::WithTtl(examples::kTombstoneTtlMs)).IfAbsent();
      } else if ((*hold)->rfind("held:", 0) == 0) {
        const std::int64_t quantity = examples::ToNumber((*hold)->substr(5));
        auto stock = stock_->Get(product);
        if (!stock) return std::unexpected(stock.error());
        const std::int64_t available = stock->has_value() ? examples::ToNumber(**stock) : 0;
        tx.Set(kHolds, key, "released:" + std::to_string(quantity),
               grid::WithTtl(examples::kTombstoneTtlMs))
            .IfValue(**hold);
        tx.Set(kStock, product, std::to_string(available + quantity));
        if (stock->has_value()) {
          tx.IfValue(**stock);
        } else {
          tx.IfAbsent();
        }
        released = true;
      } else {
        return false;  // released or void before
      }
      auto done = member_.Transact(tx);
      if (!done) return std::unexpected(done.error());
      if (done->committed) {
        log_->info("release {}: was '{}', {}", key, hold->value_or("absent"),
                   released ? "released" : "voided");
        return released;
      }
    }
    return Fail(ErrorCode::kOverloaded, "product '" + product + "' changed under every attempt");
  }

  grid::Member& member_;
  std::shared_ptr<grid::Map> stock_, holds_, decisions_;
  std::shared_ptr<spdlog::logger> log_;  // hold transitions and decisions, at info
};

Result<std::vector<examples::OrderLine>> Lines(const saga::Event& command) {
  auto text = command.payload.GetString("lines");
  if (!text) {
    return Fail(ErrorCode::kBadRequest, "command " + command.type + " has no lines");
  }
  return examples::DecodeLines(*text);
}

}  // namespace

int main(int argc, char** argv) {
  examples::Service svc("inventory-service", argc, argv, {{"products", ""}, {"concurrency", "2"}},
                        kUsage);
  auto fail = [&](const tessera::base::Error& e) {
    std::fprintf(stderr, "inventory-service: %s\n", e.message().c_str());
    return 1;
  };
  // Initial stock: "p1=100,p2=50".
  std::vector<std::pair<std::string, std::int64_t>> initial;
  for (const std::string& item : examples::SplitCommas(svc.Flag("products"))) {
    const std::size_t eq = item.find('=');
    char* end = nullptr;
    const std::string n = eq == std::string::npos ? "" : item.substr(eq + 1);
    const long long count = std::strtoll(n.c_str(), &end, 10);
    if (eq == std::string::npos || !examples::ValidName(item.substr(0, eq)) || n.empty() ||
        *end != '\0' || count < 0) {
      std::fprintf(stderr, "inventory-service: bad --products item '%s': expected NAME=COUNT\n%s",
                   item.c_str(), kUsage);
      return 2;
    }
    initial.emplace_back(item.substr(0, eq), count);
  }
  if (auto ok = svc.Prepare(); !ok) return fail(ok.error());
  auto& member = svc.member();
  saga::OutboxOptions oo;
  oo.service = "inventory";
  auto outbox = std::make_unique<saga::Outbox>(member, svc.shared(), oo);
  if (auto ok = svc.StartMember(); !ok) return fail(ok.error());
  // A restarted instance may find a partition not serving yet (its unconfirmed writes wait
  // for the copy to this instance: kNoQuorum), as any call may: retried for about 30 s.
  saga::RetryPolicy seeding;
  seeding.max_attempts = 40;
  seeding.max_delay_ms = 1'000;
  for (const auto& [product, count] : initial) {
    auto put = saga::Retry<std::optional<std::string>>(
        seeding,
        [&, product = product, count = count] {
          return member.GetMap(kStock)->PutIfAbsent(product, std::to_string(count));
        },
        [product = product](int attempt, const tessera::base::Error& error,
                            tessera::base::Millis delay) {
          tessera::base::NamedLogger("inventory-service")
              ->info("seeding stock of '{}' failed ({}); attempt {} in {} ms", product,
                     error.ToString(), attempt, delay);
        });
    if (!put) return fail(put.error());
  }
  Stock stock(member);
  saga::Inbox inbox(member);
  saga::SagaParticipant participant(member, svc.shared());
  saga::ConsumerOptions co;
  co.group = "inventory";
  co.streams = {"inventory.commands"};
  co.concurrency = static_cast<int>(svc.IntFlag("concurrency"));
  co.unknown_to_dlq = true;
  auto consumer = std::make_unique<saga::Consumer>(svc.shared(), member, inbox, co);
  participant.On(*consumer, "ReserveStock", [&](const saga::Event& cmd) -> Result<saga::StepWork> {
    auto lines = Lines(cmd);
    if (!lines) return std::unexpected(lines.error());
    const std::string order = saga::SagaParticipant::SagaId(cmd);
    // The lines' stock and the order's holds are read in one call each (every blocking call is
    // a hand-off to the member's shard and back); the transactions check what was read.
    std::vector<std::string> products, hold_keys;
    for (const auto& l : *lines) {
      products.push_back(l.product);
      hold_keys.push_back(Stock::HoldKey(order, l.product));
    }
    auto stocks = stock.stock_->GetAll(products);
    if (!stocks) return std::unexpected(stocks.error());
    for (const auto& l : *lines) {  // the catalog first: nothing held on an error
      if (!stocks->contains(l.product)) {
        return Fail(ErrorCode::kNotFound, "unknown product '" + l.product + "' in order " + order +
                                              ": add it with PUT /stock/" + l.product +
                                              ", then replay this dead letter");
      }
    }
    std::string refusal, result;
    auto decided = stock.decisions_->Get(order);  // decided before: that decision stands
    if (!decided) return std::unexpected(decided.error());
    if (!decided->has_value()) {
      auto holds = stock.holds_->GetAll(hold_keys);
      if (!holds) return std::unexpected(holds.error());
      for (const auto& l : *lines) {
        Stock::Read read;
        if (auto h = holds->find(Stock::HoldKey(order, l.product)); h != holds->end()) {
          read.hold = h->second;
        }
        read.stock = stocks->at(l.product);
        auto held = stock.Hold(order, l.product, l.quantity, std::move(read));
        if (!held) return std::unexpected(held.error());
        if (held->held == Stock::Held::kShort) {
          refusal = fmt::format("out of stock: {} has {}, the order needs {}", l.product,
                                held->available, l.quantity);
          break;
        }
        if (held->held == Stock::Held::kCancelled) {
          refusal = "the order was cancelled before its stock was reserved";
          break;
        }
        result +=
            (result.empty() ? "reserved " : ", ") + fmt::format("{}x{}", l.quantity, l.product);
      }
      auto stands =
          stock.Decide(order, refusal.empty() ? "reserved:" + result : "refused:" + refusal);
      if (!stands) return std::unexpected(stands.error());
      decided->emplace(std::move(*stands));
    }
    const auto& decision = **decided;
    if (decision.rfind("refused:", 0) == 0) {  // give back what this order holds
      for (const auto& l : *lines) {
        if (auto r = stock.Release(order, l.product); !r) return std::unexpected(r.error());
      }
      return saga::StepWork(std::nullopt, saga::StepReply{false, false, decision.substr(8), ""});
    }
    return saga::StepWork(std::nullopt, saga::StepReply{true, false, "", decision.substr(9)});
  });
  participant.On(*consumer, "ReleaseStock", [&](const saga::Event& cmd) -> Result<saga::StepWork> {
    auto lines = Lines(cmd);
    if (!lines) return std::unexpected(lines.error());
    const std::string order = saga::SagaParticipant::SagaId(cmd);
    int released = 0;
    for (const auto& l : *lines) {
      auto r = stock.Release(order, l.product);
      if (!r) return std::unexpected(r.error());
      released += *r ? 1 : 0;
    }
    return saga::StepWork(std::nullopt, saga::StepReply{true, false, "",
                                                        fmt::format("released {} of {} lines",
                                                                    released, lines->size())});
  });
  if (auto ok = consumer->Start(); !ok) return fail(ok.error());

  auto& http = svc.http();
  http.Route("GET", "/stock", [&](const Request&) {
    auto all = stock.stock_->EntrySet();
    if (!all) return Response::FromError(all.error());
    auto holds = stock.holds_->EntrySet();
    if (!holds) return Response::FromError(holds.error());
    json products = json::object();
    for (const auto& [product, available] : *all) {
      products[product] = {{"available", examples::ToNumber(available)}, {"held", 0}};
    }
    for (const auto& [key, state] : *holds) {
      const std::string product = key.substr(key.rfind('@') + 1);
      if (state.rfind("held:", 0) == 0 && products.contains(product)) {
        products[product]["held"] =
            products[product]["held"].get<std::int64_t>() + examples::ToNumber(state.substr(5));
      }
    }
    return Response::Json(200, json{{"products", products}}.dump());
  });
  http.Route("GET", "/stock/{product}", [&](const Request& r) {
    const std::string& product = r.params.at("product");
    auto got = stock.stock_->Get(product);
    if (!got) return Response::FromError(got.error());
    if (!got->has_value()) {
      return Response::Error(404, "not_found", "no product '" + product + "' in the catalog");
    }
    return Response::Json(
        200, json{{"product", product}, {"available", examples::ToNumber(**got)}}.dump());
  });
  http.Route("PUT", "/stock/{product}", [&](const Request& r) {
    const std::string& product = r.params.at("product");
    if (!examples::ValidName(product)) {
      return Response::Error(400, "bad_request",
                             "a product name is 1..64 letters, digits, '-' or '_'");
    }
    const json body = json::parse(r.body, nullptr, false);
    if (body.is_discarded() || !body.is_object() || !body.contains("available") ||
        !body["available"].is_number_integer() || body["available"].get<std::int64_t>() < 0) {
      return Response::Error(400, "bad_request",
                             "expected a JSON object {\"available\": N} with N >= 0");
    }
    const std::int64_t n = body["available"].get<std::int64_t>();
    if (auto ok = stock.stock_->Set(product, std::to_string(n)); !ok) {
      return Response::FromError(ok.error());
    }
    return Response::Json(200, json{{"product", product}, {"available", n}}.dump());
  });
  http.Route("GET", "/holds", [&](const Request&) {
    return examples::ListStates(*stock.holds_, "holds", "product", "quantity");
  });
  if (auto ok = svc.StartHttp(); !ok) return fail(ok.error());
  svc.WaitForStop();
  consumer->Stop();
  consumer.reset();
  outbox.reset();
  member.Shutdown();
  return 0;
}
