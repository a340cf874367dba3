// Map values <-> Cap'n Proto (src/map.capnp). Messages are unpacked flat arrays (one segment
// when the size estimate holds; wire/capnp_io.h). Decoding reads the bytes in place when they
// are word-aligned (else from an aligned copy), with limits proportional to the input (a
// message cannot make the reader do more than a few passes over its own bytes), checks every
// enum code, and turns any kj::Exception into kBadRequest.
#include "tessera/map/map_codec.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "map.capnp.h"
#include "tessera/wire/capnp_io.h"

namespace tessera::map {
namespace {
using base::ErrorCode;
using base::Fail;
constexpr int kNestingLimit = 64;

capnp::Data::Reader ToData(std::string_view s) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(s.data()), s.size());
}
capnp::Text::Reader ToText(const std::string& s) { return capnp::Text::Reader(s.data(), s.size()); }
std::string FromData(capnp::Data::Reader d) {
  return std::string(reinterpret_cast<const char*>(d.begin()), d.size());
}
std::string FromText(capnp::Text::Reader t) { return std::string(t.cStr(), t.size()); }

// Messages are built in tessera::wire::ScratchBuilder (this thread's first segment, sized from the
// bytes the message carries; Cap'n Proto's default 8 KiB first segment, zeroed on every
// message, was a third of a client's CPU time) and leave as one flat copy.
std::string Finish(capnp::MessageBuilder& message) { return tessera::wire::FlatString(message); }

// Reads `bytes` as a message with root T and hands the reader to `convert`, translating
// every failure into kBadRequest "<what>: ...".
template <typename T, typename Out, typename Fn>
base::Result<Out> Read(std::string_view bytes, std::string_view what, Fn convert) {
  const std::string prefix = "not a valid " + std::string(what) + ": ";
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0) {
    return Fail(ErrorCode::kBadRequest,
                prefix + std::to_string(bytes.size()) +
                    " bytes is not a whole, non-zero number of 8-byte words");
  }
  const tessera::wire::AlignedWords aligned(bytes);
  const auto words = aligned.words();
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = words.size() * 4 + 64;
    options.nestingLimit = kNestingLimit;
    capnp::FlatArrayMessageReader reader(words, options);
    if (reader.getEnd() != words.end()) {
      return Fail(ErrorCode::kBadRequest, prefix + "trailing bytes after the message");
    }
    return convert(reader.getRoot<T>());
  } catch (const kj::Exception& e) {
    return Fail(ErrorCode::kBadRequest, prefix + e.getDescription().cStr());
  } catch (const std::bad_alloc&) {
    return Fail(ErrorCode::kBadRequest, prefix + "the message claims more memory than allowed");
  }
}

void OptionsToWire(const WriteOptions& o, wire::WriteOptions::Builder out) {
  out.setHasTtl(o.ttl_ms.has_value());
  out.setTtlMs(o.ttl_ms.value_or(0));
  out.setHasMaxIdle(o.max_idle_ms.has_value());
  out.setMaxIdleMs(o.max_idle_ms.value_or(0));
  out.setKeepTtl(o.keep_ttl);
}

WriteOptions OptionsFromWire(wire::WriteOptions::Reader in) {
  WriteOptions o;
  if (in.getHasTtl()) o.ttl_ms = in.getTtlMs();
  if (in.getHasMaxIdle()) o.max_idle_ms = in.getMaxIdleMs();
  o.keep_ttl = in.getKeepTtl();
  return o;
}

void EntriesToWire(const std::vector<std::pair<std::string, std::string>>& entries,
                   capnp::List<wire::KeyValue>::Builder out) {
  for (unsigned i = 0; i < out.size(); ++i) {
    out[i].setKey(ToData(entries[i].first));
    out[i].setValue(ToData(entries[i].second));
  }
}

std::vector<std::pair<std::string, std::string>> EntriesFromWire(
    capnp::List<wire::KeyValue>::Reader in) {
  std::vector<std::pair<std::string, std::string>> entries;
  entries.reserve(in.size());
  for (auto kv : in) entries.emplace_back(FromData(kv.getKey()), FromData(kv.getValue()));
  return entries;
}

