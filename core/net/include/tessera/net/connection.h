#pragma once
// Connection: one framed native-protocol TCP connection, owned by the thread that runs its
// socket's io_context (a shard on members, the client's I/O thread on clients). It reads
// frames with a wire::FrameDecoder and hands each decoded Message to its handlers, and it
// writes frames in batches: frames queued while a write is in flight (or queued during one run
// of the event loop) go out together in a single gathered async_write.
//
// Shard: Start and every handler run on the socket's io_context thread. Send, SendFrame and
// Close are safe from any thread. The accessors (id, shard, remote_address, is_open) too.
// peer_hello/set_peer_hello only on the socket's thread.

#include <utility>  // before Asio's awaitable header (Boost 1.74)

#include <spdlog/logger.h>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/wire/frame_codec.h"
#include "tessera/wire/message.h"

namespace tessera::net {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using MessageHandler = std::function<void(const std::shared_ptr<Connection>&, wire::Message)>;
  // A malformed, oversized or unknown frame arrived; reading has stopped. The handler usually
  // sends an error reply and calls Close(). Without a handler the connection just closes.
  using ProtocolErrorHandler =
      std::function<void(const std::shared_ptr<Connection>&, const base::Error&)>;
  // The socket is closed (by Close, by the peer, or by an I/O error). Called exactly once.
  using ClosedHandler = std::function<void(const std::shared_ptr<Connection>&)>;
  // The frames one read delivered, before each goes to on_message (in order, unchanged): a
  // hint, say to prefetch what they will touch. Only once peer_hello() is set (from then on
  // nothing a frame does changes how the next one decodes, so decoding ahead is safe), only
  // for two frames or more, at most kMaxBatchFrames at a time. Optional.
  using BatchHandler =
      std::function<void(const std::shared_ptr<Connection>&, std::span<const wire::Message>)>;
  static constexpr std::size_t kMaxBatchFrames = 32;
  // Frames up to this size are copied into the write buffer of their batch (one contiguous
  // write for many small frames); larger ones are written from their own string, gathered.
  static constexpr std::size_t kCoalesceFrameBytes = 4 * 1024;
  // A coalescing buffer takes frames until it holds this much; then the next one starts.
  static constexpr std::size_t kCoalesceBufferBytes = 64 * 1024;

  struct Handlers {
    MessageHandler on_message;
    ProtocolErrorHandler on_protocol_error;
    ClosedHandler on_closed;
    BatchHandler on_batch;
  };

  // How long Close() waits for queued frames to be written before it drops them.
  static constexpr std::chrono::milliseconds kCloseLinger{2000};

  // `id` names the connection in logs and stats (the server numbers them); `shard` says which
  // shard owns it (0 on clients). Frames bigger than max_frame_bytes are protocol errors.
  static std::shared_ptr<Connection> Create(boost::asio::ip::tcp::socket socket, std::uint64_t id,
                                            std::size_t shard, std::size_t max_frame_bytes,
                                            std::shared_ptr<spdlog::logger> log);

  // Starts the read loop. Handlers are released after on_closed, breaking reference cycles.
  // REQUIRES: called once, on the socket's io_context thread.
  void Start(Handlers handlers);

  // Encodes and queues `message`. Returns false (and drops it) when the connection is closed
  // or closing. Any thread.
  bool Send(const wire::Message& message);
  // Queues an already encoded frame (wire::EncodeFrame output). Any thread.
  bool SendFrame(std::string frame);
  // The same from bytes the caller keeps (a reused buffer): copied into the write buffer (a
  // frame of up to kCoalesceFrameBytes) or into a string of its own.
  bool SendFrameCopy(std::string_view frame);

  // Stops reading, writes the frames already queued (up to kCloseLinger), then closes the
  // socket and calls on_closed. Idempotent. Any thread.
  void Close();

  std::uint64_t id() const { return id_; }
  std::size_t shard() const { return shard_; }
  // "ip:port" of the peer, captured at creation ("?" if unknown).
  const std::string& remote_address() const { return remote_address_; }
  // False once Close() was called or the socket failed.
  bool is_open() const { return !closing_.load(); }

