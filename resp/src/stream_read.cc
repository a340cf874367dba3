// XREAD and XREADGROUP, with BLOCK. One kRedisStream request per stream key ("read" or
// "readgroup", streams/redis_stream.h), sent together; the reply lists the streams that returned
// entries. A blocked read asks again on a timer of the connection's shard (1 ms, doubling up
// to kMaxPollDelay) until entries come, the BLOCK time passes or the connection closes, and an
// XADD through this server wakes it at once (StreamWaiters): no thread waits, and it works the
// same when the stream lives on another member. A blocked command holds its connection's later
// replies back, as in Redis.
#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <chrono>

#include "command_util.h"
#include "stream_util.h"
#include "tessera/hash/redis_hash.h"

namespace tessera::resp {

using Clock = std::chrono::steady_clock;
constexpr auto kMaxPollDelay = std::chrono::milliseconds(20);

struct StreamPoll : std::enable_shared_from_this<StreamPoll> {
  std::shared_ptr<Connection> conn;
  ReplySlot slot;
  std::vector<std::string> keys;
  std::vector<map::MapRequest> requests;  // one per key
  std::vector<std::string> after;         // XREAD: the ID each key reads after ("$" at first)
  std::vector<bool> history;  // XREADGROUP with an ID for this key: listed even when empty
  bool group = false;
  bool block = false;
  Clock::time_point deadline = Clock::time_point::max();
  std::chrono::microseconds delay{1000};
  std::unique_ptr<boost::asio::steady_timer> timer;
  bool waiting = false;     // the timer is armed (on the connection's shard)
  bool registered = false;  // in StreamWaiters

  StreamPoll(std::shared_ptr<Connection> c, ReplySlot s) : conn(std::move(c)), slot(std::move(s)) {}

  ServerState& server() { return conn->server(); }

  void Run() {
    struct Round {
      std::vector<base::Result<map::MapResult>> results;
      std::atomic<std::size_t> left{0};
    };
    auto round = std::make_shared<Round>();
    round->results.resize(requests.size());
    round->left = requests.size();
    for (std::size_t i = 0; i < requests.size(); ++i) {
      map::MapRequest request = requests[i];
      if (!group) {
        request.argument = request.argument.ToBuilder().String("after", after[i]).Done();
      }
      conn->maps().Execute(std::move(request), [self = shared_from_this(), round,
                                                i](base::Result<map::MapResult> result) {
        round->results[i] = std::move(result);
        if (round->left.fetch_sub(1) != 1) return;
        self->server().shards.DispatchOn(self->conn->shard(),
                                         [self, round] { self->Finish(round->results); });
      });
    }
  }

  // Keys this shard does not know as streams: their keyspace entries first, so a string or
  // hash answers WRONGTYPE, as in Redis; then the reads.
  void CheckKindsThenRun() {
    StreamKeyCache& known = server().stream_keys[conn->shard()];
    const std::uint64_t removals = conn->maps().StreamKeyRemovals();
    std::vector<std::string> unknown;
    for (const auto& key : keys) {
      if (!known.Has(key, removals)) unknown.push_back(key);
    }
    if (unknown.empty()) return Run();
    struct Check {
      std::vector<std::string> keys;
      std::atomic<std::size_t> left{0};
      std::atomic<bool> wrong{false};
    };
    auto check = std::make_shared<Check>();
    check->keys = std::move(unknown);
    check->left = check->keys.size();
    for (const auto& key : check->keys) {
      conn->maps().Execute(
          KeyRequest(map::MapOp::kGetEntryView, conn->default_map(), key),
          [self = shared_from_this(), check, &known, key](base::Result<map::MapResult> entry) {
            if (entry && entry->view) {
              if (entry->view->kind != map::ValueKind::kStream) {
                check->wrong = true;
              } else {
                known.Add(key, self->conn->maps().StreamKeyRemovals());
              }
            }
            if (check->left.fetch_sub(1) != 1) return;
            self->server().shards.DispatchOn(self->conn->shard(), [self, check] {
              if (!check->wrong) return self->Run();
              self->slot.Fill(
                  [](RespWriter& writer) { WriteServiceError(writer, map::WrongKindError()); });
            });
          });
    }
  }

  bool Listed(std::size_t i, const map::MapResult& r) const {
    return !r.entries.empty() || (group && history[i]);
  }