bool ValidOp(std::uint8_t code) {
  return SpecOf(static_cast<MapOp>(code)).scope != OpScope::kUnknown;
}
bool ValidEventType(std::uint8_t code) {
  return EntryEventTypeName(static_cast<EntryEventType>(code)) != "unknown";
}

base::Result<MapRequest> RequestFromWire(wire::MapRequest::Reader in) {
  if (!ValidOp(in.getOp())) {
    return Fail(ErrorCode::kBadRequest, "unknown map operation code " + std::to_string(in.getOp()));
  }
  if (in.getProjection() > static_cast<std::uint8_t>(Projection::kValues)) {
    return Fail(ErrorCode::kBadRequest,
                "unknown projection code " + std::to_string(in.getProjection()));
  }
  // A request's entries (putAll) each need a key. Checked before any is copied: a list of
  // empty entries costs Cap'n Proto nothing per element, and copied it would make a frame of
  // 16 MiB hundreds of megabytes of strings (found in review).
  const auto entries = in.getEntries();
  for (unsigned i = 0; i < entries.size(); ++i) {
    if (entries[i].getKey().size() == 0) {
      return Fail(ErrorCode::kBadRequest, std::string(MapOpName(static_cast<MapOp>(in.getOp()))) +
                                              " needs a key for every entry; entry " +
                                              std::to_string(i) + " of " +
                                              std::to_string(entries.size()) + " has an empty key");
    }
  }
  MapRequest rq;
  rq.op = static_cast<MapOp>(in.getOp());
  rq.map_name = FromText(in.getMapName());
  rq.key = FromData(in.getKey());
  rq.value = FromData(in.getValue());
  rq.expected = FromData(in.getExpected());
  rq.options = OptionsFromWire(in.getOptions());
  rq.entries = EntriesFromWire(in.getEntries());
  for (auto key : in.getKeys()) rq.keys.push_back(FromData(key));
  rq.processor = FromText(in.getProcessor());
  rq.projection = static_cast<Projection>(in.getProjection());
  if (in.getArgument().size() > 0) {
    auto argument = record::GenericRecord::Decode(FromData(in.getArgument()));
    if (!argument) return std::unexpected(argument.error());
    rq.argument = std::move(*argument);
  }
  if (in.getPredicate().size() > 0) {
    auto predicate = Predicate::Decode(FromData(in.getPredicate()));
    if (!predicate) return std::unexpected(predicate.error());
    rq.predicate = std::move(*predicate);
  }
  rq.transaction_id = FromText(in.getTransactionId());
  if (in.hasTransaction()) {
    rq.transaction.reserve(in.getTransaction().size());
    for (auto op : in.getTransaction()) {
      if (op.getCondition() > static_cast<std::uint8_t>(TxCondition::kVersionEquals)) {
        return Fail(ErrorCode::kBadRequest,
                    "unknown transaction condition code " + std::to_string(op.getCondition()));
      }
      if (op.getRequest().getOp() == static_cast<std::uint8_t>(MapOp::kTransact)) {
        return Fail(ErrorCode::kBadRequest, "a transaction cannot contain a transaction");
      }
      auto request = RequestFromWire(op.getRequest());
      if (!request) return std::unexpected(request.error());
      TxOp tx;
      tx.request = std::move(*request);
      tx.condition = static_cast<TxCondition>(op.getCondition());
      tx.condition_value = FromData(op.getConditionValue());
      tx.condition_version = op.getConditionVersion();
      rq.transaction.push_back(std::move(tx));
    }
  }
  return rq;
}

std::size_t RequestBytes(const MapRequest& rq) {
  std::size_t bytes = rq.map_name.size() + rq.key.size() + rq.value.size() + rq.expected.size() +
                      rq.processor.size() + rq.transaction_id.size();
  for (const auto& [k, v] : rq.entries) bytes += k.size() + v.size() + 16;
  for (const auto& k : rq.keys) bytes += k.size() + 8;
  for (const auto& op : rq.transaction) bytes += RequestBytes(op.request) + 160;
  return bytes;
}

