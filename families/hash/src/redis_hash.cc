// The hash family, MapOp::kRedisKey: Redis hashes as entries of the RESP keyspace, and RENAME
// (the layout and the request are described in redis_hash.h). Every command runs on the key's
// partition owner in one step: it reads the hash, changes what it must (the entry, or a
// spilled hash's fields through OpContext::maps) and each change reaches the backups as the
// state of that record.
#include "tessera/hash/redis_hash.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include "tessera/base/bytes.h"
#include "tessera/map/family.h"
#include "tessera/partition/partitioner.h"

namespace tessera::hash {

using map::EntryEventType;
using map::FindLive;
using map::IntArg;
using map::MapOp;
using map::MapRequest;
using map::MapResult;
using map::OpContext;
using map::Record;
using map::RecordStore;
using map::RemoveLive;
using map::StringArg;
using map::ValueKind;
using map::WriteLive;
using map::WriteLiveKind;
using map::WriteOptions;

std::string HashFieldMap(std::string_view keyspace, std::string_view key) {
  std::string name = "__hash:" + std::to_string(keyspace.size()) + ":";
  name.append(keyspace);
  name.append(key);
  return name;
}

std::optional<std::pair<std::string, std::string>> ParseHashFieldMap(std::string_view name) {
  constexpr std::string_view kPrefix = "__hash:";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  name.remove_prefix(kPrefix.size());
  std::size_t length = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), length);
  if (ec != std::errc() || end == name.data() + name.size() || *end != ':') return std::nullopt;
  name.remove_prefix(static_cast<std::size_t>(end - name.data()) + 1);
  if (length > name.size()) return std::nullopt;
  return std::make_pair(std::string(name.substr(0, length)), std::string(name.substr(length)));
}

std::string EncodeHashFields(const HashFields& fields) {
  std::size_t size = 0;
  for (const auto& [f, v] : fields) size += f.size() + v.size() + 4;
  std::string out;
  out.reserve(size);
  for (const auto& [f, v] : fields) {
    base::PutVarint(out, f.size());
    out.append(f);
    base::PutVarint(out, v.size());
    out.append(v);
  }
  return out;
}

std::optional<HashFields> DecodeHashFields(std::string_view bytes) {
  HashFields fields;
  while (!bytes.empty()) {
    std::string_view f, v;
    if (!base::GetVarintBytes(bytes, f) || !base::GetVarintBytes(bytes, v)) return std::nullopt;
    fields.emplace_back(f, v);
  }
  return fields;
}

namespace {

// The leaving hook for a spilled hash (below): its fields go with it.
void DropHashFields(OpContext& ctx, std::string_view key);

using base::ErrorCode;
using base::Fail;
using Owned = std::vector<std::pair<std::string, std::string>>;

WriteOptions KeepTtl() {
  WriteOptions options;
  options.keep_ttl = true;
  return options;
}

WriteOptions NoExpiry() {
  WriteOptions options;
  options.ttl_ms = 0;
  options.max_idle_ms = 0;
  return options;
}

// Empties a field map: one clear (one replica update) unless a transaction must be able to undo
// it, then field by field.
void ClearFields(RecordStore& side, OpContext& side_ctx) {
  if (side.size() == 0) return;
  if (!side_ctx.maps->undoable()) {
    map::ClearLive(side, side_ctx);
    return;
  }
  std::vector<std::string> keys;
  side.ForEach([&keys](const Record& r) { keys.emplace_back(r.key()); });
  for (const auto& key : keys) {
    if (const Record* r = side.Find(key)) RemoveLive(side, *r, side_ctx, EntryEventType::kRemoved);
  }
}

// One hash as a command finds it.
struct Hash {
  Hash(RecordStore& s, OpContext& c, const std::string& k) : store(s), ctx(c), key(k) {}
  RecordStore& store;
  OpContext& ctx;
  const std::string& key;
  bool exists = false;
  ValueKind kind = ValueKind::kHash;
  Owned fields;  // inline: the fields, in order

  bool spilled() const { return kind == ValueKind::kSpilledHash; }
  const std::string& side_name() {
    if (side_name_.empty()) side_name_ = HashFieldMap(ctx.map_name, key);
    return side_name_;
  }
  std::string side_name_;
  // The field map of a spilled hash (nullptr: none yet and !create).
  RecordStore* Side(bool create) {
    return ctx.maps == nullptr ? nullptr : ctx.maps->Find(side_name(), create);
  }
  OpContext SideContext() { return ctx.maps->ContextFor(side_name()); }

