#include "dlq_commands.h"

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <random>
#include <thread>

#include "tessera/base/clock.h"
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

// The list/count filters of `command` over the tessera.DeadLetter records.
map::Predicate Filter(const CliCommand& command) {
  std::vector<map::Predicate> all;
  if (command.event_id != 0) {
    all.push_back(map::Predicate::Equal("event.id", record::Value(command.event_id)));
  }
  if (!command.event_type.empty()) {
    all.push_back(map::Predicate::Equal("event.type", record::Value(command.event_type)));
  }
  if (!command.event_key.empty()) {
    all.push_back(map::Predicate::Equal("event.key", record::Value(command.event_key)));
  }
  const std::int64_t now = base::SteadyClock().WallMs();
  if (command.older_than_ms) {
    all.push_back(
        map::Predicate::LessEqual("last_failure_ms", record::Value(now - *command.older_than_ms)));
  }
  if (command.newer_than_ms) {
    all.push_back(map::Predicate::GreaterEqual("last_failure_ms",
                                               record::Value(now - *command.newer_than_ms)));
  }
  if (all.empty()) return map::Predicate();
  if (all.size() == 1) return all.front();
  return map::Predicate::And(std::move(all));
}

// Leaves a replay request for the group's consumers and waits for its outcome.
base::Result<CommandOutput> Replay(saga::DeadLetterQueue& dlq, const CliCommand& command) {
  saga::ReplayRequest request;
  request.id = fmt::format("{:016x}", std::random_device()() * 0x100000000ULL ^
                                          static_cast<std::uint64_t>(base::SteadyClock().WallMs()));
  request.event_id = command.event_id;
  request.type = command.event_type;
  request.key = command.event_key;
  request.requested_ms = base::SteadyClock().WallMs();
  if (auto ok = dlq.RequestReplay(request); !ok) return std::unexpected(ok.error());
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(command.wait_ms);
  std::optional<saga::ReplayRequest> seen;
  while (true) {
    auto got = dlq.GetReplay(request.id);
    if (!got) return std::unexpected(got.error());
    seen = std::move(*got);
    if (seen && (seen->status == "done" || seen->status == "failed")) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      if (seen && seen->status == "pending") {
        auto cancelled = dlq.CancelReplay(*seen);
        if (cancelled && *cancelled) {
          return base::Fail(base::ErrorCode::kTimeout,
                            fmt::format("no consumer of group '{}' took the replay request "
                                        "within {} ms (withdrawn): start the group's service "
                                        "(its consumers run replay requests), or wait longer "
                                        "with --wait",
                                        command.group, command.wait_ms));
        }
        continue;  // claimed just now: wait for it
      }
      return base::Fail(
          base::ErrorCode::kTimeout,
          fmt::format("replay request {} of group '{}' is still running on {} "
                      "after {} ms; see its outcome with 'dlq list'",
                      request.id, command.group, seen ? seen->by : "?", command.wait_ms));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  nlohmann::json doc = {{"group", command.group}, {"request", seen->id},
                        {"status", seen->status}, {"replayed", seen->replayed},
                        {"failed", seen->failed}, {"error", seen->error},
                        {"consumer", seen->by}};
  if (seen->status == "failed") {
    return base::Fail(
        base::ErrorCode::kConflict,
        fmt::format("replay in group '{}' by {}: {} replayed, {} failed: {}", command.group,
                    seen->by, seen->replayed, seen->failed, seen->error));
  }
  return CommandOutput{fmt::format("replayed {} event(s) in group {} (by {})\n", seen->replayed,
                                   command.group, seen->by),
                       std::move(doc)};
}

}  // namespace

base::Result<CommandOutput> RunDlqCommand(grid::Client& client, const CliCommand& command) {
  // The client outlives the queue object; it is not shared beyond this call.
  std::shared_ptr<grid::Instance> shared(&client, [](grid::Instance*) {});
  saga::DeadLetterQueue dlq(shared, command.group);
  if (command.kind == CommandKind::kDlqReplay) return Replay(dlq, command);
  const map::Predicate filter = Filter(command);
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
    list.push_back(LetterJson(l));
  }
  if (command.kind == CommandKind::kDlqShow) {
    return CommandOutput{text, list.front()};
  }
  return CommandOutput{text, {{"group", command.group}, {"dead_letters", list}}};
}

}  // namespace tessera::tools::cli