void RequestToWire(const MapRequest& rq, wire::MapRequest::Builder out) {
  out.setOp(static_cast<std::uint8_t>(rq.op));
  out.setMapName(ToText(rq.map_name));
  out.setKey(ToData(rq.key));
  out.setValue(ToData(rq.value));
  out.setExpected(ToData(rq.expected));
  OptionsToWire(rq.options, out.initOptions());
  EntriesToWire(rq.entries, out.initEntries(static_cast<unsigned>(rq.entries.size())));
  auto keys = out.initKeys(static_cast<unsigned>(rq.keys.size()));
  for (unsigned i = 0; i < keys.size(); ++i) keys.set(i, ToData(rq.keys[i]));
  out.setProcessor(ToText(rq.processor));
  if (!(rq.argument == record::GenericRecord{})) out.setArgument(ToData(rq.argument.Encode()));
  if (rq.predicate.kind() != Predicate::Kind::kTrue) {
    out.setPredicate(ToData(rq.predicate.Encode()));
  }
  out.setProjection(static_cast<std::uint8_t>(rq.projection));
  if (!rq.transaction.empty()) {
    auto ops = out.initTransaction(static_cast<unsigned>(rq.transaction.size()));
    for (unsigned i = 0; i < ops.size(); ++i) {
      const TxOp& op = rq.transaction[i];
      RequestToWire(op.request, ops[i].initRequest());
      ops[i].setCondition(static_cast<std::uint8_t>(op.condition));
      ops[i].setConditionValue(ToData(op.condition_value));
      ops[i].setConditionVersion(op.condition_version);
    }
  }
  if (!rq.transaction_id.empty()) out.setTransactionId(ToText(rq.transaction_id));
}

void ViewToWire(const EntryView& v, wire::EntryView::Builder out) {
  out.setCreationMs(v.creation_ms);
  out.setLastUpdateMs(v.last_update_ms);
  out.setLastAccessMs(v.last_access_ms);
  out.setExpireAtMs(v.expire_at_ms);
  out.setTtlMs(v.ttl_ms);
  out.setMaxIdleMs(v.max_idle_ms);
  out.setHits(v.hits);
  out.setVersion(v.version);
  out.setKind(static_cast<std::uint8_t>(v.kind));
}

EntryView ViewFromWire(wire::EntryView::Reader in) {
  EntryView v;
  v.creation_ms = in.getCreationMs();
  v.last_update_ms = in.getLastUpdateMs();
  v.last_access_ms = in.getLastAccessMs();
  v.expire_at_ms = in.getExpireAtMs();
  v.ttl_ms = in.getTtlMs();
  v.max_idle_ms = in.getMaxIdleMs();
  v.hits = in.getHits();
  v.version = in.getVersion();
  v.kind = static_cast<ValueKind>(in.getKind() & 3);
  return v;
}

void StatsToWire(const MapStats& s, wire::MapStats::Builder out) {
  out.setEntries(s.entries);
  out.setMemoryBytes(s.memory_bytes);
  out.setHits(s.hits);
  out.setMisses(s.misses);
  out.setGets(s.gets);
  out.setPuts(s.puts);
  out.setRemoves(s.removes);
  out.setExpirations(s.expirations);
  out.setEvictions(s.evictions);
  out.setGetLatencyNs(s.get_latency_ns);
  out.setPutLatencyNs(s.put_latency_ns);
  out.setRemoveLatencyNs(s.remove_latency_ns);
}

MapStats StatsFromWire(wire::MapStats::Reader in) {
  MapStats s;
  s.entries = in.getEntries();
  s.memory_bytes = in.getMemoryBytes();
  s.hits = in.getHits();
  s.misses = in.getMisses();
  s.gets = in.getGets();
  s.puts = in.getPuts();
  s.removes = in.getRemoves();
  s.expirations = in.getExpirations();
  s.evictions = in.getEvictions();
  s.get_latency_ns = in.getGetLatencyNs();
  s.put_latency_ns = in.getPutLatencyNs();
  s.remove_latency_ns = in.getRemoveLatencyNs();
  return s;
}

