#pragma once
// What the stream commands share (stream_commands.cc, stream_read.cc): building a
// MapOp::kRedisStream request (streams/redis_stream.h) and writing entries and errors as Redis
// does.
//
// Shard: the connection's (builders); the writers run wherever a reply is formatted.

#include <optional>
#include <string>
#include <string_view>

#include "connection.h"
#include "tessera/map/map_request.h"
#include "tessera/record/generic_record.h"
#include "tessera/streams/redis_stream.h"

namespace tessera::resp {

// The request for Redis stream `key`, command `cmd` (the argument is built by the caller with
// `args` and set with Finish).
struct StreamRequest {
  StreamRequest(std::string_view key, std::string_view cmd);
  map::MapRequest Finish() &&;
  map::MapRequest request;
  record::GenericRecordBuilder args;
};

// Tessera stream names cannot hold spaces, '@' or '#': the error to reply for `key`, or "".
std::string StreamKeyProblem(std::string_view key);

// [ID, [field, value, ...]] for one entry (result entry: ID, EncodeStreamFields payload).
void WriteStreamEntry(RespWriter& writer, const std::string& id, const std::string& payload);
// NOGROUP / BUSYGROUP keep their prefix; the rest as WriteServiceError.
void WriteStreamError(RespWriter& writer, const base::Error& error);

// A range bound: "-", "+", "<ms>", "<ms>-<seq>", and "(" before an ID for an exclusive one.
// nullopt (with `error` set to the reply) when it is not one.
std::optional<streams::StreamId> ParseRangeBound(std::string_view text, bool start,
                                                 std::string& error);

inline constexpr const char* kInvalidStreamId =
    "ERR Invalid stream ID specified as stream command argument";

}  // namespace tessera::resp
