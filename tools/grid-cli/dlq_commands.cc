#include "dlq_commands.h"

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <random>
#include <thread>

#include "progress.h"
#include "tessera/admin/documents.h"
#include "tessera/saga/dead_letter.h"

namespace tessera::tools::cli {
namespace {

std::string LetterLine(const saga::DeadLetter& l) {
  return fmt::format("{} {} {} {} attempts={} replays={}{}\n", l.event.id, l.event.type,
                     l.event.key, l.parked ? "parked" : "failed", l.attempts, l.replays,
                     l.parked ? std::string() : " " + l.error);
}

admin::DeadLetterFilter FilterOf(const CliCommand& command) {
  return {command.event_id, command.event_type, command.event_key, command.older_than_ms,
          command.newer_than_ms};
}

// Leaves a replay request for the group's consumers and waits for its outcome.
base::Result<CommandOutput> Replay(saga::DeadLetterQueue& dlq, const CliCommand& command) {
  admin::DeadLetterFilter which;
  which.event_id = command.event_id;
  which.type = command.event_type;
  which.key = command.event_key;
  Progress progress("waiting for group " + command.group + "'s consumers to replay", 0);
  auto done = admin::ReplayDeadLetters(dlq, which, command.wait_ms, [&] { progress.Update(0); });
  if (!done) return std::unexpected(done.error());
  nlohmann::json doc = {{"group", command.group}, {"request", done->id},
                        {"status", done->status}, {"replayed", done->replayed},
                        {"failed", done->failed}, {"error", done->error},
                        {"consumer", done->by}};
  return CommandOutput{fmt::format("replayed {} event(s) in group {} (by {})\n", done->replayed,
                                   command.group, done->by),
                       std::move(doc)};
}

}  // namespace

base::Result<CommandOutput> RunDlqCommand(grid::Client& client, const CliCommand& command) {
  // The client outlives the queue object; it is not shared beyond this call.
  std::shared_ptr<grid::Instance> shared(&client, [](grid::Instance*) {});
  saga::DeadLetterQueue dlq(shared, command.group);
  if (command.kind == CommandKind::kDlqReplay) return Replay(dlq, command);
  const map::Predicate filter = admin::DeadLetterPredicate(FilterOf(command));
  if (command.kind == CommandKind::kDlqCount && filter.kind() == map::Predicate::Kind::kTrue) {
    auto count = dlq.Count();
    if (!count) return std::unexpected(count.error());
    return CommandOutput{std::to_string(*count) + "\n",
                         {{"group", command.group}, {"count", *count}}};
  }
  auto letters = dlq.List(filter);
  if (!letters) return std::unexpected(letters.error());
  if (command.kind == CommandKind::kDlqCount) {
    const auto count = static_cast<std::int64_t>(letters->size());
    return CommandOutput{std::to_string(count) + "\n",
                         {{"group", command.group}, {"count", count}}};
  }
  if (command.kind != CommandKind::kDlqList && letters->empty()) {
    return base::Fail(
        base::ErrorCode::kNotFound,
        fmt::format("group '{}' has no dead letter of event {}", command.group, command.event_id));
  }
  if (command.kind == CommandKind::kDlqDiscard) {
    if (auto removed = dlq.Remove(letters->front()); !removed) {
      return std::unexpected(removed.error());
    }
    const std::string reason = command.reason.empty() ? "(no reason given)" : command.reason;
    return CommandOutput{
        fmt::format("discarded dead letter {} of group {}: {}\n", command.event_id, command.group,
                    reason),
        {{"group", command.group}, {"discarded", command.event_id}, {"reason", command.reason}}};
  }
  std::string text;
  nlohmann::json list = nlohmann::json::array();
  for (const auto& l : *letters) {
    text += LetterLine(l);
    list.push_back(admin::DeadLetterJson(l));
  }
  if (command.kind == CommandKind::kDlqShow) {
    return CommandOutput{text, list.front()};
  }
  return CommandOutput{text, {{"group", command.group}, {"dead_letters", list}}};
}

}  // namespace tessera::tools::cli
