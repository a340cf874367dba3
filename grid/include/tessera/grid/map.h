#pragma once
// Map: a distributed map of byte-string keys and values, with Hazelcast IMap semantics.
// Obtained from Instance::GetMap; the same class serves the embedded member and the client.
//
// TTL (the one rule, see map/map_request.h): a write with options.ttl_ms sets it (0 = never
// expires); a write without uses the map's default TTL; keep_ttl keeps the current expiry.
// An expired entry is never returned; a background sweeper reclaims its memory.
//
// Errors: every call returns base::Result; besides per-operation errors, kTimeout,
// kConnectionFailed/kMemberLeft (client), kShuttingDown.
// Thread-safety: safe to use from many threads at once.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/grid/invoker.h"
#include "tessera/map/map_request.h"
#include "tessera/map/predicate.h"
#include "tessera/record/generic_record.h"

namespace tessera::grid {

using map::ListenerId;
using map::ListenerOptions;
using map::Predicate;
using map::WriteOptions;
using Entries = std::vector<std::pair<std::string, std::string>>;

// Shorthand for WriteOptions with a TTL in milliseconds.
inline WriteOptions WithTtl(base::Millis ttl_ms) {
  WriteOptions o;
  o.ttl_ms = ttl_ms;
  return o;
}

class Map {
 public:
  Map(std::string name, std::shared_ptr<Invoker> invoker);

  const std::string& name() const { return name_; }

  // Stores value; returns the previous value (nullopt if there was none).
  base::Result<std::optional<std::string>> Put(std::string_view key, std::string_view value,
                                               WriteOptions options = {});
  // Stores value without returning the previous one (cheaper).
  base::Result<void> Set(std::string_view key, std::string_view value, WriteOptions options = {});
  base::Result<std::optional<std::string>> Get(std::string_view key);
  // Removes the entry; returns the previous value.
  base::Result<std::optional<std::string>> Remove(std::string_view key);
  // Removes only if the current value equals `expected`; returns whether it did.
  base::Result<bool> Remove(std::string_view key, std::string_view expected);
  // Removes the entry; returns whether it existed.
  base::Result<bool> Delete(std::string_view key);
  base::Result<bool> ContainsKey(std::string_view key);
  // Atomically stores value if the key is absent (or expired). Returns nullopt when it
  // stored, else the existing value (left unchanged).
  base::Result<std::optional<std::string>> PutIfAbsent(std::string_view key, std::string_view value,
                                                       WriteOptions options = {});
  // Replaces only if present; returns the previous value, or nullopt if nothing was replaced.
  base::Result<std::optional<std::string>> Replace(std::string_view key, std::string_view value,
                                                   WriteOptions options = {});
  // Replaces only if the current value equals `expected`; returns whether it did.
  base::Result<bool> Replace(std::string_view key, std::string_view expected,
                             std::string_view value, WriteOptions options = {});
  // Changes the TTL of an existing entry (0 = never expires); returns whether it exists.
  base::Result<bool> SetTtl(std::string_view key, base::Millis ttl_ms);
  // Metadata (expiry, hits, version, ...) of an entry, or nullopt if absent.
  base::Result<std::optional<std::pair<std::string, map::EntryView>>> GetEntryView(
      std::string_view key);

  base::Result<void> PutAll(const Entries& entries, WriteOptions options = {});
  // Values of the keys that exist (missing keys are omitted).
  base::Result<std::map<std::string, std::string>> GetAll(const std::vector<std::string>& keys);
  base::Result<std::int64_t> Size();
  // Removes every entry; returns how many were removed.
  base::Result<std::int64_t> Clear();

  base::Result<std::vector<std::string>> KeySet(const Predicate& predicate = Predicate());
  base::Result<std::vector<std::string>> Values(const Predicate& predicate = Predicate());
  base::Result<Entries> EntrySet(const Predicate& predicate = Predicate());

  // Runs the named entry processor on the member that owns the key, atomically.
  base::Result<record::GenericRecord> ExecuteOnKey(std::string_view key, std::string_view processor,
                                                   const record::GenericRecord& argument = {});
  base::Result<std::vector<std::pair<std::string, record::GenericRecord>>> ExecuteOnKeys(
      const std::vector<std::string>& keys, std::string_view processor,
      const record::GenericRecord& argument = {});
  base::Result<std::vector<std::pair<std::string, record::GenericRecord>>> ExecuteOnEntries(
      std::string_view processor, const record::GenericRecord& argument = {},
      const Predicate& predicate = Predicate());

  base::Result<map::MapStats> Stats();

  base::Result<ListenerId> AddEntryListener(map::EntryListener listener,
                                            ListenerOptions options = {});
  base::Result<bool> RemoveEntryListener(ListenerId id);

  // Asynchronous path (pipelining): any request on this map; `done` runs on an internal
  // thread. request.map_name is filled in.
  void ExecuteAsync(map::MapRequest request, Invoker::Callback done);
  void GetAsync(std::string_view key, Invoker::Callback done);
  void SetAsync(std::string_view key, std::string_view value, WriteOptions options,
                Invoker::Callback done);
  void PutIfAbsentAsync(std::string_view key, std::string_view value, WriteOptions options,
                        Invoker::Callback done);

 private:
  map::MapRequest Request(map::MapOp op, std::string_view key = {}) const;
  base::Result<map::MapResult> Run(map::MapRequest request);

  std::string name_;
  std::shared_ptr<Invoker> invoker_;
};

}  // namespace tessera::grid
