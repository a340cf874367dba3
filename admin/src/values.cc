// Values are opaque bytes to the grid; the tools guess "record" by trying to decode, which is
// what a person wants to see for records and harmless for text (text never decodes).
#include "tessera/admin/values.h"

#include <vector>

namespace tessera::admin {
namespace {

using base::ErrorCode;
using base::Fail;
using base::Result;
using nlohmann::json;

Result<record::Value> ValueFromJson(const json& j, const std::string& path);

Result<record::GenericRecord> RecordFromJsonObject(const json& object, const std::string& path) {
  record::GenericRecord r;
  if (auto type = object.find("@type"); type != object.end() && type->is_string()) {
    r = record::GenericRecord::Build(type->get<std::string>()).Done();
  }
  for (const auto& [name, field] : object.items()) {
    if (name == "@type") continue;
    auto v = ValueFromJson(field, path.empty() ? name : path + "." + name);
    if (!v) return std::unexpected(v.error());
    r.Set(name, std::move(*v));
  }
  return r;
}

Result<record::Value> ListFromJson(const json& array, const std::string& path) {
  std::vector<record::Value> items;
  for (const auto& item : array) {
    auto v = ValueFromJson(item, path + "[]");
    if (!v) return std::unexpected(v.error());
    items.push_back(std::move(*v));
  }
  return record::Value(std::move(items));
}

Result<record::Value> ValueFromJson(const json& j, const std::string& path) {
  switch (j.type()) {
    case json::value_t::null:
      return record::Value();
    case json::value_t::boolean:
      return record::Value(j.get<bool>());
    case json::value_t::number_integer:
      return record::Value(j.get<std::int64_t>());
    case json::value_t::number_unsigned:
      if (j.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
        return Fail(ErrorCode::kBadRequest, "field '" + path + "' does not fit an int64");
      }
      return record::Value(j.get<std::int64_t>());
    case json::value_t::number_float:
      return record::Value(j.get<double>());
    case json::value_t::string:
      return record::Value(j.get<std::string>());
    case json::value_t::object: {
      auto r = RecordFromJsonObject(j, path);
      if (!r) return std::unexpected(r.error());
      return record::Value(std::move(*r));
    }
    case json::value_t::array:
      return ListFromJson(j, path);
    default:
      return Fail(ErrorCode::kBadRequest, "field '" + path + "' has an unsupported JSON type");
  }
}

std::optional<record::GenericRecord> AsRecord(std::string_view bytes) {
  if (bytes.empty()) return std::nullopt;
  auto r = record::GenericRecord::Decode(bytes);
  if (!r) return std::nullopt;
  return std::move(*r);
}

}  // namespace

std::string ValueToText(std::string_view bytes) {
  if (auto r = AsRecord(bytes)) return r->ToJson();
  return std::string(bytes);
}

json ValueToJson(std::string_view bytes) {
  if (auto r = AsRecord(bytes)) {
    auto parsed = json::parse(r->ToJson(), nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_discarded()) return parsed;
  }
  return json(std::string(bytes));
}

std::string Dump(const json& doc) {
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<record::GenericRecord> RecordFromJson(std::string_view text) {
  auto parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return Fail(ErrorCode::kBadRequest,
                "--record needs VALUE to be a JSON object, e.g. '{\"age\": 31, \"city\": "
                "\"Oslo\"}'");
  }
  return RecordFromJsonObject(parsed, "");
}

}  // namespace tessera::admin
