#include "tessera/saga/event.h"

namespace tessera::saga {
namespace {

using base::ErrorCode;
using base::Fail;
using record::FieldType;
using record::GenericRecord;
using record::Value;

auto Bad(const std::string& what) {
  return Fail(ErrorCode::kBadRequest, "not a valid event: " + what);
}

// The field `name` of `record` with type `type`; kBadRequest naming it otherwise.
base::Result<const Value*> Field(const GenericRecord& record, std::string_view name,
                                 FieldType type) {
  const Value* v = record.Find(name);
  if (v == nullptr) {
    return Fail(ErrorCode::kBadRequest,
                "not a valid event: field '" + std::string(name) + "' is missing");
  }
  if (v->type() != type) {
    return Fail(ErrorCode::kBadRequest, "not a valid event: field '" + std::string(name) + "' is " +
                                            std::string(FieldTypeName(v->type())) + ", expected " +
                                            std::string(FieldTypeName(type)));
  }
  return v;
}

}  // namespace

std::string Event::Header(std::string_view name) const {
  for (const auto& [n, value] : headers) {
    if (n == name) return value;
  }
  return {};
}

base::Result<void> ValidateEvent(const Event& e) {
  if (e.id <= 0) {
    return Bad("id " + std::to_string(e.id) +
               " is not positive; give it a cluster-unique id (grid::IdGenerator::Next)");
  }
  if (e.type.empty()) return Bad("type is empty; name what happened, e.g. OrderCreated");
  if (e.key.empty()) {
    return Bad("key is empty; give the ordering key its events share, e.g. the order id");
  }
  if (e.time_ms < 0) return Bad("time " + std::to_string(e.time_ms) + " is negative");
  if (e.attempt < 1) return Bad("attempt " + std::to_string(e.attempt) + " is below 1");
  for (const auto& [name, value] : e.headers) {
    if (name.empty()) return Bad("a header has an empty name");
  }
  return {};
}

record::GenericRecord EventToRecord(const Event& e) {
  std::vector<Value> headers;
  headers.reserve(e.headers.size());
  for (const auto& [name, value] : e.headers) {
    headers.emplace_back(GenericRecord::Build().String("name", name).String("value", value).Done());
  }
  return GenericRecord::Build(std::string(kEventTypeName))
      .Int64("id", e.id)
      .String("type", e.type)
      .String("key", e.key)
      .String("source", e.source)
      .String("correlation", e.correlation_id)
      .String("causation", e.causation_id)
      .Int64("time", e.time_ms)
      .Int32("attempt", e.attempt)
      .List("headers", std::move(headers))
      .Record("payload", e.payload)
      .Done();
}

std::string EncodeEvent(const Event& event) { return EventToRecord(event).Encode(); }

base::Result<Event> EventFromRecord(const GenericRecord& record) {
  if (record.type_name() != kEventTypeName) {
    return Fail(ErrorCode::kBadRequest, "not a valid event: a record of type '" +
                                            record.type_name() + "', expected '" +
                                            std::string(kEventTypeName) + "'");
  }
  Event e;
  auto int64 = [&](std::string_view name, std::int64_t& out) -> base::Result<void> {
    auto v = Field(record, name, FieldType::kInt64);
    if (!v) return std::unexpected(v.error());
    out = (*v)->AsInt64();
    return {};
  };
  auto text = [&](std::string_view name, std::string& out) -> base::Result<void> {
    auto v = Field(record, name, FieldType::kString);
    if (!v) return std::unexpected(v.error());
    out = (*v)->AsString();
    return {};
  };
  for (auto r : {int64("id", e.id), text("type", e.type), text("key", e.key),
                 text("source", e.source), text("correlation", e.correlation_id),
                 text("causation", e.causation_id), int64("time", e.time_ms)}) {
    if (!r) return std::unexpected(r.error());
  }
  auto attempt = Field(record, "attempt", FieldType::kInt32);
  if (!attempt) return std::unexpected(attempt.error());
  e.attempt = (*attempt)->AsInt32();
  auto headers = Field(record, "headers", FieldType::kList);
  if (!headers) return std::unexpected(headers.error());
  for (const Value& h : (*headers)->AsList()) {
    if (h.type() != FieldType::kRecord) return Bad("a header is not a {name, value} record");
    auto name = h.AsRecord().GetString("name");
    auto value = h.AsRecord().GetString("value");
    if (!name || !value) return Bad("a header lacks its string name or value");
    e.headers.emplace_back(std::move(*name), std::move(*value));
  }
  auto payload = Field(record, "payload", FieldType::kRecord);
  if (!payload) return std::unexpected(payload.error());
  e.payload = (*payload)->AsRecord();
  if (auto ok = ValidateEvent(e); !ok) return std::unexpected(ok.error());
  return e;
}

base::Result<Event> DecodeEvent(std::string_view bytes) {
  auto record = GenericRecord::Decode(bytes);
  if (!record) {
    return Fail(ErrorCode::kBadRequest, "not a valid event: " + record.error().message());
  }
  return EventFromRecord(*record);
}

}  // namespace tessera::saga
