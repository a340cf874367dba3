#include "tessera/saga/inbox.h"

#include <random>

#include "tessera/grid/map.h"

namespace tessera::saga {
namespace {

using base::ErrorCode;
using base::Fail;

constexpr const char* kDone = "done";
constexpr const char* kLeased = "leased";

map::WriteOptions Lasting(base::Millis ttl_ms) {
  map::WriteOptions o;
  o.ttl_ms = ttl_ms;
  return o;
}

}  // namespace

Inbox::Inbox(grid::Instance& member, InboxOptions options) : member_(member), options_(options) {}

std::string Inbox::MarkerKey(const std::string& group, const Event& event,
                             const std::string& partition_key) {
  return group + "|" + std::to_string(event.id) + "@" + partition_key;
}

base::Result<InboxOutcome> Inbox::Commit(const std::string& group, const Event& event,
                                         const grid::Transaction& changes) {
  if (changes.error()) return std::unexpected(*changes.error());
  const std::string& partition_key = changes.request().key;
  grid::Transaction tx(partition_key);
  tx.WithId(changes.id());  // a retry of the same commit is applied once
  tx.Set(kInboxMap, MarkerKey(group, event, partition_key), kDone, Lasting(options_.retention_ms))
      .IfAbsent();
  for (const auto& op : changes.request().transaction) tx.Append(op);
  auto result = member_.Transact(tx);
  if (!result) return std::unexpected(result.error());
  if (result->committed) {
    applied_.fetch_add(1);
    return InboxOutcome::kApplied;
  }
  if (result->conflict && result->conflict->index == 0) {
    duplicates_.fetch_add(1);
    return InboxOutcome::kDuplicate;
  }
  if (!result->conflict) {
    return Fail(ErrorCode::kInternal, "the transaction was not committed and names no conflict");
  }
  const auto& c = *result->conflict;
  return Fail(ErrorCode::kConflict,
              "the handler's operation " + std::to_string(c.index - 1) + " (map '" + c.map_name +
                  "', key '" + c.key + "') found " + c.found +
                  "; nothing was applied and the event is not marked handled");
}

base::Result<std::optional<std::string>> Inbox::Lease(const std::string& group, const Event& event,
                                                      const std::string& partition_key) {
  thread_local std::mt19937_64 random(std::random_device{}());
  const std::string token = std::string(kLeased) + ":" + std::to_string(random());
  auto existing = member_.GetMap(kInboxMap)->PutIfAbsent(MarkerKey(group, event, partition_key),
                                                         token, Lasting(options_.lease_ms));
  if (!existing) return std::unexpected(existing.error());
  if (existing->has_value()) {
    if (**existing == kDone) duplicates_.fetch_add(1);
    return std::optional<std::string>();
  }
  return std::optional<std::string>(token);
}

base::Result<void> Inbox::Complete(const std::string& group, const Event& event,
                                   const std::string& partition_key) {
  auto ok = member_.GetMap(kInboxMap)->Set(MarkerKey(group, event, partition_key), kDone,
                                           Lasting(options_.retention_ms));
  if (!ok) return ok;
  applied_.fetch_add(1);
  return {};
}

base::Result<void> Inbox::Release(const std::string& group, const Event& event,
                                  const std::string& partition_key, const std::string& token) {
  // Only this lease goes: a completed marker, or another holder's lease, stays.
  auto removed = member_.GetMap(kInboxMap)->Remove(MarkerKey(group, event, partition_key), token);
  if (!removed) return std::unexpected(removed.error());
  return {};
}

base::Result<bool> Inbox::Seen(const std::string& group, const Event& event,
                               const std::string& partition_key) {
  return member_.GetMap(kInboxMap)->ContainsKey(MarkerKey(group, event, partition_key));
}

}  // namespace tessera::saga