  // The peer's accepted Hello (set by the server after the handshake), or null before.
  const wire::Hello* peer_hello() const { return peer_hello_ ? &*peer_hello_ : nullptr; }
  void set_peer_hello(wire::Hello hello) { peer_hello_ = std::move(hello); }
  // The peer negotiated protocol version 2: its lean frames are read from now on (socket's
  // thread: the server's hello handler, the client's hello reply handler).
  void set_accept_lean(bool accept) { decoder_.set_accept_lean(accept); }
  // The largest frame read from here on (FrameDecoder::set_max_frame_bytes). Before Start, or
  // on the socket's thread.
  void set_max_frame_bytes(std::size_t max_frame_bytes, std::string why = {}) {
    decoder_.set_max_frame_bytes(max_frame_bytes, std::move(why));
  }
  // The most bytes of frames that may wait unwritten for this peer (queued and in the write
  // under way); 0 = no limit. A frame that would pass it is not queued: the connection logs
  // once that the peer does not read, closes (unsent_limit_hit() turns true) and Send returns
  // false. Any thread.
  void set_max_unsent_bytes(std::size_t max_bytes);
  bool unsent_limit_hit() const { return unsent_limit_hit_.load(); }
  // The protocol version agreed with the peer in the hello (1 before it), for handlers that
  // check what a version allows (set on the socket's thread before its requests are read).
  std::uint32_t protocol_version() const { return protocol_version_; }
  void set_protocol_version(std::uint32_t version) { protocol_version_ = version; }

  class Passkey {
    friend class Connection;
    Passkey() = default;
  };
  // Internal: use Create().
  Connection(Passkey, boost::asio::ip::tcp::socket socket, std::uint64_t id, std::size_t shard,
             std::size_t max_frame_bytes, std::shared_ptr<spdlog::logger> log);

 private:
  void ReadSome();
  void OnRead(const boost::system::error_code& error, std::size_t bytes);
  void DeliverFrames();
  // Queues a frame (outbox_mutex_ held): `owned` is taken when the frame is too big to copy
  // into the batch's buffer; without it, `frame` is copied either way.
  // False (nothing queued) when the frame would pass max_unsent_bytes_.
  bool Enqueue(std::string_view frame, std::string* owned);
  void Flush();
  void OnWritten(const boost::system::error_code& error);
  void BeginClose();
  void Finish();

  const std::uint64_t id_;
  const std::size_t shard_;
  const std::shared_ptr<spdlog::logger> log_;
  std::string remote_address_;
  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer linger_timer_;

  // Socket-thread state.
  Handlers handlers_;
  wire::FrameDecoder decoder_;
  std::vector<char> read_buffer_;
  std::vector<std::string> writing_;                // frames of the write in flight
  std::vector<boost::asio::const_buffer> buffers_;  // writing_'s, for the gathered write
  bool write_in_flight_ = false;
  bool close_begun_ = false;
  bool finished_ = false;
  std::optional<wire::Hello> peer_hello_;
  std::uint32_t protocol_version_ = 1;
  std::vector<wire::Message> batch_;  // DeliverFrames' frames decoded ahead (capacity kept)

  std::atomic<bool> closing_{false};
  std::mutex outbox_mutex_;
  // Guarded by outbox_mutex_: the frames queued for the next write. Small frames are copied
  // into one buffer (outbox_.back() while coalescing_), so a batch of them leaves as one
  // contiguous write; larger ones keep their own string (no copy).
  std::vector<std::string> outbox_;
  bool coalescing_ = false;
  std::string spare_;  // a written buffer's storage, reused for the next batch
  bool flush_posted_ = false;
  std::size_t max_unsent_bytes_ = 0;  // set_max_unsent_bytes
  std::size_t queued_bytes_ = 0;      // in outbox_
  std::size_t writing_bytes_ = 0;     // in writing_ until its write completed
  std::atomic<bool> unsent_limit_hit_{false};
};

}  // namespace tessera::net
