// One RespConnection per connection, all on one io_context run by one thread (see the header).
// A connection keeps `pipeline` commands in flight: each parsed reply records its latency and,
// while the window is open, issues the next command; commands issued in one turn of the loop
// go out in one write (a posted flush, as net::Connection batches frames). A connection whose
// socket fails counts its commands in flight as errors and stops.
#include "resp_bench.h"

#include <utility>  // before Asio's awaitable header (Boost 1.74)

#include <array>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <charconv>
#include <chrono>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace tessera::tools::bench {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using base::ErrorCode;
using base::Fail;
using base::Result;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kPreloadBatch = 1000;

// Appends a RESP bulk string.
void PutBulk(std::string& out, std::string_view s) {
  char digits[24];
  auto end = std::to_chars(digits, digits + sizeof digits, s.size()).ptr;
  out += '$';
  out.append(digits, end);
  out += "\r\n";
  out += s;
  out += "\r\n";
}

void PutCommand(std::string& out, std::initializer_list<std::string_view> args) {
  char digits[24];
  auto end = std::to_chars(digits, digits + sizeof digits, args.size()).ptr;
  out += '*';
  out.append(digits, end);
  out += "\r\n";
  for (auto a : args) PutBulk(out, a);
}

class RespConnection : public std::enable_shared_from_this<RespConnection> {
 public:
  // What the run counts; touched on the I/O thread only until the loop has stopped.
  using Outcome = ConnectionCounts;

  RespConnection(asio::io_context& io, const BenchOptions& options, int index, std::uint32_t nonce,
                 std::atomic<int>& running)
      : io_(io),
        socket_(io),
        options_(options),
        index_(index),
        fresh_prefix_("f" + std::to_string(nonce) + "c" + std::to_string(index) + "n"),
        value_(options.value_size, static_cast<char>('a' + index % 26)),
        ttl_(std::to_string(options.ttl_ms)),
        random_(std::random_device()() + static_cast<unsigned>(index)),
        running_(running) {
    for (const auto& w : options.mix) total_weight_ += w.weight;
  }

  Result<void> Connect(const tcp::endpoint& at) {
    boost::system::error_code error;
    socket_.connect(at, error);
    if (error) {
      return Fail(ErrorCode::kConnectionFailed, "cannot connect to the RESP server at " +
                                                    options_.redis + ": " + error.message());
    }
    socket_.set_option(tcp::no_delay(true));
    return {};
  }

  // Blocking, before the loop runs: SETs this connection's share of the key space, in batches.
  Result<void> Preload() {
    const std::int64_t begin = options_.keys * index_ / options_.connections;
    const std::int64_t end = options_.keys * (index_ + 1) / options_.connections;
    for (std::int64_t from = begin; from < end;) {
      const std::int64_t to = std::min<std::int64_t>(end, from + kPreloadBatch);
      std::string batch;
      for (std::int64_t i = from; i < to; ++i) AddSet(batch, KeyOf(i), /*fresh=*/false);
      boost::system::error_code error;
      asio::write(socket_, asio::buffer(batch), error);
      for (std::int64_t replies = 0; !error && replies < to - from;) {
        std::string failure;
        const int r = NextReply(failure);
        if (r == 0) {
          const std::size_t n = socket_.read_some(asio::buffer(read_buffer_), error);
          in_.append(read_buffer_.data(), n);
          continue;
        }
        if (r < 0) return Fail(ErrorCode::kBadRequest, "preload SET refused: " + failure);
        ++replies;
      }
      if (error) return Fail(ErrorCode::kConnectionFailed, "preload: " + error.message());
      Compact();
      from = to;
    }
    return {};
  }

  // On the I/O thread.
  void Start(Clock::time_point window_start, Clock::time_point window_end) {
    window_start_ = window_start;
    window_end_ = window_end;
    outcome_.in_flight = options_.pipeline;
    Read();
    for (int i = 0; i < options_.pipeline; ++i) Issue(Clock::now());
  }

  const Outcome& outcome() const { return outcome_; }

 private:
  struct Pending {
    OpKind kind;
    Clock::time_point start;
    int replies;  // top-level replies the operation gets (a MULTI block: one per command)
    bool failed = false;
  };

  std::string KeyOf(std::int64_t i) const { return BenchKey(options_.key_size, i); }
  OpKind NextOp() { return PickOp(options_.mix, total_weight_, random_); }

  // SET key value [PX ttl] (a set with --ttl), or SET key value NX PX ttl (a fresh key).
  void AddSet(std::string& out, std::string_view key, bool fresh) const {
    if (fresh) {
      PutCommand(out, {"SET", key, value_, "NX", "PX", ttl_});
    } else if (options_.ttl_given) {
      PutCommand(out, {"SET", key, value_, "PX", ttl_});
    } else {
      PutCommand(out, {"SET", key, value_});
    }
  }

