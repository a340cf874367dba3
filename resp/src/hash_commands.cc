// Hash family: a hash is the map named by its key and a field is an entry of that map, so a
// map written by an embedded member (say "orders") reads as a hash from redis-cli, and
// fields of one hash spread over partitions. Whole-hash reads (HGETALL, HKEYS, HVALS, HLEN)
// fan out over the partitions.
#include "command_util.h"
#include "tessera/record/generic_record.h"

namespace tessera::resp {

namespace {

using map::MapOp;

std::int64_t NewFieldScore(const map::MapResult& result) { return result.value ? 0 : 1; }
std::int64_t FlagScore(const map::MapResult& result) { return result.flag ? 1 : 0; }

// HSET key field value [field value ...] -> number of new fields; HMSET -> OK.
void HSetGeneric(Connection& conn, Args args, bool reply_ok) {
  if (args.size() % 2 != 0) return conn.Reply().WrongArity(Lowercase(args[0]));
  std::vector<map::MapRequest> requests;
  requests.reserve(args.size() / 2 - 1);
  for (std::size_t i = 2; i + 1 < args.size(); i += 2) {
    auto request = KeyRequest(MapOp::kPut, args[1], args[i]);
    request.value.assign(args[i + 1]);
    requests.push_back(std::move(request));
  }
  CallMapSum(conn, std::move(requests), NewFieldScore, reply_ok);
}

void HSet(Connection& conn, Args args) { HSetGeneric(conn, args, false); }
void HMSet(Connection& conn, Args args) { HSetGeneric(conn, args, true); }

void HSetNx(Connection& conn, Args args) {
  auto request = KeyRequest(MapOp::kPutIfAbsent, args[1], args[2]);
  request.value.assign(args[3]);
  CallMap(conn, std::move(request),
          [](RespWriter& writer, map::MapResult& result) { writer.Integer(result.value ? 0 : 1); });
}

void HGet(Connection& conn, Args args) {
  CallMap(
      conn, KeyRequest(MapOp::kGet, args[1], args[2]),
      [](RespWriter& writer, map::MapResult& result) { WriteOptionalBulk(writer, result.value); });
}

void HStrLen(Connection& conn, Args args) {
  CallMap(conn, KeyRequest(MapOp::kGet, args[1], args[2]),
          [](RespWriter& writer, map::MapResult& result) {
            writer.Integer(result.value ? static_cast<std::int64_t>(result.value->size()) : 0);
          });
}

void HMGet(Connection& conn, Args args) {
  map::MapRequest request;
  request.op = MapOp::kGetAll;
  request.map_name.assign(args[1]);
  request.keys.assign(args.begin() + 2, args.end());
  std::vector<std::string> fields = request.keys;
  CallMap(conn, std::move(request),
          [fields = std::move(fields)](RespWriter& writer, map::MapResult& result) {
            WriteInKeyOrder(writer, fields, result.entries);
          });
}

void HDel(Connection& conn, Args args) {
  std::vector<map::MapRequest> requests;
  for (std::size_t i = 2; i < args.size(); ++i) {
    requests.push_back(KeyRequest(MapOp::kDelete, args[1], args[i]));
  }
  CallMapSum(conn, std::move(requests), FlagScore);
}

void HExists(Connection& conn, Args args) {
  CallMap(conn, KeyRequest(MapOp::kContainsKey, args[1], args[2]),
          [](RespWriter& writer, map::MapResult& result) { writer.Integer(result.flag ? 1 : 0); });
}

void HLen(Connection& conn, Args args) {
  map::MapRequest request;
  request.op = MapOp::kSize;
  request.map_name.assign(args[1]);
  CallMap(conn, std::move(request),
          [](RespWriter& writer, map::MapResult& result) { writer.Integer(result.count); });
}

// HGETALL / HKEYS / HVALS: one query over the hash's map.
void HQuery(Connection& conn, Args args, map::Projection projection) {
  map::MapRequest request;
  request.op = MapOp::kQuery;
  request.map_name.assign(args[1]);
  request.projection = projection;
  CallMap(conn, std::move(request), [projection](RespWriter& writer, map::MapResult& result) {
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
  auto request = KeyRequest(MapOp::kExecuteOnKey, args[1], args[2]);
  request.processor = "incrementRaw";
  request.argument = record::GenericRecord::Build().Int64("delta", delta).Done();
  CallMapRaw(conn, std::move(request),
             [](RespWriter& writer, base::Result<map::MapResult>& result) {
               if (!result) {
                 if (result.error().code() == base::ErrorCode::kWrongType) {
                   return writer.Error("ERR hash value is not an integer");
                 }
                 return WriteServiceError(writer, result.error());
               }
               auto value = result->processor_result ? result->processor_result->GetInt64("value")
                                                     : base::Result<std::int64_t>(0);
               if (!value) return WriteServiceError(writer, value.error());
               writer.Integer(*value);
             });
}

}  // namespace

void RegisterHashCommands(CommandTable& table) {
  table.Add({"hset", -4, kWrite | kFast | kMulti, 1, 1, 1, HSet});
  table.Add({"hmset", -4, kWrite | kFast | kMulti, 1, 1, 1, HMSet});
  table.Add({"hsetnx", 4, kWrite | kFast | kMulti, 1, 1, 1, HSetNx});
  table.Add({"hget", 3, kReadOnly | kFast | kMulti, 1, 1, 1, HGet});
  table.Add({"hstrlen", 3, kReadOnly | kFast | kMulti, 1, 1, 1, HStrLen});
  table.Add({"hmget", -3, kReadOnly | kFast, 1, 1, 1, HMGet});
  table.Add({"hdel", -3, kWrite | kFast | kMulti, 1, 1, 1, HDel});
  table.Add({"hexists", 3, kReadOnly | kFast | kMulti, 1, 1, 1, HExists});
  table.Add({"hlen", 2, kReadOnly | kFast, 1, 1, 1, HLen});
  table.Add({"hgetall", 2, kReadOnly, 1, 1, 1, HGetAll});
  table.Add({"hkeys", 2, kReadOnly, 1, 1, 1, HKeys});
  table.Add({"hvals", 2, kReadOnly, 1, 1, 1, HVals});
  table.Add({"hincrby", 4, kWrite | kFast | kMulti, 1, 1, 1, HIncrBy});
}

}  // namespace tessera::resp
