// Merge entries travel as a fixed 40-byte header (five little-endian int64: version tag, update
// time, hits, TTL left, max idle) followed by the value bytes. The value's kind rides in bits
// 56-57 of the hits word (hits stay below 2^30), so an entry of a release without kinds reads as
// plain.
#include "tessera/map/merge.h"

#include <cstring>

#include "tessera/base/bytes.h"

namespace tessera::map {
namespace {

constexpr std::int64_t kTag = 0x314547'52454d;  // "MERGE1" in little-endian bytes
constexpr std::size_t kHeader = 5 * sizeof(std::int64_t);
constexpr int kKindShift = 56;
constexpr std::int64_t kHitsBits = (std::int64_t{1} << kKindShift) - 1;

void Put(std::string& out, std::int64_t v) { base::PutLE(out, v); }

std::int64_t Get(std::string_view in, std::size_t at) {
  return base::LoadLE<std::int64_t>(in.data() + at);
}

}  // namespace

std::string_view MergePolicyName(MergePolicy policy) {
  switch (policy) {
    case MergePolicy::kPutIfAbsent:
      return "put_if_absent";
    case MergePolicy::kPassThrough:
      return "pass_through";
    case MergePolicy::kHigherHits:
      return "higher_hits";
    case MergePolicy::kLatestUpdate:
      return "latest_update";
  }
  return "unknown";
}

base::Result<MergePolicy> ParseMergePolicy(std::string_view text) {
  for (auto policy : {MergePolicy::kPutIfAbsent, MergePolicy::kPassThrough,
                      MergePolicy::kHigherHits, MergePolicy::kLatestUpdate}) {
    if (text == MergePolicyName(policy)) return policy;
  }
  return base::Fail(base::ErrorCode::kBadRequest,
                    "unknown merge policy '" + std::string(text) +
                        "'; use put_if_absent, pass_through, higher_hits or latest_update");
}

std::string EncodeMergeEntry(const MergeEntry& entry) {
  std::string out;
  out.reserve(kHeader + entry.value.size());
  Put(out, kTag);
  Put(out, entry.update_wall_ms);
  Put(out, (entry.hits & kHitsBits) | (static_cast<std::int64_t>(entry.kind) << kKindShift));
  Put(out, entry.ttl_left_ms);
  Put(out, entry.max_idle_ms);
  out += entry.value;
  return out;
}

base::Result<MergeEntry> DecodeMergeEntry(std::string_view bytes) {
  if (bytes.size() < kHeader || Get(bytes, 0) != kTag) {
    return base::Fail(base::ErrorCode::kBadRequest,
                      "not a merge entry (" + std::to_string(bytes.size()) +
                          " bytes without the merge header); kMergeEntries takes the entries a "
                          "member leaving its cluster exported");
  }
  MergeEntry entry;
  entry.update_wall_ms = Get(bytes, 8);
  const std::int64_t hits = Get(bytes, 16);
  entry.hits = hits & kHitsBits;
  entry.kind = static_cast<ValueKind>((hits >> kKindShift) & 3);
  entry.ttl_left_ms = Get(bytes, 24);
  entry.max_idle_ms = Get(bytes, 32);
  if (entry.ttl_left_ms < 0 || entry.max_idle_ms < 0) {
    return base::Fail(base::ErrorCode::kBadRequest, "merge entry with a negative TTL or max idle");
  }
  entry.value.assign(bytes.substr(kHeader));
  return entry;
}

bool MergeWins(MergePolicy policy, const MergeEntry& merging, bool existing,
               std::int64_t existing_hits, base::Millis existing_update_wall_ms) {
  if (!existing) return true;
  switch (policy) {
    case MergePolicy::kPutIfAbsent:
      return false;
    case MergePolicy::kPassThrough:
      return true;
    case MergePolicy::kHigherHits:
      return merging.hits > existing_hits;
    case MergePolicy::kLatestUpdate:
      return merging.update_wall_ms > existing_update_wall_ms;
  }
  return false;
}

MapRequest MergeBatch::Request() const {
  MapRequest rq;
  rq.op = op;
  rq.map_name = map_name;
  rq.key = key;
  rq.entries = entries;
  rq.keys = keys;
  rq.processor = processor;
  return rq;
}

}  // namespace tessera::map
