#pragma once
// Helpers shared by the command families: strict argument parsing, MapRequest builders, and
// the ways a command hands requests to MapService and turns results into one reply.
//
// Shard: Call* run on the connection's shard; their completion callbacks may run on any
// shard and only format the reply (ReplySlot::Fill brings it home in order).

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "connection.h"
#include "tessera/map/map_request.h"

namespace tessera::resp {

// Strict decimal int64 as Redis accepts it (no spaces, no '+', no overflow).
bool ParseInt64(std::string_view text, std::int64_t& out);
bool EqualsIgnoreCase(std::string_view a, std::string_view b);
std::string Lowercase(std::string_view text);
std::string Uppercase(std::string_view text);

// A keyed request on `map_name`.
map::MapRequest KeyRequest(map::MapOp op, std::string_view map_name, std::string_view key);
// The same, built in the connection's reusable request (its strings keep their capacity, so
// building it allocates nothing once warm). Valid until the next ReuseKeyRequest on `conn`;
// pass it on with std::move (CallMap moves it only when it leaves the shard).
map::MapRequest& ReuseKeyRequest(Connection& conn, map::MapOp op, std::string_view map_name,
                                 std::string_view key);

// A service error as RESP writes it: "-ERR <message>", or Redis's prefix and text for the
// cases Redis names (WRONGTYPE for a key of another kind); the table is in command_util.cc.
void WriteServiceError(RespWriter& writer, const base::Error& error);

// Executes `request`; on success format(writer, result), on error WriteServiceError.
// A key owned by this connection's shard runs at once and replies in place (no deferred
// slot, no callback allocation); a key owned by another shard is forwarded with the rest of
// the read batch (Connection::Forward); other requests go through MapService::Execute.
// While compiling a command queued in MULTI (conn.capture()): adds `request` and `finish` to
// the compiled command instead of running it. A request that is not keyed cannot join a
// partition transaction: the command is marked unsupported.
void Capture(Connection& conn, map::MapRequest&& request,
             std::function<void(RespWriter&, base::Result<map::MapResult>&)> finish);

// Runs `request` now when this shard owns its partition (MapService::ExecuteIfLocal with a
// log ticket) and returns true; write(writer, result) writes the reply: in place, or, for a
// write whose map persists, into a deferred slot filled once its log record allows
// (MapService::WhenLogged; a write that could not be logged replies its error). False: not
// run (another shard or member, or a request that waits).
template <typename Write>
bool RunLocal(Connection& conn, const map::MapRequest& request, Write&& write) {
  map::MapService::LogTicket ticket;
  auto local = conn.maps().ExecuteIfLocal(request, ticket);
  if (!local) return false;
  if (ticket.wait == map::Persistence::kNone) {
    RespWriter writer = conn.Reply();
    write(writer, *local);
    return true;
  }
  std::string data;
  RespWriter writer(data, conn.protocol());
  write(writer, *local);
  conn.maps().WhenLogged(
      ticket, [slot = conn.Defer(), data = std::move(data)](base::Result<void> logged) mutable {
        if (logged) return slot.FillData(std::move(data));
        slot.Fill([&logged](RespWriter& w) { WriteServiceError(w, logged.error()); });
      });
  return true;
}

template <typename Format>
void CallMap(Connection& conn, map::MapRequest&& request, Format format) {
  if (conn.capture() != nullptr) {
    return Capture(conn, std::move(request),
                   [format](RespWriter& writer, base::Result<map::MapResult>& result) {
                     if (result) {
                       format(writer, *result);
                     } else {
                       WriteServiceError(writer, result.error());
                     }
                   });
  }
  if (RunLocal(conn, request, [&format](RespWriter& writer, base::Result<map::MapResult>& result) {
        if (result) {
          format(writer, *result);
        } else {
          WriteServiceError(writer, result.error());
        }
      })) {
    return;
  }
  if (map::MapOpIsKeyed(request.op)) {  // owned by another shard
    conn.Forward(std::move(request),
                 [format](RespWriter& writer, base::Result<map::MapResult>& result) {
                   if (result) {
                     format(writer, *result);
                   } else {
                     WriteServiceError(writer, result.error());
                   }
                 });
    return;
  }
  ReplySlot slot = conn.Defer();
  conn.maps().Execute(std::move(request),
                      [slot, format](base::Result<map::MapResult> result) mutable {
                        slot.Fill([&result, &format](RespWriter& writer) {
                          if (result) {
                            format(writer, *result);
                          } else {
                            WriteServiceError(writer, result.error());
                          }
                        });
                      });
}

// Executes `request`; format(writer, result) handles success and error.
template <typename Format>
void CallMapRaw(Connection& conn, map::MapRequest&& request, Format format) {
  if (conn.capture() != nullptr) return Capture(conn, std::move(request), format);
  if (RunLocal(conn, request, format)) return;
  if (map::MapOpIsKeyed(request.op)) {  // owned by another shard
    conn.Forward(std::move(request),
                 [format](RespWriter& writer, base::Result<map::MapResult>& result) {
                   format(writer, result);
                 });
    return;
  }
  ReplySlot slot = conn.Defer();
  conn.maps().Execute(
      std::move(request), [slot, format](base::Result<map::MapResult> result) mutable {
        slot.Fill([&result, &format](RespWriter& writer) { format(writer, result); });
      });
}

using Results = std::vector<base::Result<map::MapResult>>;
using GatherFinish = std::function<void(RespWriter& writer, Results& results)>;

// Executes all requests concurrently; finish(writer, results) runs once with results in
// request order.
void CallMapGather(Connection& conn, std::vector<map::MapRequest> requests, GatherFinish finish);

// Executes all requests concurrently and replies with the sum of score(result) as an integer
// (or "+OK" when reply_ok); the first error, in request order, is replied instead.
using Score = std::int64_t (*)(const map::MapResult& result);
void CallMapSum(Connection& conn, std::vector<map::MapRequest> requests, Score score,
                bool reply_ok = false);

// Reply helpers for common result shapes.
void WriteOptionalBulk(RespWriter& writer, const std::optional<std::string>& value);
// An array with, for each of `keys` in order, its value from `entries` or nil (MGET, HMGET).
void WriteInKeyOrder(RespWriter& writer, const std::vector<std::string>& keys,
                     const std::vector<std::pair<std::string, std::string>>& entries);

}  // namespace tessera::resp