  Owned::iterator FindInline(std::string_view field) {
    return std::find_if(fields.begin(), fields.end(),
                        [field](const auto& fv) { return fv.first == field; });
  }
  // A field's value (nullopt: absent).
  std::optional<std::string> Get(std::string_view field) {
    if (!spilled()) {
      auto it = FindInline(field);
      if (it == fields.end()) return std::nullopt;
      return it->second;
    }
    RecordStore* side = Side(false);
    if (side == nullptr) return std::nullopt;
    OpContext side_ctx = SideContext();
    const Record* r = FindLive(*side, field, side_ctx);
    if (r == nullptr) return std::nullopt;
    return std::string(r->value());
  }
  std::int64_t Length() {
    if (!spilled()) return static_cast<std::int64_t>(fields.size());
    RecordStore* side = Side(false);
    return side == nullptr ? 0 : static_cast<std::int64_t>(side->size());
  }

  bool TooBigInline() const {
    if (ctx.maps == nullptr) return false;
    if (fields.size() > kHashMaxInlineFields) return true;
    return std::any_of(fields.begin(), fields.end(), [](const auto& fv) {
      return fv.first.size() > kHashMaxInlineBytes || fv.second.size() > kHashMaxInlineBytes;
    });
  }

  // Writes the inline fields back (or the spilled form, when they no longer fit; or removes
  // the entry when none is left).
  void SaveInline() {
    if (fields.empty()) {
      if (exists) {
        if (const Record* r = store.Find(key)) RemoveLive(store, *r, ctx, EntryEventType::kRemoved);
      }
      exists = false;
      return;
    }
    if (TooBigInline()) return Spill();
    HashFields views(fields.begin(), fields.end());
    WriteLiveKind(store, key, EncodeHashFields(views), KeepTtl(), ctx, exists, std::nullopt,
                  ValueKind::kHash);
    exists = true;
  }
  void Spill() {
    RecordStore& side = *Side(true);
    OpContext side_ctx = SideContext();
    ClearFields(side, side_ctx);  // what a lost hash of this name may have left
    for (const auto& [f, v] : fields) {
      WriteLive(side, f, v, NoExpiry(), side_ctx, false, std::nullopt);
    }
    fields.clear();
    kind = ValueKind::kSpilledHash;
    Touch();
  }
  // A spilled hash's entry after its fields changed: a new version (WATCH sees the change).
  void Touch() {
    WriteLiveKind(store, key, "", KeepTtl(), ctx, exists, std::nullopt, ValueKind::kSpilledHash);
    exists = true;
  }

  // Sets fields (nx: absent ones only); returns how many were added.
  std::int64_t Set(const std::vector<std::pair<std::string, std::string>>& changes, bool nx) {
    std::int64_t added = 0;
    bool changed = false;
    if (spilled()) {
      RecordStore& side = *Side(true);
      OpContext side_ctx = SideContext();
      for (const auto& [f, v] : changes) {
        const Record* r = FindLive(side, f, side_ctx);
        if (nx && r != nullptr) continue;
        WriteLive(side, f, v, NoExpiry(), side_ctx, r != nullptr, std::nullopt);
        added += r == nullptr ? 1 : 0;
        changed = true;
      }
      if (changed) Touch();
      return added;
    }
    for (const auto& [f, v] : changes) {
      auto it = FindInline(f);
      if (it != fields.end()) {
        if (nx) continue;
        it->second = v;
      } else {
        fields.emplace_back(f, v);
        ++added;
      }
      changed = true;
    }
    if (changed) SaveInline();
    return added;
  }

  std::int64_t Delete(const std::vector<std::string>& names) {
    std::int64_t removed = 0;
    if (!spilled()) {
      for (const auto& f : names) {
        auto it = FindInline(f);
        if (it == fields.end()) continue;
        fields.erase(it);
        ++removed;
      }
      if (removed > 0) SaveInline();
      return removed;
    }
    RecordStore* side = Side(false);
    if (side == nullptr) return 0;
    OpContext side_ctx = SideContext();
    for (const auto& f : names) {
      if (const Record* r = FindLive(*side, f, side_ctx)) {
        RemoveLive(*side, *r, side_ctx, EntryEventType::kRemoved);
        ++removed;
      }
    }
    if (removed == 0) return 0;
    if (side->size() == 0) {
      if (const Record* r = store.Find(key)) RemoveLive(store, *r, ctx, EntryEventType::kRemoved);
      exists = false;
    } else {
      Touch();
    }
    return removed;
  }

