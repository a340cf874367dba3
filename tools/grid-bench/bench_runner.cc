// Closed loop per connection: Drive() issues `pipeline` calls, and each completion (on the
// client's I/O thread) records its latency and issues the next call while the window is open,
// so no thread hand-off sits between a reply and the next request (a driver thread woken per
// reply cost more CPU than the member did; on a 2-core machine that capped the figures). A
// failed call retires its slot instead of reissuing from the I/O thread, which could wait
// there for a reconnect. The per-connection State is shared with every callback (shared_ptr),
// so a late completion after the run gave up still has somewhere safe to land.
#include "bench_runner.h"

#include "alloc_counter.h"

#include <fmt/format.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "tessera/grid/client.h"
#include "tessera/grid/transaction.h"

namespace tessera::tools::bench {
namespace {

using base::Result;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kPreloadBatch = 1000;

// Shared by a connection's driver thread and its completions.
struct State : ConnectionCounts {
  std::mutex mutex;
  std::condition_variable idle;
  Clock::time_point window_start;
  Clock::time_point window_end;

  // Records one completion; returns the time it was recorded at when its slot issues another
  // call (then it stays counted in in_flight; the next call starts then: one clock read per
  // call), nullopt when not.
  std::optional<Clock::time_point> Complete(OpKind kind, Clock::time_point start,
                                            const Result<map::MapResult>& result) {
    auto now = Clock::now();
    std::lock_guard lock(mutex);
    if (!result) {
      ++errors;
      if (first_error.empty()) first_error = result.error().ToString();
    } else if (start >= window_start && now <= window_end) {
      latency_ns.Record(std::chrono::duration_cast<std::chrono::nanoseconds>(now - start).count());
      ++ops;
      ++ops_by_kind[static_cast<std::size_t>(kind)];
    }
    if (result && now < window_end) return now;
    if (--in_flight == 0) idle.notify_all();
    return std::nullopt;
  }
};

class Connection {
 public:
  Connection(const BenchOptions& options, int index, std::uint32_t run_nonce,
             std::unique_ptr<grid::Client> client)
      : options_(options),
        index_(index),
        fresh_prefix_(fmt::format("f{:08x}c{}n", run_nonce, index)),
        client_(std::move(client)),
        map_(client_->GetMap(options.map_name)),
        value_(options.value_size, static_cast<char>('a' + index % 26)),
        random_(std::random_device()() + index),
        state_(std::make_shared<State>()) {
    for (const auto& w : options.mix) total_weight_ += w.weight;
  }

  Result<void> Preload();
  void Drive(Clock::time_point window_start, Clock::time_point window_end);
  void Shutdown() { client_->Shutdown(); }
  State& state() { return *state_; }

 private:
  std::string KeyOf(std::int64_t i) const { return BenchKey(options_.key_size, i); }
  std::string FreshKey() {
    std::size_t width =
        options_.key_size > fresh_prefix_.size() + 1 ? options_.key_size - fresh_prefix_.size() : 1;
    return fmt::format("{}{:0>{}}", fresh_prefix_, fresh_counter_++, width);
  }
  OpKind NextOp();
  struct Op {
    OpKind kind;
    std::string key;
  };
  // The next operation to issue. Only one thread draws at a time (no lock): Drive draws the
  // window's first `pipeline` operations before it issues any, and from then on only their
  // completions draw, on the client's I/O thread.
  Op Draw();
  // Issues `op`, started at `start`; its completion draws and issues the next (see the file
  // comment).
  void Issue(Op op, Clock::time_point start);
  void Drain();

