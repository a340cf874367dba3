#pragma once
// StreamWaiters: the blocked XREAD / XREADGROUP commands of one RespServer by stream key, so
// an XADD through the same server wakes them at once instead of at their next poll
// (stream_read.cc). A write through another member, or through the Tessera API, is seen at
// the next poll.
//
// Thread-safety: every method is safe from any thread (one mutex; Wake posts the wake-ups to
// each command's shard and never runs one inline).

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tessera::resp {

struct StreamPoll;

class StreamWaiters {
 public:
  void Add(std::string_view key, const std::shared_ptr<StreamPoll>& poll);
  void Remove(std::string_view key, const StreamPoll* poll);
  void Wake(std::string_view key);

 private:
  std::mutex mu_;
  std::unordered_map<std::string, std::vector<std::weak_ptr<StreamPoll>>> by_key_;
};

}  // namespace tessera::resp
