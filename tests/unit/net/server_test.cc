// Server and ClientConnection over real sockets on 127.0.0.1 (ephemeral ports).
#include <catch2/catch.hpp>
#include <deque>
#include <future>

#include "net_test_support.h"
#include "tessera/net/call_table.h"

using namespace tessera::net;
using namespace tessera::net::testing;
using tessera::base::Error;
using tessera::base::ErrorCode;
using tessera::base::Result;
using tessera::runtime::ShardSet;
using tessera::wire::Message;
using tessera::wire::MessageKind;
using tessera::wire::Service;

namespace {

struct Fixture {
  explicit Fixture(ServerOptions options = TestServerOptions()) {
    shards.Start();
    auto started = Server::Start(shards, std::move(options), handler, log.logger);
    REQUIRE(started.has_value());
    server = std::move(*started);
  }
  ~Fixture() {
    server->Stop();
    shards.Stop();
  }
  Result<std::shared_ptr<ClientConnection>> Connect(ClientOptions options) {
    return ClientConnection::Connect(client_io.io(), std::move(options), log.logger);
  }
  Result<std::shared_ptr<ClientConnection>> Connect() {
    return Connect(TestClientOptions(server->port()));
  }

  ShardSet shards{2};
  EchoHandler handler;
  CapturedLog log;
  std::unique_ptr<Server> server;
  IoThread client_io;
};

Message Echo(std::string payload) {
  return Message::MakeRequest(0, 3, Service::kMap, kEchoOp, std::move(payload));
}

// Sends one echo call per payload, all pipelined on `client`, and waits for every answer: the
// answers in call order (empty for a failed call) and how many failed.
struct EchoAnswers {
  std::vector<std::string> payloads;
  int failed = 0;
};
EchoAnswers EchoAll(ClientConnection& client, const std::vector<std::string>& payloads,
                    std::chrono::seconds timeout) {
  const int calls = static_cast<int>(payloads.size());
  std::mutex mutex;
  EchoAnswers answers;
  answers.payloads.resize(payloads.size());
  std::atomic<int> done{0};
  std::atomic<int> failed{0};
  std::promise<void> all_done;
  for (int i = 0; i < calls; ++i) {
    client.Call(Echo(payloads[i]), timeout,
                [&mutex, &answers, &failed, &done, &all_done, calls, i](Result<Message> result) {
                  if (result) {
                    std::lock_guard lock(mutex);
                    answers.payloads[i] = std::move(result->payload);
                  } else {
                    failed.fetch_add(1);
                  }
                  if (done.fetch_add(1) + 1 == calls) all_done.set_value();
                });
  }
  REQUIRE(all_done.get_future().wait_for(timeout + std::chrono::seconds(10)) ==
          std::future_status::ready);
  answers.failed = failed.load();
  return answers;
}

}  // namespace

TEST_CASE("A client with the right cluster name and secret is accepted", "[net]") {
  Fixture f;
  auto client = f.Connect();
  REQUIRE(client.has_value());
  const auto& reply = (*client)->hello_reply();
  CHECK(reply.accepted);
  CHECK(reply.member_uuid == "uuid-1");
  CHECK(reply.member_address == "127.0.0.1:5701");
  CHECK(reply.partition_count == 271);
  CHECK(reply.protocol_version == tessera::wire::kProtocolVersion);
  CHECK(WaitFor([&f] { return f.handler.accepted_names().size() == 1; }));
  CHECK(f.handler.accepted_names() == std::vector<std::string>{"test-client"});
  CHECK(f.server->connection_count() == 1);

  auto answer = (*client)->CallSync(Echo("hello"), std::chrono::seconds(5));
  REQUIRE(answer.has_value());
  CHECK(answer->kind == MessageKind::kResponse);
  CHECK(answer->payload == "hello");
  CHECK(answer->partition_id == 3);
  (*client)->Close();
  CHECK(WaitFor([&f] { return f.server->connection_count() == 0; }));
  CHECK(WaitFor([&f] { return f.handler.closed() == 1; }));
}

TEST_CASE("A wrong cluster name is rejected with a clear error on both sides", "[net]") {
  Fixture f;
  auto options = TestClientOptions(f.server->port());
  options.hello.cluster_name = "prod";
  auto client = f.Connect(options);
  REQUIRE_FALSE(client.has_value());
  CHECK(client.error() ==
        Error(ErrorCode::kAuthFailed,
              "cluster name mismatch: member is in 'dev', client asked for 'prod'; connect "
              "with --cluster-name dev to join this member's cluster"));
  CHECK(f.log.Contains("cluster name mismatch"));
  CHECK(f.handler.accepted_names().empty());
  CHECK(WaitFor([&f] { return f.server->connection_count() == 0; }));
}

