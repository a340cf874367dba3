#pragma once
// TypedMap<K, V>: a typed facade over a byte Map. Keys and values are converted by Codec<T>
// at the edge; the stored form is what other clients (and RESP) see:
//   std::string         the bytes themselves
//   std::int64_t        decimal text ("42"), so RESP INCR and typed int64 maps agree
//   record::GenericRecord  GenericRecord::Encode() bytes, readable by predicates/processors
// A stored value that does not decode as V gives kWrongType naming the map and key.
//
// Thread-safety: as Map.

#include <charconv>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tessera/grid/map.h"
#include "tessera/record/generic_record.h"

namespace tessera::grid {

template <typename T>
struct Codec;

template <>
struct Codec<std::string> {
  static std::string Encode(const std::string& v) { return v; }
  static base::Result<std::string> Decode(std::string_view bytes) { return std::string(bytes); }
};

template <>
struct Codec<std::int64_t> {
  static std::string Encode(std::int64_t v) { return std::to_string(v); }
  static base::Result<std::int64_t> Decode(std::string_view bytes) {
    std::int64_t v = 0;
    auto [end, ec] = std::from_chars(bytes.data(), bytes.data() + bytes.size(), v);
    if (ec != std::errc() || end != bytes.data() + bytes.size()) {
      return base::Fail(base::ErrorCode::kWrongType,
                        "stored value is not a decimal int64: '" + std::string(bytes) + "'");
    }
    return v;
  }
};

template <>
struct Codec<record::GenericRecord> {
  static std::string Encode(const record::GenericRecord& v) { return v.Encode(); }
  static base::Result<record::GenericRecord> Decode(std::string_view bytes) {
    auto r = record::GenericRecord::Decode(bytes);
    if (!r) return base::Fail(base::ErrorCode::kWrongType, r.error().message());
    return r;
  }
};

template <typename K, typename V>
class TypedMap {
 public:
  explicit TypedMap(std::shared_ptr<Map> map) : map_(std::move(map)) {}

  Map& raw() { return *map_; }

  base::Result<std::optional<V>> Put(const K& key, const V& value, WriteOptions options = {}) {
    return DecodeOptional(map_->Put(Codec<K>::Encode(key), Codec<V>::Encode(value), options));
  }
  base::Result<void> Set(const K& key, const V& value, WriteOptions options = {}) {
    return map_->Set(Codec<K>::Encode(key), Codec<V>::Encode(value), options);
  }
  base::Result<std::optional<V>> Get(const K& key) {
    return DecodeOptional(map_->Get(Codec<K>::Encode(key)));
  }
  base::Result<std::optional<V>> Remove(const K& key) {
    return DecodeOptional(map_->Remove(Codec<K>::Encode(key)));
  }
  base::Result<bool> Delete(const K& key) { return map_->Delete(Codec<K>::Encode(key)); }
  base::Result<bool> ContainsKey(const K& key) { return map_->ContainsKey(Codec<K>::Encode(key)); }
  base::Result<std::optional<V>> PutIfAbsent(const K& key, const V& value,
                                             WriteOptions options = {}) {
    return DecodeOptional(
        map_->PutIfAbsent(Codec<K>::Encode(key), Codec<V>::Encode(value), options));
  }
  base::Result<std::optional<V>> Replace(const K& key, const V& value, WriteOptions options = {}) {
    return DecodeOptional(map_->Replace(Codec<K>::Encode(key), Codec<V>::Encode(value), options));
  }
  base::Result<bool> Replace(const K& key, const V& expected, const V& value,
                             WriteOptions options = {}) {
    return map_->Replace(Codec<K>::Encode(key), Codec<V>::Encode(expected), Codec<V>::Encode(value),
                         options);
  }
  base::Result<std::int64_t> Size() { return map_->Size(); }

 private:
  static base::Result<std::optional<V>> DecodeOptional(
      base::Result<std::optional<std::string>> raw) {
    if (!raw) return std::unexpected(raw.error());
    if (!raw->has_value()) return std::optional<V>();
    auto v = Codec<V>::Decode(**raw);
    if (!v) return std::unexpected(v.error());
    return std::optional<V>(std::move(*v));
  }

  std::shared_ptr<Map> map_;
};

}  // namespace tessera::grid
