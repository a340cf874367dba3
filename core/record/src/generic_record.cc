// GenericRecord field access. Dotted paths always split on '.', so a field whose name
// contains a dot is reachable only through fields(). Nested records are immutable boxes
// inside Value, so SetPath rebuilds the chain of records along the path (copy-on-write).
#include "tessera/record/generic_record.h"

#include <string>
#include <utility>

namespace tessera::record {
namespace {

std::string Quote(std::string_view s) { return "'" + std::string(s) + "'"; }

const Value* FindTopLevel(const std::vector<Field>& fields, std::string_view name) {
  for (const Field& field : fields) {
    if (field.name == name) return &field.value;
  }
  return nullptr;
}

// Resolves `path` to its value or explains which segment is missing or not a record.
base::Result<const Value*> Lookup(const GenericRecord& record, std::string_view path) {
  const GenericRecord* current = &record;
  std::size_t start = 0;
  while (true) {
    std::size_t dot = path.find('.', start);
    std::string_view segment =
        path.substr(start, dot == std::string_view::npos ? dot : dot - start);
    const Value* value = FindTopLevel(current->fields(), segment);
    if (value == nullptr) {
      std::string where =
          start == 0 ? ""
                     : " (no " + Quote(segment) + " in " + Quote(path.substr(0, start - 1)) + ")";
      return base::Fail(base::ErrorCode::kNotFound, "field " + Quote(path) + " not found" + where);
    }
    if (dot == std::string_view::npos) return value;
    if (value->type() != FieldType::kRecord) {
      return base::Fail(base::ErrorCode::kWrongType,
                        "field " + Quote(path.substr(0, dot)) + " is " +
                            std::string(FieldTypeName(value->type())) +
                            ", not a record: cannot read " + Quote(path));
    }
    current = &value->AsRecord();
    start = dot + 1;
  }
}

// The value at `path` if it has type `want`, else kNotFound/kWrongType.
base::Result<const Value*> LookupTyped(const GenericRecord& record, std::string_view path,
                                       FieldType want) {
  auto value = Lookup(record, path);
  if (!value) return value;
  FieldType actual = (*value)->type();
  if (actual == want) return value;
  std::string detail =
      actual == FieldType::kNull ? " is null" : " is " + std::string(FieldTypeName(actual));
  return base::Fail(base::ErrorCode::kWrongType,
                    "field " + Quote(path) + detail + ", not " + std::string(FieldTypeName(want)));
}

base::Result<void> SetPathIn(GenericRecord& record, std::string_view full_path, std::size_t start,
                             Value value) {
  std::size_t dot = full_path.find('.', start);
  if (dot == std::string_view::npos) {
    record.Set(std::string(full_path.substr(start)), std::move(value));
    return {};
  }
  std::string_view segment = full_path.substr(start, dot - start);
  const Value* nested = FindTopLevel(record.fields(), segment);
  if (nested == nullptr) {
    return base::Fail(base::ErrorCode::kNotFound, "cannot set " + Quote(full_path) + ": field " +
                                                      Quote(full_path.substr(0, dot)) +
                                                      " does not exist");
  }
  if (nested->type() != FieldType::kRecord) {
    return base::Fail(base::ErrorCode::kWrongType, "cannot set " + Quote(full_path) + ": field " +
                                                       Quote(full_path.substr(0, dot)) + " is " +
                                                       std::string(FieldTypeName(nested->type())) +
                                                       ", not a record");
  }
  GenericRecord copy = nested->AsRecord();
  auto result = SetPathIn(copy, full_path, dot + 1, std::move(value));
  if (!result) return result;
  record.Set(std::string(segment), Value(std::move(copy)));
  return {};
}

}  // namespace

GenericRecordBuilder GenericRecord::Build(std::string type_name) {
  return GenericRecordBuilder(std::move(type_name));
}

const Value* GenericRecord::Find(std::string_view path) const {
  // Lookup's walk without its error texts: operations probe optional fields on every call.
  const GenericRecord* current = this;
  while (true) {
    const std::size_t dot = path.find('.');
    const Value* value = FindTopLevel(current->fields(), path.substr(0, dot));
    if (value == nullptr || dot == std::string_view::npos) return value;
    if (value->type() != FieldType::kRecord) return nullptr;
    current = &value->AsRecord();
    path.remove_prefix(dot + 1);
  }
}

base::Result<std::int32_t> GenericRecord::GetInt32(std::string_view path) const {
  auto value = LookupTyped(*this, path, FieldType::kInt32);
  if (!value) return std::unexpected(value.error());
  return (*value)->AsInt32();
}

base::Result<std::int64_t> GenericRecord::GetInt64(std::string_view path) const {
  auto value = LookupTyped(*this, path, FieldType::kInt64);
  if (!value) return std::unexpected(value.error());
  return (*value)->AsInt64();
}

base::Result<double> GenericRecord::GetFloat64(std::string_view path) const {
  auto value = LookupTyped(*this, path, FieldType::kFloat64);
  if (!value) return std::unexpected(value.error());
  return (*value)->AsFloat64();
}

base::Result<bool> GenericRecord::GetBool(std::string_view path) const {
  auto value = LookupTyped(*this, path, FieldType::kBool);
  if (!value) return std::unexpected(value.error());
  return (*value)->AsBool();
}

base::Result<std::string> GenericRecord::GetString(std::string_view path) const {
  auto value = LookupTyped(*this, path, FieldType::kString);
  if (!value) return std::unexpected(value.error());
  return (*value)->AsString();
}

base::Result<GenericRecord> GenericRecord::GetRecord(std::string_view path) const {
  auto value = LookupTyped(*this, path, FieldType::kRecord);
  if (!value) return std::unexpected(value.error());
  return (*value)->AsRecord();
}

void GenericRecord::Set(std::string name, Value value) {
  for (Field& field : fields_) {
    if (field.name == name) {
      field.value = std::move(value);
      return;
    }
  }
  fields_.push_back(Field{std::move(name), std::move(value)});
}

base::Result<void> GenericRecord::SetPath(std::string_view path, Value value) {
  return SetPathIn(*this, path, 0, std::move(value));
}

bool GenericRecord::Remove(std::string_view name) {
  for (auto it = fields_.begin(); it != fields_.end(); ++it) {
    if (it->name == name) {
      fields_.erase(it);
      return true;
    }
  }
  return false;
}

GenericRecordBuilder GenericRecord::ToBuilder() const { return GenericRecordBuilder(*this); }

}  // namespace tessera::record