TEST_CASE("A wrong secret is rejected", "[net]") {
  Fixture f;
  auto options = TestClientOptions(f.server->port());
  options.hello.secret = "guess";
  auto client = f.Connect(options);
  REQUIRE_FALSE(client.has_value());
  CHECK(client.error().code() == ErrorCode::kAuthFailed);
  CHECK(client.error().message() ==
        "wrong cluster secret from client 'test-client'; pass the secret the cluster was "
        "started with (--secret)");
  CHECK(f.log.Contains("wrong cluster secret"));
  CHECK_FALSE(f.log.Contains("guess"));  // secrets never reach the log
}

TEST_CASE("A different protocol version is rejected", "[net]") {
  Fixture f;
  auto options = TestClientOptions(f.server->port());
  options.hello.protocol_version = 2;
  auto client = f.Connect(options);
  REQUIRE_FALSE(client.has_value());
  CHECK(client.error() == Error(ErrorCode::kProtocol,
                                "protocol version mismatch: member speaks 1, client speaks 2; "
                                "use a client and member from the same Tessera release"));
}

TEST_CASE("Connecting to a port nobody listens on fails with ConnectionFailed", "[net]") {
  Fixture f;
  const auto port = f.server->port();
  f.server->Stop();
  auto client = f.Connect(TestClientOptions(port));
  REQUIRE_FALSE(client.has_value());
  CHECK(client.error().code() == ErrorCode::kConnectionFailed);
  CHECK_THAT(client.error().message(),
             Catch::StartsWith("cannot connect to 127.0.0.1:" + std::to_string(port)));
}

