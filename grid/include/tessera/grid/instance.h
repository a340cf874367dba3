#pragma once
// Instance: what the embedded member and the client both offer. Services code against
// Instance and choose at wiring time whether it is an embedded Member (local state, outbox)
// or a Client of a shared cluster (cross-service topics and maps).
//
// Thread-safety: safe to use from many threads at once.

#include <cstdint>
#include <memory>
#include <string>

#include "tessera/grid/map.h"
#include "tessera/grid/reliable_topic.h"
#include "tessera/grid/stream.h"
#include "tessera/grid/topic.h"
#include "tessera/grid/transaction.h"
#include "tessera/grid/typed_map.h"

namespace tessera::grid {

class Instance {
 public:
  virtual ~Instance() = default;

  // The map named `name` (created on first write). Cheap; proxies may be cached.
  virtual std::shared_ptr<Map> GetMap(const std::string& name) = 0;

  // A typed facade over GetMap(name), e.g. GetTypedMap<std::string, record::GenericRecord>.
  template <typename K, typename V>
  TypedMap<K, V> GetTypedMap(const std::string& name) {
    return TypedMap<K, V>(GetMap(name));
  }

  // The topic named `name` (see topic.h). Cheap; proxies may be cached.
  virtual std::shared_ptr<Topic> GetTopic(const std::string& name) = 0;

  // A proxy of the reliable topic named `name` (see reliable_topic.h); its listeners stop
  // when the proxy is destroyed. Publishers of one topic should use the same `config`.
  virtual std::shared_ptr<ReliableTopic> GetReliableTopic(const std::string& name,
                                                          ReliableTopicConfig config = {}) = 0;

  // A proxy of the event stream named `name` (see stream.h); its subscriptions stop when the
  // proxy is destroyed. The first instance to use a stream stores `config` in the grid.
  virtual std::shared_ptr<Stream> GetStream(const std::string& name, StreamConfig config = {}) = 0;

  // Applies `transaction` all-or-nothing on its partition's owner (see transaction.h): the
  // result says whether it committed, with each operation's result, or which precondition
  // failed (nothing applied). Errors: kBadRequest (empty batch, too many operations, a key
  // outside the partition, an unknown operation; each named), kUnknownProcessor, an
  // operation's error (nothing applied), and those of any call (kTimeout, kMemberLeft: the
  // same Transaction may be sent again, it is applied once).
  virtual base::Result<TransactionResult> Transact(const Transaction& transaction) = 0;
  // Stops the instance: a member leaves, a client disconnects. Idempotent.
  virtual void Shutdown() = 0;
  // Changes whenever this instance may have come to see another cluster's state: a member
  // merged or rejoined after a split brain, or a new master (a failover, a merge, a restarted
  // cluster a client reconnected to). What was reserved cluster-wide through the instance
  // (IdGenerator's node id lease) is checked again when it changes. Any thread.
  virtual std::uint64_t ClusterEpoch() const { return 0; }
};

}  // namespace tessera::grid