base::Result<MapResult> ResultFromWire(wire::MapResult::Reader in) {
  MapResult r;
  if (in.getHasValue()) r.value = FromData(in.getValue());
  r.flag = in.getFlag();
  r.count = in.getCount();
  r.entries = EntriesFromWire(in.getEntries());
  if (in.getHasProcessorResult()) {
    auto decoded = record::GenericRecord::Decode(FromData(in.getProcessorResult()));
    if (!decoded) return std::unexpected(decoded.error());
    r.processor_result = std::move(*decoded);
  }
  for (auto kr : in.getProcessorResults()) {
    auto decoded = record::GenericRecord::Decode(FromData(kr.getRecord()));
    if (!decoded) return std::unexpected(decoded.error());
    r.processor_results.emplace_back(FromData(kr.getKey()), std::move(*decoded));
  }
  if (in.getHasView()) r.view = ViewFromWire(in.getView());
  r.stats = StatsFromWire(in.getStats());
  if (in.hasResults()) {
    r.results.reserve(in.getResults().size());
    for (auto part : in.getResults()) {
      auto decoded = ResultFromWire(part);
      if (!decoded) return std::unexpected(decoded.error());
      r.results.push_back(std::move(*decoded));
    }
  }
  if (in.getHasConflict()) {
    auto c = in.getConflict();
    r.conflict = TxConflict{c.getIndex(), FromText(c.getMapName()), FromData(c.getKey()),
                            FromText(c.getFound())};
  }
  return r;
}

std::size_t ResultBytes(const MapResult& r) {
  std::size_t bytes = r.value ? r.value->size() : 0;
  for (const auto& [k, v] : r.entries) bytes += k.size() + v.size() + 16;
  bytes += r.processor_results.size() * 64;
  for (const auto& part : r.results) bytes += ResultBytes(part) + 256;
  return bytes;
}

// `stored`: for EncodeStoredResult, which sets MapResult.stored in every struct.
void ResultToWire(const MapResult& r, wire::MapResult::Builder out, bool stored = false) {
  if (stored) out.setStored(true);
  out.setHasValue(r.value.has_value());
  if (r.value) out.setValue(ToData(*r.value));
  out.setFlag(r.flag);
  out.setCount(r.count);
  // An empty list is left unset: a reader sees an unset list as empty, and an unset pointer
  // lets a canonical encoding (EncodeStoredResult) end the struct before it.
  if (!r.entries.empty()) {
    EntriesToWire(r.entries, out.initEntries(static_cast<unsigned>(r.entries.size())));
  }
  out.setHasProcessorResult(r.processor_result.has_value());
  if (r.processor_result) out.setProcessorResult(ToData(r.processor_result->Encode()));
  if (!r.processor_results.empty()) {
    auto results = out.initProcessorResults(static_cast<unsigned>(r.processor_results.size()));
    for (unsigned i = 0; i < results.size(); ++i) {
      results[i].setKey(ToData(r.processor_results[i].first));
      results[i].setRecord(ToData(r.processor_results[i].second.Encode()));
    }
  }
  out.setHasView(r.view.has_value());
  if (r.view) ViewToWire(*r.view, out.initView());
  // Only stats replies carry stats: an unset struct reads back as zeros, and skipping it
  // saves 104 bytes on every other reply (and in every transaction id marker).
  if (!(r.stats == MapStats{})) StatsToWire(r.stats, out.initStats());
  if (!r.results.empty()) {
    auto parts = out.initResults(static_cast<unsigned>(r.results.size()));
    for (unsigned i = 0; i < parts.size(); ++i) ResultToWire(r.results[i], parts[i], stored);
  }
  out.setHasConflict(r.conflict.has_value());
  if (r.conflict) {
    auto c = out.initConflict();
    c.setIndex(r.conflict->index);
    c.setMapName(ToText(r.conflict->map_name));
    c.setKey(ToData(r.conflict->key));
    c.setFound(ToText(r.conflict->found));
  }
}
}  // namespace

std::string EncodeRequest(const MapRequest& rq) {
  tessera::wire::ScratchBuilder scratch(RequestBytes(rq));
  capnp::MessageBuilder& message = scratch.message();
  RequestToWire(rq, message.initRoot<wire::MapRequest>());
  return Finish(message);
}

