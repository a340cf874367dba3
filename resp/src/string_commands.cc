// String family: the string keyspace is the map named by the default_map option; a Redis
// string is the entry's value bytes. SET's conditions map onto the map's atomic operations
// (NX = putIfAbsent, XX = replace), so they hold under concurrency without locks.
#include <limits>

#include "command_util.h"
#include "tessera/hash/redis_hash.h"
#include "tessera/record/generic_record.h"

namespace tessera::resp {

namespace {

using map::MapOp;

struct SetOptions {
  bool nx = false;
  bool xx = false;
  bool get = false;
  bool keep_ttl = false;
  std::optional<base::Millis> ttl_ms;
};

// Parses an expiry amount for `command`; writes the Redis error and returns false when bad.
// `unit_ms` is 1000 for seconds, 1 for milliseconds; `absolute` for EXAT/PXAT.
bool ParseExpiry(Connection& conn, std::string_view text, std::int64_t unit_ms, bool absolute,
                 std::string_view command, base::Millis& ttl_ms) {
  std::int64_t amount = 0;
  if (!ParseInt64(text, amount)) {
    conn.Reply().NotInteger();
    return false;
  }
  if (amount <= 0 || amount > std::numeric_limits<std::int64_t>::max() / unit_ms) {
    conn.Reply().Error("ERR invalid expire time in '" + std::string(command) + "' command");
    return false;
  }
  ttl_ms = amount * unit_ms;
  if (absolute) {
    // Wall-clock deadline -> TTL from now. A deadline already past keeps the value for 1 ms
    // (Redis deletes it at once); see docs/resp.md.
    ttl_ms = std::max<base::Millis>(1, ttl_ms - conn.server().clock.WallMs());
  }
  return true;
}

bool ParseSetOptions(Connection& conn, Args args, SetOptions& options) {
  for (std::size_t i = 3; i < args.size(); ++i) {
    const std::string word = Lowercase(args[i]);
    const bool has_next = i + 1 < args.size();
    const bool expiry_taken = options.ttl_ms.has_value() || options.keep_ttl;
    if (word == "nx" && !options.xx) {
      options.nx = true;
    } else if (word == "xx" && !options.nx) {
      options.xx = true;
    } else if (word == "get") {
      options.get = true;
    } else if (word == "keepttl" && !expiry_taken) {
      options.keep_ttl = true;
    } else if ((word == "ex" || word == "px" || word == "exat" || word == "pxat") && has_next &&
               !expiry_taken) {
      const std::int64_t unit = (word == "ex" || word == "exat") ? 1000 : 1;
      base::Millis ttl = 0;
      if (!ParseExpiry(conn, args[++i], unit, word.size() == 4, "set", ttl)) return false;
      options.ttl_ms = ttl;
    } else {
      conn.Reply().SyntaxError();
      return false;
    }
  }
  return true;
}

// SET ... NX|XX GET: the old value read and the conditional write in one partition
// transaction, so a key of another kind answers WRONGTYPE and is left alone, as in Redis.
void SetConditionalGet(Connection& conn, Args args, const SetOptions& options) {
  if (conn.capture() != nullptr) {  // inside MULTI: the block is the transaction
    std::vector<map::MapRequest> requests;
    requests.push_back(KeyRequest(MapOp::kGet, conn.default_map(), args[1]));
    auto& write = requests.emplace_back(KeyRequest(
        options.nx ? MapOp::kPutIfAbsent : MapOp::kReplace, conn.default_map(), args[1]));
    write.value.assign(args[2]);
    write.options.ttl_ms = options.ttl_ms;
    write.options.keep_ttl = options.keep_ttl;
    return CallMapGather(conn, std::move(requests), [](RespWriter& writer, Results& results) {
      if (!results[0]) return WriteServiceError(writer, results[0].error());
      WriteOptionalBulk(writer, results[0]->value);
    });
  }
  map::MapRequest transaction;
  transaction.op = MapOp::kTransact;
  transaction.key.assign(args[1]);
  transaction.transaction.emplace_back().request =
      KeyRequest(MapOp::kGet, conn.default_map(), args[1]);
  auto& write = transaction.transaction.emplace_back().request;
  write =
      KeyRequest(options.nx ? MapOp::kPutIfAbsent : MapOp::kReplace, conn.default_map(), args[1]);
  write.value.assign(args[2]);
  write.options.ttl_ms = options.ttl_ms;
  write.options.keep_ttl = options.keep_ttl;
  CallMapRaw(conn, std::move(transaction),
             [](RespWriter& writer, base::Result<map::MapResult>& result) {
               if (!result) {
                 // Its get, putIfAbsent and replace fail kWrongType only on a key of another kind.
                 if (result.error().code() == base::ErrorCode::kWrongType) {
                   return WriteServiceError(writer, map::WrongKindError());
                 }
                 return WriteServiceError(writer, result.error());
               }
               if (result->results.empty()) return writer.Null();
               WriteOptionalBulk(writer, result->results.front().value);
             });
}

void Set(Connection& conn, Args args) {
  SetOptions options;
  if (!ParseSetOptions(conn, args, options)) return;
  if (options.get && (options.nx || options.xx)) {
    return SetConditionalGet(conn, args, options);
  }
  MapOp op = options.get ? MapOp::kPut : MapOp::kSet;
  if (options.nx) op = MapOp::kPutIfAbsent;
  if (options.xx) op = MapOp::kReplace;
  auto& request = ReuseKeyRequest(conn, op, conn.default_map(), args[1]);
  request.value.assign(args[2]);
  request.options.ttl_ms = options.ttl_ms;
  request.options.keep_ttl = options.keep_ttl;
  const bool get = options.get;
  CallMap(conn, std::move(request), [op, get](RespWriter& writer, map::MapResult& result) {
    if (get) {
      WriteOptionalBulk(writer, result.value);
    } else if (op == MapOp::kSet || op == MapOp::kPut) {
      writer.SimpleString("OK");
    } else if ((op == MapOp::kPutIfAbsent) == !result.value.has_value()) {
      writer.SimpleString("OK");  // NX stored (no existing value) / XX replaced (old value)
    } else {
      writer.Null();
    }
  });
}

void SetNx(Connection& conn, Args args) {
  auto& request = ReuseKeyRequest(conn, MapOp::kPutIfAbsent, conn.default_map(), args[1]);
  request.value.assign(args[2]);
  CallMap(conn, std::move(request), [](RespWriter& writer, map::MapResult& result) {
    writer.Integer(result.value.has_value() ? 0 : 1);
  });
}

// SETEX key seconds value / PSETEX key milliseconds value.
void SetWithExpiry(Connection& conn, Args args, std::int64_t unit_ms, std::string_view name) {
  base::Millis ttl = 0;
  if (!ParseExpiry(conn, args[2], unit_ms, false, name, ttl)) return;
  auto& request = ReuseKeyRequest(conn, MapOp::kSet, conn.default_map(), args[1]);
  request.value.assign(args[3]);
  request.options.ttl_ms = ttl;
  CallMap(conn, std::move(request),
          [](RespWriter& writer, map::MapResult&) { writer.SimpleString("OK"); });
}

void SetEx(Connection& conn, Args args) { SetWithExpiry(conn, args, 1000, "setex"); }
void PSetEx(Connection& conn, Args args) { SetWithExpiry(conn, args, 1, "psetex"); }

void ReplyValue(RespWriter& writer, map::MapResult& result) {
  WriteOptionalBulk(writer, result.value);
}

void Get(Connection& conn, Args args) {
  CallMap(conn, std::move(ReuseKeyRequest(conn, MapOp::kGet, conn.default_map(), args[1])),
          ReplyValue);
}

void GetDel(Connection& conn, Args args) {
  CallMap(conn, std::move(ReuseKeyRequest(conn, MapOp::kRemove, conn.default_map(), args[1])),
          ReplyValue);
}

void GetSet(Connection& conn, Args args) {
  auto& request = ReuseKeyRequest(conn, MapOp::kPut, conn.default_map(), args[1]);
  request.value.assign(args[2]);
  CallMap(conn, std::move(request), ReplyValue);
}

void StrLen(Connection& conn, Args args) {
  CallMap(conn, std::move(ReuseKeyRequest(conn, MapOp::kGet, conn.default_map(), args[1])),
          [](RespWriter& writer, map::MapResult& result) {
            writer.Integer(result.value ? static_cast<std::int64_t>(result.value->size()) : 0);
          });
}

void IncrementBy(Connection& conn, std::string_view key, std::int64_t delta) {
  auto& request = ReuseKeyRequest(conn, MapOp::kExecuteOnKey, conn.default_map(), key);
  request.processor = "incrementRaw";
  request.argument = record::GenericRecord::Build().Int64("delta", delta).Done();
  CallMapRaw(conn, std::move(request),
             [](RespWriter& writer, base::Result<map::MapResult>& result) {
               if (!result) {
                 if (result.error().code() == base::ErrorCode::kWrongType &&
                     !map::IsWrongKindError(result.error())) {
                   writer.NotInteger();
                 } else {
                   WriteServiceError(writer, result.error());
                 }
                 return;
               }
               auto value = result->processor_result
                                ? result->processor_result->GetInt64("value")
                                : base::Result<std::int64_t>(std::unexpected(base::Error(
                                      base::ErrorCode::kInternal, "incrementRaw gave no result")));
               if (value) {
                 writer.Integer(*value);
               } else {
                 WriteServiceError(writer, value.error());
               }
             });
}

void Incr(Connection& conn, Args args) { IncrementBy(conn, args[1], 1); }
void Decr(Connection& conn, Args args) { IncrementBy(conn, args[1], -1); }

void IncrBy(Connection& conn, Args args) {
  std::int64_t delta = 0;
  if (!ParseInt64(args[2], delta)) return conn.Reply().NotInteger();
  IncrementBy(conn, args[1], delta);
}

void DecrBy(Connection& conn, Args args) {
  std::int64_t delta = 0;
  if (!ParseInt64(args[2], delta)) return conn.Reply().NotInteger();
  if (delta == std::numeric_limits<std::int64_t>::min()) {
    return conn.Reply().Error("ERR decrement would overflow");
  }
  IncrementBy(conn, args[1], -delta);
}

void MGet(Connection& conn, Args args) {
  map::MapRequest request;
  request.op = MapOp::kGetAll;
  request.map_name = conn.default_map();
  request.keys.assign(args.begin() + 1, args.end());
  std::vector<std::string> keys = request.keys;
  CallMap(conn, std::move(request),
          [keys = std::move(keys)](RespWriter& writer, map::MapResult& result) {
            WriteInKeyOrder(writer, keys, result.entries);
          });
}

void MSet(Connection& conn, Args args) {
  if (args.size() % 2 != 1) return conn.Reply().WrongArity("mset");
  map::MapRequest request;
  request.op = MapOp::kPutAll;
  request.map_name = conn.default_map();
  request.entries.reserve(args.size() / 2);
  for (std::size_t i = 1; i + 1 < args.size(); i += 2) {
    request.entries.emplace_back(std::string(args[i]), std::string(args[i + 1]));
  }
  CallMap(conn, std::move(request),
          [](RespWriter& writer, map::MapResult&) { writer.SimpleString("OK"); });
}

}  // namespace

void RegisterStringCommands(CommandTable& table) {
  table.Add({"get", 2, kReadOnly | kFast | kMulti, 1, 1, 1, Get});
  table.Add({"set", -3, kWrite | kMulti, 1, 1, 1, Set});
  table.Add({"setnx", 3, kWrite | kFast | kMulti, 1, 1, 1, SetNx});
  table.Add({"setex", 4, kWrite | kMulti, 1, 1, 1, SetEx});
  table.Add({"psetex", 4, kWrite | kMulti, 1, 1, 1, PSetEx});
  table.Add({"getdel", 2, kWrite | kFast | kMulti, 1, 1, 1, GetDel});
  table.Add({"getset", 3, kWrite | kFast | kMulti, 1, 1, 1, GetSet});
  table.Add({"strlen", 2, kReadOnly | kFast | kMulti, 1, 1, 1, StrLen});
  table.Add({"incr", 2, kWrite | kFast | kMulti, 1, 1, 1, Incr});
  table.Add({"decr", 2, kWrite | kFast | kMulti, 1, 1, 1, Decr});
  table.Add({"incrby", 3, kWrite | kFast | kMulti, 1, 1, 1, IncrBy});
  table.Add({"decrby", 3, kWrite | kFast | kMulti, 1, 1, 1, DecrBy});
  table.Add({"mget", -2, kReadOnly | kFast, 1, -1, 1, MGet});
  table.Add({"mset", -3, kWrite, 1, -1, 2, MSet});
}

}  // namespace tessera::resp