  void Issue(Clock::time_point start) {
    const OpKind kind = NextOp();
    if (kind == OpKind::kPutIfAbsentTtl) {
      std::string key = fresh_prefix_ + std::to_string(fresh_counter_++);
      if (key.size() < options_.key_size)
        key.insert(fresh_prefix_.size(), options_.key_size - key.size(), '0');
      AddSet(out_, key, /*fresh=*/true);
    } else {
      const std::string key =
          KeyOf(std::uniform_int_distribution<std::int64_t>(0, options_.keys - 1)(random_));
      if (kind == OpKind::kGet) {
        PutCommand(out_, {"GET", key});
      } else if (kind == OpKind::kTx3 || kind == OpKind::kTx3NoId) {
        // The native run's batch: three sets in one partition (`x@key` lands with `key`).
        PutCommand(out_, {"MULTI"});
        AddSet(out_, key, /*fresh=*/false);
        AddSet(out_, key + ":a@" + key, /*fresh=*/false);
        AddSet(out_, key + ":b@" + key, /*fresh=*/false);
        PutCommand(out_, {"EXEC"});
        pending_.push_back({kind, start, 5});
      } else {
        AddSet(out_, key, /*fresh=*/false);
      }
    }
    if (kind != OpKind::kTx3 && kind != OpKind::kTx3NoId) pending_.push_back({kind, start, 1});
    if (!write_posted_) {
      write_posted_ = true;
      asio::post(io_, [self = shared_from_this()] {
        self->write_posted_ = false;
        if (!self->writing_) self->Write();
      });
    }
  }

  void Write() {
    if (out_.empty() || broken_) return;
    writing_ = true;
    writing_buffer_.swap(out_);
    out_.clear();
    asio::async_write(
        socket_, asio::buffer(writing_buffer_),
        [self = shared_from_this()](const boost::system::error_code& error, std::size_t) {
          self->writing_ = false;
          self->writing_buffer_.clear();
          if (error) return self->Break(error.message());
          if (!self->out_.empty()) self->Write();
        });
  }

  void Read() {
    socket_.async_read_some(
        asio::buffer(read_buffer_),
        [self = shared_from_this()](const boost::system::error_code& error, std::size_t n) {
          if (error) return self->Break(error.message());
          self->in_.append(self->read_buffer_.data(), n);
          self->OnReplies();
          if (!self->broken_ && self->outcome_.in_flight > 0) self->Read();
        });
  }

  void OnReplies() {
    for (;;) {
      std::string failure;
      int r = NextReply(failure);
      if (r == 0) break;
      if (pending_.empty()) return Break("a reply to no command");
      Pending& front = pending_.front();
      if (r < 0 && !front.failed) {
        front.failed = true;
        ++outcome_.errors;
        if (outcome_.first_error.empty()) outcome_.first_error = failure;
      }
      if (--front.replies > 0) continue;  // the rest of a MULTI block's replies
      const Pending p = front;
      pending_.pop_front();
      const auto now = Clock::now();
      if (p.failed) {
        r = -1;  // counted once, above
      } else if (p.start >= window_start_ && now <= window_end_) {
        outcome_.latency_ns.Record(
            std::chrono::duration_cast<std::chrono::nanoseconds>(now - p.start).count());
        ++outcome_.ops;
        ++outcome_.ops_by_kind[static_cast<std::size_t>(p.kind)];
      }
      if (r > 0 && now < window_end_) {
        Issue(now);
      } else if (--outcome_.in_flight == 0) {
        running_.fetch_sub(1);
      }
    }
    Compact();
  }

  // 1: a reply was consumed; -1: an error reply (its text in `failure`), or an array (EXEC's)
  // holding one, or a null array (an aborted EXEC); 0: not complete yet.
  int NextReply(std::string& failure) {
    std::size_t at = pos_;
    const int r = ReplyAt(at, failure);
    if (r != 0) pos_ = at;
    return r;
  }

  // NextReply from `at` (moved past the reply when it is complete).
  int ReplyAt(std::size_t& at, std::string& failure) {
    const auto end = in_.find("\r\n", at);
    if (end == std::string::npos) return 0;
    const char kind = in_[at];
    if (kind == '$' || kind == '*') {
      long long length = 0;
      std::from_chars(in_.data() + at + 1, in_.data() + end, length);
      if (kind == '$') {
        const std::size_t next = end + 2 + (length < 0 ? 0 : static_cast<std::size_t>(length) + 2);
        if (in_.size() < next) return 0;
        at = next;
        return 1;
      }
      at = end + 2;
      if (length < 0) {
        failure = "EXEC aborted (null reply)";
        return -1;
      }
      int result = 1;
      for (long long i = 0; i < length; ++i) {
        const int r = ReplyAt(at, failure);
        if (r == 0) return 0;
        if (r < 0) result = -1;
      }
      return result;
    }
    const std::size_t line_start = at + 1;
    at = end + 2;
    if (kind == '+' || kind == ':') return 1;
    failure = kind == '-' ? in_.substr(line_start, end - line_start)
                          : "unexpected RESP reply '" +
                                in_.substr(line_start - 1, end - line_start + 1) + "'";
    return -1;
  }

