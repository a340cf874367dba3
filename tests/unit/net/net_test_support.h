#pragma once
// Shared fixtures for the net tests: a started ShardSet, an echo RequestHandler, a client
// io thread, and a raw socket that talks bytes to a server and collects what comes back.

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "tessera/net/client_connection.h"
#include "tessera/net/server.h"
#include "tessera/wire/frame_codec.h"

namespace tessera::net::testing {

namespace asio = boost::asio;
using asio::ip::tcp;

// Ops understood by EchoHandler.
inline constexpr std::uint16_t kEchoOp = 1;        // replies with the request's payload
inline constexpr std::uint16_t kSilentOp = 99;     // never replies
inline constexpr std::uint16_t kPushEventOp = 50;  // pushes an Event with the payload, then echoes

class EchoHandler final : public RequestHandler {
 public:
  void OnAccepted(const std::shared_ptr<Connection>& connection) override {
    std::lock_guard lock(mutex_);
    accepted_names_.push_back(connection->peer_hello()->client_name);
  }
  void BeforeFrames(const std::shared_ptr<Connection>&,
                    std::span<const wire::Message> frames) override {
    std::string line = "before:";
    for (const auto& frame : frames) {
      line += std::string(wire::MessageKindName(frame.kind)) + " " + frame.payload + ",";
    }
    std::lock_guard lock(mutex_);
    trace_.push_back(std::move(line));
  }
  void OnRequest(const std::shared_ptr<Connection>& connection, wire::Message request) override {
    {
      std::lock_guard lock(mutex_);
      trace_.push_back("request:" + request.payload);
    }
    requests_.fetch_add(1);
    if (request.op == kSilentOp) return;
    if (request.op == kPushEventOp) {
      connection->Send(wire::Message::MakeEvent(request.service, 7, -1, request.payload));
    }
    connection->Send(wire::Message::MakeResponse(request, request.payload));
  }
  void OnClosed(const std::shared_ptr<Connection>&) override { closed_.fetch_add(1); }

  std::vector<std::string> accepted_names() const {
    std::lock_guard lock(mutex_);
    return accepted_names_;
  }
  int requests() const { return requests_.load(); }
  // "before:<kind> <payload>,..." per BeforeFrames, "request:<payload>" per OnRequest.
  std::vector<std::string> trace() const {
    std::lock_guard lock(mutex_);
    return trace_;
  }
  int closed() const { return closed_.load(); }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> accepted_names_;
  std::vector<std::string> trace_;
  std::atomic<int> requests_{0};
  std::atomic<int> closed_{0};
};

// A logger whose recent lines tests can read.
struct CapturedLog {
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink =
      std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256);
  std::shared_ptr<spdlog::logger> logger = std::make_shared<spdlog::logger>("net-test", sink);

  bool Contains(const std::string& text) const {
    for (const auto& line : sink->last_formatted()) {
      if (line.find(text) != std::string::npos) return true;
    }
    return false;
  }
};

// An io_context run by one background thread, like the client's.
class IoThread {
 public:
  IoThread() : work_(io_.get_executor()), thread_([this] { io_.run(); }) {}
  ~IoThread() {
    work_.reset();
    io_.stop();
    thread_.join();
  }
  asio::io_context& io() { return io_; }

 private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
};

inline ServerOptions TestServerOptions() {
  ServerOptions options;
  options.handshake.cluster_name = "dev";
  options.handshake.secret = "s3cret";
  options.member_uuid = "uuid-1";
  options.member_address = "127.0.0.1:5701";
  options.partition_count = 271;
  return options;
}

inline ClientOptions TestClientOptions(std::uint16_t port) {
  ClientOptions options;
  options.port = port;
  options.hello.cluster_name = "dev";
  options.hello.secret = "s3cret";
  options.hello.client_name = "test-client";
  options.connect_timeout = std::chrono::milliseconds(3000);
  return options;
}

inline std::string HelloFrame(const std::string& cluster, const std::string& secret) {
  return wire::EncodeFrame(wire::Message::MakeHello(
      wire::Hello{.cluster_name = cluster, .secret = secret, .client_name = "raw"}));
}

// Connects, writes `bytes`, and reads until the server closes (or 5 s pass). Returns the
// frames received and whether the server closed the connection.
struct RawExchange {
  std::vector<wire::Message> frames;
  bool closed_by_server = false;
};

inline RawExchange SendRaw(std::uint16_t port, const std::string& bytes) {
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  asio::write(socket, asio::buffer(bytes));
  RawExchange exchange;
  wire::FrameDecoder decoder;
  std::array<char, 4096> buffer{};
  std::function<void()> read = [&socket, &buffer, &decoder, &exchange, &read] {
    socket.async_read_some(asio::buffer(buffer),
                           [&buffer, &decoder, &exchange, &read](
                               const boost::system::error_code& error, std::size_t n) {
                             decoder.Feed(buffer.data(), n);
                             if (error) {
                               exchange.closed_by_server = true;
                               return;
                             }
                             read();
                           });
  };
  read();
  io.run_for(std::chrono::seconds(5));
  for (int i = 0; i < 100; ++i) {
    auto next = decoder.Next();
    if (!next || !next->has_value()) break;
    exchange.frames.push_back(std::move(**next));
  }
  return exchange;
}

// Waits (bounded) until `condition` holds.
template <typename Condition>
bool WaitFor(Condition condition, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return condition();
}

}  // namespace tessera::net::testing
