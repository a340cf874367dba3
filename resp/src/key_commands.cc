// Key family: generic commands over the keyspace (the default map), where every key is one
// entry of its kind: a string, a hash (hash/redis_hash.h) or a stream's marker (the stream's
// records live in its own partition and go when the marker goes). Inside MULTI they see what
// the block's partition holds.
// SCAN uses a stateless cursor: keys are ordered by a 63-bit hash of the key, and the cursor
// is the hash position to resume from; see docs/resp.md for the guarantees.
#include <algorithm>
#include <charconv>
#include <limits>
#include <mutex>
#include <optional>

#include "command_util.h"
#include "stream_util.h"
#include "tessera/hash/redis_hash.h"
#include "tessera/map/map_service.h"
#include "tessera/map/stream_format.h"
#include "tessera/streams/redis_stream.h"
#include "tessera/topic/glob.h"

namespace tessera::resp {

namespace {

using map::MapOp;

std::int64_t FoundScore(const map::MapResult& result) {
  return (result.flag || result.count > 0) ? 1 : 0;
}

// A stream the key names, if it can name one (outside MULTI).
bool MayBeStream(Connection& conn, std::string_view key) {
  return conn.capture() == nullptr && StreamKeyProblem(key).empty();
}

// DEL/UNLINK (clear=true) and EXISTS (clear=false) over the keyspace: each key counts once.
// DEL also removes a stream's records itself (its owner would, after the keyspace entry went,
// but the reply then waits for it): the first 50,000 entries, the rest right after.
void CountKeys(Connection& conn, Args args, bool clear) {
  std::vector<map::MapRequest> requests;
  std::vector<std::size_t> key_of;  // the argument each request is about
  for (std::size_t i = 1; i < args.size(); ++i) {
    requests.push_back(
        KeyRequest(clear ? MapOp::kDelete : MapOp::kContainsKey, conn.default_map(), args[i]));
    key_of.push_back(i);
    if (clear && MayBeStream(conn, args[i])) {
      requests.push_back(streams::RedisStreamDeleteRequest(args[i]));
      key_of.push_back(i);
    }
  }
  CallMapGather(
      conn, std::move(requests),
      [key_of = std::move(key_of), keys = args.size()](RespWriter& writer, Results& results) {
        std::vector<bool> found(keys, false);
        for (std::size_t j = 0; j < results.size(); ++j) {
          if (!results[j]) return WriteServiceError(writer, results[j].error());
          if (FoundScore(*results[j]) > 0) found[key_of[j]] = true;
        }
        writer.Integer(std::count(found.begin(), found.end(), true));
      });
}

// The records of stream `key`, step after step (50,000 entries each, each step posted: a long
// stream takes turns with other work); then done(existed).
void DeleteStreamRecords(ServerState* server, map::MapRequest request,
                         std::function<void(base::Result<bool>)> done, bool existed = false,
                         int round = 0) {
  constexpr int kMaxRounds = 10'000;  // 500 M entries
  auto again = std::make_shared<map::MapRequest>(request);
  server->maps.Execute(std::move(request), [server, again, done = std::move(done), existed,
                                            round](base::Result<map::MapResult> result) mutable {
    if (!result) return done(std::unexpected(result.error()));
    existed = existed || result->count > 0;
    if (!result->flag || round >= kMaxRounds) return done(existed);
    const std::size_t shard = server->shards.CurrentShard().value_or(0);
    server->shards.InvokeOn(
        shard, [server, again, done = std::move(done), existed, round]() mutable {
          DeleteStreamRecords(server, std::move(*again), std::move(done), existed, round + 1);
        });
  });
}

// DEL/UNLINK: each key's keyspace entry and, for a stream, all its records before the reply (a
// later XADD of the same key starts a new stream). Inside MULTI: the entries only, the records
// go after EXEC (their owner removes them).
void Del(Connection& conn, Args args) {
  if (conn.capture() != nullptr) return CountKeys(conn, args, true);
  struct State {
    State(ReplySlot s, std::size_t keys) : slot(std::move(s)), found(keys, 0) {}
    ReplySlot slot;
    std::vector<char> found;
    std::atomic<std::size_t> remaining{0};
    std::mutex mu;
    std::optional<base::Error> error;
    void Done(std::size_t i, base::Result<bool> result) {
      {
        std::lock_guard lock(mu);
        if (!result) {
          if (!error) error = result.error();
        } else if (*result) {
          found[i] = 1;
        }
      }
      if (remaining.fetch_sub(1) != 1) return;
      slot.Fill([this](RespWriter& writer) {
        if (error) return WriteServiceError(writer, *error);
        writer.Integer(std::count(found.begin(), found.end(), 1));
      });
    }
  };
  auto state = std::make_shared<State>(conn.Defer(), args.size());
  map::MapService& maps = conn.maps();
  ServerState* server = &conn.server();
  std::vector<std::pair<std::size_t, bool>> work;  // (argument, is a stream request)
  for (std::size_t i = 1; i < args.size(); ++i) {
    work.emplace_back(i, false);
    if (MayBeStream(conn, args[i])) {
      work.emplace_back(i, true);
      const std::string key(args[i]);
      for (auto& cache : server->stream_keys) cache.Remove(key);  // its next XADD marks again
    }
  }
  state->remaining = work.size();
  for (const auto& [i, stream] : work) {
    auto done = [state, i = i](base::Result<bool> r) { state->Done(i, std::move(r)); };
    if (stream) {
      DeleteStreamRecords(server, streams::RedisStreamDeleteRequest(args[i]), std::move(done));
      continue;
    }
    maps.Execute(KeyRequest(MapOp::kDelete, conn.default_map(), args[i]),
                 [done = std::move(done)](base::Result<map::MapResult> r) mutable {
                   if (!r) return done(std::unexpected(r.error()));
                   done(r->flag);
                 });
  }
}
void Exists(Connection& conn, Args args) { CountKeys(conn, args, false); }

void Type(Connection& conn, Args args) {
  CallMap(conn, KeyRequest(MapOp::kGetEntryView, conn.default_map(), args[1]),
          [](RespWriter& writer, map::MapResult& result) {
            if (!result.view) return writer.SimpleString("none");
            writer.SimpleString(std::string(map::ValueKindName(result.view->kind)));
          });
}

// RENAME (nx=false) / RENAMENX: one step on the keys' partition, whatever the key holds.
void RenameGeneric(Connection& conn, Args args, bool nx) {
  auto request = KeyRequest(MapOp::kRedisKey, conn.default_map(), args[1]);
  request.processor = "rename";
  request.argument =
      record::GenericRecord::Build().String("to", std::string(args[2])).Bool("nx", nx).Done();
  CallMapRaw(conn, std::move(request),
             [nx](RespWriter& writer, base::Result<map::MapResult>& result) {
               if (!result) {
                 // A member that predates error reasons sends Redis's text itself.
                 if (result.error().message().starts_with("CROSSSLOT")) {
                   return writer.Error(result.error().message());
                 }
                 return WriteServiceError(writer, result.error());
               }
               if (nx) return writer.Integer(result->flag ? 1 : 0);
               writer.SimpleString("OK");
             });
}

void Rename(Connection& conn, Args args) { RenameGeneric(conn, args, false); }
void RenameNx(Connection& conn, Args args) { RenameGeneric(conn, args, true); }

// EXPIRE/PEXPIRE/EXPIREAT/PEXPIREAT: `unit_ms` 1000 or 1; `absolute` for the *AT forms.
void ExpireGeneric(Connection& conn, Args args, std::int64_t unit_ms, bool absolute) {
  if (args.size() > 3) {
    return conn.Reply().Error("ERR Unsupported option " + std::string(args[3]) +
                              " (NX, XX, GT and LT are not supported)");
  }
  std::int64_t amount = 0;
  if (!ParseInt64(args[2], amount)) return conn.Reply().NotInteger();
  if (amount > std::numeric_limits<std::int64_t>::max() / unit_ms ||
      amount < std::numeric_limits<std::int64_t>::min() / unit_ms) {
    return conn.Reply().Error("ERR invalid expire time in '" + Lowercase(args[0]) + "' command");
  }
  base::Millis ttl = amount * unit_ms;
  if (absolute) ttl -= conn.server().clock.WallMs();
  auto request =
      KeyRequest(ttl <= 0 ? MapOp::kDelete : MapOp::kSetTtl, conn.default_map(), args[1]);
  if (ttl > 0) request.options.ttl_ms = ttl;
  CallMap(conn, std::move(request),
          [](RespWriter& writer, map::MapResult& result) { writer.Integer(result.flag ? 1 : 0); });
}

void Expire(Connection& conn, Args args) { ExpireGeneric(conn, args, 1000, false); }
void PExpire(Connection& conn, Args args) { ExpireGeneric(conn, args, 1, false); }
void ExpireAt(Connection& conn, Args args) { ExpireGeneric(conn, args, 1000, true); }
void PExpireAt(Connection& conn, Args args) { ExpireGeneric(conn, args, 1, true); }

// TTL (seconds) and PTTL: -2 missing, -1 no expiry.
void TtlGeneric(Connection& conn, Args args, bool millis) {
  const base::Clock* clock = &conn.server().clock;
  CallMap(conn, KeyRequest(MapOp::kGetEntryView, conn.default_map(), args[1]),
          [clock, millis](RespWriter& writer, map::MapResult& result) {
            if (!result.value || !result.view) return writer.Integer(-2);
            if (result.view->expire_at_ms == 0) return writer.Integer(-1);
            const base::Millis remaining = result.view->expire_at_ms - clock->NowMs();
            if (remaining < 0) return writer.Integer(-2);
            writer.Integer(millis ? remaining : (remaining + 500) / 1000);
          });
}

void Ttl(Connection& conn, Args args) { TtlGeneric(conn, args, false); }
void PTtl(Connection& conn, Args args) { TtlGeneric(conn, args, true); }

// PERSIST: 1 only if the key had an expiry that was removed. Reads the view, then clears the
// TTL; a concurrent EXPIRE between the two steps may be undone (documented).
void Persist(Connection& conn, Args args) {
  ReplySlot slot = conn.Defer();
  map::MapService* maps = &conn.maps();
  auto clear = KeyRequest(MapOp::kSetTtl, conn.default_map(), args[1]);
  clear.options.ttl_ms = 0;
  maps->Execute(KeyRequest(MapOp::kGetEntryView, conn.default_map(), args[1]),
                [slot, maps, clear = std::move(clear)](base::Result<map::MapResult> view) mutable {
                  if (!view || !view->value || !view->view || view->view->expire_at_ms == 0) {
                    return slot.Fill([&view](RespWriter& writer) {
                      if (!view) return WriteServiceError(writer, view.error());
                      writer.Integer(0);
                    });
                  }
                  maps->Execute(std::move(clear), [slot](base::Result<map::MapResult> done) {
                    slot.Fill([&done](RespWriter& writer) {
                      if (!done) return WriteServiceError(writer, done.error());
                      writer.Integer(done->flag ? 1 : 0);
                    });
                  });
                });
}

void DbSize(Connection& conn, Args) {
  map::MapRequest request;
  request.op = MapOp::kSize;
  request.map_name = conn.default_map();
  CallMap(conn, std::move(request),
          [](RespWriter& writer, map::MapResult& result) { writer.Integer(result.count); });
}

void FlushDb(Connection& conn, Args args) {
  if (args.size() > 2 || (args.size() == 2 && !EqualsIgnoreCase(args[1], "async") &&
                          !EqualsIgnoreCase(args[1], "sync"))) {
    return conn.Reply().SyntaxError();
  }
  for (auto& cache : conn.server().stream_keys) cache.Clear();
  std::vector<std::string> names{conn.default_map()};
  if (EqualsIgnoreCase(args[0], "flushall")) {
    for (auto& name : conn.maps().MapNames()) {
      // The transaction id markers are written by their transactions only (they expire by
      // themselves): the member refuses to clear them.
      if (name != conn.default_map() && name != map::kTransactionIdMap) {
        names.push_back(std::move(name));
      }
    }
  }
  std::vector<map::MapRequest> requests;
  for (auto& name : names) {
    map::MapRequest clear;
    clear.op = MapOp::kClear;
    clear.map_name = std::move(name);
    requests.push_back(std::move(clear));
  }
  CallMapSum(conn, std::move(requests), FoundScore, /*reply_ok=*/true);
}

map::MapRequest AllKeys(Connection& conn) {
  map::MapRequest request;
  request.op = MapOp::kQuery;
  request.map_name = conn.default_map();
  request.projection = map::Projection::kKeys;
  return request;
}

void Keys(Connection& conn, Args args) {
  std::string pattern(args[1]);
  CallMap(conn, AllKeys(conn),
          [pattern = std::move(pattern)](RespWriter& writer, map::MapResult& result) {
            const bool all = pattern == "*";
            std::size_t count = 0;
            for (const auto& entry : result.entries) {
              count += (all || topic::GlobMatch(pattern, entry.first)) ? 1 : 0;
            }
            writer.ArrayHeader(count);
            for (const auto& entry : result.entries) {
              if (all || topic::GlobMatch(pattern, entry.first)) writer.Bulk(entry.first);
            }
          });
}

// Position of a key in SCAN order: a 63-bit FNV-1a hash, never 0 (0 is the start cursor).
std::uint64_t ScanPosition(std::string_view key) {
  std::uint64_t hash = 1469598103934665603ULL;
  for (unsigned char c : key) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  hash &= 0x7FFFFFFFFFFFFFFFULL;
  return hash == 0 ? 1 : hash;
}

struct ScanOptions {
  std::uint64_t cursor = 0;
  std::string match;
  std::size_t count = 10;
  std::string type;  // TYPE filter ("" = every kind)
};

bool ParseScanOptions(Connection& conn, Args args, ScanOptions& options) {
  auto [end, ec] = std::from_chars(args[1].data(), args[1].data() + args[1].size(), options.cursor);
  if (ec != std::errc() || end != args[1].data() + args[1].size()) {
    conn.Reply().Error("ERR invalid cursor");
    return false;
  }
  for (std::size_t i = 2; i < args.size(); i += 2) {
    if (i + 1 >= args.size()) {
      conn.Reply().SyntaxError();
      return false;
    }
    std::int64_t count = 0;
    if (EqualsIgnoreCase(args[i], "match")) {
      options.match.assign(args[i + 1]);
    } else if (EqualsIgnoreCase(args[i], "count")) {
      if (!ParseInt64(args[i + 1], count)) {
        conn.Reply().NotInteger();
        return false;
      }
      if (count < 1) {
        conn.Reply().SyntaxError();
        return false;
      }
      options.count = static_cast<std::size_t>(count);
    } else if (EqualsIgnoreCase(args[i], "type")) {
      options.type = Lowercase(args[i + 1]);
    } else {
      conn.Reply().SyntaxError();
      return false;
    }
  }
  return true;
}

// SCAN cursor [MATCH pattern] [COUNT n] [TYPE type].
void Scan(Connection& conn, Args args) {
  ScanOptions options;
  if (!ParseScanOptions(conn, args, options)) return;
  CallMap(
      conn, AllKeys(conn),
      [options = std::move(options)](RespWriter& writer, map::MapResult& result) {
        struct Scanned {
          std::uint64_t position;
          std::string_view key;
          std::string_view type;  // as TYPE names it
          bool operator<(const Scanned& other) const {
            return position < other.position || (position == other.position && key < other.key);
          }
        };
        std::vector<Scanned> ordered;
        for (const auto& [key, kind] : result.entries) {  // kind: "" for a string (map_ops)
          const auto position = ScanPosition(key);
          if (position >= options.cursor) {
            ordered.push_back({position, key, kind.empty() ? std::string_view("string") : kind});
          }
        }
        std::sort(ordered.begin(), ordered.end());
        std::size_t end = std::min(options.count, ordered.size());
        while (end > 0 && end < ordered.size() &&
               ordered[end].position == ordered[end - 1].position) {
          ++end;  // never split keys that share a position
        }
        const std::uint64_t next = end < ordered.size() ? ordered[end].position : 0;
        std::vector<std::string_view> page;
        for (std::size_t i = 0; i < end; ++i) {
          if (!options.type.empty() && options.type != ordered[i].type) continue;
          if (options.match.empty() || topic::GlobMatch(options.match, ordered[i].key)) {
            page.push_back(ordered[i].key);
          }
        }
        writer.ArrayHeader(2);
        writer.Bulk(std::to_string(next));
        writer.ArrayHeader(page.size());
        for (auto key : page) writer.Bulk(key);
      });
}

}  // namespace

void RegisterKeyCommands(CommandTable& table) {
  table.Add({"del", -2, kWrite | kMulti, 1, -1, 1, Del});
  table.Add({"unlink", -2, kWrite | kFast | kMulti, 1, -1, 1, Del});
  table.Add({"exists", -2, kReadOnly | kFast | kMulti, 1, -1, 1, Exists});
  table.Add({"type", 2, kReadOnly | kFast | kMulti, 1, 1, 1, Type});
  table.Add({"rename", 3, kWrite | kMulti, 1, 2, 1, Rename});
  table.Add({"renamenx", 3, kWrite | kFast | kMulti, 1, 2, 1, RenameNx});
  table.Add({"expire", -3, kWrite | kFast | kMulti, 1, 1, 1, Expire});
  table.Add({"pexpire", -3, kWrite | kFast | kMulti, 1, 1, 1, PExpire});
  table.Add({"expireat", -3, kWrite | kFast | kMulti, 1, 1, 1, ExpireAt});
  table.Add({"pexpireat", -3, kWrite | kFast | kMulti, 1, 1, 1, PExpireAt});
  table.Add({"ttl", 2, kReadOnly | kFast | kMulti, 1, 1, 1, Ttl});
  table.Add({"pttl", 2, kReadOnly | kFast | kMulti, 1, 1, 1, PTtl});
  table.Add({"persist", 2, kWrite | kFast, 1, 1, 1, Persist});
  table.Add({"dbsize", 1, kReadOnly | kFast, 0, 0, 0, DbSize});
  table.Add({"flushdb", -1, kWrite, 0, 0, 0, FlushDb});
  table.Add({"flushall", -1, kWrite, 0, 0, 0, FlushDb});
  table.Add({"keys", 2, kReadOnly, 0, 0, 0, Keys});
  table.Add({"scan", -2, kReadOnly, 0, 0, 0, Scan});
}

}  // namespace tessera::resp
