#include "topic_protocol.h"

#include "tessera/record/generic_record.h"

namespace tessera::grid {

using record::GenericRecord;
using record::Value;

std::string EncodeTopicBatch(const TopicBatch& batch) {
  std::vector<Value> payloads;
  payloads.reserve(batch.payloads.size());
  for (const auto& p : batch.payloads) payloads.emplace_back(record::Bytes{p});
  return GenericRecord::Build()
      .String("topic", batch.topic)
      .List("payloads", std::move(payloads))
      .String("publisher", batch.publisher)
      .Int64("time", batch.time_ms)
      .Done()
      .Encode();
}

base::Result<TopicBatch> DecodeTopicBatch(std::string_view bytes) {
  auto rec = GenericRecord::Decode(bytes);
  if (!rec) return std::unexpected(rec.error());
  TopicBatch batch;
  auto topic = rec->GetString("topic");
  auto publisher = rec->GetString("publisher");
  auto time = rec->GetInt64("time");
  const Value* payloads = rec->Find("payloads");
  if (!topic || !publisher || !time || !payloads || payloads->type() != record::FieldType::kList) {
    return base::Fail(base::ErrorCode::kBadRequest,
                      "a topic publish needs {topic, payloads: [bytes], publisher, time}");
  }
  for (const auto& p : payloads->AsList()) {
    if (p.type() != record::FieldType::kBytes) {
      return base::Fail(base::ErrorCode::kBadRequest, "topic payloads must be bytes");
    }
    batch.payloads.push_back(p.AsBytes().data);
  }
  batch.topic = std::move(*topic);
  batch.publisher = std::move(*publisher);
  batch.time_ms = *time;
  return batch;
}

std::string EncodeTopicEvent(std::int64_t listener, const topic::Message& message) {
  return GenericRecord::Build()
      .Int64("listener", listener)
      .String("topic", message.topic)
      .BytesField("payload", message.payload)
      .String("publisher", message.publisher_id)
      .Int64("time", message.publish_time_ms)
      .Int64("sequence", message.sequence)
      .Done()
      .Encode();
}

base::Result<std::pair<std::int64_t, topic::Message>> DecodeTopicEvent(std::string_view bytes) {
  auto rec = GenericRecord::Decode(bytes);
  if (!rec) return std::unexpected(rec.error());
  auto listener = rec->GetInt64("listener");
  auto topic = rec->GetString("topic");
  const Value* payload = rec->Find("payload");
  auto publisher = rec->GetString("publisher");
  auto time = rec->GetInt64("time");
  auto sequence = rec->GetInt64("sequence");
  if (!listener || !topic || !payload || payload->type() != record::FieldType::kBytes ||
      !publisher || !time || !sequence) {
    return base::Fail(base::ErrorCode::kBadRequest,
                      "a topic event needs {listener, topic, payload, publisher, time, sequence}");
  }
  topic::Message m;
  m.topic = std::move(*topic);
  m.payload = payload->AsBytes().data;
  m.publisher_id = std::move(*publisher);
  m.publish_time_ms = *time;
  m.sequence = *sequence;
  return std::make_pair(*listener, std::move(m));
}

}  // namespace tessera::grid
