#pragma once
// Outbox: the transactional outbox. A service stages its events inside the
// same partition transaction as its business writes in its embedded member, so a write and
// its events commit together or not at all:
//
//   grid::Transaction tx("cust-9");
//   tx.Set("orders", "order-17@cust-9", order).IfAbsent();
//   saga::Outbox::Stage(tx, order_created);   // order_created.id from an IdGenerator
//   member.Transact(tx);
//
// A staged event is the entry "<id as 16 hex digits>@<the transaction's partition key>" of the
// internal map "__outbox" (internal maps take no default TTL or eviction: an entry stays until
// it was published). The relay is partition-owned work on the embedded member: each owned
// partition's relay finds its entries (in id order: ids are time-ordered, so one producer's
// events keep their order), appends them to the shared cluster's stream with their event ids
// (idempotent: a second append of an id within the stream's dedup window stores nothing),
// then removes them. A relay is woken by each entry staged in its partition (an entry
// listener on the member's shard) and otherwise looks every poll_ms. The Outbox's publisher
// thread appends the batches of all relays that handed one over meanwhile together (up to
// max_batch events, one AppendAll per stream). A failed publish keeps the entries and is retried,
// at once and then with growing, jittered delays; an outage is logged once when it starts and once
// when it ends. After a member dies, the member that takes its partitions runs their relays.
//
// Thread-safety: Stage is a pure function; Outbox methods are safe from any thread.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "tessera/base/error.h"
#include "tessera/grid/instance.h"
#include "tessera/grid/member.h"
#include "tessera/grid/stream.h"
#include "tessera/grid/transaction.h"
#include "tessera/saga/event.h"
#include "tessera/saga/retry.h"

namespace tessera::saga {

inline constexpr const char* kOutboxMap = "__outbox";
// Entries no stream will ever take (their stream refuses them as a bad request) are moved here
// with an error in the log, so they do not hold back their partition's other events.
inline constexpr const char* kRejectedOutboxMap = "__outbox.rejected";
// An event with this header goes to the stream it names instead of OutboxOptions::stream (a
// saga's commands to each participant's stream, replies to the orchestrator's).
inline constexpr const char* kStreamHeader = "tessera-stream";

struct OutboxOptions {
  std::string service = "service";  // this service's name: the metrics' label
  std::string stream = "events";    // the shared stream events go to (kStreamHeader overrides)
  grid::StreamConfig stream_config;
  // How often an idle partition's relay looks for entries. A staged entry wakes its relay at
  // once (an entry listener on the member), so this is a fallback.
  base::Millis poll_ms = 500;
  std::size_t max_batch = 256;  // events per append (one partition's, or several's together)
  RetryPolicy backoff = [] {    // waits between failed publishes (attempts are unlimited)
    RetryPolicy p;
    p.immediate_retries = 1;
    p.initial_delay_ms = 50;
    p.max_delay_ms = 5'000;
    return p;
  }();
};

class Outbox {
 public:
  struct Stats {
    std::int64_t staged = 0;             // entries a relay found for the first time
    std::int64_t published = 0;          // events appended to the stream (duplicates included)
    std::int64_t publish_failures = 0;   // appends that failed (each is retried)
    std::int64_t pending = 0;            // entries the relays saw last, not published yet
    std::int64_t oldest_pending_ms = 0;  // wall-clock time of the oldest of them (0: none)
  };

  // Adds the staging of `event` to `tx`. Errors: kBadRequest from ValidateEvent.
  static base::Result<void> Stage(grid::Transaction& tx, const Event& event);

  // Registers the relay as partition work "saga.outbox" on `member`; events go to `shared`'s
  // stream. The member's metrics get, labelled service=options.service:
  // tessera_outbox_staged_total, tessera_outbox_published_total,
  // tessera_outbox_publish_failures_total, tessera_outbox_pending and
  // tessera_outbox_oldest_pending_seconds (age of the oldest pending event; 0 when none). REQUIRES:
  // before member.Start(). Destroy the Outbox before the member is destroyed (its publisher thread
  // uses the member); relays left on a running member then stop publishing, and their entries wait
  // for the next Outbox or another member.
  Outbox(grid::Member& member, std::shared_ptr<grid::Instance> shared, OutboxOptions options = {});
  ~Outbox();

  Stats stats() const;

  struct State;  // shared with the relays (outbox.cc)

 private:
  std::shared_ptr<State> state_;
};

}  // namespace tessera::saga
