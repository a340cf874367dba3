#include "tessera/grid/topic.h"

namespace tessera::grid {

namespace {
base::Result<void> CheckName(const std::string& name) {
  if (name.empty()) {
    return base::Fail(base::ErrorCode::kBadRequest, "a topic needs a non-empty name");
  }
  return {};
}
}  // namespace

Topic::Topic(std::string name, std::shared_ptr<TopicBackend> backend)
    : name_(std::move(name)), backend_(std::move(backend)) {}

base::Result<void> Topic::Publish(std::string payload) {
  std::vector<std::string> one;
  one.push_back(std::move(payload));
  return PublishAll(std::move(one));
}

base::Result<void> Topic::PublishAll(std::vector<std::string> payloads) {
  if (auto ok = CheckName(name_); !ok) return ok;
  if (payloads.empty()) return {};
  return backend_->Publish(name_, std::move(payloads));
}

base::Result<TopicListenerId> Topic::AddMessageListener(TopicListener listener) {
  if (auto ok = CheckName(name_); !ok) return std::unexpected(ok.error());
  return backend_->AddListener(name_, std::move(listener));
}

base::Result<bool> Topic::RemoveMessageListener(TopicListenerId id) {
  return backend_->RemoveListener(id);
}

std::int64_t Topic::DroppedMessages(TopicListenerId id) const { return backend_->Dropped(id); }

std::int64_t Topic::ListenerErrors(TopicListenerId id) const {
  return backend_->ListenerErrors(id);
}

}  // namespace tessera::grid
