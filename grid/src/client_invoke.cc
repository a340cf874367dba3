// Map calls. A keyed call goes straight to its partition's owner over that member's
// connection; anything else over the control connection. Retries within the call's timeout: a
// call never sent (kConnectionFailed), one no member took (kNotOwner), and a read whose
// connection was lost (kMemberLeft; reading twice is harmless). A write whose connection was
// lost is reported as kMemberLeft: it may or may not have been applied.
#include <time.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "client_impl.h"
#include "tessera/map/map_codec.h"
#include "tessera/wire/frame_codec.h"

namespace tessera::grid {

using base::ErrorCode;
using Clock = Client::Impl::Clock;
template <typename T>
using Result = base::Result<T>;

namespace {

// An asynchronous call's deadline, `timeout` from now, read from the coarse monotonic clock
// (cheaper to read than steady_clock::now(); clock reads, this one among them, showed in
// grid-bench's CPU profile). That clock is steady_clock's (CLOCK_MONOTONIC) as of the last
// tick, behind it by at most its resolution, which is added: a call never fails before its
// timeout, and at most the resolution (4 ms at 250 Hz) later than it would with the precise
// clock.
Clock::time_point DeadlineAfter(std::chrono::milliseconds timeout) {
  static const std::chrono::nanoseconds resolution = [] {
    timespec res{};
    clock_getres(CLOCK_MONOTONIC_COARSE, &res);
    return std::chrono::seconds(res.tv_sec) + std::chrono::nanoseconds(res.tv_nsec);
  }();
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(
             std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec) +
             resolution)) +
         timeout;
}

}  // namespace

Result<Client::Impl::Routed> Client::Impl::Target(map::MapOp op, std::string_view key,
                                                  Clock::time_point deadline) {
  Routed routed;
  if (map::MapOpIsKeyed(op)) {
    std::lock_guard lock(mu);
    if (partitioner) {
      const std::uint32_t partition = partitioner->PartitionOf(key);
      routed.partition = static_cast<std::int32_t>(partition);
      if (owner_connections_version != routing_version) RebuildOwnerConnections();
      if (partition < owner_index.size() && owner_index[partition] != kNoOwner) {
        const auto& conn = owner_connections[owner_index[partition]];
        if (conn->is_open()) {
          routed.conn = conn;
          return routed;
        }
      }
    }
  }
  auto conn = Current(deadline);
  if (!conn) return std::unexpected(conn.error());
  routed.conn = std::move(*conn);
  return routed;
}

void Client::Impl::RebuildOwnerConnections() {
  owner_connections.clear();
  std::map<std::string_view, std::uint16_t> index_of;  // by member address
  for (const auto& [address, peer] : peers) {
    if (!peer.conn || owner_connections.size() == kNoOwner) continue;
    index_of.emplace(address, static_cast<std::uint16_t>(owner_connections.size()));
    owner_connections.push_back(peer.conn);
  }
  owner_index.assign(owner_of.size(), kNoOwner);
  for (std::size_t p = 0; p < owner_of.size(); ++p) {
    if (auto it = index_of.find(owner_of[p]); it != index_of.end()) owner_index[p] = it->second;
  }
  owner_connections_version = routing_version;
}

wire::Message Client::Impl::Encode(const map::MapRequest& request, std::int32_t partition,
                                   std::uint32_t protocol_version) {
  if (map::LeanEncodable(request, protocol_version)) {
    auto message = wire::Message::MakeRequest(0, partition, wire::Service::kMap,
                                              static_cast<std::uint16_t>(request.op),
                                              map::EncodeLeanRequest(request));
    message.lean = true;
    return message;
  }
  return wire::Message::MakeRequest(0, partition, wire::Service::kMap,
                                    static_cast<std::uint16_t>(request.op),
                                    map::EncodeRequest(request));
}

Result<map::MapResult> Client::Impl::Decode(Result<wire::Message>&& response) {
  if (!response) return std::unexpected(response.error());
  return response->lean ? map::DecodeLeanResult(std::move(response->payload))
                        : map::DecodeResult(response->payload);
}

