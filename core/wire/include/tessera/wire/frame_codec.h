#pragma once
// Frame codec: Message <-> bytes on the wire.
//
// Frame = 4-byte little-endian length N + N bytes of one Cap'n Proto message in the standard
// unpacked stream encoding (segment table + segments; see frame.capnp). Unpacked was chosen
// over packed because payloads are already compact service encodings and unpacked messages
// are read in place without a decode pass.
//
// Lean frame (protocol version 2, only on a connection whose Hello / HelloReply agreed on it):
// a request or a successful response as a fixed header and the payload, without Cap'n Proto:
// length N | 0x80000000, then kind (1 byte), call id (8), partition id (4, signed), service
// (2), op (2), all little-endian, then N - 17 payload bytes (the service's lean encoding,
// e.g. map_codec.h's). A frame with an error, a hello or an event is never lean.
//
// Thread-safety: EncodeFrame is a pure function. A FrameDecoder is thread-compatible (one
// connection's reader owns it).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/wire/message.h"

namespace tessera::wire {

// The length prefix size in bytes.
inline constexpr std::size_t kFrameHeaderBytes = 4;

// Encodes `message` as one frame, length prefix included. Fields that do not belong to
// message.kind are encoded as they are (decoders ignore them only where documented). A
// message with `lean` set is a lean frame when it can be one (a request, or a response
// without an error), else a Cap'n Proto frame with `lean` dropped.
std::string EncodeFrame(const Message& message);

// A lean frame built in place, without a copy of its payload: the caller writes the payload
// after kLeanFramePrefixBytes reserved bytes of `frame`, and SealLeanFrame fills them with the
// length and the header fields of `header` (kind, call id, partition id, service, op; its
// payload is not read). The result is the frame EncodeFrame makes of `header` with that
// payload and `lean` set. Returns false, leaving `frame` as it was, when the frame cannot be
// lean (not a request or an error-free response, shorter than the prefix, or too long);
// the caller then encodes it with EncodeFrame.
inline constexpr std::size_t kLeanFramePrefixBytes = kFrameHeaderBytes + 17;
bool SealLeanFrame(const Message& header, std::string& frame);

// Incremental decoder: Feed bytes as they arrive from a socket, then call Next() until it
// returns nullopt (needs more bytes) or an error.
//
// Errors (all kProtocol, sticky: once Next() failed, it fails again with the same error and
// the connection should be closed):
//   - a header announcing more than max_frame_bytes (checked before the body is buffered:
//     Feed drops body bytes of such a frame, so a peer cannot make us allocate them),
//   - a length that is 0 or not a multiple of 8 (not a Cap'n Proto message),
//   - a body that is not a valid message, has trailing bytes, exceeds the reader's traversal
//     or nesting limits, or has an unknown kind / role,
//   - a lean frame before set_accept_lean(true), or one shorter than its header or of
//     another kind than request / response.
class FrameDecoder {
 public:
  // max_frame_bytes is capped below 2^31 (the length's high bit marks lean frames).
  explicit FrameDecoder(std::size_t max_frame_bytes = kDefaultMaxFrameBytes);

  // Appends bytes received from the peer.
  void Feed(std::string_view bytes);
  void Feed(const char* data, std::size_t size) { Feed(std::string_view(data, size)); }

  // The next complete message, nullopt when more bytes are needed, or a kProtocol error.
  base::Result<std::optional<Message>> Next();

  // Lean frames are accepted from now on (the connection negotiated protocol version 2).
  void set_accept_lean(bool accept) { accept_lean_ = accept; }
  // The largest frame accepted from the frame not yet checked on (capped as in the
  // constructor); `why`, when not empty, ends the error of a frame over it (a server's limit
  // before the handshake: "for the Hello, the first frame").
  void set_max_frame_bytes(std::size_t max_frame_bytes, std::string why = {});

  // Bytes fed but not yet consumed by Next().
  std::size_t buffered_bytes() const { return buffer_.size() - read_offset_; }
  std::size_t max_frame_bytes() const { return max_frame_bytes_; }

 private:
  // Validates the header at read_offset_ once 4 bytes are there; sets error_ on violation.
  void CheckHeader();
  void Compact();

  std::size_t max_frame_bytes_;
  std::string limit_why_;  // set_max_frame_bytes
  std::vector<char> buffer_;
  std::size_t read_offset_ = 0;
  std::optional<base::Error> error_;
  bool accept_lean_ = false;
};

// Decodes one frame body (the N bytes after the length prefix). Errors: kProtocol.
// Exposed for tests and tools; connections use FrameDecoder.
base::Result<Message> DecodeFrameBody(std::string_view body);
// The same for a lean frame's body (lean set in the result). Errors: kProtocol.
base::Result<Message> DecodeLeanFrameBody(std::string_view body);
// Lean frames EncodeFrame produced in this process so far (a statistic; tests use it to see
// that a connection really went lean).
std::uint64_t LeanFramesEncoded();

}  // namespace tessera::wire
