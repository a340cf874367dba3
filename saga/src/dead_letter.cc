#include "tessera/saga/dead_letter.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "tessera/base/clock.h"
#include "tessera/grid/map.h"

#include "record_fields.h"

namespace tessera::saga {
namespace {

using base::ErrorCode;
using base::Fail;
using record::GenericRecord;

std::string PartitionKeyOf(const std::string& key) {
  const auto at = key.rfind('@');
  return at == std::string::npos ? key : key.substr(at + 1);
}

}  // namespace

record::GenericRecord DeadLetterToRecord(const DeadLetter& l) {
  return GenericRecord::Build("tessera.DeadLetter")
      .Record("event", EventToRecord(l.event))
      .String("group", l.group)
      .String("handler", l.handler)
      .Int32("error_code", l.error_code)
      .String("error", l.error)
      .Int32("attempts", l.attempts)
      .Int64("first_failure_ms", l.first_failure_ms)
      .Int64("last_failure_ms", l.last_failure_ms)
      .Int32("replays", l.replays)
      .Bool("parked", l.parked)
      .Done();
}

base::Result<DeadLetter> DeadLetterFromRecord(const GenericRecord& r) {
  if (r.type_name() != "tessera.DeadLetter") {
    return Fail(ErrorCode::kBadRequest,
                "not a dead letter: a record of type '" + r.type_name() + "'");
  }
  DeadLetter l;
  auto event_record = r.GetRecord("event");
  if (!event_record) return std::unexpected(event_record.error());
  auto event = EventFromRecord(*event_record);
  if (!event) return std::unexpected(event.error());
  l.event = std::move(*event);
  for (auto ok : {Into(r.GetString("group"), l.group), Into(r.GetString("handler"), l.handler),
                  Into(r.GetInt32("error_code"), l.error_code), Into(r.GetString("error"), l.error),
                  Into(r.GetInt32("attempts"), l.attempts),
                  Into(r.GetInt64("first_failure_ms"), l.first_failure_ms),
                  Into(r.GetInt64("last_failure_ms"), l.last_failure_ms),
                  Into(r.GetInt32("replays"), l.replays), Into(r.GetBool("parked"), l.parked)}) {
    if (!ok) return std::unexpected(ok.error());
  }
  return l;
}

record::GenericRecord ReplayRequestToRecord(const ReplayRequest& q) {
  return GenericRecord::Build("tessera.ReplayRequest")
      .String("id", q.id)
      .Int64("event_id", q.event_id)
      .String("type", q.type)
      .String("key", q.key)
      .String("status", q.status)
      .String("by", q.by)
      .Int32("replayed", q.replayed)
      .Int32("failed", q.failed)
      .String("error", q.error)
      .Int64("requested_ms", q.requested_ms)
      .Int64("finished_ms", q.finished_ms)
      .Int64("claimed_ms", q.claimed_ms)
      .Done();
}

base::Result<ReplayRequest> ReplayRequestFromRecord(const GenericRecord& r) {
  if (r.type_name() != "tessera.ReplayRequest") {
    return Fail(ErrorCode::kBadRequest,
                "not a replay request: a record of type '" + r.type_name() + "'");
  }
  ReplayRequest q;
  for (auto ok :
       {Into(r.GetString("id"), q.id), Into(r.GetInt64("event_id"), q.event_id),
        Into(r.GetString("type"), q.type), Into(r.GetString("key"), q.key),
        Into(r.GetString("status"), q.status), Into(r.GetString("by"), q.by),
        Into(r.GetInt32("replayed"), q.replayed), Into(r.GetInt32("failed"), q.failed),
        Into(r.GetString("error"), q.error), Into(r.GetInt64("requested_ms"), q.requested_ms),
        Into(r.GetInt64("finished_ms"), q.finished_ms)}) {
    if (!ok) return std::unexpected(ok.error());
  }
  if (r.Find("claimed_ms") != nullptr) {  // absent in requests of older tools
    if (auto ok = Into(r.GetInt64("claimed_ms"), q.claimed_ms); !ok) {
      return std::unexpected(ok.error());
    }
  }
  return q;
}

DeadLetterQueue::DeadLetterQueue(std::shared_ptr<grid::Instance> shared, std::string group)
    : shared_(std::move(shared)), group_(std::move(group)) {}

std::string DeadLetterQueue::EntryKey(const Event& event) {
  return fmt::format("{:016x}@{}", static_cast<std::uint64_t>(event.id), PartitionKeyOf(event.key));
}

base::Result<void> DeadLetterQueue::Add(const DeadLetter& letter) {
  auto previous = shared_->GetMap(MapName(group_))
                      ->Put(EntryKey(letter.event), DeadLetterToRecord(letter).Encode());
  if (!previous) return std::unexpected(previous.error());
  if (previous->has_value()) return {};  // the same event again: already counted
  auto counted = shared_->GetMap(MapName(group_) + ".keys")
                     ->ExecuteOnKey(letter.event.key, "incrementRaw",
                                    GenericRecord::Build().Int64("delta", 1).Done());
  if (!counted) return std::unexpected(counted.error());
  return {};
}

base::Result<bool> DeadLetterQueue::KeyParked(const Event& event) {
  auto count = shared_->GetMap(MapName(group_) + ".keys")->Get(event.key);
  if (!count) return std::unexpected(count.error());
  if (!count->has_value()) return false;
  return std::strtoll((*count)->c_str(), nullptr, 10) > 0;  // incrementRaw's decimal text
}

base::Result<std::vector<std::string>> DeadLetterQueue::ParkedKeys() {
  auto entries = shared_->GetMap(MapName(group_) + ".keys")->EntrySet();
  if (!entries) return std::unexpected(entries.error());
  std::vector<std::string> keys;
  for (const auto& [key, count] : *entries) {
    if (std::strtoll(count.c_str(), nullptr, 10) > 0) keys.push_back(key);
  }
  return keys;
}

base::Result<std::vector<DeadLetter>> DeadLetterQueue::List(const map::Predicate& filter) {
  auto entries = shared_->GetMap(MapName(group_))->EntrySet(filter);
  if (!entries) return std::unexpected(entries.error());
  std::vector<std::pair<std::string, DeadLetter>> sorted;
  for (const auto& [key, bytes] : *entries) {
    auto record = GenericRecord::Decode(bytes);
    if (!record) continue;
    auto letter = DeadLetterFromRecord(*record);
    if (letter) sorted.emplace_back(key, std::move(*letter));
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<DeadLetter> out;
  for (auto& [key, letter] : sorted) out.push_back(std::move(letter));
  return out;
}

base::Result<std::optional<DeadLetter>> DeadLetterQueue::Get(const Event& event) {
  auto bytes = shared_->GetMap(MapName(group_))->Get(EntryKey(event));
  if (!bytes) return std::unexpected(bytes.error());
  if (!bytes->has_value()) return std::optional<DeadLetter>();
  auto record = GenericRecord::Decode(**bytes);
  if (!record) return std::unexpected(record.error());
  auto letter = DeadLetterFromRecord(*record);
  if (!letter) return std::unexpected(letter.error());
  return std::optional<DeadLetter>(std::move(*letter));
}

base::Result<std::int64_t> DeadLetterQueue::Count() {
  return shared_->GetMap(MapName(group_))->Size();
}

base::Result<void> DeadLetterQueue::Remove(const DeadLetter& letter) {
  auto removed = shared_->GetMap(MapName(group_))->Delete(EntryKey(letter.event));
  if (!removed) return std::unexpected(removed.error());
  if (!*removed) return {};
  auto keys = shared_->GetMap(MapName(group_) + ".keys");
  auto counted = keys->ExecuteOnKey(letter.event.key, "incrementRaw",
                                    GenericRecord::Build().Int64("delta", -1).Done());
  if (!counted) return std::unexpected(counted.error());
  if (counted->GetInt64("value").value_or(1) == 0) {  // (negative: an Add is half done)
    // The key's last dead letter: drop its count (unless one was added meanwhile), so the keys
    // map holds parked keys only.
    auto dropped =
        keys->Remove(letter.event.key, std::to_string(counted->GetInt64("value").value()));
    if (!dropped) return std::unexpected(dropped.error());
  }
  return {};
}

base::Result<void> DeadLetterQueue::Update(const DeadLetter& letter) {
  // Only while it is there: a letter removed meanwhile (replayed elsewhere) stays removed.
  auto replaced = shared_->GetMap(MapName(group_))
                      ->Replace(EntryKey(letter.event), DeadLetterToRecord(letter).Encode());
  if (!replaced) return std::unexpected(replaced.error());
  return {};
}

namespace {
constexpr base::Millis kFinishedReplayTtlMs = 3'600'000;  // an hour for the requester to read it

base::Result<std::optional<ReplayRequest>> DecodeReplay(const std::optional<std::string>& bytes) {
  if (!bytes) return std::optional<ReplayRequest>();
  auto record = GenericRecord::Decode(*bytes);
  if (!record) return std::unexpected(record.error());
  auto request = ReplayRequestFromRecord(*record);
  if (!request) return std::unexpected(request.error());
  request->stored = *bytes;
  return std::optional<ReplayRequest>(std::move(*request));
}
}  // namespace

base::Result<void> DeadLetterQueue::RequestReplay(const ReplayRequest& request) {
  if (request.id.empty()) return Fail(ErrorCode::kBadRequest, "a replay request needs an id");
  auto previous = shared_->GetMap(ReplayMapName(group_))
                      ->PutIfAbsent(request.id, ReplayRequestToRecord(request).Encode());
  if (!previous) return std::unexpected(previous.error());
  if (previous->has_value()) {
    return Fail(ErrorCode::kConflict, "replay request '" + request.id + "' exists already");
  }
  return {};
}

base::Result<std::vector<ReplayRequest>> DeadLetterQueue::PendingReplays() {
  const std::int64_t stale = base::SteadyClock().WallMs() - kStaleClaimMs;
  auto entries =
      shared_->GetMap(ReplayMapName(group_))
          ->Values(map::Predicate::Or(
              {map::Predicate::Equal("status", record::Value("pending")),
               map::Predicate::And({map::Predicate::Equal("status", record::Value("running")),
                                    map::Predicate::Less("claimed_ms", record::Value(stale))})}));
  if (!entries) return std::unexpected(entries.error());
  std::vector<ReplayRequest> out;
  for (const auto& bytes : *entries) {
    auto request = DecodeReplay(bytes);
    if (request && request->has_value()) out.push_back(std::move(**request));
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.requested_ms < b.requested_ms; });
  return out;
}

base::Result<bool> DeadLetterQueue::ClaimReplay(ReplayRequest& request, const std::string& by) {
  ReplayRequest running = request;
  running.status = "running";
  running.by = by;
  running.claimed_ms = base::SteadyClock().WallMs();
  // Compared with the bytes as read (a request written by another version of the tool
  // encodes differently), else with this version's encoding.
  const std::string expected =
      request.stored.empty() ? ReplayRequestToRecord(request).Encode() : request.stored;
  running.stored = ReplayRequestToRecord(running).Encode();
  auto swapped =
      shared_->GetMap(ReplayMapName(group_))->Replace(request.id, expected, running.stored);
  if (!swapped) return std::unexpected(swapped.error());
  if (*swapped) request = std::move(running);
  return *swapped;
}

base::Result<std::string> DeadLetterQueue::LeaseReplay(const std::string& key,
                                                       const std::string& holder,
                                                       base::Millis ttl_ms) {
  auto map = shared_->GetMap(MapName(group_) + ".replaying");
  auto previous = map->PutIfAbsent(key, holder, grid::WithTtl(ttl_ms));
  if (!previous) return std::unexpected(previous.error());
  if (!previous->has_value() || **previous == holder) return std::string();
  return **previous;
}

base::Result<void> DeadLetterQueue::ReleaseReplay(const std::string& key,
                                                  const std::string& holder) {
  auto removed = shared_->GetMap(MapName(group_) + ".replaying")->Remove(key, holder);
  if (!removed) return std::unexpected(removed.error());
  return {};
}

base::Result<void> DeadLetterQueue::FinishReplay(const ReplayRequest& request) {
  return shared_->GetMap(ReplayMapName(group_))
      ->Set(request.id, ReplayRequestToRecord(request).Encode(),
            grid::WithTtl(kFinishedReplayTtlMs));
}

base::Result<std::optional<ReplayRequest>> DeadLetterQueue::GetReplay(const std::string& id) {
  auto bytes = shared_->GetMap(ReplayMapName(group_))->Get(id);
  if (!bytes) return std::unexpected(bytes.error());
  return DecodeReplay(*bytes);
}

base::Result<bool> DeadLetterQueue::CancelReplay(const ReplayRequest& request) {
  return shared_->GetMap(ReplayMapName(group_))
      ->Remove(request.id,
               request.stored.empty() ? ReplayRequestToRecord(request).Encode() : request.stored);
}

}  // namespace tessera::saga
