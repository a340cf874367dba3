// The processor registry and the built-in processors. Built-ins validate their arguments
// first (kBadRequest naming the argument), then the stored value (kWrongType naming the
// field and both types), and only then change the entry, so a failure changes nothing.
#include "tessera/map/entry_processor.h"

#include <charconv>
#include <string>
#include <utility>

namespace tessera::map {
namespace {
using base::ErrorCode;
using base::Fail;
using record::FieldType;
using record::GenericRecord;
using record::Value;

std::string TypeName(FieldType type) { return std::string(record::FieldTypeName(type)); }

// The argument field `name` of type `type` (int64 also accepts int32). nullptr when absent or
// null and !required. Errors: kBadRequest naming the processor, argument and type.
base::Result<const Value*> Argument(const GenericRecord& argument, std::string_view processor,
                                    std::string_view name, FieldType type, bool required) {
  const Value* v = argument.Find(name);
  const std::string what = std::string(processor) + " needs argument field '" + std::string(name) +
                           "' (" + TypeName(type) + ")";
  if (v == nullptr || v->is_null()) {
    if (required) return Fail(ErrorCode::kBadRequest, what + "; it is missing");
    return nullptr;
  }
  const bool int_ok = type == FieldType::kInt64 && v->type() == FieldType::kInt32;
  if (type != FieldType::kNull && v->type() != type && !int_ok) {
    return Fail(ErrorCode::kBadRequest, what + "; it is " + TypeName(v->type()));
  }
  return v;
}

std::int64_t AsInteger(const Value& v) {
  return v.type() == FieldType::kInt32 ? v.AsInt32() : v.AsInt64();
}

base::Result<void> SetField(GenericRecord& record, const std::string& path, Value value) {
  if (path.find('.') == std::string::npos) {
    record.Set(path, std::move(value));
    return {};
  }
  return record.SetPath(path, std::move(value));
}

base::Result<GenericRecord> Increment(MutableEntry& entry, const GenericRecord& argument) {
  auto field = Argument(argument, "increment", "field", FieldType::kString, true);
  if (!field) return std::unexpected(field.error());
  auto delta_arg = Argument(argument, "increment", "delta", FieldType::kInt64, false);
  if (!delta_arg) return std::unexpected(delta_arg.error());
  const std::string& path = (*field)->AsString();
  const std::int64_t delta = *delta_arg != nullptr ? AsInteger(**delta_arg) : 1;
  GenericRecord record;
  if (entry.value()) {
    auto decoded = entry.Record();
    if (!decoded) return std::unexpected(decoded.error());
    record = std::move(*decoded);
  }
  std::int64_t current = 0;
  if (const Value* v = record.Find(path); v != nullptr && !v->is_null()) {
    if (v->type() != FieldType::kInt64) {
      return Fail(ErrorCode::kWrongType, "field '" + path + "' is a " + TypeName(v->type()) +
                                             ", not an int64: increment needs an int64 field");
    }
    current = v->AsInt64();
  }
  std::int64_t next = 0;
  if (__builtin_add_overflow(current, delta, &next)) {
    return Fail(ErrorCode::kWrongType, "incrementing field '" + path + "' (" +
                                           std::to_string(current) + ") by " +
                                           std::to_string(delta) + " overflows int64");
  }
  if (auto ok = SetField(record, path, Value(next)); !ok) return std::unexpected(ok.error());
  entry.SetRecord(record);
  return GenericRecord::Build().Int64("value", next).Done();
}

base::Result<GenericRecord> IncrementRaw(MutableEntry& entry, const GenericRecord& argument) {
  auto delta_arg = Argument(argument, "incrementRaw", "delta", FieldType::kInt64, true);
  if (!delta_arg) return std::unexpected(delta_arg.error());
  const std::int64_t delta = AsInteger(**delta_arg);
  std::int64_t current = 0;
  if (entry.value()) {
    const std::string& text = *entry.value();
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, current);
    if (text.empty() || ec != std::errc() || ptr != end) {
      return Fail(ErrorCode::kWrongType, "value of key '" + std::string(entry.key()) +
                                             "' is not an integer or out of range: "
                                             "incrementRaw needs decimal int64 text");
    }
  }
  std::int64_t next = 0;
  if (__builtin_add_overflow(current, delta, &next)) {
    return Fail(ErrorCode::kWrongType, "increment or decrement of key '" +
                                           std::string(entry.key()) + "' would overflow int64");
  }
  entry.SetValue(std::to_string(next));
  return GenericRecord::Build().Int64("value", next).Done();
}

base::Result<GenericRecord> CompareAndSetField(MutableEntry& entry, const GenericRecord& argument) {
  constexpr std::string_view kName = "compareAndSetField";
  auto field = Argument(argument, kName, "field", FieldType::kString, true);
  if (!field) return std::unexpected(field.error());
  const Value* new_value = argument.Find("value");
  if (new_value == nullptr) {
    return Fail(ErrorCode::kBadRequest,
                "compareAndSetField needs argument field 'value' (the value to set)");
  }
  const Value* expected = argument.Find("expected");
  const std::string& path = (*field)->AsString();
  if (!entry.value()) {  // no entry, no record to compare: nothing is created
    return GenericRecord::Build().Bool("swapped", false).Null("current").Done();
  }
  auto record = entry.Record();
  if (!record) return std::unexpected(record.error());
  const Value* current = record->Find(path);
  const bool current_null = current == nullptr || current->is_null();
  const bool matches = (expected == nullptr || expected->is_null())
                           ? current_null
                           : (!current_null && *current == *expected);
  if (!matches) {
    return GenericRecord::Build()
        .Bool("swapped", false)
        .Set("current", current_null ? Value() : *current)
        .Done();
  }
  if (auto ok = SetField(*record, path, *new_value); !ok) return std::unexpected(ok.error());
  entry.SetRecord(*record);
  return GenericRecord::Build().Bool("swapped", true).Set("current", *new_value).Done();
}

base::Result<GenericRecord> Get(MutableEntry& entry, const GenericRecord& /*argument*/) {
  if (!entry.value()) return GenericRecord{};
  return GenericRecord::Build().BytesField("value", *entry.value()).Done();
}
}  // namespace

base::Result<record::GenericRecord> MutableEntry::Record() const {
  if (!value_) {
    return Fail(ErrorCode::kNotFound, "entry '" + std::string(key_) + "' does not exist");
  }
  auto decoded = GenericRecord::Decode(*value_);
  if (!decoded) {
    return Fail(ErrorCode::kWrongType, "the value of key '" + std::string(key_) +
                                           "' is not a GenericRecord (" +
                                           decoded.error().message() + ")");
  }
  return decoded;
}

void EntryProcessorRegistry::Register(std::string name, EntryProcessor processor) {
  processors_.insert_or_assign(std::move(name), std::move(processor));
}

const EntryProcessor* EntryProcessorRegistry::Find(std::string_view name) const {
  auto it = processors_.find(name);
  return it == processors_.end() ? nullptr : &it->second;
}

void EntryProcessorRegistry::RegisterBuiltins() {
  Register("increment", &Increment);
  Register("incrementRaw", &IncrementRaw);
  Register("compareAndSetField", &CompareAndSetField);
  Register("get", &Get);
}

}  // namespace tessera::map
