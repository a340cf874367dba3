// The codec is the only place that sees the Cap'n Proto types: it converts frame.capnp
// messages to and from wire::Message at the edge. Encoding builds in the thread's scratch
// segment and copies once into the frame; decoding copies the body into the thread's
// word-aligned buffer (socket buffers are not aligned; capnp_io.h), reads it with tight
// ReaderOptions, converts every field eagerly inside one try block (Cap'n Proto validates
// lazily and throws kj::Exception on bad pointers), and turns any failure into a kProtocol
// error.
#include "tessera/wire/frame_codec.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>
#include <algorithm>
#include <atomic>
#include <cstring>

#include "frame.capnp.h"
#include "tessera/base/bytes.h"
#include "tessera/wire/capnp_io.h"

namespace tessera::wire {
namespace {

namespace schema = capnp_schema;
using base::ErrorCode;

constexpr std::size_t kWordBytes = sizeof(capnp::word);
constexpr unsigned kNestingLimit = 8;

kj::ArrayPtr<const kj::byte> Bytes(std::string_view text) {
  return {reinterpret_cast<const kj::byte*>(text.data()), text.size()};
}

capnp::Text::Reader TextOf(const std::string& text) { return {text.data(), text.size()}; }

std::string ToString(capnp::Text::Reader text) { return {text.cStr(), text.size()}; }

std::string ToString(capnp::Data::Reader data) {
  return {reinterpret_cast<const char*>(data.begin()), data.size()};
}

void EncodeHello(const Hello& hello, schema::Hello::Builder out) {
  out.setProtocolVersion(hello.protocol_version);
  out.setClusterName(TextOf(hello.cluster_name));
  out.setRole(static_cast<schema::Hello::Role>(hello.role));
  out.setSecret(TextOf(hello.secret));
  out.setClientName(TextOf(hello.client_name));
  out.setMaxProtocolVersion(hello.max_protocol_version);
}

void EncodeHelloReply(const HelloReply& reply, schema::HelloReply::Builder out) {
  out.setAccepted(reply.accepted);
  out.setProtocolVersion(reply.protocol_version);
  out.setMemberUuid(TextOf(reply.member_uuid));
  out.setMemberAddress(TextOf(reply.member_address));
  out.setPartitionCount(reply.partition_count);
}

void EncodeMessage(const Message& message, schema::Frame::Builder frame) {
  frame.setKind(static_cast<schema::Frame::Kind>(message.kind));
  frame.setCallId(message.call_id);
  frame.setPartitionId(message.partition_id);
  frame.setService(static_cast<std::uint16_t>(message.service));
  frame.setOp(message.op);
  if (!message.payload.empty()) frame.setPayload(Bytes(message.payload));
  if (message.error) {
    auto error = frame.initError();
    error.setCode(static_cast<std::uint16_t>(message.error->code()));
    error.setMessage(TextOf(message.error->message()));
    error.setReason(static_cast<std::uint16_t>(message.error->reason()));
  }
  if (message.hello) EncodeHello(*message.hello, frame.initHello());
  if (message.hello_reply) EncodeHelloReply(*message.hello_reply, frame.initHelloReply());
}

base::Result<Hello> DecodeHello(schema::Hello::Reader in) {
  const auto role = static_cast<std::uint16_t>(in.getRole());
  if (role != static_cast<std::uint16_t>(Role::kMember) &&
      role != static_cast<std::uint16_t>(Role::kClient)) {
    return base::Fail(ErrorCode::kProtocol, "Hello frame has unknown role " + std::to_string(role) +
                                                "; expected member (1) or client (2)");
  }
  Hello hello;
  hello.protocol_version = in.getProtocolVersion();
  hello.cluster_name = ToString(in.getClusterName());
  hello.role = static_cast<Role>(role);
  hello.secret = ToString(in.getSecret());
  hello.client_name = ToString(in.getClientName());
  hello.max_protocol_version = in.getMaxProtocolVersion();
  return hello;
}

HelloReply DecodeHelloReply(schema::HelloReply::Reader in) {
  HelloReply reply;
  reply.accepted = in.getAccepted();
  reply.protocol_version = in.getProtocolVersion();
  reply.member_uuid = ToString(in.getMemberUuid());
  reply.member_address = ToString(in.getMemberAddress());
  reply.partition_count = in.getPartitionCount();
  return reply;
}

base::Result<MessageKind> DecodeKind(schema::Frame::Kind kind) {
  const auto value = static_cast<std::uint16_t>(kind);
  if (value < static_cast<std::uint16_t>(MessageKind::kHello) ||
      value > static_cast<std::uint16_t>(MessageKind::kEvent)) {
    return base::Fail(ErrorCode::kProtocol,
                      "unknown message kind " + std::to_string(value) +
                          "; the peer speaks another protocol or a newer version");
  }
  return static_cast<MessageKind>(value);
}

// Converts a frame that passed the reader's structural checks. May throw kj::Exception.
base::Result<Message> DecodeMessage(schema::Frame::Reader frame) {
  auto kind = DecodeKind(frame.getKind());
  if (!kind) return std::unexpected(kind.error());
  Message message;
  message.kind = *kind;
  message.call_id = frame.getCallId();
  message.partition_id = frame.getPartitionId();
  message.service = static_cast<Service>(frame.getService());
  message.op = frame.getOp();
  message.payload = ToString(frame.getPayload());
  if (frame.hasError()) {
    auto error = frame.getError();
    message.error.emplace(static_cast<ErrorCode>(error.getCode()), ToString(error.getMessage()),
                          static_cast<base::ErrorReason>(error.getReason()));
  }
  if (message.kind == MessageKind::kHello) {
    if (!frame.hasHello()) return base::Fail(ErrorCode::kProtocol, "Hello frame without a hello");
    auto hello = DecodeHello(frame.getHello());
    if (!hello) return std::unexpected(hello.error());
    message.hello = std::move(*hello);
  }
  if (message.kind == MessageKind::kHelloReply) {
    if (!frame.hasHelloReply()) {
      return base::Fail(ErrorCode::kProtocol, "HelloReply frame without a hello reply");
    }
    message.hello_reply = DecodeHelloReply(frame.getHelloReply());
  }
  return message;
}

std::uint32_t ReadLength(const char* header) { return base::LoadLE<std::uint32_t>(header); }

void AppendLength(std::string& out, std::uint32_t length) { base::PutLE(out, length); }

constexpr std::uint32_t kLeanBit = 0x80000000U;
constexpr std::size_t kLeanHeaderBytes = 1 + 8 + 4 + 2 + 2;
static_assert(kLeanFramePrefixBytes == kFrameHeaderBytes + kLeanHeaderBytes);

bool CanBeLean(const Message& m) {
  return m.lean && !m.error && !m.hello && !m.hello_reply &&
         (m.kind == MessageKind::kRequest || m.kind == MessageKind::kResponse) &&
         m.payload.size() <= ~kLeanBit - kLeanHeaderBytes;  // the length keeps its lean bit
}

std::atomic<std::uint64_t> lean_frames_encoded{0};

}  // namespace

std::string EncodeFrame(const Message& message) {
  if (CanBeLean(message)) {
    std::string out;
    out.reserve(kLeanFramePrefixBytes + message.payload.size());
    out.resize(kLeanFramePrefixBytes);
    out += message.payload;
    SealLeanFrame(message, out);
    return out;
  }
  // The first segment is sized so that the whole message fits it (one segment, one copy out).
  ScratchBuilder builder(message.payload.size() +
                         (message.error ? message.error->message().size() : 0) + 768);
  EncodeMessage(message, builder.message().initRoot<schema::Frame>());
  const std::size_t body_bytes =
      capnp::computeSerializedSizeInWords(builder.message()) * kWordBytes;
  std::string out;
  out.reserve(kFrameHeaderBytes + body_bytes);
  AppendLength(out, static_cast<std::uint32_t>(body_bytes));
  AppendFlat(builder.message(), out);
  return out;
}

bool SealLeanFrame(const Message& header, std::string& frame) {
  if (frame.size() < kLeanFramePrefixBytes || header.error || header.hello || header.hello_reply ||
      (header.kind != MessageKind::kRequest && header.kind != MessageKind::kResponse) ||
      frame.size() - kFrameHeaderBytes > ~kLeanBit) {
    return false;
  }
  lean_frames_encoded.fetch_add(1, std::memory_order_relaxed);
  char* out = frame.data();
  out = base::StoreLE(out, kLeanBit | static_cast<std::uint32_t>(frame.size() - kFrameHeaderBytes));
  *out++ = static_cast<char>(header.kind);
  out = base::StoreLE(out, header.call_id);
  out = base::StoreLE(out, header.partition_id);
  out = base::StoreLE(out, static_cast<std::uint16_t>(header.service));
  base::StoreLE(out, header.op);
  return true;
}

base::Result<Message> DecodeFrameBody(std::string_view body) {
  if (body.empty() || body.size() % kWordBytes != 0) {
    return base::Fail(ErrorCode::kProtocol, "frame of " + std::to_string(body.size()) +
                                                " bytes is not a Cap'n Proto message (the "
                                                "length must be a non-zero multiple of 8)");
  }
  const AlignedWords aligned(body);
  const auto words = aligned.words();
  capnp::ReaderOptions options;
  options.traversalLimitInWords = words.size() * 2 + 64;
  options.nestingLimit = kNestingLimit;
  try {
    capnp::FlatArrayMessageReader reader(words, options);
    if (reader.getEnd() != words.end()) {
      return base::Fail(ErrorCode::kProtocol,
                        "malformed frame: the message is shorter than the frame length");
    }
    return DecodeMessage(reader.getRoot<schema::Frame>());
  } catch (const kj::Exception& exception) {
    return base::Fail(ErrorCode::kProtocol,
                      std::string("malformed frame: ") + exception.getDescription().cStr());
  }
}

base::Result<Message> DecodeLeanFrameBody(std::string_view body) {
  if (body.size() < kLeanHeaderBytes) {
    return base::Fail(ErrorCode::kProtocol, "lean frame of " + std::to_string(body.size()) +
                                                " bytes is shorter than its " +
                                                std::to_string(kLeanHeaderBytes) + "-byte header");
  }
  const auto kind = static_cast<MessageKind>(static_cast<unsigned char>(body[0]));
  if (kind != MessageKind::kRequest && kind != MessageKind::kResponse) {
    return base::Fail(ErrorCode::kProtocol, "lean frame of kind " +
                                                std::to_string(static_cast<int>(kind)) +
                                                "; only requests and responses travel lean");
  }
  Message message;
  message.kind = kind;
  message.call_id = base::LoadLE<std::uint64_t>(body.data() + 1);
  message.partition_id = base::LoadLE<std::int32_t>(body.data() + 9);
  message.service = static_cast<Service>(base::LoadLE<std::uint16_t>(body.data() + 13));
  message.op = base::LoadLE<std::uint16_t>(body.data() + 15);
  message.payload.assign(body.substr(kLeanHeaderBytes));
  message.lean = true;
  return message;
}

std::uint64_t LeanFramesEncoded() { return lean_frames_encoded.load(std::memory_order_relaxed); }

// Below 2^31: the length's high bit marks lean frames.
FrameDecoder::FrameDecoder(std::size_t max_frame_bytes)
    : max_frame_bytes_(std::min<std::size_t>(max_frame_bytes, ~kLeanBit)) {}

void FrameDecoder::set_max_frame_bytes(std::size_t max_frame_bytes, std::string why) {
  max_frame_bytes_ = std::min<std::size_t>(max_frame_bytes, ~kLeanBit);
  limit_why_ = std::move(why);
}

void FrameDecoder::Feed(std::string_view bytes) {
  if (error_) return;  // the connection is being closed; do not buffer anything more
  if (buffered_bytes() < kFrameHeaderBytes) {
    // Take just enough to see the header, so an oversized frame is refused before its body.
    const std::size_t header_part = std::min(bytes.size(), kFrameHeaderBytes - buffered_bytes());
    buffer_.insert(buffer_.end(), bytes.begin(), bytes.begin() + header_part);
    bytes.remove_prefix(header_part);
    CheckHeader();
    if (error_) return;
  }
  buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
}

void FrameDecoder::CheckHeader() {
  if (error_ || buffered_bytes() < kFrameHeaderBytes) return;
  const std::uint32_t header = ReadLength(buffer_.data() + read_offset_);
  if ((header & kLeanBit) != 0 && accept_lean_) {
    const std::size_t length = header & ~kLeanBit;
    if (length > max_frame_bytes_) {
      error_.emplace(ErrorCode::kProtocol,
                     "lean frame of " + std::to_string(length) +
                         " bytes exceeds the maximum frame size of " +
                         std::to_string(max_frame_bytes_) +
                         " bytes; send smaller values or raise the maximum frame size");
    } else if (length < kLeanHeaderBytes) {
      error_.emplace(ErrorCode::kProtocol, "lean frame length " + std::to_string(length) +
                                               " is shorter than the lean header");
    }
    return;
  }
  const std::size_t length = header;
  if ((header & kLeanBit) != 0 && length <= (max_frame_bytes_ | kLeanBit)) {
    error_.emplace(
        ErrorCode::kProtocol,
        "a lean frame (protocol version 2 or later) arrived on a connection that did not "
        "negotiate it in its hello; the peer must send protocol version 1 frames");
  } else if (length > max_frame_bytes_ && !limit_why_.empty()) {
    error_.emplace(ErrorCode::kProtocol,
                   "frame of " + std::to_string(length) + " bytes exceeds the maximum of " +
                       std::to_string(max_frame_bytes_) + " bytes " + limit_why_);
  } else if (length > max_frame_bytes_) {
    error_.emplace(ErrorCode::kProtocol,
                   "frame of " + std::to_string(length) +
                       " bytes exceeds the maximum frame size of " +
                       std::to_string(max_frame_bytes_) +
                       " bytes; send smaller values or raise the maximum frame size");
  } else if (length == 0 || length % kWordBytes != 0) {
    error_.emplace(ErrorCode::kProtocol, "frame length " + std::to_string(length) +
                                             " is not a non-zero multiple of 8; the peer does "
                                             "not speak the Tessera protocol");
  }
}

base::Result<std::optional<Message>> FrameDecoder::Next() {
  CheckHeader();
  if (error_) return std::unexpected(*error_);
  if (buffered_bytes() < kFrameHeaderBytes) return std::nullopt;
  const std::uint32_t header = ReadLength(buffer_.data() + read_offset_);
  const bool lean = (header & kLeanBit) != 0;  // accepted: CheckHeader passed
  const std::size_t length = header & ~kLeanBit;
  if (buffered_bytes() < kFrameHeaderBytes + length) return std::nullopt;
  const std::string_view body(buffer_.data() + read_offset_ + kFrameHeaderBytes, length);
  auto message = lean ? DecodeLeanFrameBody(body) : DecodeFrameBody(body);
  if (!message) {
    error_ = message.error();
    return std::unexpected(*error_);
  }
  read_offset_ += kFrameHeaderBytes + length;
  Compact();
  // The next header is checked by the next call (or Feed), not here: the caller may change
  // the limits on what this frame says (a server raises them once it accepted the Hello).
  return std::optional<Message>(std::move(*message));
}

void FrameDecoder::Compact() {
  if (read_offset_ == buffer_.size()) {
    buffer_.clear();
    read_offset_ = 0;
  } else if (read_offset_ > buffer_.size() / 2) {
    buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(read_offset_));
    read_offset_ = 0;
  }
}

}  // namespace tessera::wire
