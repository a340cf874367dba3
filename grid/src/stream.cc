// Stream: appends, groups, info and the stored configuration. The consumers are in
// stream_consumer.cc; the operations themselves in map/src/map_ops_stream.cc.
#include "tessera/grid/stream.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <condition_variable>
#include <map>
#include <sstream>

#include "stream_internal.h"
#include "tessera/map/stream_format.h"
#include "tessera/partition/partitioner.h"
#include "tessera/record/generic_record.h"

namespace tessera::grid {

using base::ErrorCode;
using base::Fail;
using base::Result;

namespace {

std::string ConfigText(const StreamConfig& c) {
  return "sub_streams=" + std::to_string(c.sub_streams) +
         " max_events=" + std::to_string(c.max_events) +
         " max_bytes=" + std::to_string(c.max_bytes) +
         " max_age_ms=" + std::to_string(c.max_age_ms) +
         " dedup_window_ms=" + std::to_string(c.dedup_window_ms);
}

// The stored fields of `text` over `c` (block_timeout_ms and groups are local).
StreamConfig ParseConfig(const std::string& text, StreamConfig c) {
  std::istringstream in(text);
  std::string field;
  while (in >> field) {
    auto eq = field.find('=');
    if (eq == std::string::npos) continue;
    std::int64_t v = 0;
    std::from_chars(field.data() + eq + 1, field.data() + field.size(), v);
    const std::string name = field.substr(0, eq);
    if (name == "sub_streams") c.sub_streams = static_cast<std::uint32_t>(v);
    if (name == "max_events") c.max_events = v;
    if (name == "max_bytes") c.max_bytes = v;
    if (name == "max_age_ms") c.max_age_ms = v;
    if (name == "dedup_window_ms") c.dedup_window_ms = v;
  }
  return c;
}

base::Result<void> Validate(const std::string& name, const StreamConfig& c) {
  if (auto problem = map::StreamNameProblem("stream", name); !problem.empty()) {
    return Fail(ErrorCode::kBadRequest, problem);
  }
  if (c.sub_streams < 1 || c.sub_streams > 1024) {
    return Fail(ErrorCode::kBadRequest, "stream '" + name + "': sub_streams is " +
                                            std::to_string(c.sub_streams) +
                                            "; use 1 to 1024 (default 16)");
  }
  if (c.max_events < 1 || c.max_bytes < 1 || c.max_age_ms < 0 || c.dedup_window_ms < 0 ||
      c.block_timeout_ms < 0) {
    return Fail(ErrorCode::kBadRequest,
                "stream '" + name +
                    "': max_events and max_bytes must be at least 1; max_age_ms, "
                    "dedup_window_ms and block_timeout_ms must not be negative");
  }
  for (const auto& g : c.groups) {
    if (auto problem = map::StreamNameProblem("group", g); !problem.empty()) {
      return Fail(ErrorCode::kBadRequest, "stream '" + name + "': " + problem);
    }
  }
  return {};
}

}  // namespace

map::MapRequest StreamRequest(map::MapOp op, std::string key) {
  map::MapRequest rq;
  rq.op = op;
  rq.map_name = map::kStreamMap;
  rq.key = std::move(key);
  return rq;
}

ReadRange RangeOf(const map::MapResult& read) {
  ReadRange out;
  if (!read.value) return out;
  const std::string& v = *read.value;
  const auto space = v.find(' ');
  if (space == std::string::npos) return out;
  std::int64_t head = 0, tail = 0;
  if (std::from_chars(v.data(), v.data() + space, head).ec != std::errc() ||
      std::from_chars(v.data() + space + 1, v.data() + v.size(), tail).ec != std::errc()) {
    return out;
  }
  return {head, tail};
}

StreamEvent DecodeEvent(std::uint32_t sub, const std::string& offset, const std::string& bytes) {
  StreamEvent e;
  e.sub_stream = sub;
  std::from_chars(offset.data(), offset.data() + offset.size(), e.offset);
  if (auto decoded = map::DecodeStoredEvent(bytes)) {
    e.id = std::move(decoded->id);
    e.key = std::move(decoded->key);
    e.payload = std::move(decoded->payload);
    e.time_ms = decoded->time_ms;
  } else {
    e.payload = bytes;
  }
  return e;
}

Stream::Stream(std::string name, StreamConfig config, std::shared_ptr<Invoker> invoker,
               std::string instance_id, std::shared_ptr<spdlog::logger> log)
    : name_(std::move(name)),
      config_(std::move(config)),
      invoker_(std::move(invoker)),
      instance_id_(std::move(instance_id)),
      log_(std::move(log)) {}

Result<map::MapResult> Stream::Call(map::MapRequest request) {
  return invoker_->InvokeSync(std::move(request));
}

std::vector<Result<map::MapResult>> Stream::CallAll(std::vector<map::MapRequest> requests,
                                                    const std::atomic<bool>* abandon,
                                                    std::chrono::milliseconds limit) {
  return Gather(
      requests.size(),
      [&](std::size_t i, Invoker::Callback done) {
        invoker_->Invoke(std::move(requests[i]), std::move(done));
      },
      abandon, limit);
}

std::vector<Result<map::MapResult>> Stream::CallAllShared(
    const std::vector<std::shared_ptr<const map::MapRequest>>& requests) {
  return Gather(
      requests.size(),
      [&](std::size_t i, Invoker::Callback done) {
        invoker_->InvokeShared(requests[i], std::move(done));
      },
      nullptr, std::chrono::minutes(5));
}

std::vector<Result<map::MapResult>> Stream::Gather(
    std::size_t n, const std::function<void(std::size_t, Invoker::Callback)>& send,
    const std::atomic<bool>* abandon, std::chrono::milliseconds limit) {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::size_t left = 0;
    std::vector<std::optional<Result<map::MapResult>>> results;
  };
  auto state = std::make_shared<State>();
  state->left = n;
  state->results.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    send(i, [state, i](Result<map::MapResult> r) {
      std::lock_guard lock(state->mu);
      state->results[i].emplace(std::move(r));
      if (--state->left == 0) state->cv.notify_all();
    });
  }
  // An instance that shut down may never answer: a stopping subscription stops waiting (late
  // answers land in `state`, which they keep alive), and nobody waits past `limit`.
  std::unique_lock lock(state->mu);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (state->left > 0 && !(abandon && abandon->load()) &&
         std::chrono::steady_clock::now() < deadline) {
    state->cv.wait_for(lock, std::chrono::milliseconds(abandon ? 20 : 1000));
  }
  std::vector<Result<map::MapResult>> out;
  out.reserve(state->results.size());
  for (auto& r : state->results) {
    out.push_back(r ? std::move(*r)
                    : Result<map::MapResult>(base::Fail(
                          ErrorCode::kTimeout, "stream '" + name_ + "': no answer (stopping)")));
  }
  return out;
}

