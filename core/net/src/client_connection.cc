// Connect phase: a TCP connect and the Hello exchange share one deadline timer; whichever of
// success, failure or deadline comes first calls the connect callback (FinishConnect moves it
// out, so later outcomes are ignored). Call phase: calls are encoded on the caller's thread,
// then registered in `pending_` and sent on the io thread; a response, the timeout tick
// finding the call past its deadline, or the loss of the connection removes the entry and
// calls back, whichever comes first. A call therefore fails no earlier than its timeout and
// at most kTimeoutTick later.
// The Connection's handlers and the timers hold only weak references to this object, so
// dropping the last reference closes the connection.
#include "tessera/net/client_connection.h"

#include <algorithm>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <cctype>
#include <future>
#include <vector>

#include "tessera/base/check.h"

namespace tessera::net {

namespace asio = boost::asio;
using asio::ip::tcp;
using base::Error;
using base::ErrorCode;

namespace {
// Extra time the blocking helpers wait beyond the operation's own deadline before giving up
// on an io_context that is not being run.
constexpr auto kBlockingSlack = std::chrono::seconds(2);
// How often pending calls are checked against their deadlines (the timeout precision).
constexpr auto kTimeoutTick = std::chrono::milliseconds(10);

std::string Lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}
}  // namespace

ClientConnection::ClientConnection(Passkey, asio::io_context& io, ClientOptions options,
                                   std::shared_ptr<spdlog::logger> log)
    : io_(io),
      options_(std::move(options)),
      log_(std::move(log)),
      address_(options_.host + ":" + std::to_string(options_.port)),
      connect_timer_(io),
      timeout_timer_(io) {}

ClientConnection::~ClientConnection() {
  if (connection_) connection_->Close();
  // The connection's on_closed, which fails the pending calls, no longer reaches this object:
  // answer them here (on the io thread, as every callback), or their callers wait forever.
  if (pending_.empty()) return;
  std::vector<PendingCall> taken;
  pending_.TakeAll(taken);
  std::vector<std::pair<CallCallback, std::string>> calls;  // with the operation's name
  for (auto& call : taken) {
    calls.emplace_back(std::move(call.callback), OperationName(call.service, call.op));
  }
  asio::post(io_, [calls = std::move(calls), address = address_]() mutable {
    for (auto& [callback, operation] : calls) {
      callback(base::Fail(ErrorCode::kMemberLeft,
                          "connection to " + address +
                              " closed by this client before the reply to " + operation +
                              "; the operation may or may not have been applied"));
    }
  });
}

void ClientConnection::AsyncConnect(asio::io_context& io, ClientOptions options,
                                    std::shared_ptr<spdlog::logger> log, ConnectCallback done) {
  boost::system::error_code error;
  const auto address =
      asio::ip::make_address(options.host == "localhost" ? "127.0.0.1" : options.host, error);
  if (error) {
    auto failure = base::Fail(ErrorCode::kBadRequest,
                              "cannot connect to '" + options.host +
                                  "': not an IP address; use a numeric address such as 127.0.0.1");
    asio::post(io, [done = std::move(done), failure] { done(failure); });
    return;
  }
  const tcp::endpoint endpoint(address, options.port);
  auto self = std::make_shared<ClientConnection>(Passkey(), io, std::move(options), std::move(log));
  asio::dispatch(io, [self, endpoint, done = std::move(done)]() mutable {
    self->BeginConnect(endpoint, std::move(done));
  });
}

base::Result<std::shared_ptr<ClientConnection>> ClientConnection::Connect(
    asio::io_context& io, ClientOptions options, std::shared_ptr<spdlog::logger> log) {
  TESSERA_CHECK(!io.get_executor().running_in_this_thread(),
                "ClientConnection::Connect would block the io thread it waits for");
  using ConnectResult = base::Result<std::shared_ptr<ClientConnection>>;
  auto promise = std::make_shared<std::promise<ConnectResult>>();
  auto future = promise->get_future();
  const auto wait = options.connect_timeout + kBlockingSlack;
  AsyncConnect(io, std::move(options), std::move(log),
               [promise](ConnectResult result) { promise->set_value(std::move(result)); });
  if (future.wait_for(wait) != std::future_status::ready) {
    return base::Fail(ErrorCode::kTimeout,
                      "connect did not finish; is a thread running the client's io_context?");
  }
  return future.get();
}

