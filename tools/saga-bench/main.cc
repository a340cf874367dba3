// saga-bench: the framework end to end, in separate processes. Service
// A (`saga-bench produce`) commits business writes with outbox events in its embedded member;
// its relay publishes them to a stream of the shared cluster (a grid-node); service B
// (`saga-bench consume`) handles them in a consumer group, committing each effect with its
// inbox marker in its own embedded member. B reports events/s from the first commit to the
// last effect and the commit->effect latency, split by stage:
//   relay     commit start (A) -> appended to the shared stream (the stream's append time)
//   delivery  appended -> B's handler starts
//   inbox     handler start -> effect and marker committed in B's member
// A reports its commit latency (the partition transaction with the outbox entry).
// Every event's stages come from wall clocks on one host; the append time has millisecond
// resolution, so the relay and delivery stages are +-1 ms each (their sum is exact).
//
// Usage:
//   saga-bench consume --shared HOST:PORT --expect N [--concurrency C] [--idle-poll-ms MS]
//                      [--timeout-s S]
//   saga-bench produce --shared HOST:PORT --events N [--rate R] [--producers P] [--keys K]
//   saga-bench sagas --shared HOST:PORT --events N [--rate R] [--producers P]
//     runs N three-step orchestrated sagas (reserve, charge, ship) with the orchestrating
//     service and the participants' service as two embedded members of this process, and
//     reports sagas/s from the first start to the last end and start->end latency.
// Common: --cluster-name NAME (the shared cluster's, default shared), --stream NAME (default
// bench-events), --sub-streams N (default 8), --threads N (the embedded member's shards, 1).
// Each prints one JSON document on stdout when done. Exit 0; 1 on a failure; 2 on bad usage.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "latency_histogram.h"
#include "tessera/base/log.h"
#include "tessera/grid/client.h"
#include "tessera/grid/id_generator.h"
#include "tessera/grid/member.h"
#include "tessera/grid/transaction.h"
#include "tessera/partition/partitioner.h"
#include "tessera/saga/consumer.h"
#include "tessera/saga/inbox.h"
#include "tessera/saga/orchestrator.h"
#include "tessera/saga/outbox.h"
#include "tessera/saga/participant.h"

namespace {

using tessera::tools::bench::LatencyHistogram;
using Clock = std::chrono::steady_clock;
namespace grid = tessera::grid;
namespace saga = tessera::saga;

std::int64_t WallUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Args {
  std::string mode;
  std::string shared;
  std::string cluster_name = "shared";
  std::string stream = "bench-events";
  int sub_streams = 8;
  int threads = 1;
  std::int64_t events = 0;  // produce
  double rate = 0;          // produce: events/s over all producers (0: as fast as they can)
  int producers = 4;
  int keys = 1000;
  std::int64_t expect = 0;  // consume
  int concurrency = 4;
  int idle_poll_ms = 20;  // consume: SubscribeOptions::max_idle_poll_ms (the library's default)
  int timeout_s = 120;
};

[[noreturn]] void Usage(const std::string& problem) {
  std::fprintf(stderr,
               "saga-bench: %s\nusage: saga-bench produce|consume --shared HOST:PORT ... (see "
               "the comment at the top of tools/saga-bench/main.cc)\n",
               problem.c_str());
  std::exit(2);
}

Args Parse(int argc, char** argv) {
  if (argc < 2) Usage("no mode given: produce or consume");
  Args a;
  a.mode = argv[1];
  if (a.mode != "produce" && a.mode != "consume" && a.mode != "sagas") {
    Usage("unknown mode '" + a.mode + "'");
  }
  for (int i = 2; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) Usage(flag + " needs a value");
    const std::string value = argv[i + 1];
    auto number = [&](auto& out, double min) {
      char* end = nullptr;
      const double v = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0' || v < min) {
        Usage("invalid " + flag + " '" + value +
              "': expected a number >= " + fmt::format("{}", min));
      }
      out = static_cast<std::remove_reference_t<decltype(out)>>(v);
    };
    if (flag == "--shared") {
      a.shared = value;
    } else if (flag == "--cluster-name") {
      a.cluster_name = value;
    } else if (flag == "--stream") {
      a.stream = value;
    } else if (flag == "--sub-streams") {
      number(a.sub_streams, 1);
    } else if (flag == "--threads") {
      number(a.threads, 1);
    } else if (flag == "--events") {
      number(a.events, 1);
    } else if (flag == "--rate") {
      number(a.rate, 0);
    } else if (flag == "--producers") {
      number(a.producers, 1);
    } else if (flag == "--keys") {
      number(a.keys, 1);
    } else if (flag == "--expect") {
      number(a.expect, 1);
    } else if (flag == "--concurrency") {
      number(a.concurrency, 1);
    } else if (flag == "--idle-poll-ms") {
      number(a.idle_poll_ms, 1);
    } else if (flag == "--timeout-s") {
      number(a.timeout_s, 1);
    } else {
      Usage("unknown option '" + flag + "'");
    }
  }
  if (a.shared.empty()) Usage("--shared HOST:PORT is required");
  if (a.mode != "consume" && a.events == 0) Usage(a.mode + " needs --events N");
  if (a.mode == "consume" && a.expect == 0) Usage("consume needs --expect N");
  return a;
}

