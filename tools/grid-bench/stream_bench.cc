#include "stream_bench.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "tessera/grid/client.h"

namespace tessera::tools::bench {
namespace {

using base::ErrorCode;
using base::Fail;
using base::Result;
using Clock = std::chrono::steady_clock;

std::uint64_t SteadyNs() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
          .count());
}

// A payload of `size` bytes whose first 8 carry `ns`.
std::string Stamped(std::size_t size, std::uint64_t ns) {
  std::string p(std::max<std::size_t>(size, sizeof ns), 'x');
  std::memcpy(p.data(), &ns, sizeof ns);
  return p;
}

std::uint64_t StampOf(const std::string& payload) {
  std::uint64_t ns = 0;
  if (payload.size() >= sizeof ns) std::memcpy(&ns, payload.data(), sizeof ns);
  return ns;
}

// Producer `index`'s i-th key: spread over --keys.
std::string EventKey(const BenchOptions& o, int index, std::uint64_t i) {
  return "k" + std::to_string((static_cast<std::uint64_t>(index) * 7919 + i) %
                              static_cast<std::uint64_t>(o.keys));
}

// Counts failures across threads, keeping the first message.
struct Errors {
  std::atomic<std::uint64_t> count{0};
  std::mutex mu;
  std::string first;
  void Add(const std::string& what) {
    if (count.fetch_add(1) == 0) {
      std::lock_guard lock(mu);
      first = what;
    }
  }
};

// ---- Redis: a minimal blocking RESP2 client ------------------------------------------------

struct Reply {
  enum class Type { kString, kInt, kArray, kNil, kError } type = Type::kNil;
  std::string text;
  std::int64_t n = 0;
  std::vector<Reply> items;
};

class Resp {
 public:
  static Result<std::unique_ptr<Resp>> Connect(const std::string& address) {
    const auto colon = address.rfind(':');
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    if (colon == std::string::npos ||
        inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr) != 1) {
      return Fail(ErrorCode::kBadRequest, "--redis '" + address + "' is not IPv4:PORT");
    }
    sa.sin_port = htons(static_cast<std::uint16_t>(std::stoi(address.substr(colon + 1))));
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      if (fd >= 0) close(fd);
      return Fail(ErrorCode::kConnectionFailed, "cannot connect to redis at " + address);
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return std::unique_ptr<Resp>(new Resp(fd));
  }
  ~Resp() { close(fd_); }

  void Add(const std::vector<std::string>& args) {
    out_ += "*" + std::to_string(args.size()) + "\r\n";
    for (const auto& a : args) {
      out_ += "$" + std::to_string(a.size()) + "\r\n";
      out_ += a;
      out_ += "\r\n";
    }
  }
  Result<void> Flush() {
    std::size_t sent = 0;
    while (sent < out_.size()) {
      ssize_t n = send(fd_, out_.data() + sent, out_.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return Fail(ErrorCode::kConnectionFailed, "redis connection lost (send)");
      sent += static_cast<std::size_t>(n);
    }
    out_.clear();
    return {};
  }
  Result<Reply> Read() {
    auto line = Line();
    if (!line) return std::unexpected(line.error());
    Reply r;
    const char kind = (*line)[0];
    const std::string rest = line->substr(1);
    if (kind == '+') {
      r.type = Reply::Type::kString;
      r.text = rest;
    } else if (kind == '-') {
      r.type = Reply::Type::kError;
      r.text = rest;
    } else if (kind == ':') {
      r.type = Reply::Type::kInt;
      r.n = std::stoll(rest);
    } else if (kind == '$') {
      const auto len = std::stoll(rest);
      if (len < 0) return r;  // nil
      while (in_.size() - pos_ < static_cast<std::size_t>(len) + 2) {
        if (auto ok = Fill(); !ok) return std::unexpected(ok.error());
      }
      r.type = Reply::Type::kString;
      r.text = in_.substr(pos_, static_cast<std::size_t>(len));
      pos_ += static_cast<std::size_t>(len) + 2;
    } else if (kind == '*') {
      const auto len = std::stoll(rest);
      if (len < 0) return r;  // nil
      r.type = Reply::Type::kArray;
      for (std::int64_t i = 0; i < len; ++i) {
        auto item = Read();
        if (!item) return item;
        r.items.push_back(std::move(*item));
      }
    } else {
      return Fail(ErrorCode::kProtocol, "unexpected RESP reply '" + *line + "'");
    }
    return r;
  }
  Result<Reply> Call(const std::vector<std::string>& args) {
    Add(args);
    if (auto ok = Flush(); !ok) return std::unexpected(ok.error());
    return Read();
  }

 private:
  explicit Resp(int fd) : fd_(fd) {}
  Result<void> Fill() {
    if (pos_ > 0 && pos_ == in_.size()) {
      in_.clear();
      pos_ = 0;
    }
    char buffer[65536];
    ssize_t n = recv(fd_, buffer, sizeof buffer, 0);
    if (n <= 0) return Fail(ErrorCode::kConnectionFailed, "redis connection lost (recv)");
    in_.append(buffer, static_cast<std::size_t>(n));
    return {};
  }
  Result<std::string> Line() {
    for (;;) {
      auto end = in_.find("\r\n", pos_);
      if (end != std::string::npos) {
        std::string line = in_.substr(pos_, end - pos_);
        pos_ = end + 2;
        return line;
      }
      if (auto ok = Fill(); !ok) return std::unexpected(ok.error());
    }
  }
  int fd_;
  std::string in_;
  std::size_t pos_ = 0;
  std::string out_;
};

