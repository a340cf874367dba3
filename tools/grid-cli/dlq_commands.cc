#include "dlq_commands.h"

#include <fmt/format.h>

#include <memory>

#include "tessera/saga/dead_letter.h"

namespace tessera::tools::cli {
namespace {

nlohmann::json LetterJson(const saga::DeadLetter& l) {
  return {{"event_id", l.event.id},
          {"type", l.event.type},
          {"key", l.event.key},
          {"handler", l.handler},
          {"parked", l.parked},
          {"error_code", l.error_code},
          {"error", l.error},
          {"attempts", l.attempts},
          {"replays", l.replays},
          {"first_failure_ms", l.first_failure_ms},
          {"last_failure_ms", l.last_failure_ms}};
}

std::string LetterLine(const saga::DeadLetter& l) {
  return fmt::format("{} {} {} {} attempts={} replays={}{}\n", l.event.id, l.event.type,
                     l.event.key, l.parked ? "parked" : "failed", l.attempts, l.replays,
                     l.parked ? std::string() : " " + l.error);
}

}  // namespace

base::Result<CommandOutput> RunDlqCommand(grid::Client& client, const CliCommand& command) {
  // The client outlives the queue object; it is not shared beyond this call.
  std::shared_ptr<grid::Instance> shared(&client, [](grid::Instance*) {});
  saga::DeadLetterQueue dlq(shared, command.group);
  if (command.kind == CommandKind::kDlqCount) {
    auto count = dlq.Count();
    if (!count) return std::unexpected(count.error());
    return CommandOutput{std::to_string(*count) + "\n",
                         {{"group", command.group}, {"count", *count}}};
  }
  map::Predicate filter;
  if (command.kind != CommandKind::kDlqList) {
    filter = map::Predicate::Equal("event.id", record::Value(command.event_id));
  }
  auto letters = dlq.List(filter);
  if (!letters) return std::unexpected(letters.error());
  if (command.kind != CommandKind::kDlqList && letters->empty()) {
    return base::Fail(
        base::ErrorCode::kNotFound,
        fmt::format("group '{}' has no dead letter of event {}", command.group, command.event_id));
  }
  if (command.kind == CommandKind::kDlqDiscard) {
    if (auto removed = dlq.Remove(letters->front()); !removed) {
      return std::unexpected(removed.error());
    }
    return CommandOutput{
        fmt::format("discarded dead letter {} of group {}\n", command.event_id, command.group),
        {{"group", command.group}, {"discarded", command.event_id}}};
  }
  std::string text;
  nlohmann::json list = nlohmann::json::array();
  for (const auto& l : *letters) {
    text += LetterLine(l);
    list.push_back(LetterJson(l));
  }
  if (command.kind == CommandKind::kDlqShow) {
    return CommandOutput{text, list.front()};
  }
  return CommandOutput{text, {{"group", command.group}, {"dead_letters", list}}};
}

}  // namespace tessera::tools::cli
