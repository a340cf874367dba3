// GenericRecord <-> Cap'n Proto (src/record.capnp). Encode() is an unpacked single-segment
// message as written by capnp::messageToFlatArray: the stored bytes are word-aligned and
// readable in place, and packing is left to the transport/storage layer.
//
// Decode() treats its input as hostile (it reads map values and predicate bytes sent by
// clients): the traversal limit is proportional to the input size, so a message cannot
// make the reader do more work than a few passes over its own bytes; the nesting limit
// bounds recursion (kMaxNestingLimit allows about 40 levels of nested records); any
// kj::Exception becomes kBadRequest.
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "record.capnp.h"
#include "tessera/record/generic_record.h"
#include "tessera/wire/capnp_io.h"

namespace tessera::record {
namespace {

constexpr int kMaxNestingLimit = 128;

// Explicit size: strings may hold NUL bytes, which a c_str() conversion would cut off.
capnp::Text::Reader ToText(const std::string& s) { return capnp::Text::Reader(s.data(), s.size()); }

void ValueToWire(const Value& value, wire::Value::Builder out);

void RecordToWire(const GenericRecord& record, wire::Record::Builder out) {
  out.setTypeName(ToText(record.type_name()));
  auto fields = out.initFields(static_cast<unsigned>(record.fields().size()));
  for (unsigned i = 0; i < fields.size(); ++i) {
    const Field& field = record.fields()[i];
    fields[i].setName(ToText(field.name));
    ValueToWire(field.value, fields[i].initValue());
  }
}

void ValueToWire(const Value& value, wire::Value::Builder out) {
  switch (value.type()) {
    case FieldType::kNull:
      out.setNull();
      return;
    case FieldType::kInt32:
      out.setInt32(value.AsInt32());
      return;
    case FieldType::kInt64:
      out.setInt64(value.AsInt64());
      return;
    case FieldType::kFloat64:
      out.setFloat64(value.AsFloat64());
      return;
    case FieldType::kBool:
      out.setBool(value.AsBool());
      return;
    case FieldType::kString:
      out.setString(ToText(value.AsString()));
      return;
    case FieldType::kBytes: {
      const std::string& data = value.AsBytes().data;
      out.setBytes(kj::arrayPtr(reinterpret_cast<const kj::byte*>(data.data()), data.size()));
      return;
    }
    case FieldType::kRecord:
      RecordToWire(value.AsRecord(), out.initRecord());
      return;
    case FieldType::kList: {
      const std::vector<Value>& items = value.AsList();
      auto list = out.initList(static_cast<unsigned>(items.size()));
      for (unsigned i = 0; i < list.size(); ++i) ValueToWire(items[i], list[i]);
      return;
    }
  }
}

std::string ToStdString(capnp::Text::Reader text) { return std::string(text.cStr(), text.size()); }

// Throws kj::Exception (caught by Decode) for malformed input.
GenericRecord RecordFromWire(wire::Record::Reader in);

Value ValueFromWire(wire::Value::Reader in) {
  switch (in.which()) {
    case wire::Value::NULL_:
      return Value();
    case wire::Value::INT32:
      return Value(in.getInt32());
    case wire::Value::INT64:
      return Value(static_cast<std::int64_t>(in.getInt64()));
    case wire::Value::FLOAT64:
      return Value(in.getFloat64());
    case wire::Value::BOOL:
      return Value(in.getBool());
    case wire::Value::STRING:
      return Value(ToStdString(in.getString()));
    case wire::Value::BYTES: {
      auto data = in.getBytes();
      return Value(Bytes{std::string(reinterpret_cast<const char*>(data.begin()), data.size())});
    }
    case wire::Value::RECORD:
      return Value(RecordFromWire(in.getRecord()));
    case wire::Value::LIST: {
      std::vector<Value> items;
      auto list = in.getList();
      items.reserve(list.size());
      for (auto item : list) items.push_back(ValueFromWire(item));
      return Value(std::move(items));
    }
  }
  KJ_FAIL_REQUIRE("unknown value type", static_cast<unsigned>(in.which()));
}

GenericRecord RecordFromWire(wire::Record::Reader in) {
  GenericRecordBuilder builder(ToStdString(in.getTypeName()));
  auto fields = in.getFields();  // once: each read of a pointer counts against the limit
  builder.Reserve(fields.size());
  for (auto field : fields) {
    builder.Set(ToStdString(field.getName()), ValueFromWire(field.getValue()));
  }
  return builder.Done();
}

// About how many bytes a record's texts and blobs take, plus room for its structure: the
// size of the builder's first segment, so most records are built in one segment.
std::size_t PayloadBytes(const GenericRecord& record);

std::size_t PayloadBytes(const Value& value) {
  switch (value.type()) {
    case FieldType::kString:
      return value.AsString().size() + 8;
    case FieldType::kBytes:
      return value.AsBytes().data.size() + 8;
    case FieldType::kRecord:
      return PayloadBytes(value.AsRecord());
    case FieldType::kList: {
      std::size_t bytes = 8;
      for (const auto& item : value.AsList()) bytes += 24 + PayloadBytes(item);
      return bytes;
    }
    default:
      return 0;
  }
}

std::size_t PayloadBytes(const GenericRecord& record) {
  std::size_t bytes = record.type_name().size() + 32;
  for (const Field& field : record.fields()) {
    bytes += field.name.size() + 8 + 32 + PayloadBytes(field.value);
  }
  return bytes;
}

base::Result<GenericRecord> DecodeWords(kj::ArrayPtr<const capnp::word> words) {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = words.size() * 4 + 64;
  options.nestingLimit = kMaxNestingLimit;
  capnp::FlatArrayMessageReader reader(words, options);
  if (reader.getEnd() != words.end()) {
    return base::Fail(base::ErrorCode::kBadRequest,
                      "not a GenericRecord: trailing bytes after the message");
  }
  return RecordFromWire(reader.getRoot<wire::Record>());
}

}  // namespace

std::string GenericRecord::Encode() const {
  // Built in this thread's scratch segment when it fits (no allocation, one segment), then
  // copied once into the string.
  tessera::wire::ScratchBuilder builder(PayloadBytes(*this));
  RecordToWire(*this, builder.message().initRoot<wire::Record>());
  return tessera::wire::FlatString(builder.message());
}

base::Result<GenericRecord> GenericRecord::Decode(std::string_view bytes) {
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0) {
    return base::Fail(base::ErrorCode::kBadRequest,
                      "not a GenericRecord: " + std::to_string(bytes.size()) +
                          " bytes is not a whole, non-zero number of 8-byte words");
  }
  // Read in place when the bytes are word-aligned (a string's heap buffer is), else from a
  // copy in this thread's buffer.
  tessera::wire::AlignedWords words(bytes);
  try {
    return DecodeWords(words.words());
  } catch (const kj::Exception& e) {
    return base::Fail(base::ErrorCode::kBadRequest,
                      "not a GenericRecord: " + std::string(e.getDescription().cStr()));
  } catch (const std::bad_alloc&) {
    return base::Fail(base::ErrorCode::kBadRequest,
                      "not a GenericRecord: the message claims more memory than allowed");
  }
}

}  // namespace tessera::record