  const BenchOptions& options_;
  int index_;
  std::string fresh_prefix_;
  std::uint64_t fresh_counter_ = 0;
  std::unique_ptr<grid::Client> client_;
  std::shared_ptr<grid::Map> map_;
  std::string value_;
  std::mt19937_64 random_;
  int total_weight_ = 0;
  std::shared_ptr<State> state_;
};

Result<void> Connection::Preload() {
  std::int64_t begin = options_.keys * index_ / options_.connections;
  std::int64_t end = options_.keys * (index_ + 1) / options_.connections;
  grid::WriteOptions write;
  if (options_.ttl_given) write.ttl_ms = options_.ttl_ms;
  grid::Entries batch;
  for (std::int64_t i = begin; i < end; ++i) {
    batch.emplace_back(KeyOf(i), value_);
    if (batch.size() == kPreloadBatch || i + 1 == end) {
      if (auto r = map_->PutAll(batch, write); !r) return r;
      batch.clear();
    }
  }
  return {};
}

OpKind Connection::NextOp() { return PickOp(options_.mix, total_weight_, random_); }

Connection::Op Connection::Draw() {
  const OpKind kind = NextOp();
  return {kind, kind == OpKind::kPutIfAbsentTtl ? FreshKey()
                                                : KeyOf(std::uniform_int_distribution<std::int64_t>(
                                                      0, options_.keys - 1)(random_))};
}

void Connection::Issue(Op op, Clock::time_point start) {
  const OpKind kind = op.kind;
  std::string key = std::move(op.key);
  auto done = [this, state = state_, kind, start](Result<map::MapResult> r) {
    if (auto next = state->Complete(kind, start, r)) Issue(Draw(), *next);
  };
  grid::WriteOptions write;
  if (options_.ttl_given) write.ttl_ms = options_.ttl_ms;
  switch (kind) {
    case OpKind::kGet:
      map_->GetAsync(key, std::move(done));
      break;
    case OpKind::kSet:
      map_->SetAsync(key, value_, write, std::move(done));
      break;
    case OpKind::kPutIfAbsentTtl:
      map_->PutIfAbsentAsync(key, value_, grid::WithTtl(options_.ttl_ms), std::move(done));
      break;
    case OpKind::kPut:
    case OpKind::kRemove: {
      map::MapRequest request;
      request.op = kind == OpKind::kPut ? map::MapOp::kPut : map::MapOp::kRemove;
      request.key = std::move(key);
      if (kind == OpKind::kPut) request.value = value_;
      request.options = write;
      map_->ExecuteAsync(std::move(request), std::move(done));
      break;
    }
    case OpKind::kTx3:
    case OpKind::kTx3NoId: {
      grid::Transaction tx(key);
      if (kind == OpKind::kTx3NoId) tx.WithId("");
      tx.Set(map_->name(), key, value_, write)
          .Set(map_->name(), key + ":a@" + key, value_, write)
          .Set(map_->name(), key + ":b@" + key, value_, write);
      map_->ExecuteAsync(std::move(tx).request(), std::move(done));
      break;
    }
  }
}

void Connection::Drain() {
  auto limit = state_->window_end + options_.client.call_timeout + std::chrono::seconds(1);
  std::unique_lock lock(state_->mutex);
  state_->idle.wait_until(lock, limit, [this] { return state_->in_flight == 0; });
}

void Connection::Drive(Clock::time_point window_start, Clock::time_point window_end) {
  {
    std::lock_guard lock(state_->mutex);
    state_->window_start = window_start;
    state_->window_end = window_end;
    state_->in_flight = options_.pipeline;
  }
  std::vector<Op> first;
  for (int i = 0; i < options_.pipeline; ++i) first.push_back(Draw());
  for (auto& op : first) Issue(std::move(op), Clock::now());
  Drain();
}

std::shared_ptr<spdlog::logger> BenchLogger() {
  auto log = std::make_shared<spdlog::logger>(
      "grid-bench", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  log->set_level(spdlog::level::warn);
  return log;
}

Result<std::vector<std::unique_ptr<Connection>>> ConnectAll(const BenchOptions& options) {
  auto log = BenchLogger();
  std::uint32_t nonce = std::random_device()();
  std::vector<std::shared_ptr<grid::ClientLoop>> loops;
  for (int i = 0; i < options.io_threads; ++i) loops.push_back(grid::ClientLoop::Start());
  std::vector<std::unique_ptr<Connection>> connections;
  for (int i = 0; i < options.connections; ++i) {
    auto client_options = options.client;
    if (!loops.empty()) client_options.loop = loops[static_cast<std::size_t>(i) % loops.size()];
    auto client = grid::Client::Connect(client_options, log);
    if (!client) {
      for (auto& c : connections) c->Shutdown();
      return std::unexpected(client.error());
    }
    connections.push_back(std::make_unique<Connection>(options, i, nonce, std::move(*client)));
  }
  return connections;
}

Result<void> PreloadAll(std::vector<std::unique_ptr<Connection>>& connections) {
  std::vector<Result<void>> results(connections.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < connections.size(); ++i) {
    threads.emplace_back([&connections, &results, i] { results[i] = connections[i]->Preload(); });
  }
  for (auto& t : threads) t.join();
  for (auto& r : results) {
    if (!r) return r;
  }
  return {};
}

BenchReport Collect(std::vector<std::unique_ptr<Connection>>& connections) {
  BenchReport report;
  for (auto& c : connections) {
    State& s = c->state();
    std::lock_guard lock(s.mutex);
    s.AddTo(report);
  }
  return report;
}

std::chrono::nanoseconds Seconds(double s) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(s));
}

}  // namespace

