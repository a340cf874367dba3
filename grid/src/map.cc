// Map turns each call into a MapRequest and hands it to the Invoker, so embedded and client
// instances share one implementation of the IMap semantics' surface.
#include "tessera/grid/map.h"

namespace tessera::grid {

using base::Result;
using map::MapOp;
using map::MapRequest;
using map::MapResult;

Map::Map(std::string name, std::shared_ptr<Invoker> invoker)
    : name_(std::move(name)), invoker_(std::move(invoker)) {}

MapRequest Map::Request(MapOp op, std::string_view key) const {
  MapRequest r;
  r.op = op;
  r.map_name = name_;
  r.key = std::string(key);
  return r;
}

Result<MapResult> Map::Run(MapRequest request) { return invoker_->InvokeSync(std::move(request)); }

namespace {
// Maps a result to one of its parts, passing errors through.
template <typename Fn>
auto Project(Result<MapResult> r, Fn fn) -> Result<decltype(fn(std::move(*r)))> {
  if (!r) return std::unexpected(r.error());
  return fn(std::move(*r));
}
}  // namespace

Result<std::optional<std::string>> Map::Put(std::string_view key, std::string_view value,
                                            WriteOptions options) {
  auto req = Request(MapOp::kPut, key);
  req.value = std::string(value);
  req.options = options;
  return Project(Run(std::move(req)), [](MapResult r) { return std::move(r.value); });
}

Result<void> Map::Set(std::string_view key, std::string_view value, WriteOptions options) {
  auto req = Request(MapOp::kSet, key);
  req.value = std::string(value);
  req.options = options;
  auto r = Run(std::move(req));
  if (!r) return std::unexpected(r.error());
  return {};
}

Result<std::optional<std::string>> Map::Get(std::string_view key) {
  return Project(Run(Request(MapOp::kGet, key)), [](MapResult r) { return std::move(r.value); });
}

Result<std::optional<std::string>> Map::Remove(std::string_view key) {
  return Project(Run(Request(MapOp::kRemove, key)), [](MapResult r) { return std::move(r.value); });
}

Result<bool> Map::Remove(std::string_view key, std::string_view expected) {
  auto req = Request(MapOp::kRemoveIfSame, key);
  req.expected = std::string(expected);
  return Project(Run(std::move(req)), [](MapResult r) { return r.flag; });
}

Result<bool> Map::Delete(std::string_view key) {
  return Project(Run(Request(MapOp::kDelete, key)), [](MapResult r) { return r.flag; });
}

Result<bool> Map::ContainsKey(std::string_view key) {
  return Project(Run(Request(MapOp::kContainsKey, key)), [](MapResult r) { return r.flag; });
}

Result<std::optional<std::string>> Map::PutIfAbsent(std::string_view key, std::string_view value,
                                                    WriteOptions options) {
  auto req = Request(MapOp::kPutIfAbsent, key);
  req.value = std::string(value);
  req.options = options;
  return Project(Run(std::move(req)), [](MapResult r) { return std::move(r.value); });
}

Result<std::optional<std::string>> Map::Replace(std::string_view key, std::string_view value,
                                                WriteOptions options) {
  auto req = Request(MapOp::kReplace, key);
  req.value = std::string(value);
  req.options = options;
  return Project(Run(std::move(req)), [](MapResult r) { return std::move(r.value); });
}

Result<bool> Map::Replace(std::string_view key, std::string_view expected, std::string_view value,
                          WriteOptions options) {
  auto req = Request(MapOp::kReplaceIfSame, key);
  req.expected = std::string(expected);
  req.value = std::string(value);
  req.options = options;
  return Project(Run(std::move(req)), [](MapResult r) { return r.flag; });
}

Result<bool> Map::SetTtl(std::string_view key, base::Millis ttl_ms) {
  auto req = Request(MapOp::kSetTtl, key);
  req.options.ttl_ms = ttl_ms;
  return Project(Run(std::move(req)), [](MapResult r) { return r.flag; });
}

Result<std::optional<std::pair<std::string, map::EntryView>>> Map::GetEntryView(
    std::string_view key) {
  return Project(Run(Request(MapOp::kGetEntryView, key)), [](MapResult r) {
    std::optional<std::pair<std::string, map::EntryView>> out;
    if (r.value && r.view) out.emplace(std::move(*r.value), *r.view);
    return out;
  });
}

Result<void> Map::PutAll(const Entries& entries, WriteOptions options) {
  auto req = Request(MapOp::kPutAll);
  req.entries = entries;
  req.options = options;
  auto r = Run(std::move(req));
  if (!r) return std::unexpected(r.error());
  return {};
}

Result<std::map<std::string, std::string>> Map::GetAll(const std::vector<std::string>& keys) {
  auto req = Request(MapOp::kGetAll);
  req.keys = keys;
  return Project(Run(std::move(req)), [](MapResult r) {
    std::map<std::string, std::string> out;
    for (auto& [k, v] : r.entries) out.emplace(std::move(k), std::move(v));
    return out;
  });
}

Result<std::int64_t> Map::Size() {
  return Project(Run(Request(MapOp::kSize)), [](MapResult r) { return r.count; });
}

Result<std::int64_t> Map::Clear() {
  return Project(Run(Request(MapOp::kClear)), [](MapResult r) { return r.count; });
}

Result<std::vector<std::string>> Map::KeySet(const Predicate& predicate) {
  auto req = Request(MapOp::kQuery);
  req.predicate = predicate;
  req.projection = map::Projection::kKeys;
  return Project(Run(std::move(req)), [](MapResult r) {
    std::vector<std::string> out;
    out.reserve(r.entries.size());
    for (auto& e : r.entries) out.push_back(std::move(e.first));
    return out;
  });
}

Result<std::vector<std::string>> Map::Values(const Predicate& predicate) {
  auto req = Request(MapOp::kQuery);
  req.predicate = predicate;
  req.projection = map::Projection::kValues;
  return Project(Run(std::move(req)), [](MapResult r) {
    std::vector<std::string> out;
    out.reserve(r.entries.size());
    for (auto& e : r.entries) out.push_back(std::move(e.second));
    return out;
  });
}

Result<Entries> Map::EntrySet(const Predicate& predicate) {
  auto req = Request(MapOp::kQuery);
  req.predicate = predicate;
  req.projection = map::Projection::kEntries;
  return Project(Run(std::move(req)), [](MapResult r) { return std::move(r.entries); });
}

Result<record::GenericRecord> Map::ExecuteOnKey(std::string_view key, std::string_view processor,
                                                const record::GenericRecord& argument) {
  auto req = Request(MapOp::kExecuteOnKey, key);
  req.processor = std::string(processor);
  req.argument = argument;
  return Project(Run(std::move(req)), [](MapResult r) {
    return r.processor_result ? std::move(*r.processor_result) : record::GenericRecord();
  });
}

Result<std::vector<std::pair<std::string, record::GenericRecord>>> Map::ExecuteOnKeys(
    const std::vector<std::string>& keys, std::string_view processor,
    const record::GenericRecord& argument) {
  auto req = Request(MapOp::kExecuteOnKeys);
  req.keys = keys;
  req.processor = std::string(processor);
  req.argument = argument;
  return Project(Run(std::move(req)), [](MapResult r) { return std::move(r.processor_results); });
}

Result<std::vector<std::pair<std::string, record::GenericRecord>>> Map::ExecuteOnEntries(
    std::string_view processor, const record::GenericRecord& argument, const Predicate& predicate) {
  auto req = Request(MapOp::kExecuteOnEntries);
  req.processor = std::string(processor);
  req.argument = argument;
  req.predicate = predicate;
  return Project(Run(std::move(req)), [](MapResult r) { return std::move(r.processor_results); });
}

Result<map::MapStats> Map::Stats() {
  return Project(Run(Request(MapOp::kStats)), [](MapResult r) { return r.stats; });
}

Result<ListenerId> Map::AddEntryListener(map::EntryListener listener, ListenerOptions options) {
  return invoker_->AddEntryListener(name_, std::move(options), std::move(listener));
}

Result<bool> Map::RemoveEntryListener(ListenerId id) { return invoker_->RemoveEntryListener(id); }

void Map::ExecuteAsync(MapRequest request, Invoker::Callback done) {
  request.map_name = name_;
  invoker_->Invoke(std::move(request), std::move(done));
}

void Map::GetAsync(std::string_view key, Invoker::Callback done) {
  invoker_->InvokeKeyed(MapOp::kGet, name_, key, {}, {}, std::move(done));
}

void Map::SetAsync(std::string_view key, std::string_view value, WriteOptions options,
                   Invoker::Callback done) {
  invoker_->InvokeKeyed(MapOp::kSet, name_, key, value, options, std::move(done));
}

void Map::PutIfAbsentAsync(std::string_view key, std::string_view value, WriteOptions options,
                           Invoker::Callback done) {
  invoker_->InvokeKeyed(MapOp::kPutIfAbsent, name_, key, value, options, std::move(done));
}

}  // namespace tessera::grid
