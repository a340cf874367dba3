#pragma once
// ClientConnection: the connecting side of the native protocol (clients, and members calling
// other members). Connects with a timeout, performs the Hello, then carries many calls in
// flight at once (pipelining): each Call gets a fresh call id, its own timeout, and exactly one
// callback with the matching Response. Writes are batched by the underlying Connection.
//
// Thread-safety: Call, CallSync, Close and the accessors are safe from any thread. Callbacks
// (call results, on_event, on_closed) run on the io_context's thread, never inline in Call.
// Lifetime: dropping the last reference closes the socket; calls still pending then fail with
// MemberLeft (posted to the io_context, which must outlive the connection), as they do when
// the connection closes: a call that was sent may have been applied.

#include <utility>  // before Asio's awaitable header (Boost 1.74)

#include <spdlog/logger.h>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/base/unique_function.h"
#include "tessera/net/call_table.h"
#include "tessera/net/connection.h"
#include "tessera/wire/message.h"

namespace tessera::net {

struct ClientOptions {
  std::string host = "127.0.0.1";  // numeric address ("localhost" = 127.0.0.1)
  std::uint16_t port = 5701;
  // Bounds the TCP connect and the Hello exchange together.
  std::chrono::milliseconds connect_timeout{5000};
  // Sent as the first frame; protocol_version defaults to wire::kProtocolVersion.
  wire::Hello hello;
  std::size_t max_frame_bytes = wire::kDefaultMaxFrameBytes;
  // Names an operation in errors, e.g. "map.put". Default: "<service>.op<N>".
  std::function<std::string(wire::Service service, std::uint16_t op)> operation_name;
  // Event frames pushed by the member.
  std::function<void(wire::Message event)> on_event;
  // The established connection closed (lost, or Close()); called once, after every pending
  // call has failed. kMemberLeft when the peer went away, kConnectionFailed after Close().
  std::function<void(const base::Error& reason)> on_closed;
};

class ClientConnection : public std::enable_shared_from_this<ClientConnection> {
 public:
  // Move-only, with room inside for a callback that captures two shared pointers, a deadline
  // and another (64-byte) callback, the client's retry state: no allocation per call for it.
  using CallCallback = base::UniqueFunction<void(base::Result<wire::Message>), 128>;
  using ConnectCallback = std::function<void(base::Result<std::shared_ptr<ClientConnection>>)>;

  // Connects to options.host:options.port on `io` and performs the Hello; `done` runs once on
  // io's thread. Errors: kBadRequest (unparsable host); kConnectionFailed (refused, timed out,
  // closed during the hello); the member's rejection as sent (kAuthFailed for a wrong cluster
  // name or secret, kProtocol for a version mismatch).
  // REQUIRES: `io` outlives the connection.
  static void AsyncConnect(boost::asio::io_context& io, ClientOptions options,
                           std::shared_ptr<spdlog::logger> log, ConnectCallback done);
  // Blocking AsyncConnect. REQUIRES: another thread runs `io` (checked).
  static base::Result<std::shared_ptr<ClientConnection>> Connect(
      boost::asio::io_context& io, ClientOptions options, std::shared_ptr<spdlog::logger> log);

  ~ClientConnection();
  ClientConnection(const ClientConnection&) = delete;
  ClientConnection& operator=(const ClientConnection&) = delete;

  // Sends `request` (its kind is set to Request and its call_id replaced by a fresh one) and
  // calls `callback` once with the Response, or with:
  //   - the Response's error when the member answered with one (the payload is then empty),
  //   - kBadRequest when the encoded request exceeds options.max_frame_bytes (not sent),
  //   - kTimeout "no reply from 127.0.0.1:5701 within 5000 ms for map.put", no earlier than
  //     `timeout` after the call and at most ~10 ms later,
  //   - kMemberLeft when the connection was lost before the reply (the operation may or may
  //     not have been applied), kConnectionFailed when it was already closed.
  void Call(wire::Message request, std::chrono::milliseconds timeout, CallCallback callback);
  // The same for a caller that already read the clock (one read per call on the hot path): the
  // call fails with kTimeout at `deadline`, and the error names `timeout` (the caller's).
  void Call(wire::Message request, std::chrono::steady_clock::time_point deadline,
            std::chrono::milliseconds timeout, CallCallback callback);
  // The same for a lean request built in place (no copy of its payload): `frame` holds
  // wire::kLeanFramePrefixBytes reserved bytes, then the payload; `header` gives the service,
  // op and partition (its payload is not read). Fails with kBadRequest, not sent, on a
  // connection that did not negotiate lean frames (check lean() first) or when the frame
  // cannot be lean (wire::SealLeanFrame).
  void CallLean(wire::Message header, std::string frame,
                std::chrono::steady_clock::time_point deadline, std::chrono::milliseconds timeout,
                CallCallback callback);
  // The same from a buffer the caller keeps and reuses (a scratch frame): it is sealed in place
  // and copied, into the connection's write buffer when called on the io thread (no
  // allocation for a frame of up to Connection::kCoalesceFrameBytes), else into a string
  // handed to the io thread.
  void CallLeanCopy(wire::Message header, std::string& frame,
                    std::chrono::steady_clock::time_point deadline,
                    std::chrono::milliseconds timeout, CallCallback callback);
  // Blocking Call. REQUIRES: not on the io thread; another thread runs the io_context.
  base::Result<wire::Message> CallSync(wire::Message request, std::chrono::milliseconds timeout);

