#include "tessera/saga/dead_letter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "tessera/grid/map.h"

namespace tessera::saga {
namespace {

using base::ErrorCode;
using base::Fail;
using record::GenericRecord;

std::string PartitionKeyOf(const std::string& key) {
  const auto at = key.rfind('@');
  return at == std::string::npos ? key : key.substr(at + 1);
}

// A field read into `out`, or its error.
template <typename T, typename U>
base::Result<void> Into(base::Result<T> value, U& out) {
  if (!value) return std::unexpected(value.error());
  out = std::move(*value);
  return {};
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
  auto counted = shared_->GetMap(MapName(group_) + ".keys")
                     ->ExecuteOnKey(letter.event.key, "incrementRaw",
                                    GenericRecord::Build().Int64("delta", -1).Done());
  if (!counted) return std::unexpected(counted.error());
  return {};
}

base::Result<void> DeadLetterQueue::Update(const DeadLetter& letter) {
  return shared_->GetMap(MapName(group_))
      ->Set(EntryKey(letter.event), DeadLetterToRecord(letter).Encode());
}

}  // namespace tessera::saga
