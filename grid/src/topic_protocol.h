#pragma once
// Encoding of the topic service's native-protocol payloads (see native_protocol.h), shared by
// the member's handler and relay and by the client. Private to the grid module.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/topic/topic_service.h"

namespace tessera::grid {

// Messages of one publish call: one topic, one publisher, one publish time.
struct TopicBatch {
  std::string topic;
  std::vector<std::string> payloads;
  std::string publisher;
  std::int64_t time_ms = 0;
};

std::string EncodeTopicBatch(const TopicBatch& batch);
// Errors: kBadRequest naming the missing or mistyped field.
base::Result<TopicBatch> DecodeTopicBatch(std::string_view bytes);

std::string EncodeTopicEvent(std::int64_t listener, const topic::Message& message);
base::Result<std::pair<std::int64_t, topic::Message>> DecodeTopicEvent(std::string_view bytes);

}  // namespace tessera::grid
