#pragma once
// GenericRecord: a self-describing record the grid can read on the server side (like
// Hazelcast's Compact GenericRecord). Named, typed fields; nullable; nested records and
// lists. Values stored in a map as GenericRecords are their Encode() bytes, so predicates
// and entry processors decode them next to the data.
//
// Value type: copyable, movable; thread-compatible (const methods may be called from many
// threads at once; mutation needs exclusive access).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tessera/base/error.h"

namespace tessera::record {

enum class FieldType : std::uint8_t {
  kNull = 0,
  kInt32 = 1,
  kInt64 = 2,
  kFloat64 = 3,
  kBool = 4,
  kString = 5,
  kBytes = 6,
  kRecord = 7,
  kList = 8,
};

// "int64", "string", ... for error messages.
std::string_view FieldTypeName(FieldType type);

class GenericRecord;

// Raw bytes, distinct from a string so the type survives a round trip.
struct Bytes {
  std::string data;
  friend bool operator==(const Bytes&, const Bytes&) = default;
};

// One field value. A list holds Values of any type (usually one type per list).
class Value {
 public:
  Value() = default;  // null
  Value(std::int32_t v);
  Value(std::int64_t v);
  Value(double v);
  Value(bool v);
  Value(std::string v);
  Value(const char* v);
  Value(Bytes v);
  Value(GenericRecord v);
  Value(std::vector<Value> v);

  FieldType type() const;
  bool is_null() const { return type() == FieldType::kNull; }

  // Typed access. REQUIRES: type() is the asked type (else TESSERA_CHECK fails).
  std::int32_t AsInt32() const;
  std::int64_t AsInt64() const;
  double AsFloat64() const;
  bool AsBool() const;
  const std::string& AsString() const;
  const Bytes& AsBytes() const;
  const GenericRecord& AsRecord() const;
  const std::vector<Value>& AsList() const;

  friend bool operator==(const Value& a, const Value& b);

 private:
  // Records are boxed so Value can hold its own enclosing type.
  std::variant<std::monostate, std::int32_t, std::int64_t, double, bool, std::string, Bytes,
               std::shared_ptr<const GenericRecord>, std::vector<Value>>
      v_;
};

struct Field {
  std::string name;
  Value value;
  friend bool operator==(const Field&, const Field&) = default;
};

class GenericRecordBuilder;

class GenericRecord {
 public:
  // An empty record with no type name and no fields.
  GenericRecord() = default;

  // Starts a builder for a record of `type_name` (free text such as "Order"; may be empty).
  static GenericRecordBuilder Build(std::string type_name = "");

  const std::string& type_name() const { return type_name_; }
  const std::vector<Field>& fields() const { return fields_; }

  // The field's value, or nullptr if there is no such field. `path` may be dotted
  // ("customer.address.city") to reach into nested records. Builds no error text: the cheap
  // way to probe an optional field.
  const Value* Find(std::string_view path) const;

  // Typed getters. Errors: kNotFound if there is no such field (message names it);
  // kWrongType if the field has another type (message names both types).
  // Null values are kWrongType too ("field 'x' is null"). Paths may be dotted.
  base::Result<std::int32_t> GetInt32(std::string_view path) const;
  base::Result<std::int64_t> GetInt64(std::string_view path) const;
  base::Result<double> GetFloat64(std::string_view path) const;
  base::Result<bool> GetBool(std::string_view path) const;
  base::Result<std::string> GetString(std::string_view path) const;
  base::Result<GenericRecord> GetRecord(std::string_view path) const;

  // Sets (adds or replaces) a top-level field. Keeps field order: a new field goes last.
  void Set(std::string name, Value value);
  // Sets a field on a dotted path; intermediate records must exist.
  // Errors: kNotFound / kWrongType naming the missing or non-record segment.
  base::Result<void> SetPath(std::string_view path, Value value);
  // Removes a top-level field; returns whether it existed.
  bool Remove(std::string_view name);

  // A builder pre-filled with this record, to derive a modified copy.
  GenericRecordBuilder ToBuilder() const;

  // Cap'n Proto encoding (the bytes stored as a map value). Decode errors: kBadRequest
  // "not a GenericRecord: ..." for bytes that are not a valid encoding.
  std::string Encode() const;
  static base::Result<GenericRecord> Decode(std::string_view bytes);

  // Compact JSON for people and `--json` output: {"@type":"Order","id":7,...}.
  // Bytes render as base64 strings under {"@bytes": "..."}.
  std::string ToJson() const;

  friend bool operator==(const GenericRecord&, const GenericRecord&) = default;

 private:
  friend class GenericRecordBuilder;
  std::string type_name_;
  std::vector<Field> fields_;
};

// Fluent builder: GenericRecord::Build("Order").Int64("id", 7).String("state", "NEW").Done().
class GenericRecordBuilder {
 public:
  explicit GenericRecordBuilder(std::string type_name);  // room for kReservedFields fields
  explicit GenericRecordBuilder(GenericRecord base);
  static constexpr std::size_t kReservedFields = 8;
  // Room for `fields` fields without reallocating (a decoder knows the count).
  GenericRecordBuilder& Reserve(std::size_t fields);

  GenericRecordBuilder& Int32(std::string name, std::int32_t v);
  GenericRecordBuilder& Int64(std::string name, std::int64_t v);
  GenericRecordBuilder& Float64(std::string name, double v);
  GenericRecordBuilder& Bool(std::string name, bool v);
  GenericRecordBuilder& String(std::string name, std::string v);
  GenericRecordBuilder& BytesField(std::string name, std::string v);
  GenericRecordBuilder& Record(std::string name, GenericRecord v);
  GenericRecordBuilder& List(std::string name, std::vector<Value> v);
  GenericRecordBuilder& Null(std::string name);
  // Any value; replaces an existing field of the same name in place.
  GenericRecordBuilder& Set(std::string name, Value v);

  GenericRecord Done();

 private:
  GenericRecord record_;
};

}  // namespace tessera::record
