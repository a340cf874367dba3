#include "tessera/wire/message.h"

#include <utility>

namespace tessera::wire {

Message Message::MakeHello(Hello hello) {
  Message message;
  message.kind = MessageKind::kHello;
  message.hello = std::move(hello);
  return message;
}

Message Message::MakeHelloReply(HelloReply reply, std::optional<base::Error> error) {
  Message message;
  message.kind = MessageKind::kHelloReply;
  message.hello_reply = std::move(reply);
  message.error = std::move(error);
  return message;
}

Message Message::MakeRequest(std::uint64_t call_id, std::int32_t partition_id, Service service,
                             std::uint16_t op, std::string payload) {
  Message message;
  message.kind = MessageKind::kRequest;
  message.call_id = call_id;
  message.partition_id = partition_id;
  message.service = service;
  message.op = op;
  message.payload = std::move(payload);
  return message;
}

Message Message::MakeResponse(const Message& request, std::string payload) {
  Message message;
  message.kind = MessageKind::kResponse;
  message.call_id = request.call_id;
  message.partition_id = request.partition_id;
  message.service = request.service;
  message.op = request.op;
  message.payload = std::move(payload);
  message.lean = request.lean;
  return message;
}

Message Message::MakeErrorResponse(const Message& request, base::Error error) {
  Message message = MakeResponse(request, {});
  message.error = std::move(error);
  message.lean = false;  // errors always travel as Cap'n Proto frames
  return message;
}

Message Message::MakeEvent(Service service, std::uint16_t op, std::int32_t partition_id,
                           std::string payload) {
  Message message;
  message.kind = MessageKind::kEvent;
  message.service = service;
  message.op = op;
  message.partition_id = partition_id;
  message.payload = std::move(payload);
  return message;
}

std::string_view MessageKindName(MessageKind kind) {
  switch (kind) {
    case MessageKind::kHello:
      return "Hello";
    case MessageKind::kHelloReply:
      return "HelloReply";
    case MessageKind::kRequest:
      return "Request";
    case MessageKind::kResponse:
      return "Response";
    case MessageKind::kEvent:
      return "Event";
  }
  return "Unknown";
}

std::string ServiceName(Service service) {
  switch (service) {
    case Service::kNone:
      return "none";
    case Service::kMap:
      return "map";
    case Service::kTopic:
      return "topic";
    case Service::kCluster:
      return "cluster";
  }
  return "service" + std::to_string(static_cast<std::uint16_t>(service));
}

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kMember:
      return "member";
    case Role::kClient:
      return "client";
  }
  return "unknown";
}

}  // namespace tessera::wire