// XREADGROUP's reply as (id, payload) pairs (payload = the field "p").
std::vector<std::pair<std::string, std::string>> Entries(const Reply& reply) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& stream : reply.items) {
    if (stream.items.size() < 2) continue;
    for (const auto& entry : stream.items[1].items) {
      if (entry.items.size() < 2) continue;
      std::string payload;
      const auto& fields = entry.items[1].items;
      for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
        if (fields[i].text == "p") payload = fields[i + 1].text;
      }
      out.emplace_back(entry.items[0].text, std::move(payload));
    }
  }
  return out;
}

// Reads and acknowledges with one connection until `stop`; calls on_event per entry.
void RedisConsume(const std::string& address, const std::string& stream, const std::string& group,
                  const std::string& consumer, bool block, const std::atomic<bool>& stop,
                  const std::function<void(const std::string&)>& on_event, Errors& errors) {
  auto conn = Resp::Connect(address);
  if (!conn) return errors.Add(conn.error().ToString());
  while (!stop.load()) {
    std::vector<std::string> args = {"XREADGROUP", "GROUP", group, consumer, "COUNT", "256"};
    if (block) args.insert(args.end(), {"BLOCK", "100"});
    args.insert(args.end(), {"STREAMS", stream, ">"});
    auto reply = (*conn)->Call(args);
    if (!reply || reply->type == Reply::Type::kError) {
      errors.Add(reply ? reply->text : reply.error().ToString());
      return;
    }
    auto entries = Entries(*reply);
    if (entries.empty()) {
      if (!block) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    std::vector<std::string> ack = {"XACK", stream, group};
    for (auto& [id, payload] : entries) {
      on_event(payload);
      ack.push_back(std::move(id));
    }
    auto acked = (*conn)->Call(ack);
    if (!acked || acked->type == Reply::Type::kError) {
      errors.Add(acked ? acked->text : acked.error().ToString());
      return;
    }
  }
}

// ---- the three phases, over either target ----------------------------------------------------

class Target {
 public:
  virtual ~Target() = default;
  // Appends `count` events from producer `index` keeping `pipeline` in flight.
  virtual void AppendBurst(int index, std::uint64_t count, Errors& errors) = 0;
  // One unpipelined append carrying `payload`; false on error.
  virtual bool AppendOne(int index, std::uint64_t seq, const std::string& payload,
                         Errors& errors) = 0;
  // Starts `consumers` consumers of a new group (from the oldest, or the tail), each calling
  // on_event(payload); returns once they are running.
  virtual void StartGroup(const std::string& group, bool from_oldest, int consumers,
                          std::function<void(const std::string&)> on_event, Errors& errors) = 0;
  virtual void StopGroup() = 0;
  virtual void Cleanup() {}
};

class RedisTarget : public Target {
 public:
  RedisTarget(const BenchOptions& o, std::string stream)
      : o_(o), stream_(std::move(stream)), producers_(static_cast<std::size_t>(o.connections)) {}

  void AppendBurst(int index, std::uint64_t count, Errors& errors) override {
    auto conn = Resp::Connect(o_.redis);
    if (!conn) return errors.Add(conn.error().ToString());
    const std::string payload(o_.value_size, 'x');
    std::uint64_t done = 0;
    while (done < count) {
      const std::uint64_t batch =
          std::min<std::uint64_t>(std::max(o_.pipeline, o_.batch), count - done);
      for (std::uint64_t i = 0; i < batch; ++i) {
        (*conn)->Add({"XADD", stream_, "*", "k", Key(index, done + i), "p", payload});
      }
      if (auto ok = (*conn)->Flush(); !ok) return errors.Add(ok.error().ToString());
      for (std::uint64_t i = 0; i < batch; ++i) {
        auto r = (*conn)->Read();
        if (!r || r->type == Reply::Type::kError) {
          return errors.Add(r ? r->text : r.error().ToString());
        }
      }
      done += batch;
    }
  }
  bool AppendOne(int index, std::uint64_t seq, const std::string& payload,
                 Errors& errors) override {
    auto& conn = producers_[static_cast<std::size_t>(index)];
    if (!conn) {
      auto c = Resp::Connect(o_.redis);
      if (!c) return errors.Add(c.error().ToString()), false;
      conn = std::move(*c);
    }
    auto r = conn->Call({"XADD", stream_, "*", "k", Key(index, seq), "p", payload});
    if (!r || r->type == Reply::Type::kError) return errors.Add(r ? r->text : "lost"), false;
    return true;
  }
  void StartGroup(const std::string& group, bool from_oldest, int consumers,
                  std::function<void(const std::string&)> on_event, Errors& errors) override {
    auto conn = Resp::Connect(o_.redis);
    if (!conn) return errors.Add(conn.error().ToString());
    auto r =
        (*conn)->Call({"XGROUP", "CREATE", stream_, group, from_oldest ? "0" : "$", "MKSTREAM"});
    if (!r || r->type == Reply::Type::kError) return errors.Add(r ? r->text : "lost");
    stop_ = false;
    for (int i = 0; i < consumers; ++i) {
      threads_.emplace_back([this, group, i, on_event, &errors, from_oldest] {
        RedisConsume(o_.redis, stream_, group, "c" + std::to_string(i), !from_oldest, stop_,
                     on_event, errors);
      });
    }
  }
  void StopGroup() override {
    stop_ = true;
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  void Cleanup() override {
    if (auto conn = Resp::Connect(o_.redis)) (void)(*conn)->Call({"DEL", stream_});
  }

 private:
  std::string Key(int index, std::uint64_t i) const { return EventKey(o_, index, i); }
  const BenchOptions& o_;
  std::string stream_;
  std::vector<std::unique_ptr<Resp>> producers_;  // [i]: producer i's own
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

class GridTarget : public Target {
 public:
  GridTarget(const BenchOptions& o, std::string stream,
             std::vector<std::unique_ptr<grid::Client>> producers,
             std::vector<std::unique_ptr<grid::Client>> consumers)
      : o_(o),
        stream_(std::move(stream)),
        producers_(std::move(producers)),
        consumers_(std::move(consumers)) {
    // One proxy per producer for the whole run, as a service holds one: a new proxy checks
    // the stream's configuration in the grid before its first append (a round trip).
    for (auto& producer : producers_) producer_streams_.push_back(producer->GetStream(stream_));
  }

  // A closed loop like map mode's: each completion (on the client's I/O thread) issues the
  // next append, so no thread wakes per event.
  void AppendBurst(int index, std::uint64_t count, Errors& errors) override {
    if (o_.batch > 1) return AppendBatches(index, count, errors);
    struct Loop {
      std::shared_ptr<grid::Stream> stream;
      std::string payload, prefix;
      std::uint64_t count = 0;
      std::atomic<std::uint64_t> next{0};
      std::mutex mu;
      std::condition_variable cv;
      int running = 0;
    };
    auto loop = std::make_shared<Loop>();
    loop->stream = producer_streams_[static_cast<std::size_t>(index)];
    loop->payload.assign(o_.value_size, 'x');
    loop->prefix = fmt::format("{}-{}-", stream_, index);
    loop->count = count;
    auto issue_ptr = std::make_shared<std::function<void()>>();
    *issue_ptr = [this, loop, index, &errors, weak = std::weak_ptr(issue_ptr)] {
      const std::uint64_t i = loop->next.fetch_add(1);
      if (i >= loop->count) {
        std::lock_guard lock(loop->mu);
        if (--loop->running == 0) loop->cv.notify_all();
        return;
      }
      loop->stream->AppendAsync({Key(index, i), loop->payload, loop->prefix + std::to_string(i)},
                                [loop, &errors, weak](Result<grid::AppendResult> r) {
                                  if (!r) errors.Add(r.error().ToString());
                                  if (auto again = weak.lock()) (*again)();
                                });
    };
    {
      std::lock_guard lock(loop->mu);
      loop->running = o_.pipeline;
    }
    for (int i = 0; i < o_.pipeline; ++i) (*issue_ptr)();
    std::unique_lock lock(loop->mu);
    loop->cv.wait(lock, [&] { return loop->running == 0; });
  }
  // --batch N: one AppendAll of N events per call (one request per sub-stream they hit).
  void AppendBatches(int index, std::uint64_t count, Errors& errors) {
    auto stream = producer_streams_[static_cast<std::size_t>(index)];
    const std::string payload(o_.value_size, 'x');
    const std::string prefix = fmt::format("{}-{}-", stream_, index);  // ids as AppendBurst's
    for (std::uint64_t done = 0; done < count;) {
      const auto n = std::min<std::uint64_t>(static_cast<std::uint64_t>(o_.batch), count - done);
      std::vector<grid::StreamAppend> batch;
      batch.reserve(n);
      for (std::uint64_t i = done; i < done + n; ++i) {
        batch.push_back({Key(index, i), payload, prefix + std::to_string(i)});
      }
      if (auto r = stream->AppendAll(std::move(batch)); !r) errors.Add(r.error().ToString());
      done += n;
    }
  }
  bool AppendOne(int index, std::uint64_t seq, const std::string& payload,
                 Errors& errors) override {
    auto r = producer_streams_[static_cast<std::size_t>(index)]->Append(
        Key(index, seq), payload, fmt::format("{}-e{}-{}", stream_, index, seq));
    if (!r) errors.Add(r.error().ToString());
    return r.has_value();
  }
  void StartGroup(const std::string& group, bool from_oldest, int consumers,
                  std::function<void(const std::string&)> on_event, Errors& errors) override {
    grid::SubscribeOptions options;
    options.start = from_oldest ? grid::SubscribeOptions::Start::kOldest
                                : grid::SubscribeOptions::Start::kLatest;
    options.max_idle_poll_ms = 2;
    for (int i = 0; i < consumers; ++i) {
      auto stream = consumers_[i % consumers_.size()]->GetStream(stream_);
      auto id = stream->Subscribe(
          group,
          [on_event](const grid::StreamEvent& e) -> base::Result<void> {
            on_event(e.payload);
            return {};
          },
          options);
      if (!id) return errors.Add(id.error().ToString());
      subscriptions_.emplace_back(stream, *id);
    }
    // Running once every sub-stream is leased (the consumers have split them).
    const auto deadline = Clock::now() + std::chrono::seconds(15);
    while (Clock::now() < deadline) {
      std::int64_t held = 0;
      for (auto& [stream, id] : subscriptions_) {
        if (auto s = stream->Stats(id)) held += s->leases_held;
      }
      if (held == 16) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  void StopGroup() override {
    for (auto& [stream, id] : subscriptions_) stream->Unsubscribe(id);
    subscriptions_.clear();
  }
  void Cleanup() override {
    for (auto& c : producers_) c->Shutdown();
    for (auto& c : consumers_) c->Shutdown();
  }

 private:
  std::string Key(int index, std::uint64_t i) const { return EventKey(o_, index, i); }
  const BenchOptions& o_;
  std::string stream_;
  std::vector<std::unique_ptr<grid::Client>> producers_, consumers_;
  std::vector<std::shared_ptr<grid::Stream>> producer_streams_;  // by producer index
  std::vector<std::pair<std::shared_ptr<grid::Stream>, grid::SubscriptionId>> subscriptions_;
};

std::shared_ptr<spdlog::logger> Logger() {
  auto log = std::make_shared<spdlog::logger>(
      "grid-bench", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  log->set_level(spdlog::level::warn);
  return log;
}

}  // namespace

Result<StreamBenchReport> RunStreamBench(const BenchOptions& o) {
  const std::string nonce = fmt::format("{:08x}", std::random_device()());
  const std::string stream = o.stream + "-" + nonce;
  std::unique_ptr<Target> target;
  StreamBenchReport report;
  if (!o.redis.empty()) {
    report.target = "redis";
    target = std::make_unique<RedisTarget>(o, stream);
  } else {
    report.target = "tessera";
    auto log = Logger();
    std::vector<std::unique_ptr<grid::Client>> producers, consumers;
    // The producers share --io-threads client loops, as map mode's connections do (one event
    // loop for many connections, like redis-benchmark's); each consumer has its own client.
    std::vector<std::shared_ptr<grid::ClientLoop>> loops;
    for (int i = 0; i < o.io_threads; ++i) loops.push_back(grid::ClientLoop::Start());
    for (int i = 0; i < o.connections + o.consumers; ++i) {
      auto client_options = o.client;
      if (i < o.connections && !loops.empty()) {
        client_options.loop = loops[static_cast<std::size_t>(i) % loops.size()];
      }
      auto client = grid::Client::Connect(client_options, log);
      if (!client) return std::unexpected(client.error());
      (i < o.connections ? producers : consumers).push_back(std::move(*client));
    }
    target = std::make_unique<GridTarget>(o, stream, std::move(producers), std::move(consumers));
  }
  Errors errors;

  // 1. Append throughput.
  auto start = Clock::now();
  {
    std::vector<std::thread> threads;
    for (int i = 0; i < o.connections; ++i) {
      const std::uint64_t share =
          o.events / static_cast<std::uint64_t>(o.connections) +
          (static_cast<std::uint64_t>(i) < o.events % o.connections ? 1 : 0);
      threads.emplace_back([&, i, share] { target->AppendBurst(i, share, errors); });
    }
    for (auto& t : threads) t.join();
  }
  report.append_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  report.appended = o.events - std::min<std::uint64_t>(o.events, errors.count.load());

  // 2. Read + commit throughput of one new group from the oldest.
  std::atomic<std::uint64_t> consumed{0};
  std::atomic<std::uint64_t> first_ns{0}, last_ns{0};
  target->StartGroup(
      "bench", /*from_oldest=*/true, o.consumers,
      [&](const std::string&) {
        const auto now = SteadyNs();
        std::uint64_t zero = 0;
        first_ns.compare_exchange_strong(zero, now);
        last_ns.store(now);
        consumed.fetch_add(1);
      },
      errors);
  const auto consume_deadline =
      Clock::now() + std::chrono::seconds(60) + std::chrono::microseconds(o.events * 50);
  while (consumed.load() < report.appended && Clock::now() < consume_deadline &&
         errors.count.load() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  target->StopGroup();
  report.consumed = consumed.load();
  report.consume_seconds = static_cast<double>(last_ns.load() - first_ns.load()) / 1e9;

  // 3. End to end: appended one at a time, latency to the handler.
  std::mutex latency_mu;
  std::atomic<std::uint64_t> received{0};
  target->StartGroup(
      "e2e", /*from_oldest=*/false, 1,
      [&](const std::string& payload) {
        const auto sent = StampOf(payload);
        std::lock_guard lock(latency_mu);
        report.e2e_latency_ns.Record(SteadyNs() - sent);
        received.fetch_add(1);
      },
      errors);
  std::atomic<std::uint64_t> sent{0};
  start = Clock::now();
  const auto e2e_end = start + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(o.duration_s));
  {
    std::vector<std::thread> threads;
    for (int i = 0; i < o.connections; ++i) {
      threads.emplace_back([&, i] {
        // Paced: each producer appends at rate / connections per second.
        const auto gap = std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(static_cast<double>(o.connections) / o.rate));
        auto next = start + gap * i / o.connections;
        for (std::uint64_t seq = 0; next < e2e_end; ++seq, next += gap) {
          std::this_thread::sleep_until(next);
          if (target->AppendOne(i, seq, Stamped(o.value_size, SteadyNs()), errors))
            sent.fetch_add(1);
        }
      });
    }
    for (auto& t : threads) t.join();
  }
  report.e2e_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const auto drain = Clock::now() + std::chrono::seconds(10);
  while (received.load() < sent.load() && Clock::now() < drain) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  target->StopGroup();
  report.e2e_events = received.load();
  target->Cleanup();
  report.errors = errors.count.load();
  report.first_error = errors.first;
  return report;
}

}  // namespace tessera::tools::bench
