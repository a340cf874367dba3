// One scanner per owned partition (partition work, on the partition's shard) finds the due
// deadlines; one thread per Deadlines object fires them (blocking calls never run on a shard).
#include "tessera/saga/deadlines.h"
#include "tessera/base/clock.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <optional>
#include <vector>

#include "serial_worker.h"
#include "tessera/base/log.h"
#include "tessera/grid/map.h"
#include "tessera/partition/partitioner.h"

namespace tessera::saga {
namespace {

std::string Encode(const Deadline& d) {
  return record::GenericRecord::Build("tessera.SagaDeadline")
      .String("saga_id", d.saga_id)
      .String("kind", d.kind)
      .Int32("step", d.step)
      .Int32("attempt", d.attempt)
      .Int64("due_ms", d.due_ms)
      .Done()
      .Encode();
}

std::optional<Deadline> Decode(std::string_view bytes) {
  auto r = record::GenericRecord::Decode(bytes);
  if (!r) return std::nullopt;
  Deadline d;
  auto id = r->GetString("saga_id");
  auto kind = r->GetString("kind");
  auto step = r->GetInt32("step");
  auto attempt = r->GetInt32("attempt");
  auto due = r->GetInt64("due_ms");
  if (!id || !kind || !step || !attempt || !due) return std::nullopt;
  d.saga_id = *id;
  d.kind = *kind;
  d.step = *step;
  d.attempt = *attempt;
  d.due_ms = *due;
  return d;
}

}  // namespace

std::string Deadline::EntryKey() const {
  return fmt::format("{:016x}|{}|{}#{}#{}@{}", static_cast<std::uint64_t>(due_ms), kind, saga_id,
                     step, attempt, partition::Partitioner::PartitionKey(saga_id));
}

void Deadlines::Set(grid::Transaction& tx, const Deadline& d) {
  tx.Set(kDeadlineMap, d.EntryKey(), Encode(d));
}

void Deadlines::Clear(grid::Transaction& tx, const Deadline& d) {
  tx.Delete(kDeadlineMap, d.EntryKey());
}

struct Deadlines::State {
  grid::Member* member = nullptr;
  std::function<base::Result<void>(const Deadline&)> fire;
  DeadlinesOptions options;
  std::shared_ptr<spdlog::logger> log = base::NamedLogger("deadlines");
  std::mutex mu;
  Stats stats;  // guarded by mu
  std::unique_ptr<SerialWorker> worker;

  void Post(std::function<void()> job) { worker->Post(std::move(job)); }

  // On the worker: fires each due deadline, oldest first; removes the ones handled.
  void Fire(const std::vector<std::pair<std::string, std::string>>& due) {
    for (const auto& [key, value] : due) {
      auto d = Decode(value);
      if (!d) {
        log->error("deadline entry {} is not a deadline; removing it", key);
        (void)member->GetMap(kDeadlineMap)->Remove(key, value);
        continue;
      }
      base::Result<void> ok;
      try {
        ok = fire(*d);
      } catch (const std::exception& e) {
        ok = base::Fail(base::ErrorCode::kInternal, std::string("fire threw: ") + e.what());
      }
      if (!ok) {
        log->warn("deadline {} of saga {} not handled ({}); it fires again", d->kind, d->saga_id,
                  ok.error().ToString());
        std::lock_guard lock(mu);
        ++stats.failed;
        continue;
      }
      (void)member->GetMap(kDeadlineMap)->Remove(key, value);  // if fire did not clear it
      std::lock_guard lock(mu);
      ++stats.fired;
    }
  }
};

namespace {

class Scanner final : public grid::PartitionWork {
 public:
  Scanner(grid::PartitionWorkContext& context, std::shared_ptr<Deadlines::State> state)
      : context_(context), state_(std::move(state)), timer_(context.shard_context()) {}

  void Arm(base::Millis delay) {
    const std::uint64_t generation = ++armed_;
    timer_.expires_after(std::chrono::milliseconds(delay));
    timer_.async_wait(
        [this, alive = context_.lifetime(), generation](const boost::system::error_code& ec) {
          if (ec || alive.expired() || generation != armed_) return;
          Tick();
        });
  }

 private:
  void Tick() {
    const std::string now_prefix =
        fmt::format("{:016x}", static_cast<std::uint64_t>(base::SteadyClock().WallMs()));
    std::vector<std::pair<std::string, std::string>> due;
    context_.ScanLocal(kDeadlineMap, [&](std::string_view key, std::string_view value) {
      if (key.substr(0, 16) <= now_prefix) due.emplace_back(std::string(key), std::string(value));
    });
    if (due.empty()) return Arm(state_->options.poll_ms);
    std::sort(due.begin(), due.end());  // oldest first
    auto& io = context_.shard_context();
    state_->Post([state = state_, due = std::move(due), &io, this, alive = context_.lifetime()] {
      state->Fire(due);
      boost::asio::post(io, [this, alive] {
        if (alive.expired()) return;  // the partition moved: its new owner scans
        Arm(state_->options.poll_ms);
      });
    });
  }

  grid::PartitionWorkContext& context_;
  std::shared_ptr<Deadlines::State> state_;
  boost::asio::steady_timer timer_;
  std::uint64_t armed_ = 0;
};

}  // namespace

Deadlines::Deadlines(grid::Member& member, std::function<base::Result<void>(const Deadline&)> fire,
                     DeadlinesOptions options)
    : state_(std::make_shared<State>()) {
  state_->member = &member;
  state_->fire = std::move(fire);
  state_->options = options;
  state_->worker = std::make_unique<SerialWorker>();
  member.RegisterPartitionWork(
      "saga.deadlines",
      [state =
           state_](grid::PartitionWorkContext& context) -> std::unique_ptr<grid::PartitionWork> {
        auto scanner = std::make_unique<Scanner>(context, state);
        scanner->Arm(0);
        return scanner;
      });
}

Deadlines::~Deadlines() { state_->worker->Stop(); }

Deadlines::Stats Deadlines::stats() const {
  std::lock_guard lock(state_->mu);
  return state_->stats;
}

}  // namespace tessera::saga