base::Result<MapRequest> DecodeRequest(std::string_view bytes) {
  return Read<wire::MapRequest, MapRequest>(bytes, "map request", &RequestFromWire);
}

std::string EncodeResult(const MapResult& r) {
  tessera::wire::ScratchBuilder scratch(ResultBytes(r));
  capnp::MessageBuilder& message = scratch.message();
  ResultToWire(r, message.initRoot<wire::MapResult>());
  return Finish(message);
}

std::string EncodeStoredResult(const MapResult& r) {
  tessera::wire::ScratchBuilder scratch(ResultBytes(r));
  capnp::MessageBuilder& message = scratch.message();
  ResultToWire(r, message.initRoot<wire::MapResult>(), /*stored=*/true);
  return tessera::wire::CanonicalFlatString(message);
}

base::Result<MapResult> DecodeResult(std::string_view bytes) {
  return Read<wire::MapResult, MapResult>(bytes, "map result", &ResultFromWire);
}

std::string EncodeEvent(const EntryEvent& e) {
  tessera::wire::ScratchBuilder scratch(e.key.size() + (e.value ? e.value->size() : 0) +
                                        (e.old_value ? e.old_value->size() : 0));
  capnp::MessageBuilder& message = scratch.message();
  auto out = message.initRoot<wire::EntryEvent>();
  out.setMapName(ToText(e.map_name));
  out.setType(static_cast<std::uint8_t>(e.type));
  out.setKey(ToData(e.key));
  out.setHasValue(e.value.has_value());
  if (e.value) out.setValue(ToData(*e.value));
  out.setHasOldValue(e.old_value.has_value());
  if (e.old_value) out.setOldValue(ToData(*e.old_value));
  out.setPartitionId(e.partition_id);
  return Finish(message);
}

base::Result<EntryEvent> DecodeEvent(std::string_view bytes) {
  return Read<wire::EntryEvent, EntryEvent>(
      bytes, "entry event", [](wire::EntryEvent::Reader in) -> base::Result<EntryEvent> {
        if (!ValidEventType(in.getType())) {
          return Fail(ErrorCode::kBadRequest,
                      "unknown entry event type " + std::to_string(in.getType()));
        }
        EntryEvent e;
        e.map_name = FromText(in.getMapName());
        e.type = static_cast<EntryEventType>(in.getType());
        e.key = FromData(in.getKey());
        if (in.getHasValue()) e.value = FromData(in.getValue());
        if (in.getHasOldValue()) e.old_value = FromData(in.getOldValue());
        e.partition_id = in.getPartitionId();
        return e;
      });
}

std::string EncodeListenerOptions(const ListenerOptions& o) {
  tessera::wire::ScratchBuilder scratch(64);
  capnp::MessageBuilder& message = scratch.message();
  auto out = message.initRoot<wire::ListenerOptions>();
  out.setIncludeValues(o.include_values);
  auto types = out.initTypes(static_cast<unsigned>(o.types.size()));
  for (unsigned i = 0; i < types.size(); ++i) {
    types.set(i, static_cast<std::uint8_t>(o.types[i]));
  }
  out.setKey(ToData(o.key));
  return Finish(message);
}

base::Result<ListenerOptions> DecodeListenerOptions(std::string_view bytes) {
  return Read<wire::ListenerOptions, ListenerOptions>(
      bytes, "listener options",
      [](wire::ListenerOptions::Reader in) -> base::Result<ListenerOptions> {
        ListenerOptions o;
        o.include_values = in.getIncludeValues();
        for (auto code : in.getTypes()) {
          if (!ValidEventType(code)) {
            return Fail(ErrorCode::kBadRequest, "unknown entry event type " + std::to_string(code));
          }
          o.types.push_back(static_cast<EntryEventType>(code));
        }
        o.key = FromData(in.getKey());
        return o;
      });
}

