// ReliableTopic over the ring map ops: Publish is one kRingAppend on the ring's partition
// owner; each listener is a thread that reads (kRingRead) from its next sequence, delivers in
// order, and polls with a growing pause (1 ms .. 20 ms) while the ring has nothing new.
#include "tessera/grid/reliable_topic.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <chrono>
#include <condition_variable>

#include "tessera/record/generic_record.h"

namespace tessera::grid {

using base::ErrorCode;

namespace {

std::int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string EncodeMessage(const std::string& payload, const std::string& publisher,
                          std::int64_t time_ms) {
  return record::GenericRecord::Build()
      .BytesField("payload", payload)
      .String("publisher", publisher)
      .Int64("time", time_ms)
      .Done()
      .Encode();
}

// A stored message back as a TopicMessage (a damaged one keeps its bytes as the payload).
TopicMessage DecodeMessage(const std::string& topic, const std::string& bytes) {
  TopicMessage m;
  m.topic = topic;
  auto rec = record::GenericRecord::Decode(bytes);
  const record::Value* payload = rec ? rec->Find("payload") : nullptr;
  if (!rec || !payload || payload->type() != record::FieldType::kBytes) {
    m.payload = bytes;
    return m;
  }
  m.payload = payload->AsBytes().data;
  if (auto p = rec->GetString("publisher")) m.publisher_id = *p;
  if (auto t = rec->GetInt64("time")) m.publish_time_ms = *t;
  return m;
}

std::pair<std::int64_t, std::int64_t> ParseRange(const std::optional<std::string>& text) {
  std::int64_t head = 1, tail = 0;
  if (!text) return {head, tail};
  auto space = text->find(' ');
  if (space == std::string::npos) return {head, tail};
  std::from_chars(text->data(), text->data() + space, head);
  std::from_chars(text->data() + space + 1, text->data() + text->size(), tail);
  return {head, tail};
}

map::RingOverflow OverflowOf(ReliableTopicConfig::Overload o) {
  switch (o) {
    case ReliableTopicConfig::Overload::kDiscardOldest:
      return map::RingOverflow::kDiscardOldest;
    case ReliableTopicConfig::Overload::kDiscardNewest:
      return map::RingOverflow::kDiscardNewest;
    default:
      return map::RingOverflow::kError;  // kBlock retries on it
  }
}

}  // namespace

struct ReliableTopic::Listener {
  std::function<void(const ReliableMessage&)> callback;
  ReliableListenerOptions options;
  std::atomic<std::int64_t> next{0};  // 0 until the start sequence is known
  std::atomic<bool> stop{false};
  std::atomic<bool> running{true};
  std::mutex mu;
  std::condition_variable cv;
  std::thread thread;
};

ReliableTopic::ReliableTopic(std::string name, ReliableTopicConfig config,
                             std::shared_ptr<Invoker> invoker, std::string publisher_id,
                             std::shared_ptr<spdlog::logger> log)
    : name_(std::move(name)),
      config_(config),
      invoker_(std::move(invoker)),
      publisher_id_(std::move(publisher_id)),
      log_(std::move(log)) {}

ReliableTopic::~ReliableTopic() {
  std::vector<TopicListenerId> ids;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, l] : listeners_) ids.push_back(id);
  }
  for (auto id : ids) RemoveMessageListener(id);
}

base::Result<std::int64_t> ReliableTopic::Publish(std::string payload) {
  std::vector<std::string> one;
  one.push_back(std::move(payload));
  return PublishAll(std::move(one));
}

