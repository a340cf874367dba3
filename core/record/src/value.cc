// Value: a tagged union over the field types. Records are boxed behind shared_ptr<const>
// so a Value can nest its enclosing type; the box is immutable, so copies share it safely
// and equality compares the records, never the pointers.
#include "tessera/record/generic_record.h"

#include <string>
#include <utility>

#include "tessera/base/check.h"

namespace tessera::record {

std::string_view FieldTypeName(FieldType type) {
  switch (type) {
    case FieldType::kNull:
      return "null";
    case FieldType::kInt32:
      return "int32";
    case FieldType::kInt64:
      return "int64";
    case FieldType::kFloat64:
      return "float64";
    case FieldType::kBool:
      return "bool";
    case FieldType::kString:
      return "string";
    case FieldType::kBytes:
      return "bytes";
    case FieldType::kRecord:
      return "record";
    case FieldType::kList:
      return "list";
  }
  return "unknown";
}

Value::Value(std::int32_t v) : v_(v) {}
Value::Value(std::int64_t v) : v_(v) {}
Value::Value(double v) : v_(v) {}
Value::Value(bool v) : v_(v) {}
Value::Value(std::string v) : v_(std::move(v)) {}
Value::Value(const char* v) : v_(std::string(v)) {}
Value::Value(Bytes v) : v_(std::move(v)) {}
Value::Value(GenericRecord v)
    : v_(std::shared_ptr<const GenericRecord>(std::make_shared<GenericRecord>(std::move(v)))) {}
Value::Value(std::vector<Value> v) : v_(std::move(v)) {}

FieldType Value::type() const {
  // The variant's alternatives are declared in FieldType order.
  return static_cast<FieldType>(v_.index());
}

namespace {

[[noreturn]] void WrongAccess(FieldType actual, FieldType asked) {
  TESSERA_CHECK(false, "Value is " + std::string(FieldTypeName(actual)) + ", not " +
                           std::string(FieldTypeName(asked)));
  __builtin_unreachable();
}

}  // namespace

std::int32_t Value::AsInt32() const {
  if (type() != FieldType::kInt32) WrongAccess(type(), FieldType::kInt32);
  return std::get<std::int32_t>(v_);
}

std::int64_t Value::AsInt64() const {
  if (type() != FieldType::kInt64) WrongAccess(type(), FieldType::kInt64);
  return std::get<std::int64_t>(v_);
}

double Value::AsFloat64() const {
  if (type() != FieldType::kFloat64) WrongAccess(type(), FieldType::kFloat64);
  return std::get<double>(v_);
}

bool Value::AsBool() const {
  if (type() != FieldType::kBool) WrongAccess(type(), FieldType::kBool);
  return std::get<bool>(v_);
}

const std::string& Value::AsString() const {
  if (type() != FieldType::kString) WrongAccess(type(), FieldType::kString);
  return std::get<std::string>(v_);
}

const Bytes& Value::AsBytes() const {
  if (type() != FieldType::kBytes) WrongAccess(type(), FieldType::kBytes);
  return std::get<Bytes>(v_);
}

const GenericRecord& Value::AsRecord() const {
  if (type() != FieldType::kRecord) WrongAccess(type(), FieldType::kRecord);
  return *std::get<std::shared_ptr<const GenericRecord>>(v_);
}

const std::vector<Value>& Value::AsList() const {
  if (type() != FieldType::kList) WrongAccess(type(), FieldType::kList);
  return std::get<std::vector<Value>>(v_);
}

bool operator==(const Value& a, const Value& b) {
  if (a.type() != b.type()) return false;
  if (a.type() == FieldType::kRecord) return a.AsRecord() == b.AsRecord();
  return a.v_ == b.v_;
}

}  // namespace tessera::record
