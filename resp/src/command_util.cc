#include "command_util.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <optional>
#include <string_view>
#include <unordered_map>

namespace tessera::resp {

bool ParseInt64(std::string_view text, std::int64_t& out) {
  if (text.empty() || text.size() > 20 || text.front() == '+') return false;
  if (text.size() > 1 && text[0] == '0') return false;  // no leading zeros, as Redis
  if (text.size() > 2 && text[0] == '-' && text[1] == '0') return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string Lowercase(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower;
}

std::string Uppercase(std::string_view text) {
  std::string upper(text);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return upper;
}

map::MapRequest KeyRequest(map::MapOp op, std::string_view map_name, std::string_view key) {
  map::MapRequest request;
  request.op = op;
  request.map_name.assign(map_name);
  request.key.assign(key);
  return request;
}

map::MapRequest& ReuseKeyRequest(Connection& conn, map::MapOp op, std::string_view map_name,
                                 std::string_view key) {
  map::MapRequest& request = conn.reusable_request();
  request.Clear();
  request.op = op;
  request.map_name.assign(map_name);
  request.key.assign(key);
  return request;
}

namespace {

// How a service error reads on RESP, by its code and reason: Redis's error prefix, and Redis's
// own text where Redis has one for the case (empty: the error's message). The first row that
// matches wins; an error no row matches is "ERR <message>".
struct RespErrorRow {
  base::ErrorCode code;
  std::optional<base::ErrorReason> reason;  // nullopt: any
  std::string_view prefix;
  std::string_view text;
};
constexpr RespErrorRow kRespErrors[] = {
    {base::ErrorCode::kWrongType, base::ErrorReason::kWrongKind, "WRONGTYPE",
     "Operation against a key holding the wrong kind of value"},
    // A processor's type error, or a wrong kind from a member that predates error reasons.
    {base::ErrorCode::kWrongType, std::nullopt, "WRONGTYPE", ""},
    {base::ErrorCode::kBadRequest, base::ErrorReason::kCrossPartition, "CROSSSLOT",
     "Keys in request don't hash to the same slot (give both keys the same hash tag, e.g. "
     "{user1}:a and {user1}:b)"},
    // Redis answers MISCONF while it cannot write its AOF or snapshot; clients fail the write.
    {base::ErrorCode::kStorage, base::ErrorReason::kDiskLow, "MISCONF", ""},
    // Redis answers LOADING while it loads its data set at start; clients retry it.
    {base::ErrorCode::kRecovering, std::nullopt, "LOADING", ""},
};

}  // namespace

void WriteServiceError(RespWriter& writer, const base::Error& error) {
  for (const auto& row : kRespErrors) {
    if (row.code != error.code() || (row.reason && *row.reason != error.reason())) continue;
    std::string text(row.prefix);
    text += ' ';
    text += row.text.empty() ? std::string_view(error.message()) : row.text;
    return writer.Error(text);
  }
  writer.Error("ERR " + error.message());
}

void WriteOptionalBulk(RespWriter& writer, const std::optional<std::string>& value) {
  if (value) {
    writer.Bulk(*value);
  } else {
    writer.Null();
  }
}

void WriteInKeyOrder(RespWriter& writer, const std::vector<std::string>& keys,
                     const std::vector<std::pair<std::string, std::string>>& entries) {
  std::unordered_map<std::string_view, std::string_view> index;
  index.reserve(entries.size());
  for (const auto& [key, value] : entries) index.emplace(key, value);
  writer.ArrayHeader(keys.size());
  for (const auto& key : keys) {
    auto it = index.find(key);
    if (it == index.end()) {
      writer.Null();
    } else {
      writer.Bulk(it->second);
    }
  }
}

namespace {

struct GatherState {
  explicit GatherState(ReplySlot s, std::size_t n, GatherFinish f)
      : slot(std::move(s)), results(n), remaining(n), finish(std::move(f)) {}
  ReplySlot slot;
  std::vector<std::optional<base::Result<map::MapResult>>> results;
  std::atomic<std::size_t> remaining;
  GatherFinish finish;

  void Finish() {
    Results done;
    done.reserve(results.size());
    for (auto& r : results) done.push_back(std::move(*r));
    slot.Fill([this, &done](RespWriter& writer) { finish(writer, done); });
  }
};

// Adds `requests` and `finish` to the command being compiled for MULTI; a request that is not
// keyed cannot join a partition transaction, and marks the command unsupported.
void CaptureAll(CompiledCommand& compiled, std::vector<map::MapRequest> requests,
                GatherFinish finish) {
  for (auto& request : requests) {
    if (!map::MapOpIsKeyed(request.op)) {
      compiled.unsupported = std::string(map::MapOpName(request.op)) + " of a whole map";
      return;
    }
    compiled.requests.push_back(std::move(request));
  }
  compiled.finish = std::move(finish);
}
}  // namespace

void Capture(Connection& conn, map::MapRequest&& request,
             std::function<void(RespWriter&, base::Result<map::MapResult>&)> finish) {
  std::vector<map::MapRequest> one;
  one.push_back(std::move(request));
  CaptureAll(*conn.capture(), std::move(one),
             [finish = std::move(finish)](RespWriter& writer, Results& results) {
               finish(writer, results.front());
             });
}

void CallMapGather(Connection& conn, std::vector<map::MapRequest> requests, GatherFinish finish) {
  if (CompiledCommand* compiled = conn.capture()) {
    return CaptureAll(*compiled, std::move(requests), std::move(finish));
  }
  ReplySlot slot = conn.Defer();
  if (requests.empty()) {
    Results none;
    slot.Fill([&finish, &none](RespWriter& writer) { finish(writer, none); });
    return;
  }
  auto state = std::make_shared<GatherState>(slot, requests.size(), std::move(finish));
  for (std::size_t i = 0; i < requests.size(); ++i) {
    conn.maps().Execute(std::move(requests[i]), [state, i](base::Result<map::MapResult> result) {
      state->results[i] = std::move(result);
      if (state->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        state->Finish();
      }
    });
  }
}

void CallMapSum(Connection& conn, std::vector<map::MapRequest> requests, Score score,
                bool reply_ok) {
  CallMapGather(conn, std::move(requests), [score, reply_ok](RespWriter& writer, Results& results) {
    std::int64_t sum = 0;
    for (auto& result : results) {
      if (!result) {
        WriteServiceError(writer, result.error());
        return;
      }
      sum += score(*result);
    }
    if (reply_ok) {
      writer.SimpleString("OK");
    } else {
      writer.Integer(sum);
    }
  });
}

}  // namespace tessera::resp
