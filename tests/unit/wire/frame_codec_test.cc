#include "tessera/wire/frame_codec.h"

#include <catch2/catch.hpp>
#include <random>

using tessera::base::Error;
using tessera::base::ErrorCode;
using namespace tessera::wire;

namespace {

std::vector<Message> EveryKind() {
  Hello hello{.protocol_version = 1,
              .cluster_name = "dev",
              .role = Role::kMember,
              .secret = "s3cret",
              .client_name = "member-2"};
  HelloReply accepted{.accepted = true,
                      .protocol_version = 1,
                      .member_uuid = "7f6c2a1e-0000-4000-8000-000000000001",
                      .member_address = "127.0.0.1:5701",
                      .partition_count = 271};
  std::string binary_payload("\0\x01\xff\x7f payload", 13);
  Message request = Message::MakeRequest(42, 17, Service::kMap, 3, binary_payload);
  return {
      Message::MakeHello(hello),
      Message::MakeHelloReply(accepted),
      Message::MakeHelloReply(HelloReply{}, Error(ErrorCode::kAuthFailed, "cluster name mismatch")),
      request,
      Message::MakeRequest(7, -1, Service::kCluster, 1, ""),
      Message::MakeResponse(request, "result bytes"),
      Message::MakeErrorResponse(request, Error(ErrorCode::kNotOwner, "partition 17 moved")),
      // The reason travels with the code (==, below, compares it too).
      Message::MakeErrorResponse(
          request, Error(ErrorCode::kWrongType, "a hash", tessera::base::ErrorReason::kWrongKind)),
      Message::MakeEvent(Service::kTopic, 9, -1, std::string(100000, 'x')),
  };
}

std::string Header(std::uint32_t length) {
  std::string out;
  for (int shift = 0; shift < 32; shift += 8) out.push_back(static_cast<char>(length >> shift));
  return out;
}

// The one message in `frame`, read by a decoder that accepts lean frames.
Message DecodeAcceptingLean(const std::string& frame) {
  FrameDecoder decoder;
  decoder.set_accept_lean(true);
  decoder.Feed(frame);
  auto next = decoder.Next();
  REQUIRE(next);
  REQUIRE(next->has_value());
  return std::move(**next);
}

}  // namespace

TEST_CASE("Every message kind survives an encode/decode round trip", "[wire]") {
  for (const Message& message : EveryKind()) {
    FrameDecoder decoder;
    decoder.Feed(EncodeFrame(message));
    auto decoded = decoder.Next();
    REQUIRE(decoded.has_value());
    REQUIRE(decoded->has_value());
    CHECK(**decoded == message);
    CHECK(decoder.buffered_bytes() == 0);
    auto after = decoder.Next();
    REQUIRE(after.has_value());
    CHECK_FALSE(after->has_value());
  }
}

TEST_CASE("The frame starts with the little-endian body length", "[wire]") {
  const std::string frame = EncodeFrame(Message::MakeRequest(1, 2, Service::kMap, 3, "abc"));
  REQUIRE(frame.size() > kFrameHeaderBytes);
  CHECK(frame.substr(0, 4) == Header(static_cast<std::uint32_t>(frame.size() - 4)));
}

TEST_CASE("Frames split at every byte boundary decode the same", "[wire]") {
  std::string stream;
  const auto messages = EveryKind();
  for (std::size_t i = 0; i < 4; ++i) stream += EncodeFrame(messages[i]);
  for (std::size_t split = 0; split <= stream.size(); ++split) {
    FrameDecoder decoder;
    std::vector<Message> out;
    for (std::string_view part :
         {std::string_view(stream).substr(0, split), std::string_view(stream).substr(split)}) {
      decoder.Feed(part);
      for (;;) {
        auto next = decoder.Next();
        REQUIRE(next.has_value());
        if (!next->has_value()) break;
        out.push_back(std::move(**next));
      }
    }
    REQUIRE(out.size() == 4);
    for (std::size_t i = 0; i < 4; ++i) CHECK(out[i] == messages[i]);
  }
}

