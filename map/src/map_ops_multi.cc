// Per-partition parts of the multi-partition operations, the merge of their results, the
// background sweep and statistics.
#include <string>
#include <vector>

#include "op_support.h"
#include "tessera/base/cycle_clock.h"
#include "tessera/map/map_ops.h"
#include "tessera/map/merge.h"

namespace tessera::map {
namespace detail {

base::Result<MapResult> OpPutAll(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  MapResult out;
  for (const auto& [key, value] : rq.entries) {
    const Record* r = FindLive(store, key, ctx);
    std::optional<std::string> old;
    if (r != nullptr && ctx.events != nullptr && ctx.event_values) old = std::string(r->value());
    WriteLive(store, key, value, rq.options, ctx, r != nullptr, old);
    ++out.count;
  }
  return out;
}

base::Result<MapResult> OpMergeEntries(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  MapResult out;
  std::int64_t discarded = 0;
  for (const auto& [key, bytes] : rq.entries) {
    auto merging = DecodeMergeEntry(bytes);
    if (!merging) return std::unexpected(merging.error());
    const Record* r = FindLive(store, key, ctx);
    const base::Millis existing_update_wall =
        r == nullptr ? 0 : ctx.wall_ms - (ctx.now_ms - r->last_update_ms());
    if (!MergeWins(ctx.config.merge_policy, *merging, r != nullptr, r == nullptr ? 0 : r->hits(),
                   existing_update_wall)) {
      ++discarded;
      continue;
    }
    std::optional<std::string> old;
    if (r != nullptr && ctx.events != nullptr && ctx.event_values) old = std::string(r->value());
    WriteOptions options;
    options.ttl_ms = merging->ttl_left_ms;
    options.max_idle_ms = merging->max_idle_ms;
    WriteLive(store, key, merging->value, options, ctx, r != nullptr, old);
    if (Record* written = store.Find(key)) {  // it keeps its own history, not the merge's
      written->SetUpdateHistory(std::max<base::Millis>(0, ctx.wall_ms - merging->update_wall_ms),
                                merging->hits, ctx.now_ms);
      written->set_kind(merging->kind);
    }
    ++out.count;
  }
  out.entries.emplace_back("discarded", std::to_string(discarded));
  return out;
}

base::Result<MapResult> OpGetAll(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  MapResult out;
  for (const auto& key : rq.keys) {
    Record* r = FindLive(store, key, ctx);
    ++store.stats().gets;
    if (r == nullptr) {
      ++store.stats().misses;
      continue;
    }
    if (r->kind() != ValueKind::kPlain) continue;  // as Redis's MGET: nil for another kind
    ++store.stats().hits;
    r->RecordRead(ctx.now_ms);
    out.entries.emplace_back(key, std::string(r->value()));
  }
  return out;
}

base::Result<MapResult> OpExecuteOnKeys(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  auto processor = LookupProcessor(ctx.processors, rq.processor);
  if (!processor) return std::unexpected(processor.error());
  MapResult out;
  for (const auto& key : rq.keys) {
    auto result = RunProcessor(store, key, **processor, rq.argument, rq.options, ctx);
    if (!result) return std::unexpected(result.error());
    out.processor_results.emplace_back(key, std::move(*result));
  }
  return out;
}

base::Result<MapResult> OpSize(RecordStore& store, OpContext& ctx) {
  MapResult out;
  store.ForEach([&out, &ctx](const Record& r) {
    if (!r.ExpiredAt(ctx.now_ms)) ++out.count;
  });
  return out;
}

base::Result<MapResult> OpClear(RecordStore& store, OpContext& ctx) {
  MapResult out;
  // Entries of a family's kind: its hook takes what lives beside them (family.h).
  struct Leaving {
    std::string key;
    ValueKind kind;
    std::string value;
  };
  std::vector<Leaving> leaving;
  store.ForEach([&out, &ctx, &leaving](const Record& r) {
    if (!r.ExpiredAt(ctx.now_ms)) ++out.count;
    if (r.kind() != ValueKind::kPlain) {
      leaving.push_back({std::string(r.key()), r.kind(), std::string(r.value())});
    }
  });
  if (store.size() == 0) return out;
  store.stats().removes += out.count;
  store.Clear();
  for (const auto& l : leaving) EntryLeaving(ctx, l.key, l.kind, l.value);
  if (out.count > 0) {
    const std::string count = std::to_string(out.count);
    // The count travels even without include_values: it is the event's payload.
    const bool values = ctx.event_values;
    ctx.event_values = true;
    Emit(ctx, EntryEventType::kCleared, "", std::nullopt, count);
    ctx.event_values = values;
  }
  return out;
}

base::Result<MapResult> OpQuery(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  MapResult out;
  const Projection projection = rq.projection;
  store.ForEach([&out, &ctx, &rq, projection](const Record& r) {
    if (r.ExpiredAt(ctx.now_ms)) return;
    if (r.kind() != ValueKind::kPlain) {  // keys only, with their kind (no value predicates)
      if (projection == Projection::kKeys && rq.predicate.Matches(r.key(), "")) {
        out.entries.emplace_back(std::string(r.key()), std::string(ValueKindName(r.kind())));
      }
      return;
    }
    if (!rq.predicate.Matches(r.key(), r.value())) return;
    switch (projection) {
      case Projection::kKeys:
        out.entries.emplace_back(std::string(r.key()), std::string());
        break;
      case Projection::kValues:
        out.entries.emplace_back(std::string(), std::string(r.value()));
        break;
      default:
        out.entries.emplace_back(std::string(r.key()), std::string(r.value()));
        break;
    }
  });
  return out;
}

base::Result<MapResult> OpExecuteOnEntries(RecordStore& store, const MapRequest& rq,
                                           OpContext& ctx) {
  auto processor = LookupProcessor(ctx.processors, rq.processor);
  if (!processor) return std::unexpected(processor.error());
  // Collect first: processors may write or delete, which must not happen mid-iteration.
  std::vector<std::string> keys;
  store.ForEach([&keys, &ctx, &rq](const Record& r) {
    if (!r.ExpiredAt(ctx.now_ms) && r.kind() == ValueKind::kPlain &&
        rq.predicate.Matches(r.key(), r.value())) {
      keys.emplace_back(r.key());
    }
  });
  MapResult out;
  for (const auto& key : keys) {
    auto result = RunProcessor(store, key, **processor, rq.argument, rq.options, ctx);
    if (!result) return std::unexpected(result.error());
    out.processor_results.emplace_back(key, std::move(*result));
  }
  return out;
}

}  // namespace detail

void AddStats(MapStats& into, const MapStats& part) {
  into.entries += part.entries;
  into.memory_bytes += part.memory_bytes;
  into.hits += part.hits;
  into.misses += part.misses;
  into.gets += part.gets;
  into.puts += part.puts;
  into.removes += part.removes;
  into.expirations += part.expirations;
  into.evictions += part.evictions;
  into.get_latency_ns += part.get_latency_ns;
  into.put_latency_ns += part.put_latency_ns;
  into.remove_latency_ns += part.remove_latency_ns;
}

namespace {

template <typename T>
void Append(std::vector<T>& into, std::vector<T>&& part) {
  if (into.empty()) {
    into = std::move(part);
    return;
  }
  into.insert(into.end(), std::make_move_iterator(part.begin()),
              std::make_move_iterator(part.end()));
}
}  // namespace

void MergeResult(MapOp op, MapResult& into, MapResult&& part) {
  (void)op;  // every multi-partition op merges the same way today
  into.count += part.count;
  into.flag = into.flag || part.flag;
  Append(into.entries, std::move(part.entries));
  Append(into.processor_results, std::move(part.processor_results));
  AddStats(into.stats, part.stats);
}

RecordStore::SweepResult SweepStore(RecordStore& store, OpContext& ctx, std::size_t budget) {
  return store.SweepExpired(ctx.now_ms, budget, [&store, &ctx](const Record& r) {
    ++store.stats().expirations;
    detail::Emit(ctx, EntryEventType::kExpired, r.key(), std::nullopt, r.value());
    detail::EntryLeaving(ctx, r.key(), r.kind(), r.value());
  });
}

MapStats ReportedStats(const RecordStore& store) {
  MapStats stats = store.stats();
  for (std::int64_t* total :
       {&stats.get_latency_ns, &stats.put_latency_ns, &stats.remove_latency_ns}) {
    *total = base::CycleClock::ToNanos(static_cast<std::uint64_t>(*total));
  }
  return stats;
}

MapStats StatsOf(const RecordStore& store, base::Millis now_ms) {
  MapStats stats = ReportedStats(store);
  stats.entries = 0;
  store.ForEach([&stats, now_ms](const Record& r) {
    if (!r.ExpiredAt(now_ms)) ++stats.entries;
  });
  stats.memory_bytes = store.memory_bytes();
  return stats;
}

}  // namespace tessera::map
