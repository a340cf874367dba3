// IdGenerator (id_generator.h). Next is one compare-and-swap on a 64-bit counter whose high
// bits are milliseconds and low bits the sequence, so "the next sequence, or the current
// millisecond if the clock moved on" is max(last + 1, now << 7): running ahead of the clock
// and ignoring a clock that went back both fall out of it. The clock itself is steady + the
// largest wall - steady offset seen (a fetch-max on one atomic), so it follows the wall clock
// forward and never back.
#include "tessera/grid/id_generator.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <thread>

#include "tessera/base/check.h"
#include "tessera/grid/instance.h"

namespace tessera::grid {

namespace {

constexpr const char* kIdMap = "__tessera.ids";

std::int64_t NowMsSinceEpoch() {
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  return std::max<std::int64_t>(0, now - IdGenerator::kEpochMs);
}

std::int64_t SystemWallNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

IdGenerator::IdGenerator(std::uint32_t node_id)
    : IdGenerator(node_id, Clocks{&SystemWallNs, &SteadyNs}) {}

IdGenerator::IdGenerator(std::uint32_t node_id, Instance& instance, std::string holder)
    : IdGenerator(node_id) {
  instance_ = &instance;
  holder_ = std::move(holder);
  checked_epoch_.store(instance.ClusterEpoch());
}

IdGenerator::IdGenerator(std::uint32_t node_id, Clocks clocks)
    : node_id_(node_id), clocks_(clocks), offset_ns_(clocks.wall_ns() - clocks.steady_ns()) {
  TESSERA_CHECK(node_id < (1u << kNodeBits), "IdGenerator node id out of range");
}

std::int64_t IdGenerator::ClockMs() {
  const std::int64_t steady = clocks_.steady_ns();
  const std::int64_t seen = clocks_.wall_ns() - steady;
  std::int64_t offset = offset_ns_.load(std::memory_order_relaxed);
  while (seen > offset &&
         !offset_ns_.compare_exchange_weak(offset, seen, std::memory_order_relaxed)) {
  }
  const std::int64_t ms = (steady + std::max(offset, seen)) / 1'000'000 - kEpochMs;
  return std::max<std::int64_t>(0, ms);
}

std::int64_t IdGenerator::Next() {
  if (instance_ != nullptr) {
    const std::uint64_t epoch = instance_->ClusterEpoch();
    if (epoch != checked_epoch_.load(std::memory_order_acquire)) RecheckLease(epoch);
  }
  const std::uint32_t node = node_id_.load(std::memory_order_acquire);
  for (;;) {
    const std::int64_t now = ClockMs();
    std::int64_t last = last_.load(std::memory_order_relaxed);
    const std::int64_t next = std::max(last + 1, now << kSequenceBits);
    if ((next >> kSequenceBits) - now > kMaxAheadMs) {  // far ahead of the clock: let it catch up
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    if (last_.compare_exchange_weak(last, next, std::memory_order_relaxed)) {
      return (next << kNodeBits) | node;
    }
  }
}

namespace {

std::string LeaseKey(std::uint32_t node) { return "node-" + std::to_string(node); }

// Takes the next free node id through the counter and a lease held by `holder`.
base::Result<std::uint32_t> Reserve(Map& ids, const std::string& holder) {
  constexpr std::uint32_t kNodes = 1u << IdGenerator::kNodeBits;
  for (std::uint32_t attempt = 0; attempt < kNodes; ++attempt) {
    auto counter = ids.ExecuteOnKey("node-counter", "incrementRaw",
                                    record::GenericRecord::Build().Int64("delta", 1).Done());
    if (!counter) return std::unexpected(counter.error());
    auto value = counter->GetInt64("value");
    if (!value) return std::unexpected(value.error());
    const auto node = static_cast<std::uint32_t>(*value % kNodes);
    auto lease = ids.PutIfAbsent(LeaseKey(node), holder, WithTtl(IdGenerator::kNodeLeaseMs));
    if (!lease) return std::unexpected(lease.error());
    if (!lease->has_value()) return node;  // ours now
  }
  return base::Fail(base::ErrorCode::kOverloaded,
                    "every one of the 32768 id generator node ids is leased (map '" +
                        std::string(kIdMap) +
                        "'); generators are meant to live as long as their process");
}

}  // namespace

base::Result<std::unique_ptr<IdGenerator>> IdGenerator::Create(Instance& instance) {
  auto ids = instance.GetMap(kIdMap);
  // Unique per generator (two processes may create one in the same millisecond): a re-check
  // must not take another generator's lease for its own.
  std::random_device random;
  const std::string holder =
      fmt::format("generator@{}/{:08x}{:08x}", NowMsSinceEpoch(), random(), random());
  auto node = Reserve(*ids, holder);
  if (!node) return std::unexpected(node.error());
  return std::make_unique<IdGenerator>(*node, instance, holder);
}

void IdGenerator::RecheckLease(std::uint64_t epoch) {
  std::lock_guard lock(check_mu_);
  if (checked_epoch_.load() == epoch) return;  // another thread did
  const auto now = std::chrono::steady_clock::now();
  if (now < next_check_) return;  // failed a moment ago: keep the node id for now
  auto fail = [&] { next_check_ = now + std::chrono::seconds(1); };
  auto ids = instance_->GetMap(kIdMap);
  const std::uint32_t node = node_id_.load();
  auto held = ids->Get(LeaseKey(node));
  if (!held) return fail();
  if (held->has_value() && **held == holder_) {
    checked_epoch_.store(epoch, std::memory_order_release);
    return;
  }
  if (!held->has_value()) {  // gone (a restarted cluster): take it back if nobody did
    auto put = ids->PutIfAbsent(LeaseKey(node), holder_, WithTtl(kNodeLeaseMs));
    if (!put) return fail();
    if (!put->has_value()) {
      checked_epoch_.store(epoch, std::memory_order_release);
      return;
    }
  }
  auto fresh = Reserve(*ids, holder_);  // another generator holds it now
  if (!fresh) return fail();
  node_id_.store(*fresh, std::memory_order_release);
  checked_epoch_.store(epoch, std::memory_order_release);
}

}  // namespace tessera::grid