TEST_CASE("Byte-at-a-time feeding yields each message once complete", "[wire]") {
  const Message message = Message::MakeRequest(5, 1, Service::kMap, 2, "value");
  const std::string frame = EncodeFrame(message);
  FrameDecoder decoder;
  for (std::size_t i = 0; i + 1 < frame.size(); ++i) {
    decoder.Feed(frame.substr(i, 1));
    auto next = decoder.Next();
    REQUIRE(next.has_value());
    REQUIRE_FALSE(next->has_value());
  }
  decoder.Feed(frame.substr(frame.size() - 1));
  auto next = decoder.Next();
  REQUIRE(next.has_value());
  REQUIRE(next->has_value());
  CHECK(**next == message);
}

TEST_CASE("An oversized frame is rejected from its header alone", "[wire]") {
  FrameDecoder decoder;  // default 16 MiB
  decoder.Feed(Header(1u << 30));
  auto next = decoder.Next();
  REQUIRE_FALSE(next.has_value());
  CHECK(next.error().code() == ErrorCode::kProtocol);
  CHECK(next.error().message() ==
        "frame of 1073741824 bytes exceeds the maximum frame size of 16777216 bytes; send "
        "smaller values or raise the maximum frame size");
  decoder.Feed(std::string(4096, 'x'));  // the body is never buffered
  CHECK(decoder.buffered_bytes() == 4);
  CHECK_FALSE(decoder.Next().has_value());  // sticky
}

TEST_CASE("The maximum frame size is configurable", "[wire]") {
  const std::string frame =
      EncodeFrame(Message::MakeRequest(1, 1, Service::kMap, 1, std::string(1000, 'v')));
  FrameDecoder small(256);
  small.Feed(frame);
  auto rejected = small.Next();
  REQUIRE_FALSE(rejected.has_value());
  CHECK(rejected.error().code() == ErrorCode::kProtocol);
  FrameDecoder large(frame.size());
  large.Feed(frame);
  auto accepted = large.Next();
  REQUIRE(accepted.has_value());
  CHECK(accepted->has_value());
}

TEST_CASE("A truncated message inside a complete frame is a protocol error", "[wire]") {
  const std::string frame = EncodeFrame(Message::MakeRequest(1, 1, Service::kMap, 1, "abcdefgh"));
  const std::string body = frame.substr(4);
  // Keep the segment table but drop the last 8 bytes of the segment, and fix the length.
  const std::string cut = body.substr(0, body.size() - 8);
  FrameDecoder decoder;
  decoder.Feed(Header(static_cast<std::uint32_t>(cut.size())) + cut);
  auto next = decoder.Next();
  REQUIRE_FALSE(next.has_value());
  CHECK(next.error().code() == ErrorCode::kProtocol);
  CHECK_THAT(next.error().message(), Catch::StartsWith("malformed frame"));
}

TEST_CASE("A truncated stream waits for the rest instead of failing", "[wire]") {
  const std::string frame = EncodeFrame(Message::MakeRequest(1, 1, Service::kMap, 1, "abc"));
  FrameDecoder decoder;
  decoder.Feed(frame.substr(0, frame.size() - 3));
  auto next = decoder.Next();
  REQUIRE(next.has_value());
  CHECK_FALSE(next->has_value());
}