  void Finish(std::vector<base::Result<map::MapResult>>& results) {
    bool any = false;
    for (std::size_t i = 0; i < results.size(); ++i) {
      if (!results[i]) return Reply(results);
      any = any || Listed(i, *results[i]);
      if (!group && after[i] == "$") after[i] = results[i]->value.value_or("0-0");
    }
    if (any || !block || conn->closed() || Clock::now() >= deadline) return Reply(results);
    if (!registered) {
      registered = true;
      for (const auto& key : keys) server().stream_waiters.Add(key, shared_from_this());
    }
    if (!timer) {
      timer = std::make_unique<boost::asio::steady_timer>(server().shards.Context(conn->shard()));
    }
    const auto wait = std::min<Clock::duration>(delay, deadline - Clock::now());
    delay = std::min<std::chrono::microseconds>(delay * 2, kMaxPollDelay);
    waiting = true;
    timer->expires_after(wait);
    timer->async_wait([self = shared_from_this()](const boost::system::error_code& error) {
      if (error || !self->waiting) return;  // cancelled: Wake ran it
      self->waiting = false;
      self->RunUnlessClosed();
    });
  }

  // An XADD to one of the keys: ask again now (on the connection's shard).
  void Wake() {
    if (!waiting) return;
    waiting = false;
    timer->cancel();
    delay = std::chrono::microseconds(1000);
    RunUnlessClosed();
  }

  // A client that went away while blocked is given nothing more (a read for a group would
  // make entries pending for a consumer nobody serves).
  void RunUnlessClosed() {
    if (!conn->closed()) return Run();
    std::vector<base::Result<map::MapResult>> none;
    Reply(none);
  }