base::Result<std::int64_t> ReliableTopic::PublishAll(std::vector<std::string> payloads) {
  if (name_.empty()) return base::Fail(ErrorCode::kBadRequest, "a topic needs a non-empty name");
  if (payloads.empty()) return 0;
  map::MapRequest rq;
  rq.op = map::MapOp::kRingAppend;
  rq.map_name = kReliableTopicMap;
  rq.key = "ring@" + name_;
  const std::int64_t now = WallMs();
  for (auto& p : payloads) rq.keys.push_back(EncodeMessage(p, publisher_id_, now));
  rq.options.ttl_ms = config_.ttl_ms;
  rq.options.max_idle_ms = 0;
  rq.argument =
      record::GenericRecord::Build()
          .Int64("capacity", config_.capacity)
          .Int64("overflow",
                 static_cast<std::int64_t>(config_.ttl_ms == 0 ? map::RingOverflow::kDiscardOldest
                                                               : OverflowOf(config_.overload)))
          .Done();
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(config_.block_timeout_ms);
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    auto r = invoker_->InvokeSync(rq);
    if (r) return r->count < 0 ? 0 : r->count;
    if (r.error().code() != ErrorCode::kOverloaded ||
        config_.overload != ReliableTopicConfig::Overload::kBlock) {
      return std::unexpected(r.error());
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return base::Fail(ErrorCode::kTimeout,
                        "reliable topic '" + name_ + "' stayed full for " +
                            std::to_string(config_.block_timeout_ms) +
                            " ms (block policy); its listeners are behind or the capacity is "
                            "too small");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

base::Result<std::pair<std::int64_t, std::int64_t>> ReliableTopic::Range() {
  map::MapRequest rq;
  rq.op = map::MapOp::kRingRead;
  rq.map_name = kReliableTopicMap;
  rq.key = "ring@" + name_;
  rq.argument = record::GenericRecord::Build().Int64("from", 1).Int64("max", 1).Done();
  auto r = invoker_->InvokeSync(rq);
  if (!r) return std::unexpected(r.error());
  return std::make_pair(r->count, ParseRange(r->value).second);
}

base::Result<TopicListenerId> ReliableTopic::AddMessageListener(
    std::function<void(const ReliableMessage&)> callback, ReliableListenerOptions options) {
  if (options.from == ReliableListenerOptions::From::kSequence && options.sequence < 1) {
    return base::Fail(ErrorCode::kBadRequest,
                      "a reliable listener's start sequence must be at least 1 (got " +
                          std::to_string(options.sequence) + ")");
  }
  auto listener = std::make_shared<Listener>();
  listener->callback = std::move(callback);
  listener->options = options;
  if (options.from == ReliableListenerOptions::From::kSequence) {
    listener->next = options.sequence;
  } else {
    auto range = Range();  // the start is fixed now, so messages published after this return
    if (!range) return std::unexpected(range.error());
    listener->next =
        options.from == ReliableListenerOptions::From::kOldest ? range->first : range->second + 1;
  }
  std::lock_guard lock(mu_);
  TopicListenerId id = next_id_++;
  listener->thread = std::thread([this, listener] { Poll(listener); });
  listeners_.emplace_back(id, listener);
  return id;
}

bool ReliableTopic::RemoveMessageListener(TopicListenerId id) {
  std::shared_ptr<Listener> listener;
  {
    std::lock_guard lock(mu_);
    for (auto it = listeners_.begin(); it != listeners_.end(); ++it) {
      if (it->first != id) continue;
      listener = std::move(it->second);
      listeners_.erase(it);
      break;
    }
  }
  if (!listener) return false;
  {
    std::lock_guard lock(listener->mu);
    listener->stop = true;
  }
  listener->cv.notify_all();
  if (listener->thread.get_id() == std::this_thread::get_id()) {
    listener->thread.detach();  // removed from its own callback; Poll holds the listener
  } else if (listener->thread.joinable()) {
    listener->thread.join();
  }
  return true;
}

std::int64_t ReliableTopic::NextSequence(TopicListenerId id) const {
  std::lock_guard lock(mu_);
  for (const auto& [lid, l] : listeners_) {
    if (lid == id) return l->next.load();
  }
  return 0;
}

bool ReliableTopic::Running(TopicListenerId id) const {
  std::lock_guard lock(mu_);
  for (const auto& [lid, l] : listeners_) {
    if (lid == id) return l->running.load();
  }
  return false;
}

void ReliableTopic::Poll(const std::shared_ptr<Listener>& l) {
  map::MapRequest rq;
  rq.op = map::MapOp::kRingRead;
  rq.map_name = kReliableTopicMap;
  rq.key = "ring@" + name_;
  auto pause = std::chrono::milliseconds(1);
  std::string last_error;
  auto wait = [&](std::chrono::milliseconds d) {
    std::unique_lock lock(l->mu);
    l->cv.wait_for(lock, d, [&] { return l->stop.load(); });
  };
  while (!l->stop.load()) {
    const std::int64_t next = l->next.load();
    rq.argument = record::GenericRecord::Build().Int64("from", next).Int64("max", 256).Done();
    auto r = invoker_->InvokeSync(rq);
    if (!r) {  // the owner moved or died: keep our place and ask again
      if (r.error().ToString() != last_error) {
        log_->warn("reliable topic '{}': read from sequence {} failed ({}); retrying", name_, next,
                   r.error().ToString());
        last_error = r.error().ToString();
      }
      wait(std::chrono::milliseconds(50));
      continue;
    }
    last_error.clear();
    std::int64_t resume = next;
    if (r->flag) {  // messages [next, oldest) were overwritten or expired unread
      const std::int64_t lost = r->count - next;
      log_->warn("reliable topic '{}': a listener lost {} message(s) ({} to {}){}", name_, lost,
                 next, r->count - 1, l->options.loss_tolerant ? "" : "; stopping it");
      if (l->options.on_loss) l->options.on_loss(lost);
      if (!l->options.loss_tolerant) break;
      resume = r->count;
    }
    for (const auto& [seq_text, bytes] : r->entries) {
      if (l->stop.load()) break;
      std::int64_t seq = 0;
      std::from_chars(seq_text.data(), seq_text.data() + seq_text.size(), seq);
      ReliableMessage m{seq, DecodeMessage(name_, bytes)};
      try {
        l->callback(m);
      } catch (const std::exception& e) {
        log_->warn("a listener of reliable topic '{}' threw: {}; it keeps receiving", name_,
                   e.what());
      } catch (...) {
        log_->warn("a listener of reliable topic '{}' threw; it keeps receiving", name_);
      }
      resume = seq + 1;
    }
    l->next.store(resume);
    if (r->entries.empty()) {
      wait(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(20));
    } else {
      pause = std::chrono::milliseconds(1);
    }
  }
  l->running = false;
}

}  // namespace tessera::grid