TEST_CASE("Garbage and bad lengths are protocol errors", "[wire]") {
  SECTION("length not a multiple of 8") {
    FrameDecoder decoder;
    decoder.Feed(Header(13) + std::string(13, 'g'));
    auto next = decoder.Next();
    REQUIRE_FALSE(next.has_value());
    CHECK(next.error().code() == ErrorCode::kProtocol);
  }
  SECTION("zero length") {
    FrameDecoder decoder;
    decoder.Feed(Header(0));
    CHECK_FALSE(decoder.Next().has_value());
  }
  SECTION("text instead of a frame") {
    FrameDecoder decoder;
    decoder.Feed("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    auto next = decoder.Next();
    REQUIRE_FALSE(next.has_value());
    CHECK(next.error().code() == ErrorCode::kProtocol);
  }
  SECTION("random words with a valid length") {
    std::string body(64, '\xa5');
    FrameDecoder decoder;
    decoder.Feed(Header(64) + body);
    auto next = decoder.Next();
    REQUIRE_FALSE(next.has_value());
    CHECK(next.error().code() == ErrorCode::kProtocol);
  }
}

TEST_CASE("Unknown message kinds are rejected", "[wire]") {
  Message message = Message::MakeRequest(1, 1, Service::kMap, 1, "x");
  message.kind = static_cast<MessageKind>(99);
  FrameDecoder decoder;
  decoder.Feed(EncodeFrame(message));
  auto next = decoder.Next();
  REQUIRE_FALSE(next.has_value());
  CHECK(next.error() == Error(ErrorCode::kProtocol,
                              "unknown message kind 99; the peer speaks another protocol or a "
                              "newer version"));
}

TEST_CASE("Random bytes never crash the decoder", "[wire]") {
  std::mt19937_64 random(20240601);
  const std::string valid = EncodeFrame(EveryKind()[3]);
  std::size_t errors = 0;
  for (int i = 0; i < 5000; ++i) {
    std::string input;
    if (i % 2 == 0) {
      // Mutate a valid frame: flip a few bytes after the header.
      input = valid;
      for (int flips = 0; flips < 3; ++flips) {
        const std::size_t at = 4 + random() % (input.size() - 4);
        input[at] = static_cast<char>(random());
      }
    } else {
      input.resize(random() % 256);
      for (char& c : input) c = static_cast<char>(random());
    }
    FrameDecoder decoder(4096);
    decoder.Feed(input);
    for (int step = 0; step < 64; ++step) {  // bounded
      auto next = decoder.Next();
      if (!next) {
        CHECK(next.error().code() == ErrorCode::kProtocol);
        ++errors;
        break;
      }
      if (!next->has_value()) break;
    }
  }
  CHECK(errors > 0);
}

TEST_CASE("Lean frames round-trip requests and responses once accepted", "[wire][lean]") {
  Message request =
      Message::MakeRequest(1ULL << 40, 17, Service::kMap, 3, std::string("\0lean\xff payload", 14));
  request.lean = true;
  Message response = Message::MakeResponse(request, "result");
  REQUIRE(response.lean);
  Message empty = Message::MakeRequest(9, -1, Service::kMap, 2, "");
  empty.lean = true;
  for (const Message& m : {request, response, empty}) {
    const std::string frame = EncodeFrame(m);
    CHECK((static_cast<unsigned char>(frame[3]) & 0x80) != 0);  // the lean bit of the length
    CHECK(frame.size() == 4 + 17 + m.payload.size());
    FrameDecoder decoder;
    decoder.set_accept_lean(true);
    for (char c : frame) decoder.Feed(&c, 1);  // byte at a time
    auto next = decoder.Next();
    REQUIRE(next);
    REQUIRE(next->has_value());
    CHECK(**next == m);
    CHECK(decoder.buffered_bytes() == 0);
  }
}

TEST_CASE("Errors, hellos and events never travel lean", "[wire][lean]") {
  Message request = Message::MakeRequest(5, 1, Service::kMap, 3, "x");
  request.lean = true;
  Message error = Message::MakeErrorResponse(request, Error(ErrorCode::kNotOwner, "moved"));
  CHECK_FALSE(error.lean);
  Message event = Message::MakeEvent(Service::kTopic, 9, -1, "m");
  event.lean = true;
  for (const Message& m : {error, event}) {
    const std::string frame = EncodeFrame(m);
    CHECK((static_cast<unsigned char>(frame[3]) & 0x80) == 0);
    const Message back = DecodeAcceptingLean(frame);
    CHECK_FALSE(back.lean);
    CHECK(back.kind == m.kind);
  }
}

TEST_CASE("A lean frame on a connection that did not negotiate it is a clear protocol error",
          "[wire][lean]") {
  Message request = Message::MakeRequest(5, 1, Service::kMap, 3, "payload");
  request.lean = true;
  FrameDecoder decoder;
  decoder.Feed(EncodeFrame(request));
  auto next = decoder.Next();
  REQUIRE_FALSE(next);
  CHECK(next.error().code() == ErrorCode::kProtocol);
  CHECK(next.error().message().find("did not negotiate") != std::string::npos);
  // Malformed lean frames once accepted: too short, or of a kind that is never lean.
  FrameDecoder short_frame;
  short_frame.set_accept_lean(true);
  short_frame.Feed(Header(0x80000000U | 5) + "12345");
  CHECK_FALSE(short_frame.Next());
  FrameDecoder hello_kind;
  hello_kind.set_accept_lean(true);
  hello_kind.Feed(Header(0x80000000U | 17) + std::string(1, '\x01') + std::string(16, '\0'));
  auto bad = hello_kind.Next();
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message().find("only requests and responses") != std::string::npos);
}