void ClientConnection::BeginConnect(const tcp::endpoint& endpoint, ConnectCallback done) {
  connect_done_ = std::move(done);
  connecting_socket_.emplace(io_);
  connect_timer_.expires_after(options_.connect_timeout);
  connect_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
    if (error) return;
    self->FinishConnect(
        base::Fail(ErrorCode::kConnectionFailed,
                   "could not connect to " + self->address_ + " within " +
                       std::to_string(self->options_.connect_timeout.count()) +
                       " ms; check that a Tessera member listens there and is reachable"));
  });
  connecting_socket_->async_connect(
      endpoint, [self = shared_from_this()](const boost::system::error_code& error) {
        self->OnTcpConnected(error);
      });
}

void ClientConnection::OnTcpConnected(const boost::system::error_code& error) {
  if (!connect_done_) return;  // timed out or closed meanwhile
  if (error) {
    FinishConnect(base::Fail(ErrorCode::kConnectionFailed,
                             "cannot connect to " + address_ + ": " + Lowercase(error.message()) +
                                 "; is a Tessera member running there?"));
    return;
  }
  boost::system::error_code ignored;
  connecting_socket_->set_option(tcp::no_delay(true), ignored);
  connection_ =
      Connection::Create(std::move(*connecting_socket_), 0, 0, options_.max_frame_bytes, log_);
  connecting_socket_.reset();
  std::weak_ptr<ClientConnection> weak = weak_from_this();
  connection_->Start(Connection::Handlers{
      .on_message =
          [weak](const std::shared_ptr<Connection>&, wire::Message message) {
            if (auto self = weak.lock()) self->OnMessage(std::move(message));
          },
      .on_protocol_error =
          [weak](const std::shared_ptr<Connection>&, const Error& error) {
            if (auto self = weak.lock()) {
              self->log_->warn("closing connection to {}: {}", self->address_, error.ToString());
              self->close_reason_ = error;
            }
          },
      .on_closed =
          [weak](const std::shared_ptr<Connection>&) {
            if (auto self = weak.lock()) self->OnConnectionClosed();
          },
      .on_batch = nullptr,
  });
  connection_->Send(wire::Message::MakeHello(options_.hello));
}

void ClientConnection::OnMessage(wire::Message&& message) {
  if (connect_done_) {
    OnHelloReply(std::move(message));
    return;
  }
  if (message.kind == wire::MessageKind::kResponse) {
    OnResponse(std::move(message));
  } else if (message.kind == wire::MessageKind::kEvent) {
    if (options_.on_event) options_.on_event(std::move(message));
  } else {
    close_reason_ = Error(ErrorCode::kProtocol,
                          "unexpected " + std::string(wire::MessageKindName(message.kind)) +
                              " frame from " + address_);
    log_->warn("closing connection to {}: {}", address_, close_reason_->message());
    connection_->Close();
  }
}

void ClientConnection::OnHelloReply(wire::Message message) {
  if (message.kind != wire::MessageKind::kHelloReply) {
    FinishConnect(
        base::Fail(ErrorCode::kProtocol, "expected a HelloReply from " + address_ + ", got a " +
                                             std::string(wire::MessageKindName(message.kind))));
    return;
  }
  if (!message.hello_reply->accepted) {
    FinishConnect(std::unexpected(message.error.value_or(
        Error(ErrorCode::kAuthFailed, "the member at " + address_ + " rejected the hello"))));
    return;
  }
  hello_reply_ = *message.hello_reply;
  // A member may answer with no more than we offered; anything else keeps version 1.
  if (const auto v = hello_reply_.protocol_version;
      v >= wire::kLeanProtocolVersion && v <= options_.hello.max_protocol_version) {
    connection_->set_accept_lean(true);
    version_.store(v, std::memory_order_release);
  }
  open_.store(true);
  FinishConnect(shared_from_this());
}

void ClientConnection::FinishConnect(base::Result<std::shared_ptr<ClientConnection>> result) {
  if (!connect_done_) return;
  ConnectCallback done = std::move(connect_done_);
  connect_done_ = nullptr;
  connect_timer_.cancel();
  if (!result) {
    boost::system::error_code ignored;
    if (connecting_socket_) connecting_socket_->close(ignored);
    if (connection_) connection_->Close();
  }
  done(std::move(result));
}

void ClientConnection::OnResponse(wire::Message&& message) {
  PendingCall call;
  if (!pending_.Take(message.call_id, call)) {
    if (message.call_id == 0 && message.error) {
      log_->warn("member {} reported: {}", address_, message.error->ToString());
      close_reason_ = *message.error;
    } else {
      log_->debug("reply from {} for call {} that already finished", address_, message.call_id);
    }
    return;
  }
  pending_count_.store(pending_.size(), std::memory_order_relaxed);
  if (message.error) {
    call.callback(std::unexpected(std::move(*message.error)));
  } else {
    call.callback(std::move(message));
  }
}

