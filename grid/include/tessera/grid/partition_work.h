#pragma once
// Partition-owned work: member-side code that runs only on the member owning a partition, the
// grid's coordinator for background work (the outbox relay, saga timeouts, stream retention):
// no claims, no token ring, no thread per partition; it moves with the partition table.
//
// A service registers a work type on its Member before Start (Member::RegisterPartitionWork).
// For each partition, the member creates one instance of each work type when it starts owning
// the partition (a new cluster, a promotion after the owner died, a migration in), on the
// partition's shard, and destroys it there when it stops owning it (a migration out, the
// member leaving or shutting down), before the partition's data is copied to its new owner.
//
// Guarantees (docs/architecture.md "Partition-owned work"):
//   - At any moment at most one member runs a partition's work, except across the failure
//     detection window of a member that died or was cut off (until the others removed it,
//     it may still run its work while a promoted backup runs it too), and a partition whose
//     owner changes twice (Z to A to B) before Z applied the first change: B may start before
//     Z stopped (A passes on no handoff it never got; not fixed yet). Work that must never
//     overlap (the outbox relay) makes its effects idempotent or fences them with a partition
//     transaction.
//   - After SIGKILL of the owner the new owner starts the work within the failure timeout plus
//     the time to install the new partition table.
//   - Construction, destruction and every handler the work posts to shard_context() run on the
//     partition's shard, one at a time with the partition's map operations: a work instance
//     needs no locks. It must not block the shard (use shard timers, never sleep).
//
// Thread-safety: PartitionWorkContext is used on the partition's shard only.

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace tessera::grid {

class Instance;

// What a work instance gets: its partition, its shard's event loop, the member.
class PartitionWorkContext {
 public:
  virtual ~PartitionWorkContext() = default;
  virtual std::uint32_t partition() const = 0;
  // The shard's event loop: steady_timers and posted handlers on it run on the shard.
  virtual boost::asio::io_context& shard_context() = 0;
  // Expires when the work instance is stopped (just before it is destroyed). A handler the
  // work posted (a timer already due, a map call's callback) can run after that: it captures
  // this by value and returns at once when it expired, before it touches the work or the
  // context (both are gone by then). Checked on the shard, so there is no race.
  virtual std::weak_ptr<const void> lifetime() const = 0;
  // Whether this member still owns the partition and the instance was not stopped.
  // REQUIRES: lifetime() has not expired.
  virtual bool owned() const = 0;
  // Calls fn(key, value) for every live entry of `map` in this partition on this member,
  // without touching them; synchronous, on the shard. A map with no entries here calls nothing.
  virtual void ScanLocal(
      const std::string& map,
      const std::function<void(std::string_view key, std::string_view value)>& fn) = 0;
  // The member, for map operations. Use the asynchronous calls (Map::ExecuteAsync and the
  // like) or map_service(): a blocking call on a shard thread is a bug (TESSERA_CHECK).
  virtual Instance& instance() = 0;
};

// One work instance for one partition; destroyed when the member stops owning it.
class PartitionWork {
 public:
  virtual ~PartitionWork() = default;
};

// Makes the work for one partition (on its shard). May return nullptr: no work there.
using PartitionWorkFactory =
    std::function<std::unique_ptr<PartitionWork>(PartitionWorkContext& context)>;

}  // namespace tessera::grid