bool Client::Impl::Retryable(const base::Error& error, const map::MapRequest& request) const {
  const auto code = error.code();
  // A transaction with an id is applied once however often it is sent (map_service_tx.cc).
  // So is a stream append whose every event has an id (map_ops_stream.cc).
  const bool idempotent =
      map::SpecOf(request.op).retryable ||
      (request.op == map::MapOp::kTransact && !request.transaction_id.empty()) ||
      (request.op == map::MapOp::kStreamAppend && !request.keys.empty() &&
       request.argument.GetInt64("dedup_ms").value_or(0) > 0 &&
       std::none_of(request.keys.begin(), request.keys.end(),
                    [](const std::string& id) { return id.empty(); }));
  // kRecovering: the cluster has no partition table yet, nothing was applied.
  return code == ErrorCode::kConnectionFailed || code == ErrorCode::kNotOwner ||
         (code == ErrorCode::kRecovering && options.retry_recovering) ||
         (code == ErrorCode::kMemberLeft && idempotent);
}

std::chrono::milliseconds Client::Impl::Remaining(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

void Client::Impl::Invoke(map::MapRequest request, Callback done) {
  InvokeShared(std::make_shared<const map::MapRequest>(std::move(request)), std::move(done));
}

void Client::Impl::InvokeShared(std::shared_ptr<const map::MapRequest> request, Callback done) {
  InvokeUntil(std::move(request), DeadlineAfter(options.call_timeout), std::move(done));
}

void Client::Impl::InvokeUntil(std::shared_ptr<const map::MapRequest> request,
                               Clock::time_point deadline, Callback done) {
  auto target = Target(*request, deadline);
  std::weak_ptr<Impl> weak = weak_from_this();
  if (!target) {
    const auto& error = target.error();
    // A retry on the I/O thread does not wait for the reconnect loop: it polls.
    if (error.code() == ErrorCode::kConnectionFailed && Clock::now() < deadline &&
        io.get_executor().running_in_this_thread()) {
      return RetryAfter(std::chrono::milliseconds(50),
                        [weak, request, deadline, done = std::move(done)]() mutable {
                          RetryOrShutDown(weak, request, deadline, std::move(done));
                        });
    }
    boost::asio::post(io, [done = std::move(done), e = error] { done(std::unexpected(e)); });
    return;
  }
  auto on_reply = [weak, request, deadline,
                   done = std::move(done)](Result<wire::Message>&& r) mutable {
    auto result = Decode(std::move(r));
    auto self = weak.lock();
    if (result || !self || Clock::now() >= deadline || !self->Retryable(result.error(), *request)) {
      return done(std::move(result));
    }
    self->log->debug("retrying {} after: {}", map::MapOpName(request->op),
                     result.error().message());
    self->RetryAfter(std::chrono::milliseconds(20),
                     [weak, request, deadline, done = std::move(done)]() mutable {
                       RetryOrShutDown(weak, request, deadline, std::move(done));
                     });
  };
  if (map::LeanEncodable(*request, target->conn->protocol_version())) {
    // Encoded straight into its frame (Encode's lean message would be copied into one).
    std::string frame = map::EncodeLeanRequest(*request, wire::kLeanFramePrefixBytes);
    target->conn->CallLean(wire::Message::MakeRequest(0, target->partition, wire::Service::kMap,
                                                      static_cast<std::uint16_t>(request->op), {}),
                           std::move(frame), deadline, options.call_timeout, std::move(on_reply));
    return;
  }
  target->conn->Call(Encode(*request, target->partition, target->conn->protocol_version()),
                     deadline, options.call_timeout, std::move(on_reply));
}

namespace {

// InvokeKeyed's scratch frame keeps at most this much between calls.
constexpr std::size_t kScratchFrameBytes = 64 * 1024;

// The answer to a lean keyed call (InvokeKeyed): the result to the caller, or, when it is
// retryable within the deadline, the request decoded from the body kept for it, sent again
// the way any call is. A struct rather than a lambda so that it stays within the connection
// callback's inline room (no allocation for it).
struct KeyedReply {
  std::weak_ptr<Client::Impl> weak;
  Clock::time_point deadline;
  std::unique_ptr<char[]> body;  // the lean request, without its frame's header
  std::uint32_t body_size = 0;
  Invoker::Callback done;

  void operator()(Result<wire::Message>&& reply) {
    auto result = Client::Impl::Decode(std::move(reply));
    auto self = weak.lock();
    if (result || !self || Clock::now() >= deadline) return done(std::move(result));
    auto request = map::DecodeLeanRequest(std::string_view(body.get(), body_size));
    if (!request || !self->Retryable(result.error(), *request)) {
      return done(std::move(result));
    }
    self->log->debug("retrying {} after: {}", map::MapOpName(request->op),
                     result.error().message());
    auto shared = std::make_shared<const map::MapRequest>(std::move(*request));
    self->RetryAfter(std::chrono::milliseconds(20),
                     [weak = weak, shared, deadline = deadline, done = std::move(done)]() mutable {
                       Client::Impl::RetryOrShutDown(weak, shared, deadline, std::move(done));
                     });
  }
};

static_assert(sizeof(KeyedReply) <= 128, "KeyedReply must fit CallCallback's inline room");

}  // namespace

void Client::Impl::InvokeKeyed(map::MapOp op, const std::string& map_name, std::string_view key,
                               std::string_view value, const map::WriteOptions& write_options,
                               Callback done) {
  const auto deadline = DeadlineAfter(options.call_timeout);
  auto target = Target(op, key, deadline);
  if (!target || !target->conn->lean()) {  // through a MapRequest, as any call
    return Invoker::InvokeKeyed(op, map_name, key, value, write_options, std::move(done));
  }
  // Built in this thread's scratch frame, which the connection copies into its write buffer
  // (on the io thread, where completions issue the next call: no allocation for the frame).
  thread_local std::string frame;
  map::EncodeLeanKeyedInto(frame, op, map_name, key, value, write_options,
                           wire::kLeanFramePrefixBytes);
  const std::size_t body_size = frame.size() - wire::kLeanFramePrefixBytes;
  KeyedReply reply{weak_from_this(), deadline, std::make_unique_for_overwrite<char[]>(body_size),
                   static_cast<std::uint32_t>(body_size), std::move(done)};
  std::memcpy(reply.body.get(), frame.data() + wire::kLeanFramePrefixBytes, body_size);
  target->conn->CallLeanCopy(wire::Message::MakeRequest(0, target->partition, wire::Service::kMap,
                                                        static_cast<std::uint16_t>(op), {}),
                             frame, deadline, options.call_timeout, std::move(reply));
  if (frame.capacity() > kScratchFrameBytes) std::string().swap(frame);  // not a big value's
}

void Client::Impl::RetryOrShutDown(const std::weak_ptr<Impl>& weak,
                                   const std::shared_ptr<const map::MapRequest>& request,
                                   Clock::time_point deadline, Callback done) {
  if (auto again = weak.lock()) return again->InvokeUntil(request, deadline, std::move(done));
  // The client is gone but its loop (shared) runs on: the call still gets its one answer.
  done(base::Fail(ErrorCode::kShuttingDown,
                  std::string(map::MapOpName(request->op)) +
                      ": the client was shut down before the call's retry"));
}

void Client::Impl::RetryAfter(std::chrono::milliseconds delay, RetryFn fn) {
  auto timer = std::make_shared<boost::asio::steady_timer>(io, delay);
  timer->async_wait([timer, fn = std::move(fn)](const boost::system::error_code& ec) {
    if (!ec) fn();
  });
}

Result<map::MapResult> Client::Impl::InvokeSync(map::MapRequest request) {
  return InvokeSyncKept(request);
}

Result<map::MapResult> Client::Impl::InvokeSyncKept(const map::MapRequest& request) {
  auto deadline = Clock::now() + options.call_timeout;
  for (;;) {
    auto target = Target(request, deadline);
    if (!target) return std::unexpected(target.error());
    auto result = Decode(target->conn->CallSync(
        Encode(request, target->partition, target->conn->protocol_version()), Remaining(deadline)));
    if (result || Clock::now() >= deadline || !Retryable(result.error(), request)) {
      return result;
    }
    log->debug("retrying {} after: {}", map::MapOpName(request.op), result.error().message());
    if (result.error().code() == ErrorCode::kNotOwner ||
        result.error().code() == ErrorCode::kRecovering) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

}  // namespace tessera::grid