  // Closes the connection: pending calls fail with kConnectionFailed, then on_closed runs.
  // Idempotent.
  void Close();

  bool is_open() const { return open_.load(); }
  // Both sides agreed on protocol version 2 or later: requests may go as lean frames
  // (frame_codec.h).
  bool lean() const { return protocol_version() >= wire::kLeanProtocolVersion; }
  // The version agreed on in the handshake (1 until it is done).
  std::uint32_t protocol_version() const { return version_.load(std::memory_order_acquire); }
  // The member's HelloReply (accepted).
  const wire::HelloReply& hello_reply() const { return hello_reply_; }
  // "host:port" as given in the options.
  const std::string& address() const { return address_; }
  std::size_t pending_call_count() const { return pending_count_.load(); }

  class Passkey {
    friend class ClientConnection;
    Passkey() = default;
  };
  // Internal: use AsyncConnect/Connect.
  ClientConnection(Passkey, boost::asio::io_context& io, ClientOptions options,
                   std::shared_ptr<spdlog::logger> log);

 private:
  struct PendingCall {
    CallCallback callback;
    std::chrono::steady_clock::time_point deadline;
    std::chrono::milliseconds timeout;
    wire::Service service;  // with op: named ("map.put") only in an error
    std::uint16_t op;
  };

  void BeginConnect(const boost::asio::ip::tcp::endpoint& endpoint, ConnectCallback done);
  void OnTcpConnected(const boost::system::error_code& error);
  void OnMessage(wire::Message&& message);
  void OnHelloReply(wire::Message message);
  void OnResponse(wire::Message&& message);
  void OnConnectionClosed();
  void FinishConnect(base::Result<std::shared_ptr<ClientConnection>> result);
  // Call's and CallLean's common end: the size check, then StartCall on the I/O thread.
  // (The callback is passed on by reference down to where it is kept: each move of a
  // UniqueFunction relocates the whole callable.)
  void SendCall(const wire::Message& header, std::string&& frame,
                std::chrono::steady_clock::time_point deadline, std::chrono::milliseconds timeout,
                CallCallback&& callback);
  // CallLean's and CallLeanCopy's checks: false (and the failure posted to the callback) when
  // the connection is not lean or the frame cannot be sealed.
  bool SealLean(wire::Message& header, std::string& frame, CallCallback& callback);
  // SendCall's size check: false (and the failure posted) when the frame is too big.
  bool FitsFrame(const wire::Message& header, std::size_t frame_bytes, CallCallback& callback);
  // Registers the call on the io thread: false (and the failure posted) when closed.
  bool RegisterCall(std::uint64_t call_id, wire::Service service, std::uint16_t op,
                    std::chrono::steady_clock::time_point deadline,
                    std::chrono::milliseconds timeout, CallCallback&& callback);
  void StartCall(std::uint64_t call_id, wire::Service service, std::uint16_t op,
                 std::string&& frame, std::chrono::steady_clock::time_point deadline,
                 std::chrono::milliseconds timeout, CallCallback&& callback);
  // Deadlines: one timer per connection ticks every kTimeoutTick while calls are pending and
  // fails those past their deadline (a timer per call cost a timerfd syscall per call).
  void ArmTimeoutTick();
  void OnTimeoutTick();
  void FailAllPending(const base::Error& reason);
  std::string OperationName(wire::Service service, std::uint16_t op) const;

  boost::asio::io_context& io_;
  const ClientOptions options_;
  const std::shared_ptr<spdlog::logger> log_;
  const std::string address_;
  std::atomic<bool> open_{false};
  std::atomic<std::uint32_t> version_{wire::kProtocolVersion};
  std::atomic<bool> closed_by_us_{false};
  std::atomic<std::uint64_t> next_call_id_{1};
  std::atomic<std::size_t> pending_count_{0};  // pending_.size(), stored by the io thread

  // io-thread state.
  std::optional<boost::asio::ip::tcp::socket> connecting_socket_;
  boost::asio::steady_timer connect_timer_;
  boost::asio::steady_timer timeout_timer_;
  bool timeout_timer_armed_ = false;
  bool connect_timed_out_ = false;
  ConnectCallback connect_done_;
  std::shared_ptr<Connection> connection_;
  wire::HelloReply hello_reply_;
  std::optional<base::Error> close_reason_;  // e.g. the member's protocol error report
  CallTable<PendingCall> pending_;           // by call id
};

}  // namespace tessera::net