Result<void> Stream::EnsureCreated(bool create) {
  if (created_.load(std::memory_order_acquire) || (!create && loaded_.load())) return {};
  std::lock_guard lock(create_mu_);
  if (created_.load() || (!create && loaded_.load())) return {};
  if (auto ok = Validate(name_, config_); !ok) return ok;
  auto rq = StreamRequest(create ? map::MapOp::kPutIfAbsent : map::MapOp::kGet,
                          map::StreamConfigKey(name_));
  rq.value = ConfigText(config_);
  rq.options.ttl_ms = 0;
  auto r = Call(rq);
  if (!r) return std::unexpected(r.error());
  if (!create && !r->value) {
    return Fail(ErrorCode::kNotFound, "stream '" + name_ +
                                          "' does not exist (nothing was appended to it or "
                                          "subscribed to it yet); check the name");
  }
  if (r->value && *r->value != rq.value && !loaded_.load()) {
    StreamConfig stored = ParseConfig(*r->value, config_);
    log_->warn("stream '{}' is configured in the grid as [{}]; this instance's [{}] is not used",
               name_, *r->value, rq.value);
    if (auto ok = Validate(name_, stored); !ok) return ok;
    config_ = stored;
  }
  if (!loaded_.load()) {  // built once, from the configuration in force from now on
    for (std::uint32_t i = 0; i < config_.sub_streams; ++i) {
      meta_keys_.push_back(map::StreamMetaKey(map::SubStreamName(name_, i)));
    }
    append_limits_ = record::GenericRecord::Build()
                         .Int64("max_events", config_.max_events)
                         .Int64("max_bytes", config_.max_bytes)
                         .Int64("max_age_ms", config_.max_age_ms)
                         .Int64("dedup_ms", config_.dedup_window_ms)
                         .Done();
  }
  loaded_.store(true);     // config_ is the stored one from now on: never written again
  if (!create) return {};  // creating (the groups of config_) comes with the first write
  for (const auto& group : config_.groups) {
    if (auto ok = CreateGroupOnAll(group, SubscribeOptions::Start::kOldest); !ok) return ok;
  }
  created_.store(true, std::memory_order_release);
  return {};
}

