// The pub/sub half of Connection: subscriptions are TopicService listeners delivered on this
// connection's shard; a message becomes a push that takes the next reply position, so it never
// overtakes a reply to an earlier command.
#include "connection.h"

namespace tessera::resp {

topic::SubscriptionId Connection::Listen(std::string_view name, bool pattern) {
  std::weak_ptr<Connection> weak = weak_from_this();
  auto listener = [weak](const topic::Message& message, std::string_view matched) {
    if (auto self = weak.lock()) self->DeliverMessage(message, matched);
  };
  const topic::ListenerOptions options{.shard = shard_};
  return pattern ? server_->topics.PatternSubscribe(std::string(name), options, listener)
                 : server_->topics.Subscribe(std::string(name), options, listener);
}

void Connection::DeliverMessage(const topic::Message& message, std::string_view pattern) {
  if (closed_) return;
  const std::size_t unread = out_.size() + writing_.size();
  if (unread + message.payload.size() > server_->options.max_subscriber_output_bytes) {
    server_->output_limit_disconnects.fetch_add(1);
    server_->log->warn(
        "client {} ({}): disconnected: {} bytes of published messages wait unread and the next "
        "would pass the subscriber output limit of {} bytes; a subscriber must read what it "
        "subscribed to",
        id_, address(), unread, server_->options.max_subscriber_output_bytes);
    Close();
    return;
  }
  const auto seq = Reserve();
  RespWriter writer(Target(seq), protocol_);
  if (pattern.empty()) {
    writer.PushHeader(3);
    writer.Bulk("message");
  } else {
    writer.PushHeader(4);
    writer.Bulk("pmessage");
    writer.Bulk(pattern);
  }
  writer.Bulk(message.topic);
  writer.Bulk(message.payload);
  Done(seq);
}

bool Connection::SubscribeChannel(std::string_view channel) {
  if (channels_.contains(channel)) return false;
  channels_.emplace(std::string(channel), Listen(channel, false));
  return true;
}

bool Connection::UnsubscribeChannel(std::string_view channel) {
  auto it = channels_.find(channel);
  if (it == channels_.end()) return false;
  server_->topics.Unsubscribe(it->second);
  channels_.erase(it);
  return true;
}

bool Connection::SubscribePattern(std::string_view pattern) {
  if (patterns_.contains(pattern)) return false;
  patterns_.emplace(std::string(pattern), Listen(pattern, true));
  return true;
}

bool Connection::UnsubscribePattern(std::string_view pattern) {
  auto it = patterns_.find(pattern);
  if (it == patterns_.end()) return false;
  server_->topics.Unsubscribe(it->second);
  patterns_.erase(it);
  return true;
}

std::vector<std::string> Connection::Channels() const {
  std::vector<std::string> names;
  for (const auto& [name, id] : channels_) names.push_back(name);
  return names;
}

std::vector<std::string> Connection::Patterns() const {
  std::vector<std::string> names;
  for (const auto& [name, id] : patterns_) names.push_back(name);
  return names;
}

}  // namespace tessera::resp
