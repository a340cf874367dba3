// Read path: parser-owned buffer -> Next() -> CommandTable::Dispatch, all commands of a read
// batch back to back; the batch's replies leave in one async_write. Replies never reorder:
// see Reserve/Target/Release. Reading pauses while too many replies are outstanding or too
// many bytes wait to be written (a slow reader cannot make the member buffer without bound).
//
// (Tried: async_wait then a non-blocking read, to save the recv that asio's speculative read
// makes after each batch and that fails with EAGAIN; asio then re-arms epoll with an
// EPOLL_CTL_MOD per wait instead, so the syscall count per batch stayed the same.)
#include "connection.h"

#include <fmt/format.h>
#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "tessera/base/check.h"

namespace tessera::resp {

namespace asio = boost::asio;

namespace {
constexpr std::size_t kMinReadBytes = 16 * 1024;
constexpr std::size_t kKeepBufferBytes = 1024 * 1024;  // shrink write buffers above this
constexpr std::size_t kHoldBytes = 64 * 1024;  // write anyway once this much waits for forwards

// The parser's limits for a connection that has authenticated or not (RespServerOptions).
ParserLimits LimitsFor(const RespServerOptions& options, bool authenticated) {
  ParserLimits limits{.max_bulk_bytes = options.max_bulk_bytes};
  if (authenticated) return limits;
  limits.max_multibulk_count = options.unauthenticated_max_args;
  limits.max_bulk_bytes = std::min(options.max_bulk_bytes, options.unauthenticated_max_bulk_bytes);
  // A header or inline line holds no more than an argument (an inline AUTH with its password).
  limits.max_inline_bytes = std::min<std::size_t>(
      limits.max_inline_bytes,
      static_cast<std::size_t>(std::max<std::int64_t>(options.unauthenticated_max_bulk_bytes, 64)));
  limits.unauthenticated = true;
  return limits;
}
}  // namespace

Connection::Connection(std::shared_ptr<ServerState> server, std::size_t shard,
                       asio::ip::tcp::socket socket)
    : server_(std::move(server)),
      shard_(shard),
      socket_(std::move(socket)),
      id_(server_->next_client_id.fetch_add(1)),
      connected_at_ms_(server_->clock.WallMs()),
      parser_(LimitsFor(server_->options, server_->options.secret.empty())),
      authenticated_(server_->options.secret.empty()) {}

void Connection::set_authenticated(bool value) {
  authenticated_ = value;
  parser_.SetLimits(LimitsFor(server_->options, value));
  if (value) {
    auth_timer_.reset();  // cancels the wait
  } else {
    ArmAuthTimer();
  }
}

void Connection::ArmAuthTimer() {
  const auto timeout = server_->options.unauthenticated_timeout;
  if (timeout.count() <= 0 || closed_) return;
  auth_timer_.emplace(socket_.get_executor());
  auth_timer_->expires_after(timeout);
  auth_timer_->async_wait([weak = weak_from_this(), timeout](const boost::system::error_code& e) {
    auto self = weak.lock();
    if (e || !self || self->closed_ || self->authenticated_) return;
    self->ProtocolError(fmt::format(
        "not authenticated within {} ms of connecting; a client of a member with a secret "
        "sends AUTH <password> (or HELLO ... AUTH) first",
        timeout.count()));
  });
}

Connection::~Connection() = default;

void Connection::Start() {
  server_->connections[shard_][id_] = weak_from_this();
  server_->connected_clients.fetch_add(1);
  server_->total_connections.fetch_add(1);
  if (!authenticated_) ArmAuthTimer();
  ReadMore();
}

void Connection::Close() {
  if (closed_) return;
  closed_ = true;
  for (const auto& [name, id] : channels_) server_->topics.Unsubscribe(id);
  for (const auto& [name, id] : patterns_) server_->topics.Unsubscribe(id);
  channels_.clear();
  patterns_.clear();
  boost::system::error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  server_->connections[shard_].erase(id_);
  server_->connected_clients.fetch_sub(1);
  auth_timer_.reset();
}

std::string Connection::address() const {
  boost::system::error_code error;
  auto endpoint = socket_.remote_endpoint(error);
  if (error) return "?";
  return endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
}

void Connection::ReadMore() {
  if (closed_ || reading_ || close_after_write_) return;
  if (Backpressured()) {
    read_paused_ = true;
    return;
  }
  reading_ = true;
  auto space = parser_.WritableSpace(kMinReadBytes);
  socket_.async_read_some(
      asio::buffer(space.data(), space.size()),
      [self = shared_from_this()](const boost::system::error_code& error, std::size_t bytes) {
        self->OnRead(error, bytes);
      });
}

void Connection::OnRead(const boost::system::error_code& error, std::size_t bytes) {
  reading_ = false;
  if (closed_) return;
  if (error) {  // EOF or reset: nothing more to answer
    Close();
    return;
  }
  parser_.Commit(bytes);
  ProcessInput();
  Flush();
  ReadMore();
}

void Connection::ProcessInput() {
  in_batch_ = true;
  while (!closed_ && !close_after_write_) {
    const auto status = parser_.Next();
    if (status == RespParser::Status::kNeedMore) break;
    if (status == RespParser::Status::kError) {
      ProtocolError(parser_.error());
      break;
    }
    Execute(parser_.args());
  }
  parser_.Compact();
  in_batch_ = false;
}

void Connection::Execute(Args args) {
  current_seq_ = Reserve();
  deferred_ = false;
  server_->commands[shard_].Add(1);
  server_->table.Dispatch(*this, args);
  if (!deferred_) Done(current_seq_);
}

void Connection::ProtocolError(const std::string& message) {
  server_->protocol_errors.fetch_add(1);
  if (!authenticated_) server_->unauthenticated_rejected.fetch_add(1);
  server_->log->info("client {} ({}): protocol error: {}; closing", id_, address(), message);
  const auto seq = Reserve();
  RespWriter(Target(seq), protocol_).Error("ERR Protocol error: " + message);
  Done(seq);
  close_after_write_ = true;
}

ReplySlot Connection::Defer() {
  TESSERA_CHECK(capture_ == nullptr,
                "a command flagged kMulti deferred its reply while compiled for MULTI");
  // The deferred command may reach other shards by another way than the Forwarder (a
  // fan-out): the commands forwarded before it must get there first.
  server_->forwarder->Send(shard_);
  deferred_ = true;
  return ReplySlot(shared_from_this(), current_seq_, protocol_);
}

std::uint64_t Connection::Reserve() {
  slots_.emplace_back();
  return next_seq_++;
}

std::string& Connection::Target(std::uint64_t seq) {
  if (closed_) {
    scratch_.clear();
    return scratch_;
  }
  return seq == head_seq_ ? out_ : slots_[seq - head_seq_].data;
}

void Connection::Done(std::uint64_t seq) {
  Release(seq);
  if (!in_batch_) ScheduleFlush();
}

void Connection::Release(std::uint64_t seq) {
  if (closed_) return;
  slots_[seq - head_seq_].done = true;
  while (!slots_.empty() && slots_.front().done) {
    if (!slots_.front().data.empty()) out_.append(slots_.front().data);
    slots_.pop_front();
    ++head_seq_;
  }
}

void Connection::DoneWithData(std::uint64_t seq, std::string data, bool forwarded) {
  server_->shards.InvokeOn(
      shard_, [self = shared_from_this(), seq, data = std::move(data), forwarded]() mutable {
        self->DeliverReply(seq, std::move(data), forwarded);
        self->ScheduleFlush();
      });
}

void Connection::DeliverReply(std::uint64_t seq, std::string data, bool forwarded) {
  if (forwarded) --forwards_pending_;
  if (closed_) return;
  if (seq == head_seq_) {
    out_.append(data);
  } else {
    slots_[seq - head_seq_].data = std::move(data);
  }
  Release(seq);
}

void Connection::AfterDelivery() {
  Flush();
  MaybeResumeReading();
}

void Connection::Forward(map::MapRequest&& request, ForwardFormat format) {
  deferred_ = true;
  ++forwards_pending_;
  const std::size_t owner =
      server_->shards.ShardOfPartition(server_->maps.partitioner().PartitionOf(request.key));
  server_->forwarder->Add(
      shard_, owner,
      {shared_from_this(), std::move(request), current_seq_, protocol_, std::move(format)});
}

void Connection::ScheduleFlush() {
  if (flush_posted_) return;
  flush_posted_ = true;
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    self->flush_posted_ = false;
    self->Flush();
    self->MaybeResumeReading();
  });
}

void Connection::Flush() {
  if (closed_ || write_in_flight_) return;
  if (out_.empty()) {
    if (close_after_write_ && slots_.empty()) Close();
    return;
  }
  if (forwards_pending_ > 0 && out_.size() < kHoldBytes) return;  // they come back soon
  std::swap(out_, writing_);
  out_.clear();
  write_in_flight_ = true;
  asio::async_write(socket_, asio::buffer(writing_),
                    [self = shared_from_this()](const boost::system::error_code& error,
                                                std::size_t /*bytes*/) { self->OnWritten(error); });
}

void Connection::OnWritten(const boost::system::error_code& error) {
  write_in_flight_ = false;
  if (closed_) return;
  if (error) {
    Close();
    return;
  }
  writing_.clear();
  if (writing_.capacity() > kKeepBufferBytes) writing_.shrink_to_fit();
  Flush();
  MaybeResumeReading();
}

bool Connection::Backpressured() const {
  return slots_.size() >= server_->options.max_pending_replies ||
         out_.size() + writing_.size() >= server_->options.max_output_bytes;
}

void Connection::MaybeResumeReading() {
  if (read_paused_ && !Backpressured()) {
    read_paused_ = false;
    ReadMore();
  }
}

}  // namespace tessera::resp