std::uint32_t Stream::SubStreamOf(std::string_view key) {
  if (!EnsureCreated()) {  // the error shows on the append; route by the local config
    std::lock_guard lock(create_mu_);
    return partition::Partitioner(config_.sub_streams).PartitionOf(key);
  }
  return partition::Partitioner(config_.sub_streams).PartitionOf(key);
}

Result<AppendResult> Stream::Append(std::string key, std::string payload, std::string id) {
  std::vector<StreamAppend> one;
  one.push_back({std::move(key), std::move(payload), std::move(id)});
  auto r = AppendAll(std::move(one));
  if (!r) return std::unexpected(r.error());
  return r->front();
}

map::MapRequest Stream::AppendRequest(std::uint32_t sub, std::vector<StreamAppend>& events,
                                      const std::vector<std::size_t>& index) const {
  auto rq = StreamRequest(map::MapOp::kStreamAppend, meta_keys_[sub]);
  bool ids = false;
  for (auto i : index) ids = ids || !events[i].id.empty();
  rq.entries.reserve(index.size());
  if (ids) rq.keys.reserve(index.size());
  for (auto i : index) {
    rq.entries.emplace_back(std::move(events[i].key), std::move(events[i].payload));
    if (ids) rq.keys.push_back(std::move(events[i].id));
  }
  rq.argument = append_limits_;
  return rq;
}

map::MapRequest Stream::AppendRequest(std::uint32_t sub, StreamAppend event) const {
  auto rq = StreamRequest(map::MapOp::kStreamAppend, meta_keys_[sub]);
  rq.entries.emplace_back(std::move(event.key), std::move(event.payload));
  if (!event.id.empty()) rq.keys.push_back(std::move(event.id));
  rq.argument = append_limits_;
  return rq;
}

void Stream::AppendAsync(StreamAppend event, std::function<void(base::Result<AppendResult>)> done) {
  if (auto ok = EnsureCreated(); !ok) return done(std::unexpected(ok.error()));
  if (event.key.empty()) {
    return done(Fail(ErrorCode::kBadRequest,
                     "stream '" + name_ + "': an event needs a key (it picks the sub-stream)"));
  }
  const std::uint32_t sub = partition::Partitioner(config_.sub_streams).PartitionOf(event.key);
  invoker_->Invoke(AppendRequest(sub, std::move(event)),
                   [sub, done = std::move(done)](Result<map::MapResult> r) {
                     if (!r) return done(std::unexpected(r.error()));
                     AppendResult out{sub, 0, false};
                     if (!r->entries.empty()) {
                       const auto& text = r->entries.front().first;
                       std::from_chars(text.data(), text.data() + text.size(), out.offset);
                       out.duplicate = r->entries.front().second == "dup";
                     }
                     done(out);
                   });
}

