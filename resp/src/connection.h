#pragma once
// Connection: one RESP client connection, living on one shard for its whole life.
//
// Reply order: every command reserves a sequence number; its reply goes straight into the
// output buffer when all earlier replies are written there, else into a per-slot buffer that
// is appended when its turn comes. Replies that complete on another shard are posted back to
// this shard first. Output of one read batch leaves in one write: while commands forwarded to
// other shards are out, the replies before them wait (up to kHoldBytes) so that the batch's
// replies leave together; replies arriving between batches are coalesced by a posted flush.
//
// Keyed commands whose keys live on other shards go through the server's Forwarder, which
// batches them across every connection of this shard (see forwarder.h).
//
// Shard: every method runs on the connection's shard, except ReplySlot::Fill (any thread).

#include <utility>  // before Asio's awaitable header (Boost 1.74)

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "command_table.h"
#include "forwarder.h"
#include "server_state.h"
#include "tessera/resp/resp_parser.h"
#include "tessera/resp/resp_writer.h"

namespace tessera::resp {

class Connection;

// One command of a MULTI block, compiled when it is queued (multi_commands.cc): the keyed
// requests its handler would have run, and how to turn their results into its reply; or the
// reply its handler wrote at once (an argument error, which EXEC returns in its place).
struct CompiledCommand {
  std::vector<map::MapRequest> requests;
  std::function<void(RespWriter& writer, std::vector<base::Result<map::MapResult>>& results)>
      finish;
  std::string immediate;
  std::string unsupported;  // why it cannot run in a partition transaction ("": it can)
};

// A connection's MULTI block, from MULTI to EXEC or DISCARD.
struct MultiState {
  std::vector<CompiledCommand> commands;
  bool dirty = false;  // a command was refused while queueing: EXEC answers EXECABORT
  std::optional<std::uint32_t> partition;  // of the first key queued
  std::string first_key;
};

// A connection's WATCHed string keys and the version each had when watched (0: absent); EXEC
// makes them preconditions of its transaction. `pending`: WATCH reads not back yet; `after`
// runs (in order) once none is, so a pipelined EXEC waits for the WATCH before it.
struct WatchState {
  std::map<std::string, std::int64_t, std::less<>> versions;
  int pending = 0;
  std::vector<std::function<void()>> after;
};

// Handle to one reserved reply position. Copyable; Fill exactly once (from any thread).
class ReplySlot {
 public:
  ReplySlot(std::shared_ptr<Connection> conn, std::uint64_t seq, int protocol)
      : conn_(std::move(conn)), seq_(seq), protocol_(protocol) {}

  // Writes the reply with write(RespWriter&) and releases it in order.
  template <typename Fn>
  void Fill(Fn&& write) const;
  // The reply is `data`, already written (in this connection's protocol); released in order.
  void FillData(std::string data) const;

 private:
  std::shared_ptr<Connection> conn_;
  std::uint64_t seq_;
  int protocol_;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<ServerState> server, std::size_t shard,
             boost::asio::ip::tcp::socket socket);
  ~Connection();

  // Registers the connection and starts reading.
  void Start();
  // Closes the socket and drops subscriptions. Idempotent.
  void Close();

  // --- for command handlers (on the connection's shard, during the handler) ---
  // Writer for the current command's reply (while compiling for MULTI: the command's
  // immediate reply).
  RespWriter Reply() {
    if (capture_ != nullptr) return RespWriter(capture_->immediate, protocol_);
    return RespWriter(Target(current_seq_), protocol_);
  }
  // While a command queued in MULTI is compiled, the Call* helpers (command_util.h) add its
  // requests here instead of running them.
  CompiledCommand* capture() { return capture_; }
  void set_capture(CompiledCommand* compiled) { capture_ = compiled; }
  std::optional<MultiState>& multi() { return multi_; }
  WatchState& watch() { return watch_; }
  // The current command replies later through the returned slot.
  ReplySlot Defer();
  // The current command's keyed `request` belongs to another shard (or needs the general
  // path on its owner): the Forwarder sends it there with the other commands queued on this
  // shard, runs it, formats the reply with format(writer, result) there, and brings it back.
  void Forward(map::MapRequest&& request, ForwardFormat format);
  // Closes the connection once every reply so far is written (QUIT).
  void CloseAfterReplies() { close_after_write_ = true; }

  // The last command name this connection sent and its spec (most pipelines repeat one).
  struct CommandCache {
    std::string name;
    const CommandSpec* spec = nullptr;
  };
  CommandCache& command_cache() { return command_cache_; }
  // A request the command handlers reuse (see ReuseKeyRequest).
  map::MapRequest& reusable_request() { return reusable_request_; }
  ServerState& server() { return *server_; }
  map::MapService& maps() { return server_->maps; }
  const std::string& default_map() const { return server_->options.default_map; }
  std::size_t shard() const { return shard_; }

