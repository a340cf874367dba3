// Read path: parser-owned buffer -> Next() -> CommandTable::Dispatch, all commands of a read
// batch back to back; the batch's replies leave in one async_write. Replies never reorder:
// see Reserve/Target/Done. Reading pauses while too many replies are outstanding or too many
// bytes wait to be written (a slow reader cannot make the member buffer without bound).
#include "connection.h"

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

namespace tessera::resp {

namespace asio = boost::asio;

namespace {
constexpr std::size_t kMinReadBytes = 16 * 1024;
constexpr std::size_t kKeepBufferBytes = 1024 * 1024;  // shrink write buffers above this
}  // namespace

Connection::Connection(std::shared_ptr<ServerState> server, std::size_t shard,
                       asio::ip::tcp::socket socket)
    : server_(std::move(server)),
      shard_(shard),
      socket_(std::move(socket)),
      id_(server_->next_client_id.fetch_add(1)),
      connected_at_ms_(server_->clock.WallMs()),
      parser_(ParserLimits{.max_bulk_bytes = server_->options.max_bulk_bytes}),
      authenticated_(server_->options.secret.empty()) {}

Connection::~Connection() = default;

void Connection::Start() {
  server_->connections[shard_][id_] = weak_from_this();
  server_->connected_clients.fetch_add(1);
  server_->total_connections.fetch_add(1);
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
  SendForwards();
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
  server_->log->info("client {} ({}): protocol error: {}; closing", id_, address(), message);
  const auto seq = Reserve();
  RespWriter(Target(seq), protocol_).Error("ERR Protocol error: " + message);
  Done(seq);
  close_after_write_ = true;
}

ReplySlot Connection::Defer() {
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
  if (closed_) return;
  slots_[seq - head_seq_].done = true;
  while (!slots_.empty() && slots_.front().done) {
    if (!slots_.front().data.empty()) out_.append(slots_.front().data);
    slots_.pop_front();
    ++head_seq_;
  }
  if (!in_batch_) ScheduleFlush();
}

void Connection::DoneWithData(std::uint64_t seq, std::string data) {
  server_->shards.InvokeOn(shard_,
                           [self = shared_from_this(), seq, data = std::move(data)]() mutable {
                             self->DeliverReply(seq, std::move(data));
                           });
}

void Connection::DeliverReply(std::uint64_t seq, std::string data) {
  if (closed_) return;
  if (seq == head_seq_) {
    out_.append(data);
  } else {
    slots_[seq - head_seq_].data = std::move(data);
  }
  Done(seq);
}

void Connection::Forward(map::MapRequest&& request, ForwardFormat format) {
  deferred_ = true;
  const auto shard =
      server_->shards.ShardOfPartition(server_->maps.partitioner().PartitionOf(request.key));
  if (forwards_.size() < server_->shards.size()) forwards_.resize(server_->shards.size());
  forwards_[shard].push_back({std::move(request), current_seq_, protocol_, std::move(format)});
  if (!in_batch_) SendForwards();
}

void Connection::SendForwards() {
  for (std::size_t shard = 0; shard < forwards_.size(); ++shard) {
    if (forwards_[shard].empty()) continue;
    auto batch = std::make_shared<std::vector<Forwarded>>(std::move(forwards_[shard]));
    forwards_[shard].clear();
    server_->shards.InvokeOn(shard, [self = shared_from_this(), batch] {
      auto replies = std::make_shared<std::vector<std::pair<std::uint64_t, std::string>>>();
      replies->reserve(batch->size());
      for (auto& f : *batch) {
        auto local = self->server_->maps.ExecuteIfLocal(f.request);
        if (!local) {
          // Not owned here any more (cannot happen while partitions never move; kept for
          // migrations): take the general path.
          self->server_->maps.Execute(
              std::move(f.request),
              [self, seq = f.seq, protocol = f.protocol,
               format = std::move(f.format)](base::Result<map::MapResult> result) mutable {
                std::string data;
                RespWriter writer(data, protocol);
                format(writer, result);
                self->DoneWithData(seq, std::move(data));
              });
          continue;
        }
        std::string data;
        RespWriter writer(data, f.protocol);
        f.format(writer, *local);
        replies->emplace_back(f.seq, std::move(data));
      }
      if (replies->empty()) return;
      self->server_->shards.InvokeOn(self->shard_, [self, replies] {
        for (auto& [seq, data] : *replies) self->DeliverReply(seq, std::move(data));
      });
    });
  }
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
