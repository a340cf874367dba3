#include "native_handler.h"

#include <spdlog/spdlog.h>
#include <array>

#include <nlohmann/json.hpp>
#include <optional>

#include "native_protocol.h"
#include "tessera/map/map_codec.h"
#include "tessera/membership/membership_service.h"
#include "tessera/record/generic_record.h"
#include "tessera/wire/frame_codec.h"
#include "topic_protocol.h"

namespace tessera::grid {

using base::ErrorCode;
using wire::Message;

static_assert(native::kClusterMessage == membership::kClusterMessageOp);

namespace {

// A member's identity (its uuid) from its hello: members name themselves "member <uuid>"
// (Member::StartRouter); empty for anything else.
std::string MemberIdentity(const wire::Hello& hello) {
  constexpr std::string_view kMemberPrefix = "member ";
  if (!hello.client_name.starts_with(kMemberPrefix)) return {};
  return hello.client_name.substr(kMemberPrefix.size());
}

// A lean response's scratch frame keeps at most this much between responses.
constexpr std::size_t kScratchFrameBytes = 64 * 1024;

// The request's routing header without its payload, to answer after the payload moved on.
Message Header(const Message& request) {
  Message header;
  header.kind = request.kind;
  header.call_id = request.call_id;
  header.partition_id = request.partition_id;
  header.service = request.service;
  header.op = request.op;
  header.lean = request.lean;
  return header;
}

void ReplyError(const std::shared_ptr<net::Connection>& connection, const Message& request,
                ErrorCode code, std::string message) {
  connection->Send(Message::MakeErrorResponse(request, base::Error(code, std::move(message))));
}

// Runs `answer` through `off_shard` (it waits or does I/O) and replies with what it returns.
void ReplyOffShard(const std::function<void(std::function<void()>)>& off_shard,
                   const std::shared_ptr<net::Connection>& connection, const Message& request,
                   std::function<base::Result<std::string>()> answer) {
  off_shard([connection, request, answer = std::move(answer)] {
    auto done = answer();
    if (!done) return ReplyError(connection, request, done.error().code(), done.error().message());
    connection->Send(Message::MakeResponse(request, *done));
  });
}

}  // namespace

NativeHandler::NativeHandler(map::MapService& maps, topic::TopicService& topics,
                             std::size_t shard_count, ClusterHooks cluster,
                             std::shared_ptr<spdlog::logger> log)
    : maps_(maps),
      topics_(topics),
      shard_count_(std::max<std::size_t>(1, shard_count)),
      cluster_(std::move(cluster)),
      log_(std::move(log)) {}

void NativeHandler::OnRequest(const std::shared_ptr<net::Connection>& connection, Message request) {
  if (request.lean &&
      (request.service != wire::Service::kMap || request.op == native::kMapAddListener ||
       request.op == native::kMapRemoveListener || request.op == native::kMapReplica)) {
    return ReplyError(connection, request, ErrorCode::kBadRequest,
                      "a lean frame carries map get, set, put, putIfAbsent, remove, delete, "
                      "containsKey, replace, stream appends and partition transactions only; "
                      "send " +
                          wire::ServiceName(request.service) + " op " + std::to_string(request.op) +
                          " as a version 1 frame");
  }
  switch (request.service) {
    case wire::Service::kMap:
      return HandleMap(connection, std::move(request));
    case wire::Service::kCluster:
      return HandleCluster(connection, request);
    case wire::Service::kTopic:
      return HandleTopic(connection, request);
    default:
      return ReplyError(connection, request, ErrorCode::kUnsupported,
                        "service " + wire::ServiceName(request.service) +
                            " is not served by this member; upgrade the member or the client");
  }
}

void NativeHandler::BeforeFrames(const std::shared_ptr<net::Connection>& connection,
                                 std::span<const wire::Message> frames) {
  (void)connection;
  std::array<map::MapService::KeyRef, map::MapService::kMaxPrefetchKeys> keys;
  std::size_t n = 0;
  for (const Message& frame : frames) {
    if (n == keys.size()) break;
    if (!frame.lean || frame.kind != wire::MessageKind::kRequest ||
        frame.service != wire::Service::kMap) {
      continue;
    }
    if (auto key = map::PeekLeanKey(frame.payload)) keys[n++] = {key->map_name, key->key};
  }
  maps_.PrefetchKeys(std::span(keys.data(), n));
}

void NativeHandler::HandleMap(const std::shared_ptr<net::Connection>& connection, Message request) {
  if (request.op == native::kMapAddListener) return AddListener(connection, request);
  if (request.op == native::kMapRemoveListener) return RemoveListener(connection, request);
  if (request.op == native::kMapReplica) return ApplyReplica(connection, request);
  // A lean request is decoded into this thread's reused request (its strings keep their
  // capacity from one request to the next, up to kKeptBytes of value and of entries), unless one is
  // being handled on this thread already; a Cap'n Proto one into its own.
  static thread_local map::MapRequest reused;
  static thread_local bool reused_busy = false;
  std::optional<map::MapRequest> owned;
  map::MapRequest* decoded = nullptr;
  struct Release {
    bool* busy = nullptr;
    ~Release() {
      if (busy == nullptr) return;
      *busy = false;
      // A large value, or a batch's large events, are not kept.
      constexpr std::size_t kKeptBytes = 64 << 10;
      if (reused.value.capacity() > kKeptBytes) std::string().swap(reused.value);
      std::size_t kept = 0;
      for (const auto& [key, value] : reused.entries) kept += key.capacity() + value.capacity();
      for (const auto& id : reused.keys) kept += id.capacity();
      if (kept > kKeptBytes) {
        decltype(reused.entries)().swap(reused.entries);
        decltype(reused.keys)().swap(reused.keys);
      }
      // Nor a large batch's operations (each a whole MapRequest).
      if (reused.transaction.capacity() > 16)
        decltype(reused.transaction)().swap(reused.transaction);
    }
  } release;
  if (request.lean && !reused_busy) {
    reused_busy = true;
    release.busy = &reused_busy;
    decoded = &reused;
    if (auto ok = map::DecodeLeanRequestInto(request.payload, reused); !ok) {
      return ReplyError(connection, request, ok.error().code(), ok.error().message());
    }
  } else {
    auto r = request.lean ? map::DecodeLeanRequest(request.payload)
                          : map::DecodeRequest(request.payload);
    if (!r) return ReplyError(connection, request, r.error().code(), r.error().message());
    decoded = &owned.emplace(std::move(*r));
  }
  // What a lean payload may carry depends on the version the connection agreed (grid-node
  // --max-protocol is then a switch that holds even for a client sending more than agreed).
  if (request.lean) {
    const std::uint32_t version = connection->protocol_version();
    const std::uint32_t needed = decoded->op == map::MapOp::kTransact ? wire::kLeanTxProtocolVersion
                                 : decoded->op == map::MapOp::kStreamAppend
                                     ? wire::kLeanEntriesProtocolVersion
                                     : wire::kLeanProtocolVersion;
    if (version < needed) {
      return ReplyError(connection, request, ErrorCode::kBadRequest,
                        "a lean " + std::string(map::MapOpName(decoded->op)) +
                            " needs protocol version " + std::to_string(needed) +
                            " and this connection agreed on version " + std::to_string(version) +
                            "; send it as a Cap'n Proto frame");
    }
  }
  if (static_cast<std::uint16_t>(decoded->op) != request.op) {
    return ReplyError(
        connection, request, ErrorCode::kBadRequest,
        "frame op " + std::to_string(request.op) + " does not match the encoded map operation");
  }
  // A member forwards only to the owner it knows; we run it here or say we are not the owner.
  const wire::Hello* hello = connection->peer_hello();
  decoded->local_only = hello != nullptr && hello->role == wire::Role::kMember;
  if (decoded->local_only) {
    const std::string sender = MemberIdentity(*hello);
    if (!maps_.ListsMember(sender)) {
      return ReplyError(connection, request, ErrorCode::kNotOwner,
                        "member " + sender +
                            " is not in this member's cluster view (one of us restarted or was "
                            "cut off); it retries with the current partition table");
    }
  }
  auto reply = [connection](const Message& header, const base::Result<map::MapResult>& result) {
    if (!result) {
      connection->Send(Message::MakeErrorResponse(header, result.error()));
      return;
    }
    if (header.lean) {  // a lean answer when it fits one, built in a scratch frame
      // (this shard thread's; the connection copies it into its write buffer)
      thread_local std::string frame;
      Message response_header = Message::MakeResponse(header, {});
      if (map::EncodeLeanResultInto(frame, *result, wire::kLeanFramePrefixBytes) &&
          wire::SealLeanFrame(response_header, frame)) {
        connection->SendFrameCopy(frame);
        if (frame.capacity() > kScratchFrameBytes) std::string().swap(frame);
        return;
      }
    }
    Message response = Message::MakeResponse(header, map::EncodeResult(*result));
    response.lean = false;  // a Cap'n Proto result travels in a Cap'n Proto frame
    connection->Send(response);
  };
  // Requests are read on a shard thread: a key this shard owns runs now, without a callback.
  if (auto local = maps_.ExecuteIfLocal(*decoded)) return reply(request, *local);
  Message header = Header(request);
  maps_.Execute(std::move(*decoded),
                [reply, header = std::move(header)](base::Result<map::MapResult> result) {
                  reply(header, result);
                });
}

void NativeHandler::ApplyReplica(const std::shared_ptr<net::Connection>& connection,
                                 const Message& request) {
  const wire::Hello* hello = connection->peer_hello();
  if (!hello || hello->role != wire::Role::kMember) {
    return ReplyError(connection, request, ErrorCode::kBadRequest,
                      "replica updates are accepted only from members; connect with the member "
                      "role");
  }
  auto updates = map::DecodeReplicaUpdates(request.payload);
  if (!updates) {
    return ReplyError(connection, request, updates.error().code(), updates.error().message());
  }
  const std::string sender = MemberIdentity(*hello);
  maps_.ApplyReplica(
      std::move(*updates),
      [connection, header = Header(request)](base::Result<map::ReplicaAck> stale) {
        if (!stale) {
          connection->Send(Message::MakeErrorResponse(header, stale.error()));
          return;
        }
        connection->Send(Message::MakeResponse(header, map::EncodeReplicaAck(*stale)));
      },
      sender);
}

void NativeHandler::AddListener(const std::shared_ptr<net::Connection>& connection,
                                const Message& request) {
  auto args = record::GenericRecord::Decode(request.payload);
  if (!args) return ReplyError(connection, request, ErrorCode::kBadRequest, args.error().message());
  auto map_name = args->GetString("map");
  auto options_record = args->Find("options");
  if (!map_name || !options_record || options_record->type() != record::FieldType::kBytes) {
    return ReplyError(connection, request, ErrorCode::kBadRequest,
                      "add-listener needs {map: string, options: bytes}");
  }
  auto options = map::DecodeListenerOptions(options_record->AsBytes().data);
  if (!options)
    return ReplyError(connection, request, options.error().code(), options.error().message());
  std::weak_ptr<net::Connection> weak = connection;
  auto id_holder = std::make_shared<std::atomic<map::ListenerId>>(0);
  map::ListenerId id = maps_.AddEntryListener(
      *map_name, std::move(*options), [weak, id_holder](const map::EntryEvent& event) {
        auto conn = weak.lock();
        if (!conn) return;
        std::string payload = record::GenericRecord::Build()
                                  .Int64("listener", static_cast<std::int64_t>(id_holder->load()))
                                  .BytesField("event", map::EncodeEvent(event))
                                  .Done()
                                  .Encode();
        conn->Send(Message::MakeEvent(wire::Service::kMap, native::kMapEntryEvent,
                                      static_cast<std::int32_t>(event.partition_id),
                                      std::move(payload)));
      });
  id_holder->store(id);
  {
    std::lock_guard lock(mu_);
    listeners_[connection->id()].push_back(id);
  }
  log_->debug("connection {} ({}) listens to map '{}' as listener {}", connection->id(),
              connection->remote_address(), *map_name, id);
  connection->Send(Message::MakeResponse(
      request,
      record::GenericRecord::Build().Int64("id", static_cast<std::int64_t>(id)).Done().Encode()));
}

void NativeHandler::RemoveListener(const std::shared_ptr<net::Connection>& connection,
                                   const Message& request) {
  auto args = record::GenericRecord::Decode(request.payload);
  auto id = args ? args->GetInt64("id") : base::Result<std::int64_t>(std::unexpected(args.error()));
  if (!id)
    return ReplyError(connection, request, ErrorCode::kBadRequest,
                      "remove-listener needs {id: int64}: " + id.error().message());
  bool owned = false;
  {
    std::lock_guard lock(mu_);
    auto& ids = listeners_[connection->id()];
    auto it = std::find(ids.begin(), ids.end(), static_cast<map::ListenerId>(*id));
    if (it != ids.end()) {
      ids.erase(it);
      owned = true;
    }
  }
  // A connection may remove only its own listeners.
  bool removed = owned && maps_.RemoveEntryListener(static_cast<map::ListenerId>(*id));
  connection->Send(Message::MakeResponse(
      request, record::GenericRecord::Build().Bool("removed", removed).Done().Encode()));
}

void NativeHandler::HandleCluster(const std::shared_ptr<net::Connection>& connection,
                                  const Message& request) {
  switch (request.op) {
    case native::kClusterPing:
      connection->Send(Message::MakeResponse(request, "pong"));
      return;
    case native::kClusterInfo:
      connection->Send(Message::MakeResponse(request, cluster_.info()));
      return;
    case native::kClusterMetrics:
      if (!cluster_.metrics || !cluster_.off_shard) break;
      cluster_.off_shard([connection, request, metrics = cluster_.metrics] {
        connection->Send(Message::MakeResponse(request, metrics()));
      });
      return;
    case native::kClusterView:
      if (!cluster_.view) break;
      connection->Send(Message::MakeResponse(request, cluster_.view()));
      return;
    case native::kClusterViewSubscribe: {
      if (!cluster_.view) break;
      {
        // Subscribed before the answer is taken: a change meanwhile is pushed, never lost.
        std::lock_guard lock(mu_);
        view_subscribers_[connection->id()] = connection;
      }
      connection->Send(Message::MakeResponse(request, cluster_.view()));
      return;
    }
    case native::kClusterFault:
      if (!cluster_.fault) {
        return ReplyError(connection, request, ErrorCode::kUnsupported,
                          "fault injection is off on this member; start it with "
                          "--fault-injection true (for tests and chaos runs only)");
      }
      connection->Send(Message::MakeResponse(request, cluster_.fault(request.payload)));
      return;
    case native::kClusterRecoveryForce:
      if (!cluster_.recovery_force || !cluster_.off_shard) {
        return ReplyError(connection, request, ErrorCode::kBadRequest,
                          "this member is not in a cluster: there is no recovery to force");
      }
      return ReplyOffShard(cluster_.off_shard, connection, request, cluster_.recovery_force);
    case native::kClusterBackup:
      if (!cluster_.backup || !cluster_.off_shard) {
        return ReplyError(connection, request, ErrorCode::kBadRequest,
                          "this member has no data directory (--data-dir): nothing to back up");
      }
      return ReplyOffShard(
          cluster_.off_shard, connection, request,
          [backup = cluster_.backup, payload = request.payload] { return backup(payload); });
    case native::kClusterMessage: {
      if (!cluster_.message) break;
      const wire::Hello* hello = connection->peer_hello();
      if (!hello || hello->role != wire::Role::kMember) {
        return ReplyError(connection, request, ErrorCode::kBadRequest,
                          "cluster messages are accepted only from members; connect with the "
                          "member role");
      }
      cluster_.message(request.payload);
      connection->Send(Message::MakeResponse(request, ""));
      return;
    }
    default:
      break;
  }
  ReplyError(connection, request, ErrorCode::kUnsupported,
             "cluster op " + std::to_string(request.op) +
                 " is not served by this member; upgrade the member or the client");
}

void NativeHandler::HandleTopic(const std::shared_ptr<net::Connection>& connection,
                                const Message& request) {
  const wire::Hello* hello = connection->peer_hello();
  const bool from_member = hello != nullptr && hello->role == wire::Role::kMember;
  switch (request.op) {
    case native::kTopicPublish:
    case native::kTopicDeliver: {
      if (request.op == native::kTopicDeliver && !from_member) {
        return ReplyError(connection, request, ErrorCode::kBadRequest,
                          "topic deliveries are accepted only from members; publish instead");
      }
      auto batch = DecodeTopicBatch(request.payload);
      if (!batch) {
        return ReplyError(connection, request, batch.error().code(), batch.error().message());
      }
      if (batch->topic.empty()) {
        return ReplyError(connection, request, ErrorCode::kBadRequest,
                          "a topic needs a non-empty name");
      }
      if (batch->publisher.empty()) batch->publisher = "connection:" + connection->remote_address();
      for (auto& payload : batch->payloads) {
        topic::Message m{batch->topic, std::move(payload), batch->publisher, 0, batch->time_ms};
        if (request.op == native::kTopicPublish) {
          topics_.Publish(std::move(m));  // here and on every other member
        } else {
          topics_.PublishLocal(std::move(m));
        }
      }
      connection->Send(Message::MakeResponse(request, ""));
      return;
    }
    case native::kTopicSubscribe: {
      auto args = record::GenericRecord::Decode(request.payload);
      auto name = args ? args->GetString("topic")
                       : base::Result<std::string>(std::unexpected(args.error()));
      if (!name || name->empty()) {
        return ReplyError(connection, request, ErrorCode::kBadRequest,
                          "topic subscribe needs {topic: non-empty string}");
      }
      std::weak_ptr<net::Connection> weak = connection;
      auto id_holder = std::make_shared<std::atomic<topic::SubscriptionId>>(0);
      topic::ListenerOptions options;
      options.shard = connection->id() % shard_count_;
      options.max_pending = 10'000;
      auto id = topics_.Subscribe(
          *name, options, [weak, id_holder](const topic::Message& m, std::string_view) {
            if (auto conn = weak.lock()) {
              conn->Send(Message::MakeEvent(
                  wire::Service::kTopic, native::kTopicEvent, -1,
                  EncodeTopicEvent(static_cast<std::int64_t>(id_holder->load()), m)));
            }
          });
      id_holder->store(id);
      {
        std::lock_guard lock(mu_);
        topic_listeners_[connection->id()].push_back(id);
      }
      connection->Send(
          Message::MakeResponse(request, record::GenericRecord::Build()
                                             .Int64("id", static_cast<std::int64_t>(id))
                                             .Done()
                                             .Encode()));
      return;
    }
    case native::kTopicUnsubscribe: {
      auto args = record::GenericRecord::Decode(request.payload);
      auto id =
          args ? args->GetInt64("id") : base::Result<std::int64_t>(std::unexpected(args.error()));
      if (!id) {
        return ReplyError(connection, request, ErrorCode::kBadRequest,
                          "topic unsubscribe needs {id: int64}");
      }
      bool owned = false;
      {
        std::lock_guard lock(mu_);
        auto& ids = topic_listeners_[connection->id()];
        auto it = std::find(ids.begin(), ids.end(), static_cast<topic::SubscriptionId>(*id));
        if (it != ids.end()) {
          ids.erase(it);
          owned = true;
        }
      }
      bool removed = owned && topics_.Unsubscribe(static_cast<topic::SubscriptionId>(*id));
      connection->Send(Message::MakeResponse(
          request, record::GenericRecord::Build().Bool("removed", removed).Done().Encode()));
      return;
    }
    case native::kTopicStats: {
      nlohmann::json doc;
      doc["topics"] = nlohmann::json::object();
      for (const auto& [name, s] : topics_.StatsByTopic()) {
        doc["topics"][name] = {{"published", s.published},
                               {"delivered", s.delivered},
                               {"dropped", s.dropped},
                               {"listener_errors", s.listener_errors},
                               {"listeners", s.subscriptions}};
      }
      connection->Send(Message::MakeResponse(request, doc.dump()));
      return;
    }
    default:
      break;
  }
  ReplyError(connection, request, ErrorCode::kUnsupported,
             "topic op " + std::to_string(request.op) +
                 " is not served by this member; upgrade the member or the client");
}

void NativeHandler::PublishView(const std::string& encoded_view) {
  std::vector<std::shared_ptr<net::Connection>> to;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, weak] : view_subscribers_) {
      if (auto conn = weak.lock()) to.push_back(std::move(conn));
    }
  }
  for (auto& conn : to) {
    conn->Send(
        Message::MakeEvent(wire::Service::kCluster, native::kClusterViewEvent, -1, encoded_view));
  }
}

void NativeHandler::OnClosed(const std::shared_ptr<net::Connection>& connection) {
  std::vector<map::ListenerId> ids;
  std::vector<topic::SubscriptionId> topic_ids;
  {
    std::lock_guard lock(mu_);
    view_subscribers_.erase(connection->id());
    if (auto t = topic_listeners_.find(connection->id()); t != topic_listeners_.end()) {
      topic_ids = std::move(t->second);
      topic_listeners_.erase(t);
    }
  }
  for (auto id : topic_ids) topics_.Unsubscribe(id);
  {
    std::lock_guard lock(mu_);
    auto it = listeners_.find(connection->id());
    if (it == listeners_.end()) return;
    ids = std::move(it->second);
    listeners_.erase(it);
  }
  for (auto id : ids) maps_.RemoveEntryListener(id);
  if (!ids.empty()) {
    log_->debug("connection {} closed; removed its {} listener(s)", connection->id(), ids.size());
  }
}

}  // namespace tessera::grid
