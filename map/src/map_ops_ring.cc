// Ring buffer operations (kRingAppend, kRingRead): a reliable topic's messages stored as
// entries of one partition, so they are replicated, migrated and promoted like any entry.
// For ring R (request key "ring@R"): entries "<seq>@R" hold the messages and
// "ring@R" holds "<head> <tail>": the oldest sequence that may still be stored and the last
// one assigned (an empty ring has head = tail + 1; sequences start at 1).
#include <charconv>

#include "op_support.h"
#include "tessera/map/merge.h"

namespace tessera::map::detail {
namespace {

using base::ErrorCode;
using base::Fail;

struct RingMeta {
  std::int64_t head = 1;
  std::int64_t tail = 0;
};

std::string MessageKey(std::string_view ring, std::int64_t seq) {
  return std::to_string(seq) + "@" + std::string(ring);
}

std::string MetaKey(std::string_view ring) { return "ring@" + std::string(ring); }

RingMeta ParseMeta(std::string_view text) {
  RingMeta m;
  auto space = text.find(' ');
  if (space == std::string_view::npos) return m;
  std::from_chars(text.data(), text.data() + space, m.head);
  std::from_chars(text.data() + space + 1, text.data() + text.size(), m.tail);
  return m;
}

std::string MetaText(const RingMeta& m) {
  return std::to_string(m.head) + " " + std::to_string(m.tail);
}

// Moves head past messages that expired or were never stored (at most `limit` steps).
void SkipGone(RecordStore& store, std::string_view ring, RingMeta& m, OpContext& ctx,
              std::int64_t limit) {
  while (m.head <= m.tail && limit-- > 0 &&
         FindLive(store, MessageKey(ring, m.head), ctx) == nullptr) {
    ++m.head;
  }
}

}  // namespace

base::Result<MapResult> OpRingAppend(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  const std::string_view ring = AfterFirstAt(rq.key);
  const std::int64_t capacity = IntArg(rq, "capacity", 10'000);
  const auto policy = static_cast<RingOverflow>(IntArg(rq, "overflow", 0));
  if (capacity < 1) {
    return Fail(ErrorCode::kBadRequest, "a ring needs a capacity of at least 1");
  }
  const std::string meta_key = MetaKey(ring);
  RingMeta m;
  Record* meta = FindLive(store, meta_key, ctx);
  const bool had_meta = meta != nullptr;
  if (meta) m = ParseMeta(meta->value());
  SkipGone(store, ring, m, ctx, capacity);
  MapResult out;
  out.count = -1;  // the first sequence stored
  std::int64_t discarded = 0;
  for (const auto& message : rq.keys) {
    if (m.tail - m.head + 1 >= capacity) {
      if (policy == RingOverflow::kDiscardOldest) {
        if (Record* oldest = FindLive(store, MessageKey(ring, m.head), ctx)) {
          RemoveLive(store, *oldest, ctx, EntryEventType::kEvicted);
        }
        ++m.head;
        SkipGone(store, ring, m, ctx, capacity);
      } else if (policy == RingOverflow::kDiscardNewest) {
        ++discarded;
        continue;
      } else {
        if (out.count >= 0) break;  // what was stored stays; the caller sees how much
        return Fail(ErrorCode::kOverloaded,
                    "reliable topic '" + std::string(ring) +
                        "' is full: " + std::to_string(capacity) +
                        " unexpired messages; wait for listeners and retry, or configure a "
                        "larger capacity, a TTL or another overload policy");
      }
    }
    ++m.tail;
    if (out.count < 0) out.count = m.tail;
    WriteLive(store, MessageKey(ring, m.tail), message, rq.options, ctx, false, std::nullopt);
    out.flag = true;  // stored at least one
  }
  WriteOptions keep;  // the ring's bookkeeping never expires
  keep.ttl_ms = 0;
  keep.max_idle_ms = 0;
  WriteLive(store, meta_key, MetaText(m), keep, ctx, had_meta, std::nullopt);
  out.value = MetaText(m);
  out.entries.emplace_back("discarded", std::to_string(discarded));
  return out;
}

base::Result<MapResult> OpRingMerge(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  const std::string_view ring = AfterFirstAt(rq.key);
  const std::string meta_key = MetaKey(ring);
  RingMeta m;
  Record* meta = FindLive(store, meta_key, ctx);
  const bool had_meta = meta != nullptr;
  if (meta) m = ParseMeta(meta->value());
  MapResult out;
  std::int64_t discarded = 0;
  for (const auto& [seq_text, bytes] : rq.entries) {
    auto message = DecodeMergeEntry(bytes);
    if (!message) return std::unexpected(message.error());
    std::int64_t seq = 0;
    std::from_chars(seq_text.data(), seq_text.data() + seq_text.size(), seq);
    // Published before the split: the same message at the same sequence on both sides.
    const Record* same = seq > 0 ? FindLive(store, MessageKey(ring, seq), ctx) : nullptr;
    if (same != nullptr && same->value() == message->value) {
      ++discarded;
      continue;
    }
    ++m.tail;
    if (m.head > m.tail) m.head = m.tail;
    WriteOptions options;
    options.ttl_ms = message->ttl_left_ms;
    options.max_idle_ms = 0;
    WriteLive(store, MessageKey(ring, m.tail), message->value, options, ctx, false, std::nullopt);
    ++out.count;
  }
  if (out.count > 0 || !had_meta) {
    WriteOptions keep;
    keep.ttl_ms = 0;
    keep.max_idle_ms = 0;
    WriteLive(store, meta_key, MetaText(m), keep, ctx, had_meta, std::nullopt);
  }
  out.entries.emplace_back("discarded", std::to_string(discarded));
  return out;
}

base::Result<MapResult> OpRingRead(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  const std::string_view ring = AfterFirstAt(rq.key);
  const std::int64_t from = IntArg(rq, "from", 1);
  const std::int64_t max = std::max<std::int64_t>(1, IntArg(rq, "max", 100));
  RingMeta m;
  if (Record* r = FindLive(store, MetaKey(ring), ctx)) m = ParseMeta(r->value());
  MapResult out;
  out.value = MetaText(m);
  // Messages below head are gone; so are expired ones at its front.
  RingMeta live = m;
  SkipGone(store, ring, live, ctx, m.tail - m.head + 1);
  std::int64_t seq = std::max(from, live.head);
  out.count = live.head;        // the oldest readable sequence (tail + 1 if none)
  out.flag = from < live.head;  // the reader lost [from, head)
  for (; seq <= m.tail && static_cast<std::int64_t>(out.entries.size()) < max; ++seq) {
    if (Record* r = FindLive(store, MessageKey(ring, seq), ctx)) {
      out.entries.emplace_back(std::to_string(seq), std::string(r->value()));
    }
  }
  return out;
}

}  // namespace tessera::map::detail