Result<std::vector<AppendResult>> Stream::AppendAll(std::vector<StreamAppend> events) {
  if (auto ok = EnsureCreated(); !ok) return std::unexpected(ok.error());
  for (const auto& e : events) {
    if (e.key.empty()) {
      return Fail(ErrorCode::kBadRequest,
                  "stream '" + name_ + "': an event needs a key (it picks the sub-stream)");
    }
  }
  std::map<std::uint32_t, std::vector<std::size_t>> parts;
  {
    // Each event's sub-stream once, then each sub-stream's list sized before it is filled.
    const partition::Partitioner partitioner(config_.sub_streams);
    std::vector<std::uint32_t> sub_of(events.size());
    std::vector<std::size_t> per_sub(config_.sub_streams, 0);
    for (std::size_t i = 0; i < events.size(); ++i) {
      sub_of[i] = partitioner.PartitionOf(events[i].key);
      ++per_sub[sub_of[i]];
    }
    for (std::uint32_t sub = 0; sub < config_.sub_streams; ++sub) {
      if (per_sub[sub] > 0) parts[sub].reserve(per_sub[sub]);
    }
    for (std::size_t i = 0; i < events.size(); ++i) parts[sub_of[i]].push_back(i);
  }
  std::vector<AppendResult> out(events.size());
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(config_.block_timeout_ms);
  auto pause = std::chrono::milliseconds(1);
  // Each sub-stream's request is built once, its events moved in: a full sub-stream is sent
  // the same request again.
  std::map<std::uint32_t, std::shared_ptr<const map::MapRequest>> requests;
  for (const auto& [sub, index] : parts) {
    requests.emplace(sub,
                     std::make_shared<const map::MapRequest>(AppendRequest(sub, events, index)));
  }
  while (!parts.empty()) {
    std::vector<std::shared_ptr<const map::MapRequest>> pending;
    std::vector<std::uint32_t> subs;
    for (const auto& [sub, index] : parts) {
      pending.push_back(requests[sub]);
      subs.push_back(sub);
    }
    auto results = CallAllShared(pending);
    std::optional<base::Error> overloaded;
    for (std::size_t j = 0; j < subs.size(); ++j) {
      auto& r = results[j];
      if (!r) {
        if (r.error().code() != ErrorCode::kOverloaded) return std::unexpected(r.error());
        overloaded = r.error();
        continue;
      }
      const auto& index = parts[subs[j]];
      for (std::size_t k = 0; k < index.size() && k < r->entries.size(); ++k) {
        std::int64_t offset = 0;
        const auto& text = r->entries[k].first;
        std::from_chars(text.data(), text.data() + text.size(), offset);
        out[index[k]] = {subs[j], offset, r->entries[k].second == "dup"};
      }
      parts.erase(subs[j]);
    }
    if (!overloaded) break;
    if (std::chrono::steady_clock::now() + pause > deadline) return std::unexpected(*overloaded);
    std::this_thread::sleep_for(pause);  // a full sub-stream: wait for its slowest group
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  return out;
}

Result<void> Stream::CreateGroupOnAll(const std::string& group, SubscribeOptions::Start start) {
  if (auto problem = map::StreamNameProblem("group", group); !problem.empty()) {
    return Fail(ErrorCode::kBadRequest, problem);
  }
  std::vector<map::MapRequest> requests;
  for (std::uint32_t i = 0; i < config_.sub_streams; ++i) {
    auto rq =
        StreamRequest(map::MapOp::kStreamGroup, map::StreamMetaKey(map::SubStreamName(name_, i)));
    rq.argument =
        record::GenericRecord::Build()
            .String("group", group)
            .String("action", start == SubscribeOptions::Start::kOldest ? "oldest" : "latest")
            .Done();
    requests.push_back(std::move(rq));
  }
  for (auto& r : CallAll(std::move(requests))) {
    if (!r) return std::unexpected(r.error());
  }
  return {};
}

Result<void> Stream::CreateGroup(const std::string& group, SubscribeOptions::Start start) {
  if (auto ok = EnsureCreated(); !ok) return ok;
  return CreateGroupOnAll(group, start);
}

Result<void> Stream::DeleteGroup(const std::string& group) {
  if (auto problem = map::StreamNameProblem("group", group); !problem.empty()) {
    return Fail(ErrorCode::kBadRequest, problem);
  }
  if (auto ok = EnsureCreated(/*create=*/false); !ok) return ok;
  std::vector<map::MapRequest> requests;
  for (std::uint32_t i = 0; i < config_.sub_streams; ++i) {
    auto rq =
        StreamRequest(map::MapOp::kStreamGroup, map::StreamMetaKey(map::SubStreamName(name_, i)));
    rq.argument = record::GenericRecord::Build()
                      .String("group", group)
                      .String("action", "delete")
                      .Int64("max_age_ms", config_.max_age_ms)
                      .Done();
    requests.push_back(std::move(rq));
  }
  requests.push_back(StreamRequest(map::MapOp::kDelete, map::StreamConsumersKey(name_, group)));
  for (auto& r : CallAll(std::move(requests))) {
    if (!r) return std::unexpected(r.error());
  }
  return {};
}

Result<StreamInfo> Stream::Info() {
  if (auto ok = EnsureCreated(/*create=*/false); !ok) return std::unexpected(ok.error());
  std::vector<map::MapRequest> requests;
  for (std::uint32_t i = 0; i < config_.sub_streams; ++i) {
    requests.push_back(
        StreamRequest(map::MapOp::kStreamInfo, map::StreamMetaKey(map::SubStreamName(name_, i))));
  }
  auto results = CallAll(std::move(requests));
  StreamInfo info;
  info.name = name_;
  info.config = config_;
  std::map<std::string, StreamGroupPosition> groups;
  for (std::uint32_t i = 0; i < results.size(); ++i) {
    auto& r = results[i];
    if (!r) return std::unexpected(r.error());
    const map::StreamMeta meta = map::ParseStreamMeta(r->value.value_or(""));
    SubStreamInfo sub;
    sub.index = i;
    sub.head = meta.head;
    sub.tail = meta.tail;
    sub.bytes = meta.bytes;
    sub.oldest_ms = r->count;
    for (const auto& [group, text] : r->entries) {
      StreamGroupPosition p;
      p.group = group;
      std::istringstream in(text);
      in >> p.cursor >> p.oldest_uncommitted_ms >> p.holder;
      if (p.holder == "-") p.holder.clear();
      p.lag = std::max<std::int64_t>(0, meta.tail - std::max(p.cursor, meta.head - 1));
      auto& total = groups[group];
      total.group = group;
      total.lag += p.lag;
      if (p.oldest_uncommitted_ms != 0 && (total.oldest_uncommitted_ms == 0 ||
                                           p.oldest_uncommitted_ms < total.oldest_uncommitted_ms)) {
        total.oldest_uncommitted_ms = p.oldest_uncommitted_ms;
      }
      sub.groups.push_back(std::move(p));
    }
    info.sub_streams.push_back(std::move(sub));
  }
  for (auto& [name, g] : groups) info.groups.push_back(std::move(g));
  return info;
}

Result<StreamSlice> Stream::Read(std::uint32_t sub, std::int64_t from, int max) {
  if (auto ok = EnsureCreated(/*create=*/false); !ok) return std::unexpected(ok.error());
  if (sub >= config_.sub_streams) {
    return Fail(ErrorCode::kBadRequest, "stream '" + name_ + "' has sub-streams 0 to " +
                                            std::to_string(config_.sub_streams - 1) + ", not " +
                                            std::to_string(sub));
  }
  auto rq =
      StreamRequest(map::MapOp::kStreamRead, map::StreamMetaKey(map::SubStreamName(name_, sub)));
  rq.argument =
      record::GenericRecord::Build().Int64("from", from).Int64("max", std::max(1, max)).Done();
  auto r = Call(std::move(rq));
  if (!r) return std::unexpected(r.error());
  StreamSlice slice;
  const ReadRange range = RangeOf(*r);
  slice.head = range.head;
  slice.tail = range.tail;
  slice.lost = r->flag;
  for (const auto& [offset, bytes] : r->entries) {
    slice.events.push_back(DecodeEvent(sub, offset, bytes));
  }
  return slice;
}

}  // namespace tessera::grid