namespace {
// CPU time of this process so far (every thread, user and system), in seconds.
double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}
}  // namespace

std::string BenchKey(std::size_t key_size, std::int64_t i) {
  // Without a format call: fmt::format showed in a pipelined run's client CPU profile.
  std::string key(key_size, '0');
  key[0] = 'k';
  char digits[24];
  const auto n =
      static_cast<std::size_t>(std::to_chars(digits, digits + sizeof digits, i).ptr - digits);
  std::memcpy(key.data() + key.size() - n, digits, n);
  return key;
}

OpKind PickOp(const std::vector<OpWeight>& mix, int total_weight, std::mt19937_64& random) {
  int pick = std::uniform_int_distribution<int>(0, total_weight - 1)(random);
  for (const auto& w : mix) {
    if (pick < w.weight) return w.kind;
    pick -= w.weight;
  }
  return mix.back().kind;
}

void ConnectionCounts::AddTo(BenchReport& report) const {
  report.latency_ns.Merge(latency_ns);
  report.ops += ops;
  report.errors += errors;
  report.unfinished += static_cast<std::uint64_t>(in_flight);
  if (report.first_error.empty()) report.first_error = first_error;
  for (std::size_t kind = 0; kind < kOpKinds; ++kind) {
    if (ops_by_kind[kind] > 0) {
      report.ops_by_kind[std::string(OpKindName(static_cast<OpKind>(kind)))] += ops_by_kind[kind];
    }
  }
}

WindowSampler::WindowSampler(Clock::time_point window_start, Clock::time_point window_end)
    : thread_([this, window_start, window_end] {
        std::this_thread::sleep_until(window_start);
        const double before = ProcessCpuSeconds();
        const std::uint64_t allocations_before = AllocationCount();
        std::this_thread::sleep_until(window_end);
        cpu_seconds_ = ProcessCpuSeconds() - before;
        allocations_ = AllocationCount() - allocations_before;
      }) {}

void WindowSampler::Finish(BenchReport& report) {
  thread_.join();
  report.client_cpu_seconds = cpu_seconds_;
  if (AllocationsCounted()) report.client_allocations = allocations_;
}

Result<BenchReport> RunBench(const BenchOptions& options) {
  auto connections = ConnectAll(options);
  if (!connections) return std::unexpected(connections.error());
  double preload_seconds = 0;
  if (options.preload) {
    auto start = Clock::now();
    if (auto r = PreloadAll(*connections); !r) {
      for (auto& c : *connections) c->Shutdown();
      return std::unexpected(r.error());
    }
    preload_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  }
  auto window_start = Clock::now() + Seconds(options.warmup_s);
  auto window_end = window_start + Seconds(options.duration_s);
  std::vector<std::thread> drivers;
  for (auto& c : *connections) {
    drivers.emplace_back([&c, window_start, window_end] { c->Drive(window_start, window_end); });
  }
  // The client's own CPU over the window: what an operation costs the caller's machine.
  WindowSampler sampler(window_start, window_end);
  for (auto& t : drivers) t.join();
  for (auto& c : *connections) c->Shutdown();
  BenchReport report = Collect(*connections);
  sampler.Finish(report);
  report.seconds = options.duration_s;
  report.preload_seconds = preload_seconds;
  return report;
}