  Owned All() {
    if (!spilled()) return fields;
    Owned out;
    RecordStore* side = Side(false);
    if (side == nullptr) return out;
    side->ForEach([&out](const Record& r) { out.emplace_back(r.key(), r.value()); });
    return out;
  }
};

base::Result<Hash> Load(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  Hash h(store, ctx, rq.key);
  Record* r = FindLive(store, rq.key, ctx);
  if (r == nullptr) return h;
  if (auto kind = map::RequireKind(r, {ValueKind::kHash, ValueKind::kSpilledHash}); !kind) {
    return std::unexpected(kind.error());
  }
  if (r->kind() == ValueKind::kSpilledHash && ctx.maps == nullptr) {
    return Fail(ErrorCode::kInternal, "hash '" + rq.key +
                                          "' keeps its fields in another map, which this operation "
                                          "cannot reach (run it through MapService)");
  }
  h.exists = true;
  h.kind = r->kind();
  if (r->kind() == ValueKind::kHash) {
    auto decoded = DecodeHashFields(r->value());
    if (!decoded) {
      return Fail(ErrorCode::kInternal, "hash '" + rq.key + "' holds an unreadable value (" +
                                            std::to_string(r->value().size()) + " bytes)");
    }
    h.fields.assign(decoded->begin(), decoded->end());
  }
  r->RecordRead(ctx.now_ms);
  return h;
}

// As Redis's string2ll: no sign but '-', no leading zeros, no "-0".
bool ParseStrictInt64(std::string_view text, std::int64_t& out) {
  if (text.empty() || text.front() == '+' || text.size() > 20) return false;
  const std::string_view digits = text.front() == '-' ? text.substr(1) : text;
  if (digits.empty() || (digits.front() == '0' && text.size() > 1)) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

base::Result<MapResult> Rename(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  const std::string to = StringArg(rq, "to");
  const bool nx = rq.argument.GetBool("nx").value_or(false);
  MapResult out;
  if (to.empty()) return Fail(ErrorCode::kBadRequest, "rename needs the new key (argument 'to')");
  const partition::Partitioner partitioner(ctx.partition_count);
  if (const auto p = partitioner.PartitionOf(to); p != ctx.partition_id) {
    return Fail(ErrorCode::kBadRequest,
                "the new key is in partition " + std::to_string(p) + ", the key in partition " +
                    std::to_string(ctx.partition_id) +
                    ": a rename keeps a key in its partition (give both keys the same hash tag, "
                    "e.g. {user1}:a and {user1}:b)",
                base::ErrorReason::kCrossPartition);
  }
  const Record* r = FindLive(store, rq.key, ctx);
  if (r == nullptr) return Fail(ErrorCode::kNotFound, "no such key");
  if (r->kind() == ValueKind::kStream) {
    return Fail(ErrorCode::kBadRequest,
                "RENAME of a stream is not supported (its entries live in another partition); "
                "read it into a new stream instead");
  }
  if (to == rq.key) {
    out.flag = !nx;
    return out;
  }
  // Copied before the next lookup, which may remove an expired target (a Record* lives until
  // the store's next change).
  const std::string value(r->value());
  const ValueKind kind = r->kind();
  WriteOptions options;
  options.ttl_ms =
      r->expire_at_ms() == 0 ? 0 : std::max<base::Millis>(1, r->expire_at_ms() - ctx.now_ms);
  options.max_idle_ms = r->max_idle_ms();
  const Record* dest = FindLive(store, to, ctx);
  if (nx && dest != nullptr) return out;
  const bool dest_existed = dest != nullptr;
  if (dest_existed && dest->kind() == ValueKind::kStream) {
    return Fail(ErrorCode::kBadRequest,
                "RENAME onto a stream is not supported (its entries live in another partition); "
                "DEL it first");
  }
  if (dest_existed && dest->kind() == ValueKind::kSpilledHash) DropHashFields(ctx, to);
  if (kind == ValueKind::kSpilledHash && ctx.maps != nullptr) {  // the fields move too
    const std::string from_name = HashFieldMap(ctx.map_name, rq.key);
    const std::string to_name = HashFieldMap(ctx.map_name, to);
    if (RecordStore* from = ctx.maps->Find(from_name, false)) {
      RecordStore& into = *ctx.maps->Find(to_name, true);
      OpContext into_ctx = ctx.maps->ContextFor(to_name);
      ClearFields(into, into_ctx);
      from->ForEach([&into, &into_ctx](const Record& field) {
        WriteLive(into, field.key(), field.value(), NoExpiry(), into_ctx, false, std::nullopt);
      });
    }
  }
  WriteLiveKind(store, to, value, options, ctx, dest_existed, std::nullopt, kind);
  if (const Record* source = store.Find(rq.key)) {  // its field map goes with it
    RemoveLive(store, *source, ctx, EntryEventType::kRemoved);
  }
  out.flag = true;
  return out;
}

void DropHashFields(OpContext& ctx, std::string_view key) {
  if (ctx.maps == nullptr) return;
  const std::string name = HashFieldMap(ctx.map_name, key);
  RecordStore* side = ctx.maps->Find(name, false);
  if (side == nullptr || side->size() == 0) return;
  OpContext side_ctx = ctx.maps->ContextFor(name);
  ClearFields(*side, side_ctx);
}

using KeyCommandFn = base::Result<MapResult> (*)(RecordStore&, const MapRequest&, OpContext&);
using HashCommandFn = base::Result<MapResult> (*)(Hash&, const MapRequest&);

// The keyspace entry of a stream an XADD or XGROUP CREATE made.
base::Result<MapResult> MarkStream(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  MapResult out;
  const Record* r = FindLive(store, rq.key, ctx);
  if (r != nullptr) {
    if (auto kind = map::RequireKind(r, {ValueKind::kStream}); !kind) {
      return std::unexpected(kind.error());
    }
    out.value = std::string(r->value());
    return out;
  }
  const std::int64_t epoch = IntArg(rq, "epoch", 0);
  const std::string value = epoch == 0 ? std::string() : std::to_string(epoch);
  WriteLiveKind(store, rq.key, value, KeepTtl(), ctx, false, std::nullopt, ValueKind::kStream);
  out.flag = true;
  out.value = value;
  return out;
}

// An XADD that made the entry failed: the entry goes again.
base::Result<MapResult> UnmarkStream(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  MapResult out;
  const Record* r = FindLive(store, rq.key, ctx);
  const std::string epoch = std::to_string(IntArg(rq, "epoch", 0));
  if (r != nullptr && r->kind() == ValueKind::kStream && r->value() == epoch) {
    RemoveLive(store, *r, ctx, EntryEventType::kRemoved);
    out.flag = true;
  }
  return out;
}

// Never fails on a key of another kind: the owner's key stays.
base::Result<MapResult> MergeHash(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  auto loaded = Load(store, rq, ctx);
  MapResult out;
  if (loaded) out.count = loaded->Set(rq.entries, /*nx=*/true);
  if (!loaded && !IsWrongKindError(loaded.error())) return std::unexpected(loaded.error());
  out.entries.emplace_back(
      "discarded", std::to_string(static_cast<std::int64_t>(rq.entries.size()) - out.count));
  return out;
}

base::Result<MapResult> HSet(Hash& h, const MapRequest& rq) {
  MapResult out;
  out.count = h.Set(rq.entries, rq.argument.GetBool("nx").value_or(false));
  return out;
}

base::Result<MapResult> HGet(Hash& h, const MapRequest& rq) {
  MapResult out;
  for (const auto& f : rq.keys) {
    if (auto v = h.Get(f)) out.entries.emplace_back(f, std::move(*v));
  }
  return out;
}

base::Result<MapResult> HDel(Hash& h, const MapRequest& rq) {
  MapResult out;
  out.count = h.Delete(rq.keys);
  return out;
}

// hexists and hstrlen.
base::Result<MapResult> HField(Hash& h, const MapRequest& rq) {
  if (rq.keys.size() != 1) return Fail(ErrorCode::kBadRequest, rq.processor + " takes one field");
  MapResult out;
  auto v = h.Get(rq.keys.front());
  out.flag = v.has_value();
  out.count = v ? static_cast<std::int64_t>(v->size()) : 0;
  return out;
}

base::Result<MapResult> HLen(Hash& h, const MapRequest&) {
  MapResult out;
  out.count = h.exists ? h.Length() : 0;
  return out;
}

base::Result<MapResult> HGetAll(Hash& h, const MapRequest&) {
  MapResult out;
  out.entries = h.All();
  return out;
}

base::Result<MapResult> HIncrBy(Hash& h, const MapRequest& rq) {
  if (rq.keys.size() != 1) return Fail(ErrorCode::kBadRequest, "hincrby takes one field");
  const std::int64_t delta = IntArg(rq, "delta", 0);
  std::int64_t current = 0;
  if (auto v = h.Get(rq.keys.front()); v && !ParseStrictInt64(*v, current)) {
    return Fail(ErrorCode::kBadRequest, "hash value is not an integer");
  }
  if ((delta > 0 && current > std::numeric_limits<std::int64_t>::max() - delta) ||
      (delta < 0 && current < std::numeric_limits<std::int64_t>::min() - delta)) {
    return Fail(ErrorCode::kBadRequest, "increment or decrement would overflow");
  }
  MapResult out;
  out.count = current + delta;
  h.Set({{rq.keys.front(), std::to_string(out.count)}}, false);
  return out;
}

// A command on the hash the key holds (a key of another kind: WrongKindError).
template <HashCommandFn F>
base::Result<MapResult> OnHash(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  auto loaded = Load(store, rq, ctx);
  if (!loaded) return std::unexpected(loaded.error());
  return F(*loaded, rq);
}

struct KeyCommand {
  std::string_view name;
  bool writes;  // as MapOpSpec::writes: a quorum map refuses it without its quorum
  KeyCommandFn run;
};

// Every kRedisKey command (redis_hash.h has their contracts).
constexpr KeyCommand kKeyCommands[] = {
    {"hset", true, OnHash<HSet>},
    {"hget", false, OnHash<HGet>},
    {"hdel", true, OnHash<HDel>},
    {"hexists", false, OnHash<HField>},
    {"hstrlen", false, OnHash<HField>},
    {"hlen", false, OnHash<HLen>},
    {"hgetall", false, OnHash<HGetAll>},
    {"hincrby", true, OnHash<HIncrBy>},
    {"rename", true, Rename},
    {"mark_stream", true, MarkStream},
    {"unmark_stream", true, UnmarkStream},
    {"merge", false, MergeHash},  // heals a split, as kMergeEntries
};

const KeyCommand* FindKeyCommand(std::string_view name) {
  for (const auto& c : kKeyCommands) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

base::Result<MapResult> OpRedisKey(RecordStore& store, const MapRequest& rq, OpContext& ctx) {
  if (const KeyCommand* c = FindKeyCommand(rq.processor)) return c->run(store, rq, ctx);
  std::string known;
  for (const auto& c : kKeyCommands) {
    known += known.empty() ? "" : ", ";
    known += c.name;
  }
  return Fail(ErrorCode::kBadRequest, "unknown redisKey command '" + rq.processor +
                                          "' (MapRequest::processor); use one of " + known);
}

}  // namespace

bool RedisKeyCommandWrites(std::string_view command) {
  const auto* c = FindKeyCommand(command);
  return c == nullptr || c->writes;  // an unknown one fails anyway: judged as a write
}

void Register() {
  map::FamilySpec spec;
  spec.name = "hash";
  spec.op = MapOp::kRedisKey;
  spec.run = OpRedisKey;
  spec.writes = [](const MapRequest& request) { return RedisKeyCommandWrites(request.processor); };
  spec.kinds[0] = ValueKind::kHash;
  spec.kinds[1] = ValueKind::kSpilledHash;
  spec.kind_count = 2;
  spec.kind_name = "hash";
  spec.leaving = [](OpContext& ctx, std::string_view key, ValueKind kind, std::string_view) {
    if (kind == ValueKind::kSpilledHash) DropHashFields(ctx, key);
  };
  spec.has_companion = [](ValueKind kind) { return kind == ValueKind::kSpilledHash; };
  spec.companion_map = HashFieldMap;
  spec.companion_owner = ParseHashFieldMap;
  spec.merge_command = "merge";
  map::RegisterFamily(spec);
}

}  // namespace tessera::hash