std::shared_ptr<grid::Client> ConnectShared(const Args& a) {
  grid::ClientOptions o;
  o.addresses = {a.shared};
  o.cluster_name = a.cluster_name;
  o.call_timeout = std::chrono::milliseconds(5000);
  auto client = grid::Client::Connect(o);
  if (!client) {
    std::fprintf(stderr, "saga-bench: cannot connect to %s: %s\n", a.shared.c_str(),
                 client.error().ToString().c_str());
    std::exit(1);
  }
  return std::shared_ptr<grid::Client>(std::move(*client));
}

grid::MemberOptions ServiceMember(const Args& a, const std::string& name) {
  grid::MemberOptions o;
  o.listen = false;
  o.threads = a.threads;
  o.cluster_name = name;
  return o;
}

grid::StreamConfig StreamConfig(const Args& a) {
  grid::StreamConfig c;
  c.sub_streams = static_cast<std::uint32_t>(a.sub_streams);
  return c;
}

nlohmann::json Summary(const LatencyHistogram& h) {
  return {{"p50", h.Percentile(0.5)}, {"p99", h.Percentile(0.99)}, {"max", h.max()}};
}

int Produce(const Args& a) {
  auto shared = ConnectShared(a);
  auto ids = grid::IdGenerator::Create(*shared);  // unique across every service of the cluster
  if (!ids) {
    std::fprintf(stderr, "saga-bench: no id generator: %s\n", ids.error().ToString().c_str());
    return 1;
  }
  grid::Member member(ServiceMember(a, "bench-orders"));
  saga::OutboxOptions oo;
  oo.service = "bench-orders";
  oo.stream = a.stream;
  oo.stream_config = StreamConfig(a);
  auto outbox = std::make_unique<saga::Outbox>(member, shared, oo);
  if (auto ok = member.Start(); !ok) {
    std::fprintf(stderr, "saga-bench: member: %s\n", ok.error().ToString().c_str());
    return 1;
  }
  std::atomic<std::int64_t> next{0}, failures{0};
  std::vector<LatencyHistogram> commit(static_cast<std::size_t>(a.producers));
  const auto start = Clock::now();
  std::vector<std::thread> producers;
  for (int p = 0; p < a.producers; ++p) {
    producers.emplace_back([&, p] {
      while (true) {
        const std::int64_t n = next.fetch_add(1);
        if (n >= a.events) return;
        if (a.rate > 0) {  // open loop: event n is due at n / rate
          std::this_thread::sleep_until(start + std::chrono::microseconds(static_cast<std::int64_t>(
                                                    static_cast<double>(n) * 1e6 / a.rate)));
        }
        const std::string pk = "cust-" + std::to_string(n % a.keys);
        saga::Event e;
        e.id = (*ids)->Next();
        e.type = "OrderPlaced";
        e.key = "order-" + std::to_string(n) + "@" + pk;
        e.source = "bench-orders";
        const std::int64_t t0 = WallUs();
        e.time_ms = t0 / 1000;
        e.payload = tessera::record::GenericRecord::Build()
                        .Int64("n", n)
                        .Int64("commit_us", t0)
                        .String("item", std::string(64, 'x'))
                        .Done();
        grid::Transaction tx(pk);
        tx.Set("orders", e.key, "placed");
        if (!saga::Outbox::Stage(tx, e) || !member.Transact(tx)) {
          failures.fetch_add(1);
          continue;
        }
        commit[static_cast<std::size_t>(p)].Record(static_cast<std::uint64_t>(WallUs() - t0));
      }
    });
  }
  for (auto& t : producers) t.join();
  const double commit_s = std::chrono::duration<double>(Clock::now() - start).count();
  // Wait for the relays to publish everything.
  const auto deadline = Clock::now() + std::chrono::seconds(a.timeout_s);
  while (outbox->stats().published < a.events - failures.load() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const auto st = outbox->stats();
  LatencyHistogram all;
  for (const auto& h : commit) all.Merge(h);
  nlohmann::json out = {
      {"committed", all.count()},
      {"commit_failures", failures.load()},
      {"commits_per_sec", static_cast<double>(all.count()) / commit_s},
      {"published", st.published},
      {"publish_failures", st.publish_failures},
      {"commit_us", Summary(all)},
  };
  std::printf("%s\n", out.dump().c_str());
  outbox.reset();
  return st.published >= a.events - failures.load() ? 0 : 1;
}

int Consume(const Args& a) {
  auto shared = ConnectShared(a);
  grid::Member member(ServiceMember(a, "bench-billing"));
  if (auto ok = member.Start(); !ok) {
    std::fprintf(stderr, "saga-bench: member: %s\n", ok.error().ToString().c_str());
    return 1;
  }
  saga::Inbox inbox(member);
  saga::ConsumerOptions co;
  co.group = "bench-billing";
  co.streams = {a.stream};
  co.stream_config = StreamConfig(a);
  co.concurrency = a.concurrency;
  co.subscribe.max_idle_poll_ms = a.idle_poll_ms;
  saga::Consumer consumer(shared, member, inbox, co);
  std::mutex mu;
  LatencyHistogram total, relay, delivery, inbox_stage;
  std::int64_t first_commit_us = 0, last_effect_us = 0;
  std::atomic<std::int64_t> effects{0};
  consumer.On(
      "OrderPlaced",
      [&](const saga::Event& e, saga::HandlerContext& ctx) -> tessera::base::Result<void> {
        const std::int64_t started = WallUs();
        const std::string pk = e.key.substr(e.key.rfind('@') + 1);
        grid::Transaction tx(pk);
        tx.Set("invoices", "invoice-" + std::to_string(e.id) + "@" + pk, "billed");
        auto committed = ctx.Commit(tx);
        if (!committed) return std::unexpected(committed.error());
        const std::int64_t done = WallUs();
        if (*committed != saga::InboxOutcome::kApplied) return {};
        const std::int64_t commit_us = e.payload.GetInt64("commit_us").value_or(done);
        const std::int64_t appended_us =
            ctx.delivery() != nullptr ? ctx.delivery()->time_ms * 1000 : started;
        std::lock_guard lock(mu);
        total.Record(static_cast<std::uint64_t>(std::max<std::int64_t>(0, done - commit_us)));
        relay.Record(
            static_cast<std::uint64_t>(std::max<std::int64_t>(0, appended_us - commit_us)));
        delivery.Record(
            static_cast<std::uint64_t>(std::max<std::int64_t>(0, started - appended_us)));
        inbox_stage.Record(static_cast<std::uint64_t>(done - started));
        if (first_commit_us == 0 || commit_us < first_commit_us) first_commit_us = commit_us;
        last_effect_us = std::max(last_effect_us, done);
        effects.fetch_add(1);
        return {};
      });
  if (auto ok = consumer.Start(); !ok) {
    std::fprintf(stderr, "saga-bench: consumer: %s\n", ok.error().ToString().c_str());
    return 1;
  }
  // Measure the settled group: every sub-stream held, shares even (a consumer starting alone
  // takes every lease and hands some back as the others ask: seconds of rebalancing).
  const auto settle_by = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < settle_by) {
    const auto held = consumer.leases_held();
    std::int64_t sum = 0, low = INT64_MAX, high = 0;
    for (auto h : held) {
      sum += h;
      low = std::min(low, h);
      high = std::max(high, h);
    }
    if (sum == a.sub_streams && high - low <= 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::printf("{\"ready\": true}\n");
  std::fflush(stdout);
  const auto deadline = Clock::now() + std::chrono::seconds(a.timeout_s);
  while (effects.load() < a.expect && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  consumer.Stop();
  const auto st = consumer.stats();
  std::lock_guard lock(mu);
  const double seconds = static_cast<double>(last_effect_us - first_commit_us) / 1e6;
  nlohmann::json out = {
      {"effects", effects.load()},
      {"expected", a.expect},
      {"duplicates_skipped", inbox.stats().duplicates},
      {"handler_failures", st.failed},
      {"events_per_sec", seconds > 0 ? static_cast<double>(effects.load()) / seconds : 0.0},
      {"commit_to_effect_us", Summary(total)},
      {"relay_us", Summary(relay)},
      {"delivery_us", Summary(delivery)},
      {"inbox_us", Summary(inbox_stage)},
  };
  std::printf("%s\n", out.dump().c_str());
  return effects.load() >= a.expect ? 0 : 1;
}

int Sagas(const Args& a) {
  auto shared = ConnectShared(a);
  grid::Member orders(ServiceMember(a, "bench-orders"));
  saga::OutboxOptions oo;
  oo.service = "orders";
  oo.stream_config = StreamConfig(a);
  saga::Outbox orders_outbox(orders, shared, oo);
  saga::Inbox orders_inbox(orders);
  saga::OrchestratorOptions opt;
  opt.service = "orders";
  opt.stream_config = StreamConfig(a);
  opt.concurrency = a.concurrency;
  saga::Orchestrator orchestrator(orders, shared, orders_inbox, opt);
  saga::SagaDefinition d;
  d.type = "fulfillment";
  const char* names[][4] = {{"reserve", "inventory.commands", "ReserveStock", "ReleaseStock"},
                            {"charge", "payment.commands", "ChargeCard", "RefundCard"},
                            {"ship", "shipping.commands", "Ship", ""}};
  for (const auto& n : names) {
    saga::SagaStepDef s;
    s.name = n[0];
    s.stream = n[1];
    s.command = n[2];
    s.compensation = n[3];
    d.steps.push_back(s);
  }
  orchestrator.Define(d);
  if (auto ok = orders.Start(); !ok) return 1;
  if (auto ok = orchestrator.Start(); !ok) {
    std::fprintf(stderr, "saga-bench: orchestrator: %s\n", ok.error().ToString().c_str());
    return 1;
  }
  grid::Member shop(ServiceMember(a, "bench-shop"));
  oo.service = "shop";
  saga::Outbox shop_outbox(shop, shared, oo);
  if (auto ok = shop.Start(); !ok) return 1;
  saga::Inbox shop_inbox(shop);
  saga::SagaParticipant participant(shop, shared);
  std::vector<std::unique_ptr<saga::Consumer>> consumers;
  for (const auto& n : names) {
    saga::ConsumerOptions co;
    co.group = std::string(n[1]) + ".group";
    co.streams = {n[1]};
    co.stream_config = StreamConfig(a);
    co.concurrency = a.concurrency;
    co.subscribe.max_idle_poll_ms = a.idle_poll_ms;
    consumers.push_back(std::make_unique<saga::Consumer>(shared, shop, shop_inbox, co));
    const std::string ledger = n[0];
    participant.On(*consumers.back(), n[2], [ledger](const saga::Event& cmd) {
      grid::Transaction tx(std::string(tessera::partition::Partitioner::PartitionKey(cmd.key)));
      tx.Set("ledger", ledger + "-" + cmd.correlation_id, "1");
      return tessera::base::Result<saga::StepWork>(
          saga::StepWork{std::move(tx), saga::StepReply{true, false, "", ledger}});
    });
  }
  for (auto& c : consumers) {
    if (auto ok = c->Start(); !ok) return 1;
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));  // the groups' leases settle
  std::atomic<std::int64_t> next{0}, failures{0};
  const auto start = Clock::now();
  std::vector<std::thread> producers;
  for (int p = 0; p < a.producers; ++p) {
    producers.emplace_back([&] {
      while (true) {
        const std::int64_t n = next.fetch_add(1);
        if (n >= a.events) return;
        if (a.rate > 0) {
          std::this_thread::sleep_until(start + std::chrono::microseconds(static_cast<std::int64_t>(
                                                    static_cast<double>(n) * 1e6 / a.rate)));
        }
        const std::string id = "order-" + std::to_string(n) + "@cust-" + std::to_string(n % a.keys);
        if (!orchestrator.Begin(
                id, "fulfillment",
                tessera::record::GenericRecord::Build("Order").Int64("n", n).Done())) {
          failures.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : producers) t.join();
  const auto deadline = Clock::now() + std::chrono::seconds(a.timeout_s);
  while (Clock::now() < deadline) {
    const auto st = orchestrator.stats();
    if (st.completed + st.compensated + st.failed >= a.events - failures.load()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto all = orchestrator.store().List();
  LatencyHistogram latency;
  std::int64_t first = 0, last = 0, completed = 0;
  if (all) {
    for (const auto& s : *all) {
      if (s.status != saga::SagaStatus::kCompleted) continue;
      ++completed;
      latency.Record(static_cast<std::uint64_t>(s.updated_ms - s.created_ms));
      if (first == 0 || s.created_ms < first) first = s.created_ms;
      last = std::max(last, s.updated_ms);
    }
  }
  const auto st = orchestrator.stats();
  nlohmann::json out = {
      {"sagas", a.events},
      {"begin_failures", failures.load()},
      {"completed", completed},
      {"compensated", st.compensated},
      {"failed", st.failed},
      {"late", st.late},
      {"sagas_per_sec",
       last > first ? static_cast<double>(completed) * 1000.0 / static_cast<double>(last - first)
                    : 0.0},
      {"latency_ms", Summary(latency)},
  };
  std::printf("%s\n", out.dump().c_str());
  for (auto& c : consumers) c->Stop();
  orchestrator.Stop();
  return completed == a.events ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = Parse(argc, argv);
  spdlog::set_level(spdlog::level::warn);
  if (a.mode == "sagas") return Sagas(a);
  return a.mode == "produce" ? Produce(a) : Consume(a);
}