void ClientConnection::OnConnectionClosed() {
  const bool was_open = open_.exchange(false);
  std::string detail = close_reason_ ? " (" + close_reason_->message() + ")" : "";
  FinishConnect(base::Fail(ErrorCode::kConnectionFailed,
                           "connection to " + address_ + " closed during the hello" + detail));
  const Error reason =
      closed_by_us_.load()
          ? Error(ErrorCode::kConnectionFailed,
                  "connection to " + address_ + " was closed by this client")
          : Error(ErrorCode::kMemberLeft, "connection to " + address_ + " lost" + detail);
  // Calls already sent may have been applied whoever closed: MemberLeft (a ConnectionFailed is
  // retried by the client as never sent, and a write could then be applied twice).
  FailAllPending(Error(ErrorCode::kMemberLeft, reason.message()));
  if (was_open && options_.on_closed) options_.on_closed(reason);
}

void ClientConnection::FailAllPending(const Error& reason) {
  std::vector<PendingCall> pending;
  pending_.TakeAll(pending);
  pending_count_.store(0, std::memory_order_relaxed);
  for (auto& call : pending) {
    call.callback(
        base::Fail(reason.code(), reason.message() + " before the reply to " +
                                      OperationName(call.service, call.op) +
                                      "; the operation may or may not have been applied"));
  }
}

void ClientConnection::Call(wire::Message request, std::chrono::milliseconds timeout,
                            CallCallback callback) {
  Call(std::move(request), std::chrono::steady_clock::now() + timeout, timeout,
       std::move(callback));
}

void ClientConnection::Call(wire::Message request, std::chrono::steady_clock::time_point deadline,
                            std::chrono::milliseconds timeout, CallCallback callback) {
  request.kind = wire::MessageKind::kRequest;
  request.call_id = next_call_id_.fetch_add(1);
  if (request.lean && !lean()) {  // its payload is in a lean encoding the peer may not read
    auto failure = base::Fail(
        ErrorCode::kBadRequest,
        OperationName(request.service, request.op) +
            " request encoded for lean frames on a "
            "connection to " +
            address_ +
            " that negotiated protocol version 1; encode it for version 1 (check lean())");
    asio::post(io_, [callback = std::move(callback), failure] { callback(failure); });
    return;
  }
  std::string frame = wire::EncodeFrame(request);
  SendCall(request, std::move(frame), deadline, timeout, std::move(callback));
}

void ClientConnection::CallLean(wire::Message header, std::string frame,
                                std::chrono::steady_clock::time_point deadline,
                                std::chrono::milliseconds timeout, CallCallback callback) {
  if (!SealLean(header, frame, callback)) return;
  SendCall(header, std::move(frame), deadline, timeout, std::move(callback));
}

void ClientConnection::CallLeanCopy(wire::Message header, std::string& frame,
                                    std::chrono::steady_clock::time_point deadline,
                                    std::chrono::milliseconds timeout, CallCallback callback) {
  if (!SealLean(header, frame, callback)) return;
  if (!io_.get_executor().running_in_this_thread()) {
    SendCall(header, std::string(frame), deadline, timeout, std::move(callback));
    return;
  }
  if (!FitsFrame(header, frame.size(), callback)) return;
  if (RegisterCall(header.call_id, header.service, header.op, deadline, timeout,
                   std::move(callback))) {
    connection_->SendFrameCopy(frame);  // if closing, on_closed fails the call
  }
}

bool ClientConnection::SealLean(wire::Message& header, std::string& frame, CallCallback& callback) {
  header.kind = wire::MessageKind::kRequest;
  header.call_id = next_call_id_.fetch_add(1);
  header.lean = true;
  if (lean() && wire::SealLeanFrame(header, frame)) return true;
  auto failure = base::Fail(
      ErrorCode::kBadRequest,
      OperationName(header.service, header.op) + " request built as a lean frame " +
          (lean() ? "cannot be one (shorter than its header or too long)"
                  : "on a connection to " + address_ +
                        " that negotiated protocol version 1; encode it for version 1 (check "
                        "lean())"));
  asio::post(io_, [callback = std::move(callback), failure] { callback(failure); });
  return false;
}

bool ClientConnection::FitsFrame(const wire::Message& header, std::size_t frame_bytes,
                                 CallCallback& callback) {
  if (frame_bytes - wire::kFrameHeaderBytes <= options_.max_frame_bytes) return true;
  auto failure =
      base::Fail(ErrorCode::kBadRequest,
                 OperationName(header.service, header.op) + " request of " +
                     std::to_string(frame_bytes) + " bytes exceeds the maximum frame size of " +
                     std::to_string(options_.max_frame_bytes) + " bytes; send smaller values");
  asio::post(io_, [callback = std::move(callback), failure] { callback(failure); });
  return false;
}