  void Reply(std::vector<base::Result<map::MapResult>>& results) {
    if (registered) {
      for (const auto& key : keys) server().stream_waiters.Remove(key, this);
      registered = false;
    }
    slot.Fill([&](RespWriter& writer) {
      for (auto& r : results) {
        if (!r) return WriteStreamError(writer, r.error());
      }
      std::size_t listed = 0;
      for (std::size_t i = 0; i < results.size(); ++i) listed += Listed(i, *results[i]) ? 1 : 0;
      if (listed == 0) return writer.NullArray();
      if (writer.protocol() >= 3) {
        writer.MapHeader(listed);
      } else {
        writer.ArrayHeader(listed);
      }
      for (std::size_t i = 0; i < results.size(); ++i) {
        if (!Listed(i, *results[i])) continue;
        if (writer.protocol() < 3) writer.ArrayHeader(2);
        writer.Bulk(keys[i]);
        writer.ArrayHeader(results[i]->entries.size());
        for (const auto& [id, fields] : results[i]->entries) {
          if (fields.empty()) {  // a pending entry no longer stored
            writer.ArrayHeader(2);
            writer.Bulk(id);
            writer.NullArray();
          } else {
            WriteStreamEntry(writer, id, fields);
          }
        }
      }
    });
  }
};

void StreamWaiters::Add(std::string_view key, const std::shared_ptr<StreamPoll>& poll) {
  std::lock_guard lock(mu_);
  by_key_[std::string(key)].push_back(poll);
}

void StreamWaiters::Remove(std::string_view key, const StreamPoll* poll) {
  std::lock_guard lock(mu_);
  auto it = by_key_.find(std::string(key));
  if (it == by_key_.end()) return;
  std::erase_if(it->second, [&](const std::weak_ptr<StreamPoll>& w) {
    auto p = w.lock();
    return p == nullptr || p.get() == poll;
  });
  if (it->second.empty()) by_key_.erase(it);
}

void StreamWaiters::Wake(std::string_view key) {
  std::vector<std::shared_ptr<StreamPoll>> woken;
  {
    std::lock_guard lock(mu_);
    auto it = by_key_.find(std::string(key));
    if (it == by_key_.end()) return;
    for (const auto& w : it->second) {
      if (auto p = w.lock()) woken.push_back(std::move(p));
    }
  }
  for (auto& p : woken) {
    p->server().shards.InvokeOn(p->conn->shard(), [p] { p->Wake(); });
  }
}

namespace {

// About 292 years: beyond it a deadline in steady_clock's nanoseconds overflows.
constexpr std::int64_t kMaxBlockMs = 9'000'000'000'000;

// XREAD [COUNT n] [BLOCK ms] STREAMS key... id...; XREADGROUP GROUP g c [COUNT n] [BLOCK ms]
// [NOACK] STREAMS key... id...
void ReadGeneric(Connection& conn, Args args, bool group) {
  const std::string name = group ? "xreadgroup" : "xread";
  std::size_t i = 1;
  std::string group_name, consumer;
  std::int64_t count = 0, block_ms = -1;
  bool noack = false;
  for (; i < args.size(); ++i) {
    const bool has_value = i + 1 < args.size();
    if (EqualsIgnoreCase(args[i], "streams")) break;
    if (has_value && EqualsIgnoreCase(args[i], "count")) {
      if (!ParseInt64(args[++i], count)) return conn.Reply().NotInteger();
      count = std::max<std::int64_t>(0, count);
    } else if (has_value && EqualsIgnoreCase(args[i], "block")) {
      if (!ParseInt64(args[++i], block_ms)) {
        return conn.Reply().Error("ERR timeout is not an integer or out of range");
      }
      if (block_ms < 0) return conn.Reply().Error("ERR timeout is negative");
      if (block_ms > kMaxBlockMs) return conn.Reply().Error("ERR timeout is out of range");
    } else if (group && i + 2 < args.size() && EqualsIgnoreCase(args[i], "group")) {
      group_name = args[i + 1];
      consumer = args[i + 2];
      i += 2;
    } else if (group && EqualsIgnoreCase(args[i], "noack")) {
      noack = true;
    } else {
      return conn.Reply().SyntaxError();
    }
  }
  if (i >= args.size()) return conn.Reply().SyntaxError();
  if (group && group_name.empty()) {
    return conn.Reply().Error("ERR Missing GROUP option for XREADGROUP");
  }
  const std::size_t n = args.size() - i - 1;
  if (n == 0 || n % 2 != 0) {
    return conn.Reply().Error("ERR Unbalanced " + Uppercase(name) +
                              " list of streams: for each stream key an ID or '$' must be "
                              "specified.");
  }
  const std::size_t streams = n / 2;
  auto poll = std::make_shared<StreamPoll>(conn.shared_from_this(), ReplySlot(nullptr, 0, 2));
  poll->group = group;
  for (std::size_t k = 0; k < streams; ++k) {
    const std::string_view key = args[i + 1 + k];
    const std::string_view id = args[i + 1 + streams + k];
    if (auto problem = StreamKeyProblem(key); !problem.empty()) return conn.Reply().Error(problem);
    StreamRequest rq(key, group ? "readgroup" : "read");
    rq.args.Int64("count", count);
    if (group) {
      if (id == "$") {
        return conn.Reply().Error(
            "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the "
            "history of this consumer by specifying a proper ID, or use the > ID to get new "
            "messages. The $ ID would just return an empty result set.");
      }
      if (id != ">") {
        auto parsed = streams::ParseStreamId(id);
        if (!parsed) return conn.Reply().Error(kInvalidStreamId);
      }
      poll->history.push_back(id != ">");
      rq.args.String("group", group_name)
          .String("consumer", consumer)
          .String("after", id == ">" ? ">" : streams::ParseStreamId(id)->Text())
          .Bool("noack", noack);
    } else {
      if (id == "$") {
        poll->after.emplace_back("$");
      } else if (auto parsed = streams::ParseStreamId(id)) {
        poll->after.push_back(parsed->Text());
      } else {
        return conn.Reply().Error(kInvalidStreamId);
      }
    }
    poll->keys.emplace_back(key);
    poll->requests.push_back(std::move(rq).Finish());
  }
  // As Redis: a read of pending entries (an ID for XREADGROUP) never blocks.
  poll->block = block_ms >= 0 &&
                std::find(poll->history.begin(), poll->history.end(), true) == poll->history.end();
  if (block_ms > 0) poll->deadline = Clock::now() + std::chrono::milliseconds(block_ms);
  poll->slot = conn.Defer();
  poll->CheckKindsThenRun();
}

void XRead(Connection& conn, Args args) { ReadGeneric(conn, args, false); }
void XReadGroup(Connection& conn, Args args) { ReadGeneric(conn, args, true); }

}  // namespace

void RegisterStreamReadCommands(CommandTable& table) {
  table.Add({"xread", -4, kReadOnly, 0, 0, 0, XRead});
  table.Add({"xreadgroup", -7, kWrite, 0, 0, 0, XReadGroup});
}

}  // namespace tessera::resp