TEST_CASE("Hello carries the highest version its sender speaks", "[wire][lean]") {
  Hello hello;
  hello.cluster_name = "dev";
  hello.max_protocol_version = 2;
  FrameDecoder decoder;
  decoder.Feed(EncodeFrame(Message::MakeHello(hello)));
  auto next = decoder.Next();
  REQUIRE(next);
  REQUIRE(next->has_value());
  CHECK((*next)->hello->max_protocol_version == 2);
  CHECK((*next)->hello->protocol_version == 1);
}

TEST_CASE("Lean frame lengths are checked against the maximum, before and after negotiation",
          "[wire][lean]") {
  FrameDecoder accepted(1000);
  accepted.set_accept_lean(true);
  accepted.Feed(Header(0x80000000U | 1001));
  auto big = accepted.Next();
  REQUIRE_FALSE(big);
  CHECK(big.error().message().find("exceeds the maximum") != std::string::npos);
  FrameDecoder not_yet(1000);
  not_yet.Feed(Header(0x80000000U | 1001));
  auto refused = not_yet.Next();
  REQUIRE_FALSE(refused);
  not_yet.set_accept_lean(true);  // an error stays: the connection is being closed
  auto still = not_yet.Next();
  REQUIRE_FALSE(still);
  CHECK(still.error() == refused.error());
  // A decoder's maximum stays below 2^31, so a Cap'n Proto length never looks lean.
  FrameDecoder huge(std::size_t{1} << 40);
  CHECK(huge.max_frame_bytes() < (std::size_t{1} << 31));
  CHECK_FALSE(DecodeLeanFrameBody("short"));
}

TEST_CASE("EncodeFrame counts the lean frames it writes", "[wire][lean]") {
  const auto before = LeanFramesEncoded();
  Message request = Message::MakeRequest(1, 2, Service::kMap, 3, "p");
  (void)EncodeFrame(request);
  CHECK(LeanFramesEncoded() == before);
  request.lean = true;
  (void)EncodeFrame(request);
  CHECK(LeanFramesEncoded() == before + 1);
}

TEST_CASE("A lean frame sealed in place is the frame EncodeFrame makes", "[wire][lean]") {
  Message request =
      Message::MakeRequest(1ULL << 41, -7, Service::kMap, 12, std::string("pay\0load", 8));
  request.lean = true;
  Message response = Message::MakeResponse(request, std::string(300, 'v'));
  Message empty = Message::MakeResponse(request, "");
  for (const Message& m : {request, response, empty}) {
    std::string frame(tessera::wire::kLeanFramePrefixBytes, '\0');
    frame += m.payload;
    Message header = m;
    header.payload = "not read";
    REQUIRE(tessera::wire::SealLeanFrame(header, frame));
    // The layout byte by byte (EncodeFrame seals its lean frames the same way, so comparing
    // with it alone would not catch a wrong header): length with the lean bit, kind, call id,
    // partition, service, op, all little-endian, then the payload untouched.
    std::string expected;
    auto put = [&expected](std::uint64_t v, int bytes) {
      for (int i = 0; i < bytes; ++i) expected.push_back(static_cast<char>(v >> (8 * i)));
    };
    put(0x80000000ULL | (17 + m.payload.size()), 4);
    put(static_cast<std::uint64_t>(m.kind), 1);
    put(m.call_id, 8);
    put(static_cast<std::uint32_t>(m.partition_id), 4);
    put(static_cast<std::uint64_t>(m.service), 2);
    put(m.op, 2);
    expected += m.payload;
    CHECK(frame == expected);
    CHECK(frame == EncodeFrame(m));
    CHECK(DecodeAcceptingLean(frame) == m);
  }
  // What cannot be lean is left as it was, for EncodeFrame.
  Message error = Message::MakeErrorResponse(request, Error(ErrorCode::kNotOwner, "moved"));
  Message event = Message::MakeEvent(Service::kTopic, 9, -1, "m");
  for (const Message& m : {error, event}) {
    std::string frame(tessera::wire::kLeanFramePrefixBytes, 'x');
    CHECK_FALSE(tessera::wire::SealLeanFrame(m, frame));
    CHECK(frame == std::string(tessera::wire::kLeanFramePrefixBytes, 'x'));
  }
  std::string short_frame = "abc";
  CHECK_FALSE(tessera::wire::SealLeanFrame(request, short_frame));
  CHECK(short_frame == "abc");
}
