#include "op_support.h"

#include <string>

namespace tessera::map::detail {
namespace {
constexpr int kEvictionSamples = 16;  // Redis uses 5-10; 16 is closer to true LRU

// ceil(max_entries / partition_count): the share of one partition (0 = unbounded).
std::size_t PartitionLimit(const OpContext& ctx) {
  if (ctx.config.max_entries <= 0) return 0;
  const auto partitions =
      static_cast<std::int64_t>(std::max<std::uint32_t>(ctx.partition_count, 1));
  return static_cast<std::size_t>((ctx.config.max_entries + partitions - 1) / partitions);
}

void ApplyExpiryRule(RecordStore& store, Record& r, const WriteOptions& options,
                     const MapConfig& config, base::Millis now_ms, bool inserted) {
  if (options.keep_ttl && !inserted) return;  // keeps both TTL and max-idle
  const base::Millis ttl = options.ttl_ms.value_or(config.default_ttl_ms);
  store.SetTtl(r, ttl, now_ms);
  store.SetMaxIdle(r, options.max_idle_ms.value_or(config.default_max_idle_ms));
}

void EnforceCapacity(RecordStore& store, std::string_view kept_key, OpContext& ctx) {
  const std::size_t limit = PartitionLimit(ctx);
  if (limit == 0) return;
  while (store.size() > limit) {
    const Record* victim = store.SampleOldest(kEvictionSamples, kept_key);
    if (victim == nullptr) return;
    if (ctx.events != nullptr) {
      Emit(ctx, EntryEventType::kEvicted, victim->key(), std::nullopt, victim->value());
    }
    ++store.stats().evictions;
    const std::string key(victim->key());  // copy: the key lives in the erased block
    const ValueKind kind = victim->kind();
    const std::string value(kind == ValueKind::kPlain ? std::string_view() : victim->value());
    store.Erase(key);
    EntryLeaving(ctx, key, kind, value);
  }
}
}  // namespace

base::Result<void> CheckPlain(const Record* r) { return RequireKind(r, {ValueKind::kPlain}); }

void Emit(OpContext& ctx, EntryEventType type, std::string_view key,
          std::optional<std::string_view> value, std::optional<std::string_view> old_value) {
  if (ctx.events == nullptr) return;
  EntryEvent event;
  event.map_name = std::string(ctx.map_name);
  event.type = type;
  event.key = std::string(key);
  event.partition_id = ctx.partition_id;
  if (ctx.event_values) {
    if (value) event.value = std::string(*value);
    if (old_value) event.old_value = std::string(*old_value);
  }
  ctx.events->push_back(std::move(event));
}

}  // namespace tessera::map::detail

namespace tessera::map {
using detail::ApplyExpiryRule;
using detail::Emit;
using detail::EnforceCapacity;
using detail::EntryLeaving;

Record* FindLive(RecordStore& store, std::string_view key, OpContext& ctx) {
  Record* r = store.Find(key);
  if (r == nullptr || !r->ExpiredAt(ctx.now_ms)) return r;
  if (ctx.events != nullptr) {
    Emit(ctx, EntryEventType::kExpired, key, std::nullopt, r->value());
  }
  ++store.stats().expirations;
  const ValueKind kind = r->kind();
  const std::string value(kind == ValueKind::kPlain ? std::string_view() : r->value());
  store.Erase(key);
  EntryLeaving(ctx, key, kind, value);
  return nullptr;
}

void WriteLive(RecordStore& store, std::string_view key, std::string_view value,
               const WriteOptions& options, OpContext& ctx, bool existed,
               const std::optional<std::string>& old_value) {
  WriteLiveKind(store, key, value, options, ctx, existed, old_value, ValueKind::kPlain);
}

void WriteLiveKind(RecordStore& store, std::string_view key, std::string_view value,
                   const WriteOptions& options, OpContext& ctx, bool existed,
                   const std::optional<std::string>& old_value, ValueKind kind) {
  auto written = store.Write(key, value, ctx.now_ms);
  Record* record = written.record;
  const bool inserted = written.inserted;
  record->set_kind(kind);
  ApplyExpiryRule(store, *record, options, ctx.config, ctx.now_ms, inserted || !existed);
  if (!inserted && written.previous != kind) {
    EntryLeaving(ctx, key, written.previous, written.previous_value);
  }
  ++store.stats().puts;
  if (ctx.events != nullptr) {
    if (existed) {
      std::optional<std::string_view> old;
      if (old_value) old = *old_value;
      Emit(ctx, EntryEventType::kUpdated, key, value, old);
    } else {
      Emit(ctx, EntryEventType::kAdded, key, value, std::nullopt);
    }
  }
  if (inserted) EnforceCapacity(store, key, ctx);
}

void RemoveLive(RecordStore& store, const Record& record, OpContext& ctx, EntryEventType type) {
  const std::string key(record.key());
  const ValueKind kind = record.kind();
  const std::string value(kind == ValueKind::kPlain ? std::string_view() : record.value());
  if (ctx.events != nullptr) Emit(ctx, type, key, std::nullopt, record.value());
  ++store.stats().removes;
  store.Erase(key);
  EntryLeaving(ctx, key, kind, value);
}

}  // namespace tessera::map

namespace tessera::map::detail {

base::Result<const EntryProcessor*> LookupProcessor(const EntryProcessorRegistry* registry,
                                                    std::string_view name) {
  const EntryProcessor* p = registry != nullptr ? registry->Find(name) : nullptr;
  if (p != nullptr) return p;
  return base::Fail(base::ErrorCode::kUnknownProcessor,
                    "no entry processor named '" + std::string(name) +
                        "' is registered on this member; register it with "
                        "EntryProcessorRegistry::Register before starting the member");
}

namespace {
// The options a processor's write uses: its own SetTtl, else the request's TTL, else the
// entry keeps its expiry (new entries get the map default).
WriteOptions ProcessorWriteOptions(const MutableEntry& entry, const WriteOptions& request) {
  WriteOptions w;
  w.max_idle_ms = request.max_idle_ms;
  if (entry.ttl_ms()) {
    w.ttl_ms = entry.ttl_ms();
  } else if (request.ttl_ms) {
    w.ttl_ms = request.ttl_ms;
  } else {
    w.keep_ttl = true;
  }
  return w;
}
}  // namespace

base::Result<record::GenericRecord> RunProcessor(RecordStore& store, std::string_view key,
                                                 const EntryProcessor& processor,
                                                 const record::GenericRecord& argument,
                                                 const WriteOptions& options, OpContext& ctx) {
  Record* r = FindLive(store, key, ctx);
  if (auto plain = CheckPlain(r); !plain) return std::unexpected(plain.error());
  std::optional<std::string> current;
  if (r != nullptr) current = std::string(r->value());
  const bool existed = current.has_value();
  MutableEntry entry(key, current);
  auto result = processor(entry, argument);
  if (!result) return result;  // the entry is untouched, not even its access time
  if (existed) r->RecordRead(ctx.now_ms);
  if (entry.deleted()) {
    if (existed) RemoveLive(store, *r, ctx, EntryEventType::kRemoved);
  } else if (entry.changed() && entry.value()) {
    WriteLive(store, key, *entry.value(), ProcessorWriteOptions(entry, options), ctx, existed,
              current);
  } else if (entry.ttl_ms() && existed) {
    store.SetTtl(*r, *entry.ttl_ms(), ctx.now_ms);
  }
  return result;
}

}  // namespace tessera::map::detail
