// GenericRecord::ToJson: ordered JSON so fields appear in record order. Strings that are not
// valid UTF-8 are rendered with U+FFFD replacements rather than failing; non-finite doubles
// render as null (JSON has no NaN/Infinity).
#include <nlohmann/json.hpp>

#include <string>

#include "tessera/record/generic_record.h"

namespace tessera::record {
namespace {

using Json = nlohmann::ordered_json;

std::string Base64(const std::string& data) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < data.size(); i += 3) {
    std::uint32_t n = (static_cast<std::uint8_t>(data[i]) << 16) |
                      (static_cast<std::uint8_t>(data[i + 1]) << 8) |
                      static_cast<std::uint8_t>(data[i + 2]);
    for (int shift = 18; shift >= 0; shift -= 6) out += kAlphabet[(n >> shift) & 63];
  }
  std::size_t rest = data.size() - i;
  if (rest > 0) {
    std::uint32_t n = static_cast<std::uint8_t>(data[i]) << 16;
    if (rest == 2) n |= static_cast<std::uint8_t>(data[i + 1]) << 8;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += rest == 2 ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

Json RecordToJson(const GenericRecord& record);

Json ValueToJson(const Value& value) {
  switch (value.type()) {
    case FieldType::kNull:
      return nullptr;
    case FieldType::kInt32:
      return value.AsInt32();
    case FieldType::kInt64:
      return value.AsInt64();
    case FieldType::kFloat64:
      return value.AsFloat64();
    case FieldType::kBool:
      return value.AsBool();
    case FieldType::kString:
      return value.AsString();
    case FieldType::kBytes:
      return Json{{"@bytes", Base64(value.AsBytes().data)}};
    case FieldType::kRecord:
      return RecordToJson(value.AsRecord());
    case FieldType::kList: {
      Json list = Json::array();
      for (const Value& item : value.AsList()) list.push_back(ValueToJson(item));
      return list;
    }
  }
  return nullptr;
}

Json RecordToJson(const GenericRecord& record) {
  Json out = Json::object();
  if (!record.type_name().empty()) out["@type"] = record.type_name();
  for (const Field& field : record.fields()) out[field.name] = ValueToJson(field.value);
  return out;
}

}  // namespace

std::string GenericRecord::ToJson() const {
  return RecordToJson(*this).dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace tessera::record