std::string EncodeReplicaUpdates(const std::vector<ReplicaUpdate>& updates) {
  std::size_t bytes = 0;
  for (const auto& u : updates) bytes += u.key.size() + u.value.size() + u.map_name.size() + 64;
  tessera::wire::ScratchBuilder scratch(bytes);
  capnp::MessageBuilder& message = scratch.message();
  auto list =
      message.initRoot<wire::ReplicaUpdates>().initUpdates(static_cast<unsigned>(updates.size()));
  for (unsigned i = 0; i < list.size(); ++i) {
    const ReplicaUpdate& u = updates[i];
    auto out = list[i];
    out.setKind(static_cast<std::uint8_t>(u.kind));
    out.setMapName(ToText(u.map_name));
    out.setPartitionId(u.partition_id);
    out.setKey(ToData(u.key));
    out.setValue(ToData(u.value));
    out.setTtlLeftMs(u.ttl_left_ms);
    out.setMaxIdleMs(u.max_idle_ms);
    out.setVersion(u.version);
    out.setUpdateAgeMs(u.update_age_ms);
    out.setHits(u.hits);
    out.setValueKind(static_cast<std::uint8_t>(u.value_kind));
    out.setEntryVersion(u.entry_version);
    out.setDigest(u.digest);
  }
  return Finish(message);
}

base::Result<std::vector<ReplicaUpdate>> DecodeReplicaUpdates(std::string_view bytes) {
  return Read<wire::ReplicaUpdates, std::vector<ReplicaUpdate>>(
      bytes, "replica update list",
      [](wire::ReplicaUpdates::Reader in) -> base::Result<std::vector<ReplicaUpdate>> {
        std::vector<ReplicaUpdate> out;
        out.reserve(in.getUpdates().size());
        for (auto u : in.getUpdates()) {
          if (u.getKind() < 1 || u.getKind() > 9) {
            return Fail(ErrorCode::kBadRequest,
                        "unknown replica update kind " + std::to_string(u.getKind()));
          }
          if (u.getValueKind() >= kValueKindCount) {
            return Fail(ErrorCode::kBadRequest,
                        "unknown value kind " + std::to_string(u.getValueKind()) +
                            " in a replica update; upgrade every member to the same release");
          }
          out.push_back(
              {static_cast<ReplicaUpdate::Kind>(u.getKind()), FromText(u.getMapName()),
               u.getPartitionId(), FromData(u.getKey()), FromData(u.getValue()), u.getTtlLeftMs(),
               u.getMaxIdleMs(), u.getVersion(), std::max<std::int64_t>(0, u.getUpdateAgeMs()),
               std::max<std::int64_t>(0, u.getHits()), static_cast<ValueKind>(u.getValueKind()),
               u.getEntryVersion(), u.getDigest()});
        }
        return out;
      });
}

std::string EncodeReplicaAck(const ReplicaAck& ack) {
  if (ack.stale.empty() && ack.points.empty()) return "";
  tessera::wire::ScratchBuilder scratch(ack.stale.size() * 4 + ack.points.size() * 24 + 32);
  capnp::MessageBuilder& message = scratch.message();
  auto root = message.initRoot<wire::ReplicaAck>();
  auto stale = root.initStale(static_cast<unsigned>(ack.stale.size()));
  for (unsigned i = 0; i < stale.size(); ++i) stale.set(i, ack.stale[i]);
  auto points = root.initPoints(static_cast<unsigned>(ack.points.size()));
  for (unsigned i = 0; i < points.size(); ++i) {
    points[i].setPartitionId(ack.points[i].partition_id);
    points[i].setVersion(ack.points[i].version);
    points[i].setDigest(ack.points[i].digest);
  }
  return Finish(message);
}

base::Result<ReplicaAck> DecodeReplicaAck(std::string_view bytes) {
  if (bytes.empty()) return ReplicaAck{};
  return Read<wire::ReplicaAck, ReplicaAck>(
      bytes, "replica acknowledgement",
      [](wire::ReplicaAck::Reader in) -> base::Result<ReplicaAck> {
        ReplicaAck out;
        for (auto p : in.getStale()) out.stale.push_back(p);
        for (auto p : in.getPoints()) {
          out.points.push_back({p.getPartitionId(), p.getVersion(), p.getDigest()});
        }
        return out;
      });
}

}  // namespace tessera::map
