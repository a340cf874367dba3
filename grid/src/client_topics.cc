// Topics over the control connection: its member delivers a publish to every member, and
// receives every message for the listeners registered on it; after a reconnect the listeners
// are subscribed again on the new control connection.
#include "client_impl.h"
#include "native_protocol.h"
#include "tessera/record/generic_record.h"
#include "topic_protocol.h"

namespace tessera::grid {

using base::ErrorCode;
using Clock = Client::Impl::Clock;
template <typename T>
using Result = base::Result<T>;

wire::Message Client::Impl::TopicRequest(std::uint16_t op, std::string payload) {
  return wire::Message::MakeRequest(0, -1, wire::Service::kTopic, op, std::move(payload));
}

Result<void> Client::Impl::Publish(const std::string& topic, std::vector<std::string> payloads) {
  auto message = TopicRequest(native::kTopicPublish,
                              EncodeTopicBatch({topic, std::move(payloads), publisher_id, 0}));
  auto deadline = Clock::now() + options.call_timeout;
  for (;;) {
    auto conn = Current(deadline);
    if (!conn) return std::unexpected(conn.error());
    auto reply = (*conn)->CallSync(message, Remaining(deadline));
    if (reply) return {};
    // Never sent: safe to send again. Anything else may have been published.
    if (reply.error().code() != ErrorCode::kConnectionFailed || Clock::now() >= deadline) {
      return std::unexpected(reply.error());
    }
  }
}

Result<TopicListenerId> Client::Impl::AddListener(const std::string& topic,
                                                  TopicListener listener) {
  auto queue =
      std::make_shared<ListenerQueue>(topic, std::move(listener), kListenerQueueCapacity, log);
  auto conn = Current(Clock::now() + options.call_timeout);
  if (!conn) return std::unexpected(conn.error());
  auto server_id = ServerIdOf((*conn)->CallSync(
      TopicRequest(native::kTopicSubscribe,
                   record::GenericRecord::Build().String("topic", topic).Done().Encode()),
      options.call_timeout));
  if (!server_id) return std::unexpected(server_id.error());
  std::lock_guard lock(mu);
  TopicListenerId id = next_topic_listener_id++;
  topic_listeners.emplace(id, TopicListenerEntry{topic, std::move(queue), *server_id});
  return id;
}

Result<bool> Client::Impl::RemoveListener(TopicListenerId id) {
  std::int64_t server_id = 0;
  std::shared_ptr<ListenerQueue> queue;  // stops its thread when this returns
  {
    std::lock_guard lock(mu);
    auto it = topic_listeners.find(id);
    if (it == topic_listeners.end()) return false;
    server_id = it->second.server_id;
    queue = std::move(it->second.queue);
    topic_listeners.erase(it);
  }
  if (server_id == 0) return true;
  auto conn = Current(Clock::now() + options.call_timeout);
  if (!conn) return true;  // the member dropped it with the connection
  auto r = (*conn)->CallSync(
      TopicRequest(native::kTopicUnsubscribe,
                   record::GenericRecord::Build().Int64("id", server_id).Done().Encode()),
      options.call_timeout);
  if (!r && r.error().code() != ErrorCode::kMemberLeft) return std::unexpected(r.error());
  return true;
}

std::int64_t Client::Impl::Dropped(TopicListenerId id) const {
  std::lock_guard lock(mu);
  auto it = topic_listeners.find(id);
  return it == topic_listeners.end() ? 0 : it->second.queue->dropped();
}

std::int64_t Client::Impl::ListenerErrors(TopicListenerId id) const {
  std::lock_guard lock(mu);
  auto it = topic_listeners.find(id);
  return it == topic_listeners.end() ? 0 : it->second.queue->errors();
}

void Client::Impl::RegisterTopicListeners(const std::shared_ptr<net::ClientConnection>& conn) {
  std::vector<std::pair<TopicListenerId, std::string>> pending;
  {
    std::lock_guard lock(mu);
    for (auto& [id, entry] : topic_listeners) {
      entry.server_id = 0;
      pending.emplace_back(id, entry.topic);
    }
  }
  if (pending.empty()) return;
  log->info("re-registering {} topic listener(s) on {}", pending.size(), conn->address());
  std::weak_ptr<Impl> weak = weak_from_this();
  for (auto& [id, topic] : pending) {
    conn->Call(TopicRequest(native::kTopicSubscribe,
                            record::GenericRecord::Build().String("topic", topic).Done().Encode()),
               options.call_timeout, [weak, conn, id = id](Result<wire::Message> r) {
                 auto self = weak.lock();
                 if (!self) return;
                 auto server_id = ServerIdOf(std::move(r));
                 if (!server_id) {
                   self->log->warn("could not re-register topic listener {}: {}", id,
                                   server_id.error().message());
                   return;
                 }
                 std::lock_guard lock(self->mu);
                 auto it = self->topic_listeners.find(id);
                 if (it != self->topic_listeners.end() && self->connection == conn) {
                   it->second.server_id = *server_id;
                 }
               });
  }
}

void Client::Impl::OnTopicEvent(const std::string& payload) {
  auto event = DecodeTopicEvent(payload);
  if (!event) {
    log->warn("dropping an undecodable topic message: {}", event.error().message());
    return;
  }
  std::shared_ptr<ListenerQueue> queue;
  {
    std::lock_guard lock(mu);
    for (auto& [id, entry] : topic_listeners) {
      if (entry.server_id == event->first) queue = entry.queue;
    }
  }
  if (queue) queue->Push(std::move(event->second));
}

}  // namespace tessera::grid
