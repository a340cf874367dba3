// Long polls of event stream consumers (kStreamRead with wait_ms; map_request.h): a consumer
// with nothing to read parks one read per sub-stream it holds on the sub-stream's owner and
// reads again when one answers "ready", instead of polling every few milliseconds. A parked
// read lives on its partition's shard (ShardState::waiters, no locks); an append that stores
// events wakes the reads parked on its sub-stream after the append's handler has run.
// Without wait_read the answer carries no events: the consumer reads them (and they are
// counted as delivered) in the read that follows. With wait_read (N > 0) the answer is that
// read, of up to N events from `from`: one round trip per wake-up fewer. A consumer that no
// longer wants them (it moved past `from` meanwhile) drops them and reads again; the owner
// then counts them delivered, and redelivered, twice.
#include <algorithm>

#include "map_service_impl.h"
#include "op_support.h"
#include "tessera/map/family.h"
#include "tessera/map/stream_format.h"

namespace tessera::map {
namespace {

using base::ErrorCode;
using base::Fail;

MapResult WaitAnswer(const char* what) {
  MapResult out;
  out.value = what;
  return out;
}

// Marks `w` answered and takes its callback (empty when it was answered before).
std::function<void(base::Result<MapResult>)> Close(const std::shared_ptr<StreamWaiter>& w) {
  if (w->answered) return {};
  w->answered = true;
  if (w->timer) w->timer->cancel();
  return std::move(w->done);
}

void Answer(const std::shared_ptr<StreamWaiter>& w, base::Result<MapResult> result) {
  if (auto done = Close(w)) done(std::move(result));
}

// Removes `w` from the waiters of `key` (it was answered).
void Forget(ShardState& state, const std::string& key, const StreamWaiter* w) {
  auto it = state.waiters.find(key);
  if (it == state.waiters.end()) return;
  auto& list = it->second;
  list.erase(std::remove_if(list.begin(), list.end(), [w](const auto& p) { return p.get() == w; }),
             list.end());
  if (list.empty()) state.waiters.erase(it);
}

}  // namespace

namespace internal {

bool StreamReadWaits(const MapRequest& request) {
  return request.op == MapOp::kStreamRead && detail::IntArg(request, "wait_ms", 0) > 0;
}

bool StreamOpStored(const MapRequest& request, const MapResult& result) {
  switch (request.op) {
    case MapOp::kStreamAppend:
    case MapOp::kStreamMerge:
      return result.count > 0;
    default: {  // a family's op (family.h)
      const FamilySpec* family = FamilyOfOp(request.op);
      return family != nullptr && family->appended != nullptr && family->appended(request, result);
    }
  }
}

}  // namespace internal

void MapService::Impl::WaitForStream(std::size_t shard, std::uint32_t partition_id,
                                     const MapRequest& request, Callback& done) {
  const std::int64_t from = detail::IntArg(request, "from", 1);
  const std::int64_t wait_ms = std::min(detail::IntArg(request, "wait_ms", 0), kMaxStreamWaitMs);
  // Not "group": a member that predates stream waits reads a wait as a plain read, and a plain
  // read without a group counts no deliveries.
  std::string group = detail::StringArg(request, "wait_group");
  std::string consumer = detail::StringArg(request, "wait_consumer");
  if (group.empty()) {
    return done(Fail(ErrorCode::kBadRequest,
                     "a stream read with wait_ms needs wait_group (a newer wait of the same "
                     "group and wait_consumer replaces an older one)"));
  }
  if (stopped.load(std::memory_order_acquire) || !started.load(std::memory_order_acquire)) {
    return done(Fail(ErrorCode::kShuttingDown,
                     "the map service is not running (stopped or not started yet); retry on "
                     "another member"));
  }
  auto w = std::make_shared<StreamWaiter>();
  w->partition_id = partition_id;
  if (const std::int64_t carry = detail::IntArg(request, "wait_read", 0); carry > 0) {
    MapRequest read = request;
    read.argument = record::GenericRecord::Build()
                        .Int64("from", from)
                        .Int64("max", carry)
                        .String("group", group)  // counts the deliveries, as a consumer's read
                        .Done();
    w->read = std::move(read);
  }
  MapTable& table = TableOn(shard, request.map_name);
  const std::string_view sub = std::string_view(request.key).substr(request.key.find('@') + 1);
  if (const Record* r = StoreOf(table, partition_id).Find(StreamMetaKey(sub))) {
    const StreamMeta meta = ParseStreamMeta(r->value());
    if (from <= meta.tail || from < meta.head) {
      w->done = std::move(done);
      return AnswerReady(shard, w);
    }
  }
  ShardState& state = *states[shard];
  std::shared_ptr<StreamWaiter> older;  // of the same consumer: this one replaces it
  auto& list = state.waiters[request.key];
  for (auto it = list.begin(); it != list.end(); ++it) {
    if ((*it)->group != group || (*it)->consumer != consumer) continue;
    older = std::move(*it);
    list.erase(it);
    break;
  }
  w->group = std::move(group);
  w->consumer = std::move(consumer);
  w->done = std::move(done);
  w->timer.emplace(shards.Context(shard));
  w->timer->expires_after(std::chrono::milliseconds(wait_ms));
  // The timer's handler holds the waiter until it runs (at expiry, or cancelled on answer).
  w->timer->async_wait([this, shard, key = request.key, w](const boost::system::error_code& ec) {
    if (ec || w->answered) return;
    Forget(*states[shard], key, w.get());
    Answer(w, WaitAnswer("timeout"));
  });
  list.push_back(std::move(w));
  if (older) Answer(older, WaitAnswer("timeout"));
}

void MapService::Impl::WakeStreamReaders(std::size_t shard, const std::string& key) {
  if (states[shard]->waiters.find(key) == states[shard]->waiters.end()) return;
  shards.InvokeOn(shard, [this, shard, key] {
    auto& waiters = states[shard]->waiters;
    auto it = waiters.find(key);
    if (it == waiters.end()) return;
    auto woken = std::move(it->second);
    waiters.erase(it);
    for (const auto& w : woken) AnswerReady(shard, w);
  });
}

void MapService::Impl::AnswerReady(std::size_t shard, const std::shared_ptr<StreamWaiter>& w) {
  auto done = Close(w);
  if (!done) return;
  if (!w->read) return done(WaitAnswer("ready"));
  MapRequest read = std::move(*w->read);
  w->read.reset();
  Callback answer = std::move(done);
  RunKeyedOnShard(shard, w->partition_id, read, answer);  // no wait_ms: a plain read
}

void MapService::Impl::DropStreamReaders(std::size_t shard) {
  auto waiters = std::move(states[shard]->waiters);
  states[shard]->waiters.clear();
  for (auto& [key, list] : waiters) {
    for (const auto& w : list) {
      Answer(w, Fail(ErrorCode::kShuttingDown,
                     "the map service is shutting down; retry on another member"));
    }
  }
}

}  // namespace tessera::map
