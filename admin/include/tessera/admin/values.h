#pragma once
// How the tools show stored values and read record values: grid-cli (--record, --json) and the
// member's REST API and console (admin_api.h). A stored value that decodes as
// a GenericRecord is shown as the record's JSON; any other value is shown as its bytes (text).
//
// Thread-safety: stateless functions; safe from any thread.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "tessera/base/error.h"
#include "tessera/record/generic_record.h"

namespace tessera::admin {

// The value for people: record JSON, or the bytes as they are.
std::string ValueToText(std::string_view bytes);
// The value for --json: a JSON object for a record, else a JSON string (invalid UTF-8 is
// replaced when dumped, see Dump()).
nlohmann::json ValueToJson(std::string_view bytes);
// Serializes a document on one line; invalid UTF-8 in strings becomes U+FFFD, never a throw.
std::string Dump(const nlohmann::json& doc);

// Builds a GenericRecord from a JSON object: integers -> int64, other numbers -> float64,
// booleans, strings, null, nested objects -> records, arrays -> lists; "@type" sets the
// record's type name. Errors: kBadRequest if the text is not a JSON object.
base::Result<record::GenericRecord> RecordFromJson(std::string_view text);

}  // namespace tessera::admin
