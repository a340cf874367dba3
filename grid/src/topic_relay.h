#pragma once
// TopicRelay: the member's cluster publisher for its TopicService. A message published on this
// member (by RESP, a client or the embedded API) is delivered to this member's listeners and
// sent to every other member (native kTopicDeliver), which delivers it to its own. One
// publisher's messages leave in publish order over one connection per member, so every
// listener sees them in that order. Delivery to other members is at-most-once: a send that
// fails (member gone) is counted, not retried.
//
// Global ordering (topic::TopicConfig): a message of such a topic goes to the member owning
// the topic name's partition (forwarded as a publish), which delivers and sends it from one
// thread (the router's), so every member receives that topic's messages in one order. While the
// partition table changes, members may briefly disagree on the owner and the order can differ.
//
// Thread-safety: Publish and SetPeers from any thread. Publish on a shard reads the view
// without a lock (runtime::ShardSnapshot).

#include <spdlog/logger.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "member_router.h"
#include "tessera/partition/partitioner.h"
#include "tessera/runtime/shard_snapshot.h"
#include "tessera/topic/topic_service.h"

namespace tessera::grid {

class TopicRelay {
 public:
  // topics, router and shards must outlive the relay.
  TopicRelay(topic::TopicService& topics, MemberRouter& router, const runtime::ShardSet& shards,
             std::map<std::string, topic::TopicConfig> configs, partition::Partitioner partitioner,
             std::shared_ptr<spdlog::logger> log);

  // From every new cluster view: the other members' addresses, this member's, and every
  // partition's owner address.
  void SetPeers(std::vector<std::string> others, std::string self = "",
                std::vector<std::string> owners = {});
  // Delivers here and sends to the peers; returns the local receivers.
  std::int64_t Publish(topic::Message message);
  // Whether the current view has other members (a message published now leaves this one).
  bool HasPeers() const {
    return view_.Read([](const View& view) { return !view.peers.empty(); });
  }
  // Sends to other members that failed (the member was gone or did not answer).
  std::int64_t failed_sends() const { return failed_sends_->load(std::memory_order_relaxed); }

 private:
  struct View {
    std::vector<std::string> peers;
    std::string self;
    std::vector<std::string> owners;  // partition -> owner address; empty: unknown
  };
  // Delivers here and sends to every peer.
  std::int64_t FanOut(const View& view, topic::Message message);
  // Forwards a message of a globally ordered topic to its owner, or orders it here.
  std::int64_t PublishOrdered(const View& view, topic::Message message);

  topic::TopicService& topics_;
  MemberRouter& router_;
  const std::map<std::string, topic::TopicConfig> configs_;
  const partition::Partitioner partitioner_;
  std::shared_ptr<spdlog::logger> log_;
  runtime::ShardSnapshot<View> view_;
  std::shared_ptr<std::atomic<std::int64_t>> failed_sends_ =
      std::make_shared<std::atomic<std::int64_t>>(0);
};

}  // namespace tessera::grid
