// Hash family: a hash is one entry of the keyspace (the default map) and every command is one
// MapOp::kRedisKey request on its key's partition owner (hash/redis_hash.h), so each is atomic,
// a hash shares the keyspace with strings and streams (SCAN, TYPE, DEL, EXPIRE see it, and a
// string command on it answers WRONGTYPE), and a small hash costs about one string entry.
#include "command_util.h"
#include "tessera/hash/redis_hash.h"
#include "tessera/record/generic_record.h"

namespace tessera::resp {

namespace {

using map::MapOp;

// The connection's reusable request (its buffers kept from command to command), the command in
// `processor` (hash/redis_hash.h).
map::MapRequest& HashRequest(Connection& conn, std::string_view key, std::string_view cmd) {
  auto& request = ReuseKeyRequest(conn, MapOp::kRedisKey, conn.default_map(), key);
  request.processor.assign(cmd);
  return request;
}

void WriteCount(RespWriter& writer, map::MapResult& result) { writer.Integer(result.count); }

// HSET key field value [field value ...] -> number of new fields; HMSET -> OK.
void HSetGeneric(Connection& conn, Args args, bool reply_ok) {
  if (args.size() % 2 != 0) return conn.Reply().WrongArity(Lowercase(args[0]));
  auto& request = HashRequest(conn, args[1], "hset");
  request.entries.reserve(args.size() / 2 - 1);
  for (std::size_t i = 2; i + 1 < args.size(); i += 2) {
    request.entries.emplace_back(std::string(args[i]), std::string(args[i + 1]));
  }
  if (reply_ok) {
    return CallMap(conn, std::move(request),
                   [](RespWriter& writer, map::MapResult&) { writer.SimpleString("OK"); });
  }
  CallMap(conn, std::move(request), WriteCount);
}

void HSet(Connection& conn, Args args) { HSetGeneric(conn, args, false); }
void HMSet(Connection& conn, Args args) { HSetGeneric(conn, args, true); }

void HSetNx(Connection& conn, Args args) {
  auto& request = HashRequest(conn, args[1], "hset");
  request.argument = record::GenericRecord::Build().Bool("nx", true).Done();
  request.entries.emplace_back(std::string(args[2]), std::string(args[3]));
  CallMap(conn, std::move(request), WriteCount);
}

// HGET / HMGET: the fields asked for, in their order.
void HGetGeneric(Connection& conn, Args args, bool many) {
  auto& request = HashRequest(conn, args[1], "hget");
  request.keys.assign(args.begin() + 2, args.end());
  if (!many) {
    return CallMap(conn, std::move(request), [](RespWriter& writer, map::MapResult& result) {
      if (result.entries.empty()) return writer.Null();
      writer.Bulk(result.entries.front().second);
    });
  }
  std::vector<std::string> fields = request.keys;
  CallMap(conn, std::move(request),
          [fields = std::move(fields)](RespWriter& writer, map::MapResult& result) {
            WriteInKeyOrder(writer, fields, result.entries);
          });
}

void HGet(Connection& conn, Args args) { HGetGeneric(conn, args, false); }
void HMGet(Connection& conn, Args args) { HGetGeneric(conn, args, true); }

void HStrLen(Connection& conn, Args args) {
  auto& request = HashRequest(conn, args[1], "hstrlen");
  request.keys.emplace_back(args[2]);
  CallMap(conn, std::move(request), WriteCount);
}

void HDel(Connection& conn, Args args) {
  auto& request = HashRequest(conn, args[1], "hdel");
  request.keys.assign(args.begin() + 2, args.end());
  CallMap(conn, std::move(request), WriteCount);
}

void HExists(Connection& conn, Args args) {
  auto& request = HashRequest(conn, args[1], "hexists");
  request.keys.emplace_back(args[2]);
  CallMap(conn, std::move(request),
          [](RespWriter& writer, map::MapResult& result) { writer.Integer(result.flag ? 1 : 0); });
}

void HLen(Connection& conn, Args args) {
  CallMap(conn, std::move(HashRequest(conn, args[1], "hlen")), WriteCount);
}

// HGETALL / HKEYS / HVALS.
void HQuery(Connection& conn, Args args, map::Projection projection) {
  CallMap(conn, std::move(HashRequest(conn, args[1], "hgetall")),
          [projection](RespWriter& writer, map::MapResult& result) {
            if (projection == map::Projection::kEntries) {
              writer.MapHeader(result.entries.size());
              for (const auto& [field, value] : result.entries) {
                writer.Bulk(field);
                writer.Bulk(value);
              }
              return;
            }
            writer.ArrayHeader(result.entries.size());
            for (const auto& [field, value] : result.entries) {
              writer.Bulk(projection == map::Projection::kKeys ? field : value);
            }
          });
}

void HGetAll(Connection& conn, Args args) { HQuery(conn, args, map::Projection::kEntries); }
void HKeys(Connection& conn, Args args) { HQuery(conn, args, map::Projection::kKeys); }
void HVals(Connection& conn, Args args) { HQuery(conn, args, map::Projection::kValues); }

void HIncrBy(Connection& conn, Args args) {
  std::int64_t delta = 0;
  if (!ParseInt64(args[3], delta)) return conn.Reply().NotInteger();
  auto& request = HashRequest(conn, args[1], "hincrby");
  request.argument = record::GenericRecord::Build().Int64("delta", delta).Done();
  request.keys.emplace_back(args[2]);
  CallMap(conn, std::move(request), WriteCount);
}

}  // namespace

void RegisterHashCommands(CommandTable& table) {
  table.Add({"hset", -4, kWrite | kFast | kMulti, 1, 1, 1, HSet});
  table.Add({"hmset", -4, kWrite | kFast | kMulti, 1, 1, 1, HMSet});
  table.Add({"hsetnx", 4, kWrite | kFast | kMulti, 1, 1, 1, HSetNx});
  table.Add({"hget", 3, kReadOnly | kFast | kMulti, 1, 1, 1, HGet});
  table.Add({"hstrlen", 3, kReadOnly | kFast | kMulti, 1, 1, 1, HStrLen});
  table.Add({"hmget", -3, kReadOnly | kFast | kMulti, 1, 1, 1, HMGet});
  table.Add({"hdel", -3, kWrite | kFast | kMulti, 1, 1, 1, HDel});
  table.Add({"hexists", 3, kReadOnly | kFast | kMulti, 1, 1, 1, HExists});
  table.Add({"hlen", 2, kReadOnly | kFast | kMulti, 1, 1, 1, HLen});
  table.Add({"hgetall", 2, kReadOnly | kMulti, 1, 1, 1, HGetAll});
  table.Add({"hkeys", 2, kReadOnly | kMulti, 1, 1, 1, HKeys});
  table.Add({"hvals", 2, kReadOnly | kMulti, 1, 1, 1, HVals});
  table.Add({"hincrby", 4, kWrite | kFast | kMulti, 1, 1, 1, HIncrBy});
}

}  // namespace tessera::resp