  std::uint64_t id() const { return id_; }
  bool closed() const { return closed_; }
  int protocol() const { return protocol_; }
  void set_protocol(int protocol) { protocol_ = protocol; }
  bool authenticated() const { return authenticated_; }
  // Also sets the parser's limits: the tighter ones until authenticated.
  void set_authenticated(bool value);
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  std::string address() const;
  base::Millis connected_at_ms() const { return connected_at_ms_; }

  // Pub/sub state. Subscribe* return false when already subscribed.
  bool SubscribeChannel(std::string_view channel);
  bool UnsubscribeChannel(std::string_view channel);
  bool SubscribePattern(std::string_view pattern);
  bool UnsubscribePattern(std::string_view pattern);
  std::vector<std::string> Channels() const;
  std::vector<std::string> Patterns() const;
  std::size_t SubscriptionCount() const { return channels_.size() + patterns_.size(); }

  // --- reply ordering (used by ReplySlot) ---
  bool OnHomeShard() const { return server_->shards.OnShard(shard_); }
  std::string& Target(std::uint64_t seq);
  void Done(std::uint64_t seq);
  // From any thread: reply `seq` is `data`; posted home. `forwarded`: it ends a Forward.
  void DoneWithData(std::uint64_t seq, std::string data, bool forwarded = false);

  // --- for the Forwarder (on the connection's shard) ---
  // Releases reply `seq` with its bytes (no write yet); `forwarded`: it ends a Forward.
  void DeliverReply(std::uint64_t seq, std::string data, bool forwarded);
  // Writes what is ready and resumes reading if it had paused.
  void AfterDelivery();

 private:
  struct Slot {
    std::string data;
    bool done = false;
  };
  // Marks reply `seq` complete and moves every complete reply at the head to out_.
  void Release(std::uint64_t seq);
  void ReadMore();
  void OnRead(const boost::system::error_code& error, std::size_t bytes);
  void ProcessInput();
  void Execute(Args args);
  void ProtocolError(const std::string& message);
  std::uint64_t Reserve();
  void ScheduleFlush();
  void Flush();
  void OnWritten(const boost::system::error_code& error);
  bool Backpressured() const;
  void MaybeResumeReading();
  void DeliverMessage(const topic::Message& message, std::string_view pattern);
  topic::SubscriptionId Listen(std::string_view name, bool pattern);

  std::shared_ptr<ServerState> server_;
  const std::size_t shard_;
  boost::asio::ip::tcp::socket socket_;
  // Until authenticated (with a secret): closes the connection at unauthenticated_timeout.
  std::optional<boost::asio::steady_timer> auth_timer_;
  void ArmAuthTimer();
  const std::uint64_t id_;
  const base::Millis connected_at_ms_;
  RespParser parser_;

  std::string out_;      // replies ready to write
  std::string writing_;  // replies being written
  bool write_in_flight_ = false;
  bool flush_posted_ = false;
  bool in_batch_ = false;
  bool reading_ = false;
  bool read_paused_ = false;
  bool close_after_write_ = false;
  bool closed_ = false;
  std::string scratch_;  // sink for replies after close

  std::uint64_t next_seq_ = 0;  // next sequence to reserve
  std::uint64_t head_seq_ = 0;  // first sequence not yet released to out_
  std::deque<Slot> slots_;      // slots for [head_seq_, next_seq_)
  std::uint64_t current_seq_ = 0;
  bool deferred_ = false;
  std::size_t forwards_pending_ = 0;  // Forward calls whose reply has not come back
  map::MapRequest reusable_request_;
  CommandCache command_cache_;
  CompiledCommand* capture_ = nullptr;
  std::optional<MultiState> multi_;
  WatchState watch_;

  int protocol_ = 2;
  bool authenticated_ = false;
  std::string name_;
  std::map<std::string, topic::SubscriptionId, std::less<>> channels_;
  std::map<std::string, topic::SubscriptionId, std::less<>> patterns_;
};

template <typename Fn>
void ReplySlot::Fill(Fn&& write) const {
  if (conn_->OnHomeShard()) {
    RespWriter writer(conn_->Target(seq_), protocol_);
    write(writer);
    conn_->Done(seq_);
    return;
  }
  std::string data;
  RespWriter writer(data, protocol_);
  write(writer);
  conn_->DoneWithData(seq_, std::move(data));
}

inline void ReplySlot::FillData(std::string data) const {
  if (conn_->OnHomeShard()) {
    conn_->Target(seq_).append(data);
    conn_->Done(seq_);
    return;
  }
  conn_->DoneWithData(seq_, std::move(data));
}

}  // namespace tessera::resp
