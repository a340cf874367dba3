// Streams family (but XREAD / XREADGROUP, in stream_read.cc): each command is one
// MapOp::kRedisStream request on the stream's partition (streams/redis_stream.h), so it runs
// atomically on the owner and is backed up like any write. Arguments are checked here, with
// Redis's error texts, before anything is sent.
#include <charconv>
#include <random>

#include "command_util.h"
#include "server_state.h"
#include "stream_util.h"
#include "tessera/hash/redis_hash.h"
#include "tessera/map/stream_format.h"
#include "tessera/streams/redis_stream.h"

namespace tessera::resp {

StreamRequest::StreamRequest(std::string_view key, std::string_view cmd)
    : args(record::GenericRecord::Build()) {
  request.op = map::MapOp::kRedisStream;
  request.map_name = map::kStreamMap;
  request.key = map::StreamMetaKey(map::SubStreamName(key, 0));
  args.String("cmd", std::string(cmd));
}

map::MapRequest StreamRequest::Finish() && {
  request.argument = args.Done();
  return std::move(request);
}

std::string StreamKeyProblem(std::string_view key) {
  auto problem = map::StreamNameProblem("stream", key);
  if (problem.empty()) return "";
  return "ERR " + problem + " (Tessera places a stream's records by '@' and '#')";
}

void WriteStreamEntry(RespWriter& writer, const std::string& id, const std::string& payload) {
  writer.ArrayHeader(2);
  writer.Bulk(id);
  auto fields = streams::DecodeStreamFields(payload);
  if (!fields || fields->size() % 2 != 0) {  // appended through the Tessera stream API
    writer.ArrayHeader(2);
    writer.Bulk("payload");
    writer.Bulk(payload);
    return;
  }
  writer.ArrayHeader(fields->size());
  for (auto f : *fields) writer.Bulk(f);
}

void WriteStreamError(RespWriter& writer, const base::Error& error) {
  const std::string& message = error.message();
  if (message.starts_with("NOGROUP ") || message.starts_with("BUSYGROUP ")) {
    return writer.Error(message);
  }
  WriteServiceError(writer, error);
}

std::optional<streams::StreamId> ParseRangeBound(std::string_view text, bool start,
                                                 std::string& error) {
  if (text == "-") return streams::StreamId{};
  if (text == "+") return streams::StreamId::Max();
  const bool exclusive = text.starts_with('(');
  if (exclusive) text.remove_prefix(1);
  auto id = streams::ParseStreamId(text, start ? 0 : ~std::uint64_t{0});
  if (!id) {
    error = kInvalidStreamId;
    return std::nullopt;
  }
  if (!exclusive) return id;
  if (start) {
    if (*id == streams::StreamId::Max()) {
      error = "ERR invalid start ID for the interval";
      return std::nullopt;
    }
    return id->seq == ~std::uint64_t{0} ? streams::StreamId{id->ms + 1, 0}
                                        : streams::StreamId{id->ms, id->seq + 1};
  }
  if (*id == streams::StreamId{}) {
    error = "ERR invalid end ID for the interval";
    return std::nullopt;
  }
  return id->seq == 0 ? streams::StreamId{id->ms - 1, ~std::uint64_t{0}}
                      : streams::StreamId{id->ms, id->seq - 1};
}

namespace {

bool StreamKeyOk(Connection& conn, std::string_view key) {
  auto problem = StreamKeyProblem(key);
  if (problem.empty()) return true;
  conn.Reply().Error(problem);
  return false;
}

// Runs `request` and replies with write(writer, result) or the stream error. For a key this
// shard has not seen as a stream, the key's keyspace entry is read alongside: a string or hash
// answers WRONGTYPE, as in Redis (a stream the request made for it, XGROUP CREATE MKSTREAM,
// goes again); a stream entry puts the key among the known ones.
template <typename Write>
void CallStream(Connection& conn, map::MapRequest&& request, Write write) {
  // request.key is "meta@<key>#0" (StreamRequest).
  std::string key = request.key.substr(5, request.key.size() - 7);
  StreamKeyCache& known = conn.server().stream_keys[conn.shard()];
  if (conn.capture() != nullptr || known.Has(key, conn.maps().StreamKeyRemovals())) {
    return CallMapRaw(conn, std::move(request),
                      [write](RespWriter& writer, base::Result<map::MapResult>& result) {
                        if (!result) return WriteStreamError(writer, result.error());
                        write(writer, *result);
                      });
  }
  ServerState* server = &conn.server();
  const bool mkstream = request.argument.Find("mkstream") != nullptr;  // XGROUP CREATE MKSTREAM
  std::vector<map::MapRequest> both;
  both.push_back(KeyRequest(map::MapOp::kGetEntryView, conn.default_map(), key));
  both.push_back(std::move(request));
  CallMapGather(conn, std::move(both),
                [write, server, &known, mkstream, key = std::move(key)](RespWriter& writer,
                                                                        Results& results) {
                  const auto& entry = results[0];
                  auto& result = results[1];
                  if (entry && entry->view && entry->view->kind != map::ValueKind::kStream) {
                    if (mkstream && result && result->flag) {  // it made a stream: not a key
                      server->maps.Execute(streams::RedisStreamDeleteRequest(key),
                                           [](base::Result<map::MapResult>) {});
                    }
                    return WriteServiceError(writer, map::WrongKindError());
                  }
                  if (entry && entry->view) known.Add(key, server->maps.StreamKeyRemovals());
                  if (!result) return WriteStreamError(writer, result.error());
                  write(writer, *result);
                });
}

void ReplyCount(RespWriter& writer, const map::MapResult& result) { writer.Integer(result.count); }

// [MAXLEN | MINID] [= | ~] threshold [LIMIT count] at args[i]: fills the trim arguments and
// moves i past them. False after replying with the error.
bool ParseTrim(Connection& conn, Args args, std::size_t& i, StreamRequest& rq) {
  const bool maxlen = EqualsIgnoreCase(args[i], "maxlen");
  ++i;
  bool approximate = false;
  if (i < args.size() && (args[i] == "=" || args[i] == "~")) {
    approximate = args[i] == "~";
    ++i;
  }
  if (i >= args.size()) {
    conn.Reply().SyntaxError();
    return false;
  }
  if (maxlen) {
    std::int64_t n = 0;
    if (!ParseInt64(args[i], n)) {
      conn.Reply().NotInteger();
      return false;
    }
    if (n < 0) {
      conn.Reply().Error("ERR The MAXLEN argument must be >= 0.");
      return false;
    }
    rq.args.String("trim", "maxlen").Int64("maxlen", n);
  } else {
    auto id = streams::ParseStreamId(args[i]);
    if (!id) {
      conn.Reply().Error(kInvalidStreamId);
      return false;
    }
    rq.args.String("trim", "minid").String("minid", id->Text());
  }
  ++i;
  if (i + 1 < args.size() && EqualsIgnoreCase(args[i], "limit")) {
    std::int64_t limit = 0;
    if (!ParseInt64(args[i + 1], limit) || limit < 0) {
      conn.Reply().Error("ERR The LIMIT argument must be >= 0.");
      return false;
    }
    if (!approximate) {
      conn.Reply().Error("ERR syntax error, LIMIT cannot be used without the special ~ option");
      return false;
    }
    rq.args.Int64("limit", limit);
    i += 2;
  }
  rq.args.Bool("approximate", approximate);
  return true;
}

// The stream's configuration for the Tessera API (one sub-stream, the RESP limits, entries
// kept until trimmed or room is needed), stored when a command creates the stream.
void StoreStreamConfig(map::MapService& maps, const std::string& key, std::int64_t max_entries,
                       std::int64_t max_bytes) {
  map::MapRequest config;
  config.op = map::MapOp::kPutIfAbsent;
  config.map_name = map::kStreamMap;
  config.key = map::StreamConfigKey(key);
  config.value = "sub_streams=1 max_events=" + std::to_string(max_entries) +
                 " max_bytes=" + std::to_string(max_bytes) +
                 " max_age_ms=3153600000000 dedup_window_ms=0";
  config.options.ttl_ms = 0;
  maps.Execute(std::move(config), [](base::Result<map::MapResult>) {});
}

// A stream XADD or XGROUP CREATE MKSTREAM created: its keyspace entry (hash/redis_hash.h), so
// SCAN, DBSIZE, TYPE and EXPIRE see it. Sent before the reply, so a later command of the same
// client finds it. A key that holds a string or hash keeps it (docs/resp.md: the stream is then
// not a key).
map::MapRequest MarkRequest(const std::string& keyspace, const std::string& key,
                            std::int64_t epoch = 0) {
  map::MapRequest mark;
  mark.op = map::MapOp::kRedisKey;
  mark.map_name = keyspace;
  mark.key = key;
  mark.processor = "mark_stream";
  mark.argument = record::GenericRecord::Build().Int64("epoch", epoch).Done();
  return mark;
}

void MarkStreamKey(map::MapService& maps, const std::string& keyspace, const std::string& key) {
  maps.Execute(MarkRequest(keyspace, key), [](base::Result<map::MapResult>) {});
}

// A stream incarnation's epoch (redis_hash.h "mark_stream"): random, never 0.
std::int64_t NewEpoch() {
  thread_local std::mt19937_64 random{std::random_device{}()};
  std::int64_t epoch = 0;
  while (epoch == 0) epoch = static_cast<std::int64_t>(random() >> 1);
  return epoch;
}

// XADD of a key this shard has not seen as a stream: the keyspace entry and the append are sent
// together (each to its partition, in command order, so a pipelined EXPIRE, DEL or XLEN finds
// what they made), with one new epoch. Then: a key of another kind answers WRONGTYPE and a
// stream the append made goes again; a failed append takes back the entry made for it; and the
// stream's epoch is made the keyspace entry's when they differ (an entry or a stream that was
// there already).
void XAddWithKeyspaceEntry(Connection& conn, std::string key, StreamRequest rq) {
  ServerState* server = &conn.server();
  const std::int64_t epoch = NewEpoch();
  rq.args.Int64("epoch", epoch);
  std::vector<map::MapRequest> both;
  both.push_back(MarkRequest(server->options.default_map, key, epoch));
  both.push_back(std::move(rq).Finish());
  StreamKeyCache& cache = server->stream_keys[conn.shard()];
  cache.Add(key, server->maps.StreamKeyRemovals());  // the pipeline's next XADDs: one request
  CallMapGather(
      conn, std::move(both),
      [server, &cache, key = std::move(key), epoch](RespWriter& writer, Results& results) {
        auto& mark = results[0];
        auto& added = results[1];
        auto send = [server](map::MapRequest request) {
          server->maps.Execute(std::move(request), [](base::Result<map::MapResult>) {});
        };
        if (!mark) {
          cache.Remove(key);
          if (added && added->flag) send(streams::RedisStreamDeleteRequest(key, true, epoch));
          return WriteServiceError(writer, mark.error());
        }
        if (!added) {
          cache.Remove(key);
          if (mark->flag) {
            map::MapRequest unmark = MarkRequest(server->options.default_map, key, epoch);
            unmark.processor = "unmark_stream";
            send(std::move(unmark));
          }
          return WriteStreamError(writer, added.error());
        }
        std::int64_t named = 0;  // the epoch the keyspace entry holds
        if (mark->value) {
          std::from_chars(mark->value->data(), mark->value->data() + mark->value->size(), named);
        }
        if (named != 0 && added->count != named) {
          StreamRequest adopt(key, "set_epoch");
          adopt.args.Int64("epoch", named);
          send(std::move(adopt).Finish());
        }
        if (added->flag) {
          StoreStreamConfig(server->maps, key, server->options.stream_max_entries,
                            server->options.stream_max_bytes);
        }
        if (added->value) server->stream_waiters.Wake(key);
        WriteOptionalBulk(writer, added->value);
      });
}

void XAdd(Connection& conn, Args args) {
  if (!StreamKeyOk(conn, args[1])) return;
  StreamRequest rq(args[1], "add");
  std::size_t i = 2;
  bool nomkstream = false;
  for (; i < args.size(); ++i) {
    if (EqualsIgnoreCase(args[i], "nomkstream")) {
      rq.args.Bool("nomkstream", true);
      nomkstream = true;
    } else if (EqualsIgnoreCase(args[i], "maxlen") || EqualsIgnoreCase(args[i], "minid")) {
      if (!ParseTrim(conn, args, i, rq)) return;
      --i;
    } else {
      break;
    }
  }
  if (i >= args.size() || (args.size() - i - 1) < 2 || (args.size() - i - 1) % 2 != 0) {
    return conn.Reply().WrongArity("xadd");
  }
  const std::string_view id = args[i];
  if (id != "*" && !(id.ends_with("-*") && streams::ParseStreamId(id.substr(0, id.size() - 2))) &&
      !streams::ParseStreamId(id)) {
    return conn.Reply().Error(kInvalidStreamId);
  }
  const auto& options = conn.server().options;
  rq.args.String("id", std::string(id))
      .Int64("max_events", options.stream_max_entries)
      .Int64("max_bytes", options.stream_max_bytes);
  rq.request.value = streams::EncodeStreamFields({args.begin() + i + 1, args.end()});
  std::string key(args[1]);
  if (!nomkstream && conn.capture() == nullptr &&
      !conn.server().stream_keys[conn.shard()].Has(key, conn.maps().StreamKeyRemovals())) {
    return XAddWithKeyspaceEntry(conn, std::move(key), std::move(rq));
  }
  // A known stream: one request. Should it have been removed meanwhile (another member's DEL),
  // this append makes it again and its keyspace entry follows right after.
  CallStream(conn, std::move(rq).Finish(),
             [key = std::move(key), server = &conn.server()](RespWriter& writer,
                                                             const map::MapResult& result) {
               if (result.flag) {
                 StoreStreamConfig(server->maps, key, server->options.stream_max_entries,
                                   server->options.stream_max_bytes);
                 MarkStreamKey(server->maps, server->options.default_map, key);
               }
               if (result.value) server->stream_waiters.Wake(key);
               WriteOptionalBulk(writer, result.value);
             });
}

void XTrim(Connection& conn, Args args) {
  if (!StreamKeyOk(conn, args[1])) return;
  if (!EqualsIgnoreCase(args[2], "maxlen") && !EqualsIgnoreCase(args[2], "minid")) {
    return conn.Reply().SyntaxError();
  }
  StreamRequest rq(args[1], "trim");
  std::size_t i = 2;
  if (!ParseTrim(conn, args, i, rq)) return;
  if (i != args.size()) return conn.Reply().SyntaxError();
  CallStream(conn, std::move(rq).Finish(), ReplyCount);
}

void XLen(Connection& conn, Args args) {
  if (!StreamKeyOk(conn, args[1])) return;
  CallStream(conn, StreamRequest(args[1], "len").Finish(), ReplyCount);
}

void RangeGeneric(Connection& conn, Args args, bool rev) {
  if (!StreamKeyOk(conn, args[1])) return;
  std::string error;
  auto start = ParseRangeBound(args[rev ? 3 : 2], true, error);
  auto end = start ? ParseRangeBound(args[rev ? 2 : 3], false, error) : std::nullopt;
  if (!end) return conn.Reply().Error(error);
  std::int64_t count = -1;
  if (args.size() == 6 && EqualsIgnoreCase(args[4], "count")) {
    if (!ParseInt64(args[5], count)) return conn.Reply().NotInteger();
    if (count < 0) count = 0;
  } else if (args.size() != 4) {
    return conn.Reply().SyntaxError();
  }
  if (count == 0) return conn.Reply().ArrayHeader(0);
  StreamRequest rq(args[1], "range");
  rq.args.String("start", start->Text())
      .String("end", end->Text())
      .Int64("count", std::max<std::int64_t>(0, count))
      .Bool("rev", rev);
  CallStream(conn, std::move(rq).Finish(), [](RespWriter& writer, const map::MapResult& result) {
    writer.ArrayHeader(result.entries.size());
    for (const auto& [id, fields] : result.entries) WriteStreamEntry(writer, id, fields);
  });
}

void XRange(Connection& conn, Args args) { RangeGeneric(conn, args, false); }
void XRevRange(Connection& conn, Args args) { RangeGeneric(conn, args, true); }

void XGroup(Connection& conn, Args args) {
  const std::string sub = Lowercase(args[1]);
  auto arity = [&](std::size_t n) {
    if (args.size() == n) return true;
    conn.Reply().Error("ERR wrong number of arguments for 'xgroup|" + sub + "' command");
    return false;
  };
  if (sub == "help") {
    conn.Reply().ArrayHeader(5);
    conn.Reply().Bulk("XGROUP CREATE <key> <groupname> <id|$> [MKSTREAM]");
    conn.Reply().Bulk("XGROUP CREATECONSUMER <key> <groupname> <consumer>");
    conn.Reply().Bulk("XGROUP DELCONSUMER <key> <groupname> <consumer>");
    conn.Reply().Bulk("XGROUP DESTROY <key> <groupname>");
    conn.Reply().Bulk("HELP");
    return;
  }
  if (args.size() < 4) return conn.Reply().WrongArity("xgroup|" + sub);
  if (!StreamKeyOk(conn, args[2])) return;
  if (sub == "create") {
    if (args.size() < 5) return conn.Reply().WrongArity("xgroup|create");
    StreamRequest rq(args[2], "create_group");
    rq.args.String("group", std::string(args[3]));
    if (args[4] != "$" && !streams::ParseStreamId(args[4]))
      return conn.Reply().Error(kInvalidStreamId);
    rq.args.String("id", args[4] == "$" ? "$" : streams::ParseStreamId(args[4])->Text());
    for (std::size_t i = 5; i < args.size(); ++i) {
      std::int64_t n = 0;
      if (EqualsIgnoreCase(args[i], "mkstream")) {
        rq.args.Bool("mkstream", true);
      } else if (EqualsIgnoreCase(args[i], "entriesread") && i + 1 < args.size() &&
                 ParseInt64(args[i + 1], n)) {
        ++i;  // Tessera counts entries read by offset
      } else {
        return conn.Reply().SyntaxError();
      }
    }
    const auto& options = conn.server().options;
    CallStream(conn, std::move(rq).Finish(),
               [key = std::string(args[2]), maps = &conn.maps(),
                max_entries = options.stream_max_entries, max_bytes = options.stream_max_bytes,
                keyspace = conn.default_map()](RespWriter& writer, const map::MapResult& result) {
                 if (result.flag) {
                   StoreStreamConfig(*maps, key, max_entries, max_bytes);
                   MarkStreamKey(*maps, keyspace, key);
                 }
                 writer.SimpleString("OK");
               });
    return;
  }
  if (sub == "destroy") {
    if (!arity(4)) return;
    StreamRequest rq(args[2], "destroy_group");
    rq.args.String("group", std::string(args[3]));
    return CallStream(conn, std::move(rq).Finish(), ReplyCount);
  }
  if (sub == "createconsumer" || sub == "delconsumer") {
    if (!arity(5)) return;
    StreamRequest rq(args[2], sub == "createconsumer" ? "create_consumer" : "del_consumer");
    rq.args.String("group", std::string(args[3])).String("consumer", std::string(args[4]));
    return CallStream(conn, std::move(rq).Finish(), ReplyCount);
  }
  conn.Reply().Error("ERR unknown subcommand '" + std::string(args[1]) +
                     "'. Try XGROUP HELP. (Tessera serves CREATE, DESTROY, CREATECONSUMER "
                     "and DELCONSUMER; SETID is not supported)");
}

void XAck(Connection& conn, Args args) {
  if (!StreamKeyOk(conn, args[1])) return;
  StreamRequest rq(args[1], "ack");
  rq.args.String("group", std::string(args[2]));
  for (std::size_t i = 3; i < args.size(); ++i) {
    auto id = streams::ParseStreamId(args[i]);
    if (!id) return conn.Reply().Error(kInvalidStreamId);
    rq.request.keys.push_back(id->Text());
  }
  CallStream(conn, std::move(rq).Finish(), ReplyCount);
}

void XPending(Connection& conn, Args args) {
  if (!StreamKeyOk(conn, args[1])) return;
  StreamRequest rq(args[1], "pending");
  rq.args.String("group", std::string(args[2]));
  const bool summary = args.size() == 3;
  if (!summary) {
    std::size_t i = 3;
    std::int64_t idle = 0;
    if (EqualsIgnoreCase(args[i], "idle")) {
      if (args.size() < 8) return conn.Reply().SyntaxError();
      if (!ParseInt64(args[i + 1], idle)) return conn.Reply().NotInteger();
      i += 2;
    }
    if (args.size() - i != 3 && args.size() - i != 4) return conn.Reply().SyntaxError();
    std::string error;
    auto start = ParseRangeBound(args[i], true, error);
    auto end = start ? ParseRangeBound(args[i + 1], false, error) : std::nullopt;
    if (!end) return conn.Reply().Error(error);
    std::int64_t count = 0;
    if (!ParseInt64(args[i + 2], count)) return conn.Reply().NotInteger();
    rq.args.String("start", start->Text())
        .String("end", end->Text())
        .Int64("count", std::max<std::int64_t>(0, count))
        .Int64("idle", idle);
    if (args.size() - i == 4) rq.args.String("consumer", std::string(args[i + 3]));
  }
  CallStream(conn, std::move(rq).Finish(),
             [summary](RespWriter& writer, const map::MapResult& result) {
               if (summary) {
                 writer.ArrayHeader(4);
                 writer.Integer(result.count);
                 if (result.count == 0) {
                   writer.Null();
                   writer.Null();
                   writer.NullArray();
                   return;
                 }
                 const auto space = result.value->find(' ');
                 writer.Bulk(std::string_view(*result.value).substr(0, space));
                 writer.Bulk(std::string_view(*result.value).substr(space + 1));
                 writer.ArrayHeader(result.entries.size());
                 for (const auto& [consumer, n] : result.entries) {
                   writer.ArrayHeader(2);
                   writer.Bulk(consumer);
                   writer.Bulk(n);
                 }
                 return;
               }
               writer.ArrayHeader(result.entries.size());
               for (const auto& [id, rest] : result.entries) {  // "<idle> <n> <consumer>"
                 const auto a = rest.find(' ');
                 const auto b = rest.find(' ', a + 1);
                 std::int64_t idle = 0, n = 0;
                 ParseInt64(std::string_view(rest).substr(0, a), idle);
                 ParseInt64(std::string_view(rest).substr(a + 1, b - a - 1), n);
                 writer.ArrayHeader(4);
                 writer.Bulk(id);
                 writer.Bulk(std::string_view(rest).substr(b + 1));
                 writer.Integer(idle);
                 writer.Integer(n);
               }
             });
}

void WriteClaimed(RespWriter& writer, const map::MapResult& result, bool justid) {
  writer.ArrayHeader(result.entries.size());
  for (const auto& [id, fields] : result.entries) {
    if (justid) {
      writer.Bulk(id);
    } else {
      WriteStreamEntry(writer, id, fields);
    }
  }
}

// XCLAIM / XAUTOCLAIM key group consumer min-idle-time ...: the request with those four, or
// nullopt after replying with the error.
std::optional<StreamRequest> ClaimRequest(Connection& conn, Args args, std::string_view cmd) {
  if (!StreamKeyOk(conn, args[1])) return std::nullopt;
  std::int64_t min_idle = 0;
  if (!ParseInt64(args[4], min_idle)) {
    conn.Reply().Error("ERR Invalid min-idle-time argument for " + Uppercase(args[0]));
    return std::nullopt;
  }
  StreamRequest rq(args[1], cmd);
  rq.args.String("group", std::string(args[2]))
      .String("consumer", std::string(args[3]))
      .Int64("min_idle", std::max<std::int64_t>(0, min_idle));
  return rq;
}

void XClaim(Connection& conn, Args args) {
  auto claim = ClaimRequest(conn, args, "claim");
  if (!claim) return;
  StreamRequest& rq = *claim;
  std::size_t i = 5;
  for (; i < args.size(); ++i) {
    auto id = streams::ParseStreamId(args[i]);
    if (!id) break;
    rq.request.keys.push_back(id->Text());
  }
  bool justid = false;
  for (; i < args.size(); ++i) {
    std::int64_t n = 0;
    const bool has_value = i + 1 < args.size();
    if (EqualsIgnoreCase(args[i], "force")) {
      rq.args.Bool("force", true);
    } else if (EqualsIgnoreCase(args[i], "justid")) {
      justid = true;
      rq.args.Bool("justid", true);
    } else if (has_value &&
               (EqualsIgnoreCase(args[i], "idle") || EqualsIgnoreCase(args[i], "time") ||
                EqualsIgnoreCase(args[i], "retrycount"))) {
      if (!ParseInt64(args[i + 1], n)) {
        return conn.Reply().Error("ERR Invalid " + Lowercase(args[i]) + " argument for XCLAIM");
      }
      rq.args.Int64(Lowercase(args[i]), std::max<std::int64_t>(0, n));
      ++i;
    } else if (has_value && EqualsIgnoreCase(args[i], "lastid")) {
      auto id = streams::ParseStreamId(args[i + 1]);
      if (!id) return conn.Reply().Error(kInvalidStreamId);
      rq.args.String("lastid", id->Text());
      ++i;
    } else {
      return conn.Reply().Error("ERR Unrecognized XCLAIM option '" + std::string(args[i]) + "'");
    }
  }
  if (rq.request.keys.empty()) return conn.Reply().Error(kInvalidStreamId);
  CallStream(conn, std::move(rq).Finish(),
             [justid](RespWriter& writer, const map::MapResult& result) {
               WriteClaimed(writer, result, justid);
             });
}

void XAutoClaim(Connection& conn, Args args) {
  auto claim = ClaimRequest(conn, args, "autoclaim");
  if (!claim) return;
  StreamRequest& rq = *claim;
  std::string error;
  auto start = ParseRangeBound(args[5], true, error);
  if (!start) return conn.Reply().Error(error);
  rq.args.String("start", start->Text());
  bool justid = false;
  for (std::size_t i = 6; i < args.size(); ++i) {
    std::int64_t count = 0;
    if (EqualsIgnoreCase(args[i], "justid")) {
      justid = true;
      rq.args.Bool("justid", true);
    } else if (EqualsIgnoreCase(args[i], "count") && i + 1 < args.size()) {
      if (!ParseInt64(args[i + 1], count) || count < 1 || count > (1 << 20)) {
        return conn.Reply().Error("ERR COUNT must be > 0");
      }
      rq.args.Int64("count", count);
      ++i;
    } else {
      return conn.Reply().SyntaxError();
    }
  }
  CallStream(conn, std::move(rq).Finish(),
             [justid](RespWriter& writer, const map::MapResult& result) {
               // "<next start> [<ID no longer stored> ...]"
               std::vector<std::string_view> words;
               std::string_view rest = result.value ? std::string_view(*result.value) : "0-0";
               while (!rest.empty()) {
                 const auto space = rest.find(' ');
                 words.push_back(rest.substr(0, space));
                 rest = space == std::string_view::npos ? "" : rest.substr(space + 1);
               }
               writer.ArrayHeader(3);
               writer.Bulk(words.empty() ? "0-0" : words.front());
               WriteClaimed(writer, result, justid);
               writer.ArrayHeader(words.empty() ? 0 : words.size() - 1);
               for (std::size_t i = 1; i < words.size(); ++i) writer.Bulk(words[i]);
             });
}

bool IsIdField(std::string_view field) { return field == "name" || field.ends_with("-id"); }

// XINFO replies: (field, value) pairs, a map per group or consumer (`per` fields each).
void WriteInfo(RespWriter& writer, const map::MapResult& result, std::size_t per) {
  const auto& e = result.entries;
  if (per == 0) {  // STREAM: first-entry and last-entry come with their fields
    writer.MapHeader(e.size() - 2);
    for (std::size_t i = 0; i < e.size(); ++i) {
      const auto& [field, value] = e[i];
      writer.Bulk(field);
      if (field == "first-entry" || field == "last-entry") {
        if (value.empty()) {
          writer.Null();
        } else {
          WriteStreamEntry(writer, value, e[i + 1].second);
        }
        ++i;
      } else if (IsIdField(field)) {
        writer.Bulk(value);
      } else {
        std::int64_t n = 0;
        ParseInt64(value, n);
        writer.Integer(n);
      }
    }
    return;
  }
  writer.ArrayHeader(e.size() / per);
  for (std::size_t i = 0; i < e.size(); ++i) {
    if (i % per == 0) writer.MapHeader(per);
    writer.Bulk(e[i].first);
    if (e[i].second.empty()) {
      writer.Null();  // entries-read of a group created at an explicit ID
    } else if (IsIdField(e[i].first)) {
      writer.Bulk(e[i].second);
    } else {
      std::int64_t n = 0;
      ParseInt64(e[i].second, n);
      writer.Integer(n);
    }
  }
}

void XInfo(Connection& conn, Args args) {
  const std::string sub = Lowercase(args[1]);
  if (sub == "help") {
    conn.Reply().ArrayHeader(3);
    conn.Reply().Bulk("XINFO CONSUMERS <key> <groupname>");
    conn.Reply().Bulk("XINFO GROUPS <key>");
    conn.Reply().Bulk("XINFO STREAM <key>");
    return;
  }
  if (args.size() < 3) return conn.Reply().WrongArity("xinfo|" + sub);
  if (!StreamKeyOk(conn, args[2])) return;
  std::size_t per = 0;
  if (sub == "stream") {
    if (args.size() != 3) {
      return conn.Reply().Error(
          "ERR XINFO STREAM FULL is not supported by Tessera; use "
          "XINFO STREAM, XINFO GROUPS and XINFO CONSUMERS");
    }
  } else if (sub == "groups") {
    if (args.size() != 3) return conn.Reply().WrongArity("xinfo|groups");
    per = 6;
  } else if (sub == "consumers") {
    if (args.size() != 4) return conn.Reply().WrongArity("xinfo|consumers");
    per = 4;
  } else {
    return conn.Reply().Error("ERR unknown subcommand '" + std::string(args[1]) +
                              "'. Try XINFO HELP.");
  }
  StreamRequest rq(args[2], "info_" + sub);
  if (per == 4) rq.args.String("group", std::string(args[3]));
  CallStream(conn, std::move(rq).Finish(), [per](RespWriter& writer, const map::MapResult& result) {
    WriteInfo(writer, result, per);
  });
}

}  // namespace

void RegisterStreamCommands(CommandTable& table) {
  table.Add({"xadd", -5, kWrite | kFast, 1, 1, 1, XAdd});
  table.Add({"xtrim", -4, kWrite, 1, 1, 1, XTrim});
  table.Add({"xlen", 2, kReadOnly | kFast, 1, 1, 1, XLen});
  table.Add({"xrange", -4, kReadOnly, 1, 1, 1, XRange});
  table.Add({"xrevrange", -4, kReadOnly, 1, 1, 1, XRevRange});
  table.Add({"xgroup", -2, kWrite, 2, 2, 1, XGroup});
  table.Add({"xack", -4, kWrite | kFast, 1, 1, 1, XAck});
  table.Add({"xpending", -3, kReadOnly, 1, 1, 1, XPending});
  table.Add({"xclaim", -6, kWrite, 1, 1, 1, XClaim});
  table.Add({"xautoclaim", -6, kWrite, 1, 1, 1, XAutoClaim});
  table.Add({"xinfo", -2, kReadOnly, 2, 2, 1, XInfo});
  RegisterStreamReadCommands(table);
}

}  // namespace tessera::resp