Result<BenchReport> RunTopicBench(const BenchOptions& options) {
  auto log = BenchLogger();
  auto subscriber_options = options.client;
  subscriber_options.addresses = {options.subscribe_address};
  auto subscriber = grid::Client::Connect(subscriber_options, log);
  if (!subscriber) return std::unexpected(subscriber.error());
  std::vector<std::unique_ptr<grid::Client>> publishers;
  for (int i = 0; i < options.connections; ++i) {
    auto client = grid::Client::Connect(options.client, log);
    if (!client) {
      for (auto& p : publishers) p->Shutdown();
      (*subscriber)->Shutdown();
      return std::unexpected(client.error());
    }
    publishers.push_back(std::move(*client));
  }
  auto window_start = Clock::now() + Seconds(options.warmup_s);
  auto window_end = window_start + Seconds(options.duration_s);
  auto steady_ns = [] {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
            .count());
  };
  // The subscriber (one listener thread) owns the histogram; read after it is removed.
  LatencyHistogram received_latency;
  std::atomic<std::uint64_t> received{0};
  auto on_message = [&](const grid::TopicMessage& m) {
    std::uint64_t sent_ns = 0;
    if (m.payload.size() < sizeof sent_ns) return;
    std::memcpy(&sent_ns, m.payload.data(), sizeof sent_ns);
    const auto sent = Clock::time_point(std::chrono::nanoseconds(sent_ns));
    if (sent < window_start || sent >= window_end) return;
    received_latency.Record(steady_ns() - sent_ns);
    received.fetch_add(1, std::memory_order_release);
  };
  auto plain_topic = (*subscriber)->GetTopic(options.topic);
  auto reliable_topic = (*subscriber)->GetReliableTopic(options.topic);
  auto id = options.reliable ? reliable_topic->AddMessageListener(
                                   [&](const grid::ReliableMessage& m) { on_message(m.message); })
                             : plain_topic->AddMessageListener(on_message);
  if (!id) {
    for (auto& p : publishers) p->Shutdown();
    (*subscriber)->Shutdown();
    return std::unexpected(id.error());
  }
  std::atomic<std::uint64_t> published{0}, errors{0};
  std::mutex error_mu;
  std::string first_error;
  std::vector<std::thread> threads;
  for (auto& p : publishers) {
    threads.emplace_back(
        [&, topic = p->GetTopic(options.topic), reliable = p->GetReliableTopic(options.topic)] {
          std::string payload(options.value_size, 'x');
          while (Clock::now() < window_end) {
            const std::uint64_t now = steady_ns();
            std::memcpy(payload.data(), &now, sizeof now);
            base::Result<void> r;
            if (options.reliable) {
              auto seq = reliable->Publish(payload);
              if (!seq) r = std::unexpected(seq.error());
            } else {
              r = topic->Publish(payload);
            }
            if (!r) {
              errors.fetch_add(1);
              std::lock_guard lock(error_mu);
              if (first_error.empty()) first_error = r.error().ToString();
              continue;
            }
            const auto sent = Clock::time_point(std::chrono::nanoseconds(now));
            if (sent >= window_start) published.fetch_add(1);
          }
        });
  }
  for (auto& t : threads) t.join();
  // The last messages arrive: until all of the window's have, for at most 5 s (a fixed
  // half second cut the last one off on a loaded machine).
  const auto give_up = Clock::now() + std::chrono::seconds(5);
  while (received.load(std::memory_order_acquire) < published.load() && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (options.reliable) {
    reliable_topic->RemoveMessageListener(*id);
  } else {
    (void)plain_topic->RemoveMessageListener(*id);
  }
  for (auto& p : publishers) p->Shutdown();
  (*subscriber)->Shutdown();
  BenchReport report;
  report.seconds = options.duration_s;
  report.ops = received.load();
  report.latency_ns = received_latency;
  report.published = published.load();
  report.errors = errors.load();
  report.first_error = first_error;
  return report;
}

}  // namespace tessera::tools::bench
