// Keyed operations and the dispatcher. Each Op* function touches one store, never blocks and
// reports through MapResult; the TTL rule, events and capacity are applied by op_support.
#include "tessera/map/map_ops.h"

#include <chrono>
#include <string>

#include "op_support.h"
#include "tessera/base/cycle_clock.h"

namespace tessera::map {
namespace {
using base::ErrorCode;
using base::Fail;

std::optional<std::string> OldValueIfNeeded(const Record* r, const OpContext& ctx, bool always) {
  if (r == nullptr || (!always && (ctx.events == nullptr || !ctx.event_values))) {
    return std::nullopt;
  }
  return std::string(r->value());
}

// The value an operation hands back as "what was there": another kind's encoding stays inside.
std::string ValueOut(const Record& r) {
  return r.kind() == ValueKind::kPlain ? std::string(r.value()) : std::string();
}

// put / set.
base::Result<MapResult> OpPut(RecordStore& store, const MapRequest& rq, OpContext& ctx,
                              bool return_old) {
  const Record* r = FindLive(store, rq.key, ctx);
  if (return_old) {
    if (auto plain = detail::CheckPlain(r); !plain) return std::unexpected(plain.error());
  }
  MapResult out;
  auto old = OldValueIfNeeded(r, ctx, return_old);
  WriteLive(store, rq.key, rq.value, rq.options, ctx, r != nullptr, old);
  if (return_old) out.value = std::move(old);
  return out;
}

base::Result<MapResult> OpGet(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  Record* r = FindLive(store, rq.key, ctx);
  MapResult out;
  ++store.stats().gets;
  if (r == nullptr) {
    ++store.stats().misses;
    return out;
  }
  if (auto plain = detail::CheckPlain(r); !plain) return std::unexpected(plain.error());
  ++store.stats().hits;
  r->RecordRead(ctx.now_ms);
  out.value = std::string(r->value());
  return out;
}

// remove / delete.
base::Result<MapResult> OpRemove(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  const Record* r = FindLive(store, rq.key, ctx);
  MapResult out;
  if (r == nullptr) return out;
  if (rq.op == MapOp::kRemove) {
    if (auto plain = detail::CheckPlain(r); !plain) return std::unexpected(plain.error());
    out.value = std::string(r->value());
  }
  out.flag = true;
  RemoveLive(store, *r, ctx, EntryEventType::kRemoved);
  return out;
}

MapResult OpContainsKey(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  Record* r = FindLive(store, rq.key, ctx);
  MapResult out;
  out.flag = r != nullptr;
  if (r != nullptr) r->RecordAccess(ctx.now_ms);
  return out;
}

MapResult OpPutIfAbsent(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  Record* r = FindLive(store, rq.key, ctx);
  MapResult out;
  if (r != nullptr) {
    r->RecordRead(ctx.now_ms);
    out.value = ValueOut(*r);
    return out;
  }
  WriteLive(store, rq.key, rq.value, rq.options, ctx, false, std::nullopt);
  out.flag = true;
  return out;
}

// replace: value=old or nullopt; replaceIfSame: flag.
base::Result<MapResult> OpReplace(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  const Record* r = FindLive(store, rq.key, ctx);
  MapResult out;
  if (r == nullptr) return out;
  if (rq.op == MapOp::kReplaceIfSame) {
    if (auto plain = detail::CheckPlain(r); !plain) return std::unexpected(plain.error());
    if (r->value() != rq.expected) return out;
  }
  std::optional<std::string> old;
  if (r->kind() != ValueKind::kPlain) {
    if (rq.op == MapOp::kReplace) old = std::string();
  } else {
    old = OldValueIfNeeded(r, ctx, rq.op == MapOp::kReplace);
  }
  WriteLive(store, rq.key, rq.value, rq.options, ctx, true, old);
  out.flag = true;
  if (rq.op == MapOp::kReplace) out.value = std::move(old);
  return out;
}

base::Result<MapResult> OpRemoveIfSame(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  const Record* r = FindLive(store, rq.key, ctx);
  if (auto plain = detail::CheckPlain(r); !plain) return std::unexpected(plain.error());
  MapResult out;
  if (r == nullptr || r->value() != rq.expected) return out;
  RemoveLive(store, *r, ctx, EntryEventType::kRemoved);
  out.flag = true;
  return out;
}

MapResult OpSetTtl(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  Record* r = FindLive(store, rq.key, ctx);
  MapResult out;
  if (r == nullptr) return out;
  store.SetTtl(*r, *rq.options.ttl_ms, ctx.now_ms);
  if (rq.options.max_idle_ms) store.SetMaxIdle(*r, *rq.options.max_idle_ms);
  r->RecordAccess(ctx.now_ms);
  out.flag = true;
  return out;
}

MapResult OpGetEntryView(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  const Record* r = FindLive(store, rq.key, ctx);
  MapResult out;
  if (r == nullptr) return out;
  out.value = ValueOut(*r);
  out.view = r->View();
  return out;
}

base::Result<MapResult> OpExecuteOnKey(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  auto processor = detail::LookupProcessor(ctx.processors, rq.processor);
  if (!processor) return std::unexpected(processor.error());
  auto result = detail::RunProcessor(store, rq.key, **processor, rq.argument, rq.options, ctx);
  if (!result) return std::unexpected(result.error());
  MapResult out;
  out.processor_result = std::move(*result);
  return out;
}

base::Result<MapResult> Dispatch(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  switch (rq.op) {
    case MapOp::kPut:
      return OpPut(store, rq, ctx, true);
    case MapOp::kSet:
      return OpPut(store, rq, ctx, false);
    case MapOp::kGet:
      return OpGet(store, rq, ctx);
    case MapOp::kRemove:
    case MapOp::kDelete:
      return OpRemove(store, rq, ctx);
    case MapOp::kContainsKey:
      return OpContainsKey(store, rq, ctx);
    case MapOp::kPutIfAbsent:
      return OpPutIfAbsent(store, rq, ctx);
    case MapOp::kReplace:
    case MapOp::kReplaceIfSame:
      return OpReplace(store, rq, ctx);
    case MapOp::kRemoveIfSame:
      return OpRemoveIfSame(store, rq, ctx);
    case MapOp::kSetTtl:
      return OpSetTtl(store, rq, ctx);
    case MapOp::kGetEntryView:
      return OpGetEntryView(store, rq, ctx);
    case MapOp::kExecuteOnKey:
      return OpExecuteOnKey(store, rq, ctx);
    case MapOp::kRingAppend:
      return detail::OpRingAppend(store, rq, ctx);
    case MapOp::kRingRead:
      return detail::OpRingRead(store, rq, ctx);
    case MapOp::kStreamAppend:
      return detail::OpStreamAppend(store, rq, ctx);
    case MapOp::kStreamRead:
      return detail::OpStreamRead(store, rq, ctx);
    case MapOp::kStreamCommit:
      return detail::OpStreamCommit(store, rq, ctx);
    case MapOp::kStreamLease:
      return detail::OpStreamLease(store, rq, ctx);
    case MapOp::kStreamGroup:
      return detail::OpStreamGroup(store, rq, ctx);
    case MapOp::kStreamInfo:
      return detail::OpStreamInfo(store, rq, ctx);
    case MapOp::kStreamJoin:
      return detail::OpStreamJoin(store, rq, ctx);
    case MapOp::kStreamMerge:
      return detail::OpStreamMerge(store, rq, ctx);
    case MapOp::kRingMerge:
      return detail::OpRingMerge(store, rq, ctx);
    case MapOp::kRedisStream:  // the ops families serve (family.h)
    case MapOp::kRedisKey:
      if (const FamilySpec* family = FamilyOfOp(rq.op)) return family->run(store, rq, ctx);
      return Fail(ErrorCode::kUnsupported,
                  std::string("no data type family serving op ") + std::string(SpecOf(rq.op).name) +
                      " is registered on this member; register it before starting the member "
                      "(a grid member registers every family it serves)");
    case MapOp::kTransact:  // spans maps: MapService runs it (map_service_tx.cc)
      return Fail(ErrorCode::kBadRequest,
                  "a transaction runs through MapService, not on one store");
    case MapOp::kPutAll:
      return detail::OpPutAll(store, rq, ctx);
    case MapOp::kMergeEntries:
      return detail::OpMergeEntries(store, rq, ctx);
    case MapOp::kGetAll:
      return detail::OpGetAll(store, rq, ctx);
    case MapOp::kExecuteOnKeys:
      return detail::OpExecuteOnKeys(store, rq, ctx);
    case MapOp::kSize:
      return detail::OpSize(store, ctx);
    case MapOp::kClear:
      return detail::OpClear(store, ctx);
    case MapOp::kQuery:
      return detail::OpQuery(store, rq, ctx);
    case MapOp::kExecuteOnEntries:
      return detail::OpExecuteOnEntries(store, rq, ctx);
    case MapOp::kStats: {
      MapResult out;
      out.stats = StatsOf(store, ctx.now_ms);
      return out;
    }
  }
  return Fail(ErrorCode::kBadRequest,
              "unknown map operation code " + std::to_string(static_cast<int>(rq.op)));
}

base::Result<void> ValidateKey(std::string_view key, MapOp op) {
  if (!key.empty()) return {};
  return Fail(ErrorCode::kBadRequest,
              std::string(MapOpName(op)) + " needs a key; the request's key is empty");
}

base::Result<void> ValidateOptions(const MapRequest& rq) {
  const auto& o = rq.options;
  if (o.ttl_ms && *o.ttl_ms < 0) {
    return Fail(ErrorCode::kBadRequest,
                "ttl_ms is negative (" + std::to_string(*o.ttl_ms) +
                    "); use 0 for no expiry or a positive number of milliseconds");
  }
  if (o.max_idle_ms && *o.max_idle_ms < 0) {
    return Fail(ErrorCode::kBadRequest,
                "max_idle_ms is negative (" + std::to_string(*o.max_idle_ms) +
                    "); use 0 for no idle limit or a positive number of milliseconds");
  }
  if (o.ttl_ms && *o.ttl_ms > kMaxExpiryMs) {
    return Fail(ErrorCode::kBadRequest, "ttl_ms is " + std::to_string(*o.ttl_ms) +
                                            ", more than the longest TTL a map keeps (" +
                                            std::to_string(kMaxExpiryMs) +
                                            " ms, about 68 years); use 0 for no expiry");
  }
  if (o.max_idle_ms && *o.max_idle_ms > kMaxExpiryMs) {
    return Fail(ErrorCode::kBadRequest, "max_idle_ms is " + std::to_string(*o.max_idle_ms) +
                                            ", more than the longest idle limit a map keeps (" +
                                            std::to_string(kMaxExpiryMs) +
                                            " ms, about 68 years); use 0 for no limit");
  }
  if (rq.op == MapOp::kSetTtl && !o.ttl_ms) {
    return Fail(ErrorCode::kBadRequest, "setTtl needs options.ttl_ms (0 removes the expiry)");
  }
  return {};
}

base::Result<void> ValidateKeys(const MapRequest& rq) {
  for (const auto& [key, value] : rq.entries) {
    if (auto ok = ValidateKey(key, rq.op); !ok) return ok;
  }
  if (rq.op == MapOp::kStreamAppend) return {};  // its keys are event ids: "" = no id
  for (const auto& key : rq.keys) {
    if (auto ok = ValidateKey(key, rq.op); !ok) return ok;
  }
  return {};
}

base::Result<void> ValidateTransaction(const MapRequest& rq,
                                       const EntryProcessorRegistry* processors) {
  if (rq.key.empty()) {
    return Fail(ErrorCode::kBadRequest,
                "a transaction needs its partition key (every key of the batch is in its "
                "partition); the request's key is empty");
  }
  if (rq.transaction.empty()) {
    return Fail(ErrorCode::kBadRequest, "the transaction has no operations; add at least one");
  }
  for (std::size_t i = 0; i < rq.transaction.size(); ++i) {
    const MapRequest& op = rq.transaction[i].request;
    const std::string where = "operation " + std::to_string(i) + " of the transaction";
    if (!SpecOf(op.op).in_transaction) {
      return Fail(ErrorCode::kBadRequest,
                  where + " is " + std::string(MapOpName(op.op)) +
                      ", which a transaction cannot run; use put, set, get, remove, delete, "
                      "containsKey, putIfAbsent, replace, replaceIfSame, removeIfSame, setTtl, "
                      "getEntryView, executeOnKey or redisKey");
    }
    if (auto ok = ValidateRequest(op, processors); !ok) {
      return std::unexpected(
          ok.error().WithContext(where + " (" + std::string(MapOpName(op.op)) + "): "));
    }
  }
  return {};
}
}  // namespace

base::Result<void> ValidateRequest(const MapRequest& rq, const EntryProcessorRegistry* processors) {
  if (rq.op == MapOp::kTransact) return ValidateTransaction(rq, processors);
  if (rq.map_name.empty()) return Fail(ErrorCode::kBadRequest, "map name is empty");
  if (SpecOf(rq.op).scope == OpScope::kUnknown) {
    return Fail(ErrorCode::kBadRequest,
                "unknown map operation code " + std::to_string(static_cast<int>(rq.op)));
  }
  if (MapOpIsKeyed(rq.op)) {
    if (auto ok = ValidateKey(rq.key, rq.op); !ok) return ok;
  }
  if (auto ok = ValidateOptions(rq); !ok) return ok;
  if (auto ok = ValidateKeys(rq); !ok) return ok;
  if (rq.op == MapOp::kExecuteOnKey || rq.op == MapOp::kExecuteOnKeys ||
      rq.op == MapOp::kExecuteOnEntries) {
    auto p = detail::LookupProcessor(processors, rq.processor);
    if (!p) return std::unexpected(p.error());
  }
  if (rq.op == MapOp::kQuery || rq.op == MapOp::kExecuteOnEntries) {
    return rq.predicate.Validate();
  }
  return {};
}

base::Result<MapResult> ExecuteOnStore(RecordStore& store, const MapRequest& request,
                                       OpContext& ctx) {
  const OpLatency kind = SpecOf(request.op).latency;
  if (kind == OpLatency::kNone) return Dispatch(store, request, ctx);
  // In CycleClock ticks while in the store (StatsOf converts them): two steady_clock reads
  // per operation showed in a member's CPU profile.
  const std::uint64_t start = base::CycleClock::Now();
  auto result = Dispatch(store, request, ctx);
  const auto ticks = static_cast<std::int64_t>(base::CycleClock::Now() - start);
  MapStats& stats = store.stats();
  if (kind == OpLatency::kGet) stats.get_latency_ns += ticks;
  if (kind == OpLatency::kPut) stats.put_latency_ns += ticks;
  if (kind == OpLatency::kRemove) stats.remove_latency_ns += ticks;
  return result;
}

}  // namespace tessera::map
