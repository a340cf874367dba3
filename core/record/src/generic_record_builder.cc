#include "tessera/record/generic_record.h"

#include <utility>

namespace tessera::record {

GenericRecordBuilder::GenericRecordBuilder(std::string type_name) {
  record_.type_name_ = std::move(type_name);
  record_.fields_.reserve(kReservedFields);  // one allocation for most records, not four
}

GenericRecordBuilder& GenericRecordBuilder::Reserve(std::size_t fields) {
  record_.fields_.reserve(fields);
  return *this;
}

GenericRecordBuilder::GenericRecordBuilder(GenericRecord base) : record_(std::move(base)) {}

GenericRecordBuilder& GenericRecordBuilder::Int32(std::string name, std::int32_t v) {
  return Set(std::move(name), Value(v));
}

GenericRecordBuilder& GenericRecordBuilder::Int64(std::string name, std::int64_t v) {
  return Set(std::move(name), Value(v));
}

GenericRecordBuilder& GenericRecordBuilder::Float64(std::string name, double v) {
  return Set(std::move(name), Value(v));
}

GenericRecordBuilder& GenericRecordBuilder::Bool(std::string name, bool v) {
  return Set(std::move(name), Value(v));
}

GenericRecordBuilder& GenericRecordBuilder::String(std::string name, std::string v) {
  return Set(std::move(name), Value(std::move(v)));
}

GenericRecordBuilder& GenericRecordBuilder::BytesField(std::string name, std::string v) {
  return Set(std::move(name), Value(Bytes{std::move(v)}));
}

GenericRecordBuilder& GenericRecordBuilder::Record(std::string name, GenericRecord v) {
  return Set(std::move(name), Value(std::move(v)));
}

GenericRecordBuilder& GenericRecordBuilder::List(std::string name, std::vector<Value> v) {
  return Set(std::move(name), Value(std::move(v)));
}

GenericRecordBuilder& GenericRecordBuilder::Null(std::string name) {
  return Set(std::move(name), Value());
}

GenericRecordBuilder& GenericRecordBuilder::Set(std::string name, Value v) {
  record_.Set(std::move(name), std::move(v));
  return *this;
}

GenericRecord GenericRecordBuilder::Done() { return std::move(record_); }

}  // namespace tessera::record
