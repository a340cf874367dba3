#pragma once
// Entry processors: named functions registered on the member that run atomically on the
// partition's shard with one entry. A processor may read the entry, set its value, set its
// TTL, or delete it, and returns a GenericRecord to the caller.
//
// Built-ins (registered by RegisterBuiltins):
//   "increment"          argument {field: string, delta: int64 (default 1)}; value must be a
//                        GenericRecord (absent entry: a new record); the int64 field += delta.
//                        An absent field starts at 0. Returns {value: int64 (new)}.
//                        The field of another type -> kWrongType naming both types.
//   "incrementRaw"       value is decimal text (RESP INCR): argument {delta: int64}; absent
//                        = 0; returns {value: int64}; non-integer or overflow -> kWrongType.
//   "compareAndSetField" argument {field, expected: Value, value: Value}; if the record's
//                        field equals `expected` (null expected matches a missing/null field),
//                        sets it to `value`. Returns {swapped: bool, current: Value}.
//   "get"                returns {value: bytes} or {} when absent (for tests/tools).
//
// Thread-safety: Register before the member starts serving; lookups are then read-only and
// safe from any thread.

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "tessera/base/clock.h"
#include "tessera/base/error.h"
#include "tessera/record/generic_record.h"

namespace tessera::map {

// The entry a processor works on. Changes are applied when the processor returns without
// error; an error leaves the entry untouched.
class MutableEntry {
 public:
  MutableEntry(std::string_view key, std::optional<std::string> value)
      : key_(key), value_(std::move(value)) {}

  std::string_view key() const { return key_; }
  // The current value bytes, or nullopt if the entry does not exist.
  const std::optional<std::string>& value() const { return value_; }
  // The value decoded as a GenericRecord. Errors: kNotFound if absent, kWrongType if the
  // value is not a GenericRecord.
  base::Result<record::GenericRecord> Record() const;

  void SetValue(std::string value) {
    value_ = std::move(value);
    changed_ = true;
    deleted_ = false;
  }
  void SetRecord(const record::GenericRecord& r) { SetValue(r.Encode()); }
  // ttl_ms: >0 lifetime from now, 0 never expires. Applies with the value change.
  void SetTtl(base::Millis ttl_ms) { ttl_ms_ = ttl_ms; }
  void Delete() {
    value_.reset();
    deleted_ = true;
    changed_ = true;
  }

  bool changed() const { return changed_; }
  bool deleted() const { return deleted_; }
  const std::optional<base::Millis>& ttl_ms() const { return ttl_ms_; }

 private:
  std::string_view key_;
  std::optional<std::string> value_;
  std::optional<base::Millis> ttl_ms_;
  bool changed_ = false;
  bool deleted_ = false;
};

using EntryProcessor =
    std::function<base::Result<record::GenericRecord>(MutableEntry&, const record::GenericRecord&)>;

class EntryProcessorRegistry {
 public:
  // Replaces an existing processor of the same name.
  void Register(std::string name, EntryProcessor processor);
  // nullptr if not registered.
  const EntryProcessor* Find(std::string_view name) const;
  // Registers the built-ins listed above.
  void RegisterBuiltins();

 private:
  std::map<std::string, EntryProcessor, std::less<>> processors_;
};

}  // namespace tessera::map