  void Compact() {
    in_.erase(0, pos_);
    pos_ = 0;
  }

  void Break(const std::string& why) {
    if (broken_) return;
    broken_ = true;
    outcome_.errors += pending_.size();
    if (outcome_.first_error.empty()) outcome_.first_error = "RESP connection: " + why;
    pending_.clear();
    if (outcome_.in_flight > 0) running_.fetch_sub(1);
    outcome_.in_flight = 0;
    boost::system::error_code ignored;
    socket_.close(ignored);
  }

  asio::io_context& io_;
  tcp::socket socket_;
  const BenchOptions& options_;
  const int index_;
  const std::string fresh_prefix_;
  std::uint64_t fresh_counter_ = 0;
  const std::string value_;
  const std::string ttl_;
  std::mt19937_64 random_;
  int total_weight_ = 0;
  std::atomic<int>& running_;  // connections still running; this one leaves it once
  Clock::time_point window_start_;
  Clock::time_point window_end_;
  std::deque<Pending> pending_;  // commands sent or queued, oldest first
  std::string out_;              // commands not written yet
  std::string writing_buffer_;   // the write in flight
  bool writing_ = false;
  bool write_posted_ = false;
  bool broken_ = false;
  std::array<char, 64 * 1024> read_buffer_{};
  std::string in_;  // bytes read, from pos_ on not parsed yet
  std::size_t pos_ = 0;
  Outcome outcome_;
};

}  // namespace

Result<BenchReport> RunRespBench(const BenchOptions& options) {
  for (const auto& w : options.mix) {
    if (w.kind != OpKind::kGet && w.kind != OpKind::kSet && w.kind != OpKind::kPutIfAbsentTtl &&
        w.kind != OpKind::kTx3 && w.kind != OpKind::kTx3NoId) {
      return Fail(ErrorCode::kBadRequest,
                  "--redis runs get, set, putIfAbsentTtl and tx3 only; drop " +
                      std::string(OpKindName(w.kind)) + " from --ops");
    }
  }
  const auto colon = options.redis.rfind(':');
  boost::system::error_code error;
  const auto host = asio::ip::make_address(
      options.redis.substr(0, colon == std::string::npos ? 0 : colon), error);
  int port = 0;
  if (colon != std::string::npos) {
    std::from_chars(options.redis.data() + colon + 1, options.redis.data() + options.redis.size(),
                    port);
  }
  if (colon == std::string::npos || error || port <= 0 || port > 65535) {
    return Fail(ErrorCode::kBadRequest, "--redis '" + options.redis + "' is not IP:PORT");
  }
  const tcp::endpoint at(host, static_cast<std::uint16_t>(port));

  asio::io_context io;
  std::atomic<int> running{0};
  const auto nonce = static_cast<std::uint32_t>(std::random_device()());
  std::vector<std::shared_ptr<RespConnection>> connections;
  for (int i = 0; i < options.connections; ++i) {
    connections.push_back(std::make_shared<RespConnection>(io, options, i, nonce, running));
    if (auto ok = connections.back()->Connect(at); !ok) return std::unexpected(ok.error());
  }
  double preload_seconds = 0;
  if (options.preload) {
    const auto start = Clock::now();
    std::vector<Result<void>> results(connections.size());
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < connections.size(); ++i) {
      threads.emplace_back([&, i] { results[i] = connections[i]->Preload(); });
    }
    for (auto& t : threads) t.join();
    for (auto& r : results) {
      if (!r) return std::unexpected(r.error());
    }
    preload_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  }
  const auto window_start = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(options.warmup_s));
  const auto window_end = window_start + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(options.duration_s));
  running = options.connections;
  for (auto& c : connections) {
    asio::post(io, [c, window_start, window_end] { c->Start(window_start, window_end); });
  }
  WindowSampler sampler(window_start, window_end);
  std::thread loop([&io] { io.run(); });
  const auto give_up = window_end + options.client.call_timeout + std::chrono::seconds(1);
  while (running.load() > 0 && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  io.stop();
  loop.join();

  BenchReport report;
  for (const auto& c : connections) c->outcome().AddTo(report);
  sampler.Finish(report);
  report.seconds = options.duration_s;
  report.preload_seconds = preload_seconds;
  return report;
}

}  // namespace tessera::tools::bench