TEST_CASE("Garbage from one client closes only that connection", "[net]") {
  Fixture f;
  auto good = f.Connect();
  REQUIRE(good.has_value());

  SECTION("garbage instead of a hello") {
    auto raw = SendRaw(f.server->port(), "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    CHECK(raw.closed_by_server);
    REQUIRE(raw.frames.size() == 1);
    CHECK(raw.frames[0].kind == MessageKind::kHelloReply);
    CHECK_FALSE(raw.frames[0].hello_reply->accepted);
    REQUIRE(raw.frames[0].error.has_value());
    CHECK(raw.frames[0].error->code() == ErrorCode::kProtocol);
  }
  SECTION("garbage after the hello") {
    std::string garbage(64, '\xa5');
    garbage.replace(0, 4, std::string("\x38\x00\x00\x00", 4));  // a plausible 56-byte length
    auto raw = SendRaw(f.server->port(), HelloFrame("dev", "s3cret") + garbage);
    CHECK(raw.closed_by_server);
    REQUIRE(raw.frames.size() == 2);
    CHECK(raw.frames[0].hello_reply->accepted);
    CHECK(raw.frames[1].kind == MessageKind::kResponse);
    CHECK(raw.frames[1].call_id == 0);
    REQUIRE(raw.frames[1].error.has_value());
    CHECK(raw.frames[1].error->code() == ErrorCode::kProtocol);
  }
  SECTION("an oversized frame after the hello") {
    const std::string header("\x00\x00\x00\x40", 4);  // 1 GiB
    auto raw = SendRaw(f.server->port(), HelloFrame("dev", "s3cret") + header);
    CHECK(raw.closed_by_server);
    REQUIRE(raw.frames.size() == 2);
    REQUIRE(raw.frames[1].error.has_value());
    CHECK_THAT(raw.frames[1].error->message(),
               Catch::StartsWith("frame of 1073741824 bytes exceeds the maximum frame size"));
  }
  SECTION("a first frame over the Hello's limit, under the frame size") {
    // 1 MiB announced before any Hello: refused at its header (64 KiB before the handshake),
    // although frames of up to the maximum frame size are taken after it.
    const std::string header("\x00\x00\x10\x00", 4);
    auto raw = SendRaw(f.server->port(), header + std::string(4096, '\0'));
    CHECK(raw.closed_by_server);
    REQUIRE(raw.frames.size() == 1);
    REQUIRE(raw.frames[0].error.has_value());
    CHECK(raw.frames[0].error->message() ==
          "frame of 1048576 bytes exceeds the maximum of 65536 bytes for a connection's first "
          "frame, its Hello; the peer must open with a Hello");
    // After the Hello, a frame of that size is taken.
    auto big = (*good)->CallSync(Echo(std::string(1 << 20, 'b')), std::chrono::seconds(10));
    REQUIRE(big.has_value());
    CHECK(big->payload.size() == (1u << 20));
  }
  SECTION("an unknown message kind after the hello") {
    Message unknown = Echo("x");
    unknown.kind = static_cast<MessageKind>(42);
    auto raw = SendRaw(f.server->port(),
                       HelloFrame("dev", "s3cret") + tessera::wire::EncodeFrame(unknown));
    CHECK(raw.closed_by_server);
    REQUIRE(raw.frames.size() == 2);
    REQUIRE(raw.frames[1].error.has_value());
    CHECK_THAT(raw.frames[1].error->message(), Catch::StartsWith("unknown message kind 42"));
  }
  SECTION("a request before the hello") {
    auto raw = SendRaw(f.server->port(), tessera::wire::EncodeFrame(Echo("early")));
    CHECK(raw.closed_by_server);
    REQUIRE(raw.frames.size() == 1);
    REQUIRE(raw.frames[0].error.has_value());
    CHECK(raw.frames[0].error->message() ==
          "expected a Hello as the first frame, got a Request; the peer must open with a Hello "
          "frame");
    CHECK(f.handler.requests() == 0);
  }
  CHECK(f.log.Contains("connection"));
  auto answer = (*good)->CallSync(Echo("still here"), std::chrono::seconds(5));
  REQUIRE(answer.has_value());
  CHECK(answer->payload == "still here");
  CHECK((*good)->is_open());
}

TEST_CASE("The frames of one read are shown to the handler first, then handled in order", "[net]") {
  // One write: the hello, five requests, garbage. The hello is read alone (it decides how
  // the frames after it decode); the five come to BeforeFrames together, then one by one to
  // OnRequest and are answered in order; the garbage is refused after them.
  Fixture f;
  std::string bytes = HelloFrame("dev", "s3cret");
  for (const char* p : {"a", "b", "c", "d", "e"}) bytes += tessera::wire::EncodeFrame(Echo(p));
  std::string garbage(64, '\xa5');
  garbage.replace(0, 4, std::string("\x38\x00\x00\x00", 4));
  auto raw = SendRaw(f.server->port(), bytes + garbage);
  CHECK(raw.closed_by_server);
  REQUIRE(raw.frames.size() == 7);
  for (std::size_t i = 0; i < 5; ++i) {
    CHECK(raw.frames[i + 1].kind == MessageKind::kResponse);
    CHECK(raw.frames[i + 1].payload == std::string(1, static_cast<char>('a' + i)));
  }
  REQUIRE(raw.frames[6].error.has_value());
  CHECK(raw.frames[6].error->code() == ErrorCode::kProtocol);
  CHECK(f.handler.trace() ==
        std::vector<std::string>{"before:Request a,Request b,Request c,Request d,Request e,",
                                 "request:a", "request:b", "request:c", "request:d", "request:e"});
}

TEST_CASE("A call without a reply times out with a message naming member and operation", "[net]") {
  Fixture f;
  auto options = TestClientOptions(f.server->port());
  options.operation_name = [](Service service, std::uint16_t op) {
    return tessera::wire::ServiceName(service) + (op == kSilentOp ? ".put" : ".other");
  };
  auto client = f.Connect(options);
  REQUIRE(client.has_value());
  const auto started = std::chrono::steady_clock::now();
  auto answer = (*client)->CallSync(Message::MakeRequest(0, 1, Service::kMap, kSilentOp, "v"),
                                    std::chrono::milliseconds(200));
  const auto elapsed = std::chrono::steady_clock::now() - started;
  REQUIRE_FALSE(answer.has_value());
  CHECK(answer.error() ==
        Error(ErrorCode::kTimeout, "no reply from 127.0.0.1:" + std::to_string(f.server->port()) +
                                       " within 200 ms for map.put"));
  CHECK(elapsed >= std::chrono::milliseconds(200));
  CHECK(elapsed < std::chrono::seconds(3));
  CHECK((*client)->pending_call_count() == 0);
  // The connection stays usable after a timeout.
  CHECK((*client)->CallSync(Echo("after"), std::chrono::seconds(5)).has_value());
}

TEST_CASE("Calls pending together each time out on their own deadline", "[net]") {
  Fixture f;
  auto client = f.Connect(TestClientOptions(f.server->port()));
  REQUIRE(client.has_value());
  using Clock = std::chrono::steady_clock;
  struct Outcome {
    std::promise<std::pair<tessera::base::Result<Message>, Clock::duration>> done;
  };
  const auto started = Clock::now();
  auto call = [&](std::chrono::milliseconds timeout) {
    auto outcome = std::make_shared<Outcome>();
    (*client)->Call(Message::MakeRequest(0, 1, Service::kMap, kSilentOp, "v"), timeout,
                    [outcome, started](tessera::base::Result<Message> r) {
                      outcome->done.set_value({std::move(r), Clock::now() - started});
                    });
    return outcome->done.get_future();
  };
  auto slow = call(std::chrono::milliseconds(1500));
  auto fast = call(std::chrono::milliseconds(100));
  auto [fast_result, fast_elapsed] = fast.get();
  REQUIRE_FALSE(fast_result.has_value());
  CHECK(fast_result.error().code() == ErrorCode::kTimeout);
  CHECK(fast_elapsed >= std::chrono::milliseconds(100));
  // The slow call is still pending when the fast one has failed...
  CHECK((*client)->pending_call_count() == 1);
  auto [slow_result, slow_elapsed] = slow.get();
  REQUIRE_FALSE(slow_result.has_value());
  CHECK(slow_result.error().code() == ErrorCode::kTimeout);
  // ...and fails on its own deadline, not the fast one's.
  CHECK(slow_elapsed >= std::chrono::milliseconds(1500));
  CHECK((*client)->pending_call_count() == 0);
  CHECK((*client)->CallSync(Echo("after"), std::chrono::seconds(5)).has_value());
}

TEST_CASE("Pending calls fail with MemberLeft when the server goes away", "[net]") {
  Fixture f;
  std::promise<Error> closed_reason;
  auto options = TestClientOptions(f.server->port());
  options.on_closed = [&closed_reason](const Error& reason) { closed_reason.set_value(reason); };
  auto client = f.Connect(options);
  REQUIRE(client.has_value());
  std::vector<std::future<Result<Message>>> results;
  for (int i = 0; i < 3; ++i) {
    auto promise = std::make_shared<std::promise<Result<Message>>>();
    results.push_back(promise->get_future());
    (*client)->Call(Message::MakeRequest(0, 1, Service::kMap, kSilentOp, "v"),
                    std::chrono::seconds(30),
                    [promise](Result<Message> result) { promise->set_value(std::move(result)); });
  }
  REQUIRE(WaitFor([&f] { return f.handler.requests() == 3; }));
  f.server->Stop();
  for (auto& result : results) {
    REQUIRE(result.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
    auto value = result.get();
    REQUIRE_FALSE(value.has_value());
    CHECK(value.error().code() == ErrorCode::kMemberLeft);
    CHECK_THAT(value.error().message(), Catch::Contains("before the reply to map.op99"));
  }
  auto reason = closed_reason.get_future();
  REQUIRE(reason.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  CHECK(reason.get().code() == ErrorCode::kMemberLeft);
  CHECK_FALSE((*client)->is_open());
  auto late = (*client)->CallSync(Echo("late"), std::chrono::seconds(1));
  REQUIRE_FALSE(late.has_value());
  CHECK(late.error().code() == ErrorCode::kConnectionFailed);
}

TEST_CASE("1000 pipelined calls on one connection are all answered", "[net]") {
  Fixture f;
  auto client = f.Connect();
  REQUIRE(client.has_value());
  constexpr int kCalls = 1000;
  std::vector<std::string> sent;
  for (int i = 0; i < kCalls; ++i) sent.push_back("payload-" + std::to_string(i));
  const EchoAnswers answers = EchoAll(**client, sent, std::chrono::seconds(10));
  CHECK(answers.failed == 0);
  for (int i = 0; i < kCalls; ++i) CHECK(answers.payloads[i] == sent[i]);
  CHECK(f.handler.requests() == kCalls);
}

// Connection copies small frames into one write buffer per batch (up to
// kCoalesceFrameBytes each, kCoalesceBufferBytes per buffer) and writes larger ones from their
// own strings: sizes around both limits, interleaved, must arrive whole and in order, both
// ways (the echo server's responses are batched the same way).
TEST_CASE("Pipelined frames of mixed sizes around the coalescing limits arrive whole and in order",
          "[net]") {
  Fixture f;
  auto client = f.Connect();
  REQUIRE(client.has_value());
  const std::vector<std::size_t> sizes = {0,
                                          1,
                                          100,
                                          Connection::kCoalesceFrameBytes - 40,
                                          Connection::kCoalesceFrameBytes,
                                          Connection::kCoalesceFrameBytes + 1,
                                          Connection::kCoalesceBufferBytes - 100,
                                          Connection::kCoalesceBufferBytes + 7,
                                          300 * 1024};
  constexpr int kCalls = 3000;
  std::vector<std::string> sent(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    // Mostly small frames (many fill a coalescing buffer), with every size now and then.
    const std::size_t size = i % 7 == 0 ? sizes[(i / 7) % sizes.size()] : 20 + i % 300;
    sent[i].resize(size);
    for (std::size_t b = 0; b < size; ++b) sent[i][b] = static_cast<char>('a' + (i + b) % 26);
  }
  const EchoAnswers answers = EchoAll(**client, sent, std::chrono::seconds(20));
  CHECK(answers.failed == 0);
  int wrong = 0;
  for (int i = 0; i < kCalls; ++i) wrong += answers.payloads[i] != sent[i] ? 1 : 0;
  CHECK(wrong == 0);
  CHECK(f.handler.requests() == kCalls);
}

TEST_CASE("Event frames pushed by the server reach the client's event handler", "[net]") {
  Fixture f;
  std::promise<Message> event;
  auto options = TestClientOptions(f.server->port());
  options.on_event = [&event](Message message) { event.set_value(std::move(message)); };
  auto client = f.Connect(options);
  REQUIRE(client.has_value());
  auto answer = (*client)->CallSync(
      Message::MakeRequest(0, -1, Service::kTopic, kPushEventOp, "news"), std::chrono::seconds(5));
  REQUIRE(answer.has_value());
  auto pushed = event.get_future();
  REQUIRE(pushed.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  const Message message = pushed.get();
  CHECK(message.kind == MessageKind::kEvent);
  CHECK(message.service == Service::kTopic);
  CHECK(message.payload == "news");
}

TEST_CASE("Server::Stop closes every connection", "[net]") {
  Fixture f;
  auto first = f.Connect();
  auto second = f.Connect();
  REQUIRE(first.has_value());
  REQUIRE(second.has_value());
  REQUIRE(WaitFor([&f] { return f.server->connection_count() == 2; }));
  f.server->Stop();
  CHECK(f.server->connection_count() == 0);
  CHECK(f.handler.closed() == 2);
  CHECK(WaitFor([&first, &second] { return !(*first)->is_open() && !(*second)->is_open(); }));
}

TEST_CASE("A connection that never says hello is closed after the handshake timeout", "[net]") {
  auto options = TestServerOptions();
  options.handshake_timeout = std::chrono::milliseconds(100);
  Fixture f(options);
  auto raw = SendRaw(f.server->port(), "");
  CHECK(raw.closed_by_server);
  REQUIRE(raw.frames.size() == 1);
  REQUIRE(raw.frames[0].error.has_value());
  CHECK(raw.frames[0].error->message() ==
        "no Hello within 100 ms; the peer must open with a Hello frame");
  CHECK(WaitFor([&f] { return f.server->connection_count() == 0; }));
}

TEST_CASE("A request bigger than the maximum frame size fails without being sent", "[net]") {
  Fixture f;
  auto options = TestClientOptions(f.server->port());
  options.max_frame_bytes = 1024;
  auto client = f.Connect(options);
  REQUIRE(client.has_value());
  auto answer = (*client)->CallSync(Echo(std::string(4096, 'v')), std::chrono::seconds(5));
  REQUIRE_FALSE(answer.has_value());
  CHECK(answer.error().code() == ErrorCode::kBadRequest);
  CHECK_THAT(answer.error().message(), Catch::Contains("exceeds the maximum frame size of 1024"));
  CHECK(f.handler.requests() == 0);
  CHECK((*client)->CallSync(Echo("small"), std::chrono::seconds(5)).has_value());
}

TEST_CASE("Calls pending when the client drops its connection object still get an answer",
          "[net]") {
  Fixture f;
  auto client = f.Connect(TestClientOptions(f.server->port()));
  REQUIRE(client.has_value());
  std::vector<std::future<Result<Message>>> results;
  for (int i = 0; i < 3; ++i) {
    auto promise = std::make_shared<std::promise<Result<Message>>>();
    results.push_back(promise->get_future());
    (*client)->Call(Message::MakeRequest(0, 1, Service::kMap, kSilentOp, "v"),
                    std::chrono::seconds(60),
                    [promise](Result<Message> result) { promise->set_value(std::move(result)); });
  }
  REQUIRE(WaitFor([&f] { return f.handler.requests() == 3; }));
  client->reset();  // e.g. a member that left the member list: its connection is dropped
  for (auto& result : results) {
    // Not after the call's 60 s timeout: a caller waiting for all its answers would stall.
    REQUIRE(result.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
    auto value = result.get();
    REQUIRE_FALSE(value.has_value());
    CHECK(value.error().code() == ErrorCode::kMemberLeft);
    CHECK_THAT(value.error().message(), Catch::Contains("before the reply to map.op99"));
  }
}

TEST_CASE("A client offering protocol version 2 gets it and its lean frames are answered lean",
          "[net][lean]") {
  Fixture f;
  auto options = TestClientOptions(f.server->port());
  options.hello.max_protocol_version = tessera::wire::kLeanProtocolVersion;
  auto client = f.Connect(options);
  REQUIRE(client.has_value());
  CHECK((*client)->hello_reply().protocol_version == tessera::wire::kLeanProtocolVersion);
  CHECK((*client)->lean());
  Message request = Echo("lean hello");
  request.lean = true;
  auto answer = (*client)->CallSync(request, std::chrono::seconds(5));
  REQUIRE(answer.has_value());
  CHECK(answer->lean);
  CHECK(answer->payload == "lean hello");
  // Cap'n Proto frames still work on the same connection.
  auto plain = (*client)->CallSync(Echo("plain"), std::chrono::seconds(5));
  REQUIRE(plain.has_value());
  CHECK_FALSE(plain->lean);
  CHECK(plain->payload == "plain");
}

TEST_CASE("The version agreed on is the lower of the two sides' highest", "[net][lean]") {
  using tessera::wire::kMaxProtocolVersion;
  struct Case {
    std::uint32_t offered, served, agreed;
  };
  for (const Case c : {Case{kMaxProtocolVersion, kMaxProtocolVersion, kMaxProtocolVersion},
                       Case{2, kMaxProtocolVersion, 2}, Case{kMaxProtocolVersion, 2, 2},
                       Case{kMaxProtocolVersion + 5, kMaxProtocolVersion, kMaxProtocolVersion},
                       Case{kMaxProtocolVersion, 1, 1}, Case{1, kMaxProtocolVersion, 1}}) {
    auto server_options = TestServerOptions();
    server_options.handshake.max_protocol_version = c.served;
    Fixture f(server_options);
    auto options = TestClientOptions(f.server->port());
    options.hello.max_protocol_version = c.offered;
    auto client = f.Connect(options);
    REQUIRE(client.has_value());
    CHECK((*client)->hello_reply().protocol_version == c.agreed);
    CHECK((*client)->protocol_version() == c.agreed);
    CHECK((*client)->lean() == (c.agreed >= 2));
  }
}

TEST_CASE("Version 1 peers keep version 1: an old client, and a member serving version 1 only",
          "[net][lean]") {
  {
    Fixture f;  // a client of the release before: no max_protocol_version in its hello
    auto client = f.Connect();
    REQUIRE(client.has_value());
    CHECK((*client)->hello_reply().protocol_version == 1);
    CHECK_FALSE((*client)->lean());
  }
  auto server_options = TestServerOptions();
  server_options.handshake.max_protocol_version = 1;
  Fixture f(server_options);
  auto options = TestClientOptions(f.server->port());
  options.hello.max_protocol_version = tessera::wire::kLeanProtocolVersion;
  auto client = f.Connect(options);
  REQUIRE(client.has_value());
  CHECK((*client)->hello_reply().protocol_version == 1);
  CHECK_FALSE((*client)->lean());
  // A request encoded for lean frames is refused before it is sent; version 1 frames work.
  Message request = Echo("lean payload");
  request.lean = true;
  auto refused = (*client)->CallSync(request, std::chrono::seconds(5));
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().code() == ErrorCode::kBadRequest);
  CHECK(refused.error().message().find("negotiated protocol version 1") != std::string::npos);
  auto answer = (*client)->CallSync(Echo("falls back"), std::chrono::seconds(5));
  REQUIRE(answer.has_value());
  CHECK(answer->payload == "falls back");
}

TEST_CASE(
    "A lean frame from a peer that did not negotiate it closes its connection with a "
    "clear error",
    "[net][lean]") {
  Fixture f;
  Message request = Echo("sneaky");
  request.lean = true;
  auto exchange =
      SendRaw(f.server->port(), HelloFrame("dev", "s3cret") + tessera::wire::EncodeFrame(request));
  CHECK(exchange.closed_by_server);
  REQUIRE(exchange.frames.size() == 2);  // the hello reply, then the error
  REQUIRE(exchange.frames[1].error.has_value());
  CHECK(exchange.frames[1].error->code() == ErrorCode::kProtocol);
  CHECK(exchange.frames[1].error->message().find("did not negotiate") != std::string::npos);
}

TEST_CASE("A lean request built in its frame is answered like one Call encodes", "[net][lean]") {
  Fixture f;
  auto options = TestClientOptions(f.server->port());
  options.hello.max_protocol_version = tessera::wire::kLeanProtocolVersion;
  auto client = f.Connect(options);
  REQUIRE(client.has_value());
  REQUIRE((*client)->lean());
  auto call_lean = [](ClientConnection& c, const std::string& payload) {
    std::string frame(tessera::wire::kLeanFramePrefixBytes, '\0');
    frame += payload;
    std::promise<Result<Message>> answer;
    c.CallLean(Echo("not sent"), std::move(frame),
               std::chrono::steady_clock::now() + std::chrono::seconds(5), std::chrono::seconds(5),
               [&answer](Result<Message> r) { answer.set_value(std::move(r)); });
    return answer.get_future().get();
  };
  for (const std::string& payload :
       {std::string("built in place"), std::string(), std::string(70'000, 'p')}) {
    auto answer = call_lean(**client, payload);
    REQUIRE(answer.has_value());
    CHECK(answer->lean);
    CHECK(answer->payload == payload);
  }
  // From a scratch buffer the caller keeps (CallLeanCopy): what was sent is what the buffer
  // held at the call, though the next call overwrites it at once. Calls from this thread,
  // then a chain of calls each issued from the previous one's reply on the io thread (copied
  // into the write buffer, or for a 70,000-byte frame into a string of its own).
  const std::vector<std::string> payloads = {"first", std::string(70'000, 'q'), "",
                                             "third", std::string(5'000, 'r'),  "last"};
  std::string scratch;
  auto fill = [&scratch](const std::string& payload) {
    scratch.assign(tessera::wire::kLeanFramePrefixBytes, '\0');
    scratch += payload;
  };
  for (const auto& payload : payloads) {
    std::promise<Result<Message>> answer;
    fill(payload);
    (*client)->CallLeanCopy(
        Echo("not sent"), scratch, std::chrono::steady_clock::now() + std::chrono::seconds(5),
        std::chrono::seconds(5), [&answer](Result<Message> r) { answer.set_value(std::move(r)); });
    fill("overwritten");
    auto got = answer.get_future().get();
    REQUIRE(got.has_value());
    CHECK(got->payload == payload);
  }
  std::vector<std::string> chained;
  std::promise<void> chain_done;
  std::function<void(std::size_t)> issue = [&](std::size_t i) {
    fill(payloads[i]);
    (*client)->CallLeanCopy(Echo("not sent"), scratch,
                            std::chrono::steady_clock::now() + std::chrono::seconds(5),
                            std::chrono::seconds(5), [&, i](Result<Message> r) {
                              chained.push_back(r ? r->payload : "error: " + r.error().message());
                              if (i + 1 < payloads.size()) {
                                issue(i + 1);
                              } else {
                                chain_done.set_value();
                              }
                            });
    fill("overwritten");
  };
  issue(0);
  REQUIRE(chain_done.get_future().wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(chained == payloads);
  // On a connection that did not negotiate lean frames it is refused, not sent.
  auto v1 = f.Connect();
  REQUIRE(v1.has_value());
  REQUIRE_FALSE((*v1)->lean());
  auto refused = call_lean(**v1, "x");
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().code() == ErrorCode::kBadRequest);
  CHECK_THAT(refused.error().message(), Catch::Contains("negotiated protocol version 1"));
  auto still = (*v1)->CallSync(Echo("still serves"), std::chrono::seconds(5));
  REQUIRE(still.has_value());
  CHECK(still->payload == "still serves");
}

// ClientConnection's pending calls by id (call_table.h): ids in sequence land in their own
// slots; an id whose slot is taken by a call still pending goes to the overflow map; the
// array grows and shrinks with what is in flight, and nothing is lost on the way.
TEST_CASE("A call table keeps every id through collisions, growth and shrinking", "[net]") {
  tessera::net::CallTable<std::string> table;
  std::string out;
  CHECK(table.Find(1) == nullptr);
  CHECK_FALSE(table.Take(1, out));
  // A call pending throughout while many others come and go, 20 in flight at a time: their
  // ids pass its slot again and again.
  table.Insert(1, "long");
  std::uint64_t next = 2;
  std::deque<std::uint64_t> in_flight;
  std::size_t most_slots = 0;
  std::size_t overflowed = 0;
  for (int round = 0; round < 10'000; ++round) {
    while (in_flight.size() < 20) {
      table.Insert(next, "call " + std::to_string(next));
      in_flight.push_back(next++);
    }
    const std::uint64_t id = in_flight.front();
    in_flight.pop_front();
    REQUIRE(table.Find(id) != nullptr);
    REQUIRE(table.Take(id, out));
    REQUIRE(out == "call " + std::to_string(id));
    CHECK_FALSE(table.Take(id, out));  // taken once
    most_slots = std::max(most_slots, table.slot_count());
    overflowed += table.overflow_count();
  }
  CHECK(overflowed > 0);  // ids did land on the long call's slot
  CHECK(table.size() == 1 + in_flight.size());
  REQUIRE(table.Find(1) != nullptr);
  CHECK(*table.Find(1) == "long");
  CHECK(most_slots <= 256);  // 21 in flight: the array stays small
  // A burst of 5,000 in flight grows it; draining them shrinks it again.
  for (int i = 0; i < 5'000; ++i) {
    table.Insert(next, "burst " + std::to_string(next));
    in_flight.push_back(next++);
  }
  CHECK(table.slot_count() >= 10'000);
  std::vector<std::string> expired;  // the timeout tick: take those past their deadline
  table.TakeIf([](const std::string& v) { return v.rfind("burst", 0) == 0 && v.back() == '7'; },
               expired);
  CHECK(expired.size() == 500);
  for (const auto& e : expired) CHECK(e.back() == '7');
  for (std::uint64_t id : in_flight) {
    const std::string expected = (id + 5'000 >= next ? "burst " : "call ") + std::to_string(id);
    if (expected.back() == '7' && expected.rfind("burst", 0) == 0) {
      CHECK(table.Find(id) == nullptr);
      continue;
    }
    REQUIRE(table.Take(id, out));
    CHECK(out == expected);
  }
  CHECK(table.size() == 1);
  CHECK(table.slot_count() <= 64);
  CHECK(*table.Find(1) == "long");
  std::vector<std::string> all;
  table.TakeAll(all);
  CHECK(all == std::vector<std::string>{"long"});
  CHECK(table.empty());
  CHECK(table.slot_count() == tessera::net::CallTable<std::string>::kMinSlots);
}

TEST_CASE(
    "A client that does not read its replies is closed once they pass the unsent limit, and the "
    "server goes on serving others",
    "[net]") {
  auto options = TestServerOptions();
  options.max_client_unsent_bytes = 1024 * 1024;
  Fixture f(options);
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), f.server->port()));
  // A send the server no longer reads fails after 5 s instead of blocking.
  timeval timeout{5, 0};
  ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  asio::write(socket, asio::buffer(HelloFrame("dev", "s3cret")));
  // 64 KiB echoes, never read: the socket buffers fill (a few MiB on loopback), then the
  // server's queue, up to the limit.
  const std::string request = tessera::wire::EncodeFrame(Echo(std::string(64 * 1024, 'e')));
  boost::system::error_code error;
  int sent = 0;
  while (!error && sent < 4000) {  // at most 256 MiB
    asio::write(socket, asio::buffer(request), error);
    if (!error) ++sent;
  }
  INFO("sent " << sent << " requests; " << error.message());
  CHECK(error);      // the server closed the connection (or stopped reading it to close)
  CHECK(sent > 16);  // the limit, not the first request, ended it
  CHECK(sent < 4000);
  CHECK(WaitFor([&f] { return f.server->slow_clients_closed() == 1; }, std::chrono::seconds(10)));
  CHECK(f.log.Contains("the peer does not read what it asked for; closing"));
  auto good = f.Connect();
  REQUIRE(good.has_value());
  auto answer = (*good)->CallSync(Echo("still here"), std::chrono::seconds(5));
  REQUIRE(answer.has_value());
  CHECK(answer->payload == "still here");
}
