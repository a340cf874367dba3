// Reads use a plain callback loop over one reusable 64 KiB buffer; every complete frame in a
// read is delivered before the next read is armed. Writes: Send() appends the encoded frame to
// a mutex-guarded outbox and posts one Flush per batch; Flush moves the whole outbox into a
// single gathered async_write, and frames queued meanwhile wait for the next one. So responses
// produced while handling one read (pipelined requests) leave in one write, and Send() from
// other threads costs one post per batch rather than per frame.
// Close is graceful: reading stops, the outbox drains (bounded by kCloseLinger), then Finish()
// closes the socket and calls on_closed exactly once.
#include "tessera/net/connection.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

namespace tessera::net {

namespace asio = boost::asio;

namespace {
constexpr std::size_t kReadBufferBytes = 64 * 1024;

std::string RemoteAddress(const asio::ip::tcp::socket& socket) {
  boost::system::error_code error;
  const auto endpoint = socket.remote_endpoint(error);
  if (error) return "?";
  return endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
}
}  // namespace

std::shared_ptr<Connection> Connection::Create(asio::ip::tcp::socket socket, std::uint64_t id,
                                               std::size_t shard, std::size_t max_frame_bytes,
                                               std::shared_ptr<spdlog::logger> log) {
  return std::make_shared<Connection>(Passkey(), std::move(socket), id, shard, max_frame_bytes,
                                      std::move(log));
}

Connection::Connection(Passkey, asio::ip::tcp::socket socket, std::uint64_t id, std::size_t shard,
                       std::size_t max_frame_bytes, std::shared_ptr<spdlog::logger> log)
    : id_(id),
      shard_(shard),
      log_(std::move(log)),
      remote_address_(RemoteAddress(socket)),
      socket_(std::move(socket)),
      linger_timer_(socket_.get_executor()),
      decoder_(max_frame_bytes) {}

void Connection::Start(Handlers handlers) {
  handlers_ = std::move(handlers);
  read_buffer_.resize(kReadBufferBytes);
  ReadSome();
}

void Connection::ReadSome() {
  socket_.async_read_some(
      asio::buffer(read_buffer_),
      [self = shared_from_this()](const boost::system::error_code& error, std::size_t bytes) {
        self->OnRead(error, bytes);
      });
}

void Connection::OnRead(const boost::system::error_code& error, std::size_t bytes) {
  if (finished_) return;
  if (error) {
    if (!closing_.load() && error != asio::error::eof) {
      log_->debug("connection {} from {} failed: {}", id_, remote_address_, error.message());
    }
    closing_.store(true);
    Finish();
    return;
  }
  if (closing_.load()) return;  // closing: ignore further input and stop reading
  decoder_.Feed(read_buffer_.data(), bytes);
  DeliverFrames();
  if (!closing_.load() && !finished_) ReadSome();
}

void Connection::DeliverFrames() {
  auto self = shared_from_this();
  while (!closing_.load()) {
    if (handlers_.on_batch && peer_hello_) {
      // Decode what the read holds (up to kMaxBatchFrames), show it to on_batch, deliver it.
      // A handler may run this again (a nested event loop): it finds batch_ empty.
      std::vector<wire::Message> batch;
      batch.swap(batch_);
      std::optional<base::Error> error;
      bool more = true;
      while (batch.size() < kMaxBatchFrames) {
        auto next = decoder_.Next();
        if (!next) {
          error = next.error();
          break;
        }
        if (!next->has_value()) {
          more = false;
          break;
        }
        batch.push_back(std::move(**next));
      }
      if (batch.size() > 1) handlers_.on_batch(self, batch);
      for (auto& message : batch) {
        if (closing_.load()) break;
        if (handlers_.on_message) handlers_.on_message(self, std::move(message));
      }
      batch.clear();
      if (batch_.capacity() < batch.capacity()) batch_.swap(batch);
      if (error) {
        if (!closing_.load() && handlers_.on_protocol_error) {
          handlers_.on_protocol_error(self, *error);
        }
        Close();
        return;
      }
      if (!more) return;
      continue;
    }
    auto next = decoder_.Next();
    if (!next) {
      if (handlers_.on_protocol_error) handlers_.on_protocol_error(self, next.error());
      Close();
      return;
    }
    if (!next->has_value()) return;
    if (handlers_.on_message) handlers_.on_message(self, std::move(**next));
  }
}

bool Connection::Send(const wire::Message& message) {
  if (closing_.load()) return false;
  return SendFrame(wire::EncodeFrame(message));
}

bool Connection::SendFrame(std::string frame) {
  std::lock_guard lock(outbox_mutex_);
  if (closing_.load()) return false;
  return Enqueue(frame, &frame);
}

bool Connection::SendFrameCopy(std::string_view frame) {
  std::lock_guard lock(outbox_mutex_);
  if (closing_.load()) return false;
  return Enqueue(frame, nullptr);
}

void Connection::set_max_unsent_bytes(std::size_t max_bytes) {
  std::lock_guard lock(outbox_mutex_);
  max_unsent_bytes_ = max_bytes;
}

bool Connection::Enqueue(std::string_view frame, std::string* owned) {
  if (max_unsent_bytes_ != 0 && queued_bytes_ + writing_bytes_ + frame.size() > max_unsent_bytes_) {
    if (!unsent_limit_hit_.exchange(true)) {
      log_->warn(
          "connection {} with {}: {} bytes wait unwritten and the next frame would pass the "
          "limit of {} bytes: the peer does not read what it asked for; closing",
          id_, remote_address_, queued_bytes_ + writing_bytes_, max_unsent_bytes_);
      asio::post(socket_.get_executor(), [self = shared_from_this()] { self->Close(); });
    }
    return false;
  }
  queued_bytes_ += frame.size();
  if (frame.size() > kCoalesceFrameBytes) {
    outbox_.push_back(owned != nullptr ? std::move(*owned) : std::string(frame));
    coalescing_ = false;
  } else {
    if (!coalescing_ || outbox_.back().size() + frame.size() > kCoalesceBufferBytes) {
      outbox_.push_back(std::move(spare_));
      spare_.clear();
      outbox_.back().clear();
      coalescing_ = true;
    }
    outbox_.back().append(frame);
  }
  if (!flush_posted_) {
    flush_posted_ = true;
    asio::post(socket_.get_executor(), [self = shared_from_this()] { self->Flush(); });
  }
  return true;
}

void Connection::Flush() {
  {
    std::lock_guard lock(outbox_mutex_);
    flush_posted_ = false;
    if (write_in_flight_ || finished_) return;  // OnWritten flushes what is queued meanwhile
    if (!writing_.empty()) {  // written: keep the first buffer's storage for the next batch
      if (spare_.capacity() < writing_.front().capacity() &&
          writing_.front().capacity() <= kCoalesceBufferBytes * 2) {
        spare_.swap(writing_.front());
      }
      writing_.clear();
    }
    writing_.swap(outbox_);
    writing_bytes_ = queued_bytes_;
    queued_bytes_ = 0;
    coalescing_ = false;
  }
  if (writing_.empty()) {
    if (close_begun_) Finish();
    return;
  }
  write_in_flight_ = true;
  if (writing_.size() == 1) {
    asio::async_write(socket_, asio::buffer(writing_.front()),
                      [self = shared_from_this()](const boost::system::error_code& error,
                                                  std::size_t) { self->OnWritten(error); });
    return;
  }
  buffers_.clear();
  for (const std::string& frame : writing_) buffers_.push_back(asio::buffer(frame));
  asio::async_write(socket_, buffers_,
                    [self = shared_from_this()](const boost::system::error_code& error,
                                                std::size_t) { self->OnWritten(error); });
}

void Connection::OnWritten(const boost::system::error_code& error) {
  write_in_flight_ = false;
  if (finished_) return;
  if (error) {
    log_->debug("write to {} failed: {}", remote_address_, error.message());
    closing_.store(true);
    Finish();
    return;
  }
  Flush();
}

void Connection::Close() {
  closing_.store(true);
  asio::dispatch(socket_.get_executor(), [self = shared_from_this()] { self->BeginClose(); });
}

void Connection::BeginClose() {
  if (close_begun_ || finished_) return;
  close_begun_ = true;
  linger_timer_.expires_after(kCloseLinger);
  linger_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
    if (!error) self->Finish();  // the peer is not reading: drop what is left
  });
  Flush();
}

void Connection::Finish() {
  if (finished_) return;
  finished_ = true;
  closing_.store(true);
  linger_timer_.cancel();
  boost::system::error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  {
    std::lock_guard lock(outbox_mutex_);
    outbox_.clear();
    queued_bytes_ = 0;
  }
  Handlers handlers = std::move(handlers_);
  handlers_ = {};
  if (handlers.on_closed) handlers.on_closed(shared_from_this());
}

}  // namespace tessera::net
