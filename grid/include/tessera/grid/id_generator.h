#pragma once
// IdGenerator: cluster-unique, time-ordered 64-bit ids without a round trip per id (the idea
// of Hazelcast's FlakeIdGenerator), for event ids, saga ids and anything else that needs a
// unique, sortable number.
//
// Layout of an id (always positive):
//   bit 63       0
//   bits 62..22  41 bits: milliseconds since 2026-01-01T00:00:00Z (kEpochMs), until 2095
//   bits 21..15  7 bits: sequence within that millisecond (128 ids per ms per generator)
//   bits 14..0   15 bits: the generator's node id, reserved in the cluster at Create
// So ids sort by time across the cluster (to the clock skew between hosts), and strictly
// increase for one generator.
//
// Limits and rules:
//   - A generator hands out 128 ids per millisecond (128k/s) from its own clock. Beyond that
//     it runs ahead of the clock (borrowing later milliseconds) by up to 10 s, and then Next
//     waits for the clock: ids never repeat.
//   - A generator's clock is the steady clock plus the largest (wall - steady) offset it has
//     seen: it never goes back and never runs slower than the wall clock. A wall clock step
//     forward (NTP step, VM resumed after a suspend the steady clock did not count) goes into
//     its ids at once; a step back neither goes into them nor stalls Next: ids then stay ahead
//     of the wall clock by that step. So an id's time is never earlier than the wall clock
//     when Next was called.
//   - Node ids: Create reserves one through the cluster (an atomic counter and a lease entry
//     in the map `__tessera.ids`), one round trip. The lease lasts kNodeLeaseMs (7 days):
//     uniqueness holds among generators created less than 32,768 reservations apart, or
//     within 7 days of each other. A restart creates a new generator with a new node id, so
//     ids stay unique across process restarts, and across a restart of the whole cluster as
//     long as its clock moved on by more than the 10 s a generator may run ahead.
//   - The lease is checked again whenever the instance's ClusterEpoch changes (a split-brain
//     merge or rejoin, a new master, a restarted cluster): the first Next after it reads the
//     lease (one round trip) and, when another generator holds the node id now (both sides of
//     a network partition leased it; the merge kept the other side's lease) or the lease is
//     gone and cannot be taken back, reserves a new node id before it hands out an id. While
//     the cluster cannot be reached the old node id is kept and the check is tried again at
//     most once a second. Two generators created on the two sides of a partition can share a
//     node id until the merge: their ids can repeat only within the same millisecond and
//     sequence (docs/reliability.md).
//
// Thread-safety: Next is safe from any thread; it is lock-free except for the check above,
// which blocks (one call) and must not run on a member's shard thread.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "tessera/base/error.h"

namespace tessera::grid {

class Instance;

class IdGenerator {
 public:
  static constexpr std::int64_t kEpochMs = 1'767'225'600'000;  // 2026-01-01T00:00:00Z
  static constexpr int kSequenceBits = 7;
  static constexpr int kNodeBits = 15;
  static constexpr std::int64_t kNodeLeaseMs = 7LL * 24 * 3600 * 1000;
  static constexpr std::int64_t kMaxAheadMs = 10'000;

  // Reserves a node id through `instance` (embedded member or client; one round trip, plus
  // one per node id found leased). Errors: those of the map calls (kTimeout,
  // kConnectionFailed, ...), kOverloaded when every node id is leased.
  static base::Result<std::unique_ptr<IdGenerator>> Create(Instance& instance);
  // Create's result: a node id leased through `instance` by `holder`. REQUIRES: `instance`
  // outlives the generator.
  IdGenerator(std::uint32_t node_id, Instance& instance, std::string holder);
  // A generator with a given node id (tests; ids are unique only if no other generator in
  // the cluster uses the same node id). REQUIRES: node_id < 2^15.
  explicit IdGenerator(std::uint32_t node_id);
  // The clocks a generator reads, in nanoseconds: wall since the Unix epoch, steady since
  // any fixed point. Tests give their own to step the wall clock.
  struct Clocks {
    std::int64_t (*wall_ns)();
    std::int64_t (*steady_ns)();
  };
  IdGenerator(std::uint32_t node_id, Clocks clocks);

  // The next id: positive, greater than every id this generator returned before, unique in
  // the cluster. Waits only when more than 10 s ahead of the clock (above).
  std::int64_t Next();

  std::uint32_t node_id() const { return node_id_.load(std::memory_order_acquire); }
  // The parts of an id: Unix time in ms, and the node id of the generator that made it.
  static std::int64_t TimestampMsOf(std::int64_t id) { return (id >> 22) + kEpochMs; }
  static std::uint32_t NodeOf(std::int64_t id) {
    return static_cast<std::uint32_t>(id & ((1 << kNodeBits) - 1));
  }

 private:
  // The generator's clock in ms since kEpochMs: steady + the largest wall - steady seen
  // (above).
  std::int64_t ClockMs();
  // The lease check after a ClusterEpoch change (above).
  void RecheckLease(std::uint64_t epoch);

  std::atomic<std::uint32_t> node_id_;
  Instance* instance_ = nullptr;  // null: a fixed node id
  std::string holder_;            // what the lease entry holds while it is ours
  std::atomic<std::uint64_t> checked_epoch_{0};
  std::mutex check_mu_;
  std::chrono::steady_clock::time_point next_check_;  // after a failed check; check_mu_
  Clocks clocks_;
  std::atomic<std::int64_t> offset_ns_;  // the largest wall - steady seen, in ns
  // (milliseconds since kEpochMs << kSequenceBits) | sequence of the last id handed out.
  std::atomic<std::int64_t> last_{0};
};

}  // namespace tessera::grid