void ClientConnection::SendCall(const wire::Message& header, std::string&& frame,
                                std::chrono::steady_clock::time_point deadline,
                                std::chrono::milliseconds timeout, CallCallback&& callback) {
  if (!FitsFrame(header, frame.size(), callback)) return;
  if (io_.get_executor().running_in_this_thread()) {  // no hand-off (a completion's next call)
    StartCall(header.call_id, header.service, header.op, std::move(frame), deadline, timeout,
              std::move(callback));
    return;
  }
  asio::post(io_, [self = shared_from_this(), call_id = header.call_id, service = header.service,
                   op = header.op, frame = std::move(frame), deadline, timeout,
                   callback = std::move(callback)]() mutable {
    self->StartCall(call_id, service, op, std::move(frame), deadline, timeout, std::move(callback));
  });
}

void ClientConnection::StartCall(std::uint64_t call_id, wire::Service service, std::uint16_t op,
                                 std::string&& frame,
                                 std::chrono::steady_clock::time_point deadline,
                                 std::chrono::milliseconds timeout, CallCallback&& callback) {
  if (RegisterCall(call_id, service, op, deadline, timeout, std::move(callback))) {
    connection_->SendFrame(std::move(frame));  // if closing, on_closed fails the call
  }
}

bool ClientConnection::RegisterCall(std::uint64_t call_id, wire::Service service, std::uint16_t op,
                                    std::chrono::steady_clock::time_point deadline,
                                    std::chrono::milliseconds timeout, CallCallback&& callback) {
  if (!open_.load() || !connection_) {
    auto failure =
        base::Fail(ErrorCode::kConnectionFailed, "not connected to " + address_ + " for " +
                                                     OperationName(service, op) +
                                                     "; the connection is closed, reconnect");
    asio::post(io_, [callback = std::move(callback), failure] { callback(failure); });
    return false;
  }
  pending_.Insert(call_id, PendingCall{std::move(callback), deadline, timeout, service, op});
  pending_count_.store(pending_.size(), std::memory_order_relaxed);
  ArmTimeoutTick();
  return true;
}

void ClientConnection::ArmTimeoutTick() {
  if (timeout_timer_armed_) return;
  timeout_timer_armed_ = true;
  timeout_timer_.expires_after(kTimeoutTick);
  timeout_timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& error) {
    auto self = weak.lock();
    if (!self) return;
    self->timeout_timer_armed_ = false;
    if (!error) self->OnTimeoutTick();
  });
}

void ClientConnection::OnTimeoutTick() {
  const auto now = std::chrono::steady_clock::now();
  std::vector<PendingCall> expired;
  pending_.TakeIf([now](const PendingCall& call) { return call.deadline <= now; }, expired);
  pending_count_.store(pending_.size(), std::memory_order_relaxed);
  if (!pending_.empty()) ArmTimeoutTick();
  for (auto& call : expired) {
    call.callback(base::Fail(ErrorCode::kTimeout, "no reply from " + address_ + " within " +
                                                      std::to_string(call.timeout.count()) +
                                                      " ms for " +
                                                      OperationName(call.service, call.op)));
  }
}

base::Result<wire::Message> ClientConnection::CallSync(wire::Message request,
                                                       std::chrono::milliseconds timeout) {
  TESSERA_CHECK(!io_.get_executor().running_in_this_thread(),
                "ClientConnection::CallSync would block the io thread it waits for");
  auto promise = std::make_shared<std::promise<base::Result<wire::Message>>>();
  auto future = promise->get_future();
  Call(std::move(request), timeout,
       [promise](base::Result<wire::Message> result) { promise->set_value(std::move(result)); });
  if (future.wait_for(timeout + kBlockingSlack) != std::future_status::ready) {
    return base::Fail(ErrorCode::kTimeout,
                      "call did not finish; is a thread running the client's io_context?");
  }
  return future.get();
}

void ClientConnection::Close() {
  closed_by_us_.store(true);
  asio::dispatch(io_, [self = shared_from_this()] {
    if (self->connection_) {
      self->connection_->Close();
    } else {
      self->FinishConnect(base::Fail(ErrorCode::kConnectionFailed,
                                     "connect to " + self->address_ + " cancelled by Close()"));
    }
  });
}

std::string ClientConnection::OperationName(wire::Service service, std::uint16_t op) const {
  if (options_.operation_name) return options_.operation_name(service, op);
  return wire::ServiceName(service) + ".op" + std::to_string(op);
}

}  // namespace tessera::net
