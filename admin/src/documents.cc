// The JSON documents of streams, dead letters, sagas and the outbox (documents.h); grid-cli
// renders its tables from the same values.
#include "tessera/admin/documents.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "tessera/admin/values.h"
#include "tessera/base/clock.h"
#include "tessera/map/stream_format.h"
#include "tessera/partition/partition_table.h"
#include "tessera/partition/partitioner.h"
#include "tessera/saga/event.h"
#include "tessera/saga/outbox.h"

namespace tessera::admin {
namespace {

using base::Result;
using nlohmann::json;

std::int64_t NowMs() { return base::SteadyClock().WallMs(); }

std::int64_t Stored(const grid::SubStreamInfo& s) {
  return std::max<std::int64_t>(0, s.tail - s.head + 1);
}

map::Predicate AllOf(std::vector<map::Predicate> all) {
  if (all.empty()) return map::Predicate();
  if (all.size() == 1) return all.front();
  return map::Predicate::And(std::move(all));
}

}  // namespace

std::int64_t AgeMs(std::int64_t time_ms) {
  return time_ms == 0 ? 0 : std::max<std::int64_t>(0, NowMs() - time_ms);
}

// ---- the cluster ------------------------------------------------------------------------

json PartitionsJson(const membership::ClusterView& view) {
  std::map<std::string, std::string> address;
  for (const auto& m : view.members.members) address[m.uuid] = m.address;
  auto name = [&address](const std::string& uuid) {
    auto it = address.find(uuid);
    return it == address.end() ? uuid : it->second;
  };
  json partitions = json::array();
  for (std::uint32_t p = 0; p < view.partitions.partition_count(); ++p) {
    const auto& replicas = view.partitions.replicas[p];
    json backups = json::array();
    for (std::size_t i = 1; i < replicas.size(); ++i) backups.push_back(name(replicas[i]));
    partitions.push_back({{"partition", p},
                          {"owner", replicas.empty() ? "" : name(replicas[0])},
                          {"backups", std::move(backups)}});
  }
  json summary = json::array();
  for (const auto& c : partition::CountReplicas(view.partitions, view.members.Uuids())) {
    summary.push_back({{"address", name(c.member)}, {"owned", c.owned}, {"backups", c.backups}});
  }
  return {{"version", view.partitions.version},
          {"backup_count", view.partitions.backup_count},
          {"summary", std::move(summary)},
          {"partitions", std::move(partitions)}};
}

// ---- maps -------------------------------------------------------------------------------

json MapStatsJson(const std::string& name, const map::MapStats& s) {
  json j = json::object();
  j["map"] = name;
  for (const auto& [field, value] : std::initializer_list<std::pair<const char*, std::int64_t>>{
           {"entries", s.entries},
           {"memory_bytes", s.memory_bytes},
           {"hits", s.hits},
           {"misses", s.misses},
           {"gets", s.gets},
           {"puts", s.puts},
           {"removes", s.removes},
           {"expirations", s.expirations},
           {"evictions", s.evictions},
           {"get_latency_ns", s.get_latency_ns},
           {"put_latency_ns", s.put_latency_ns},
           {"remove_latency_ns", s.remove_latency_ns}}) {
    j[field] = value;
  }
  return j;
}

std::optional<std::vector<std::string>> MapNamesOfInfo(const std::string& info_json) {
  const auto doc = json::parse(info_json, nullptr, false);
  if (doc.is_discarded() || !doc.contains("maps") || !doc["maps"].is_array()) return std::nullopt;
  std::vector<std::string> names;
  for (const auto& name : doc["maps"]) {
    if (name.is_string()) names.push_back(name.get<std::string>());
  }
  return names;
}

// ---- streams ----------------------------------------------------------------------------

Result<std::vector<std::string>> StreamNames(grid::Instance& instance) {
  auto keys = instance.GetMap(map::kStreamMap)->KeySet(map::Predicate::Like("__key", "stream@%"));
  if (!keys) return std::unexpected(keys.error());
  std::vector<std::string> names;
  for (const auto& key : *keys) names.push_back(key.substr(key.find('@') + 1));
  std::sort(names.begin(), names.end());
  return names;
}

json GroupJson(const grid::StreamGroupPosition& g) {
  return {{"group", g.group},
          {"lag", g.lag},
          {"oldest_uncommitted_age_ms", AgeMs(g.oldest_uncommitted_ms)}};
}

json StreamInfoJson(const grid::StreamInfo& info) {
  std::int64_t events = 0, bytes = 0, appended = 0;
  json subs = json::array();
  for (const auto& s : info.sub_streams) {
    events += Stored(s);
    bytes += s.bytes;
    appended += s.tail;
    json groups = json::array();
    for (const auto& g : s.groups) {
      groups.push_back({{"group", g.group},
                        {"cursor", g.cursor},
                        {"lag", g.lag},
                        {"holder", g.holder},
                        {"oldest_uncommitted_age_ms", AgeMs(g.oldest_uncommitted_ms)}});
    }
    subs.push_back({{"index", s.index},
                    {"head", s.head},
                    {"tail", s.tail},
                    {"events", Stored(s)},
                    {"bytes", s.bytes},
                    {"oldest_age_ms", AgeMs(s.oldest_ms)},
                    {"groups", groups}});
  }
  json groups = json::array();
  for (const auto& g : info.groups) groups.push_back(GroupJson(g));
  return {{"stream", info.name},
          {"config",
           {{"sub_streams", info.config.sub_streams},
            {"max_events", info.config.max_events},
            {"max_bytes", info.config.max_bytes},
            {"max_age_ms", info.config.max_age_ms},
            {"dedup_window_ms", info.config.dedup_window_ms}}},
          {"appended", appended},
          {"events", events},
          {"bytes", bytes},
          {"groups", groups},
          {"sub_streams", subs}};
}

std::vector<GroupRow> GroupRows(const grid::StreamInfo& info) {
  std::vector<GroupRow> rows;
  for (const auto& g : info.groups) {
    GroupRow row;
    row.position = g;
    row.sub_streams = json::array();
    for (const auto& s : info.sub_streams) {
      for (const auto& p : s.groups) {
        if (p.group != g.group) continue;
        if (!p.holder.empty()) {
          ++row.holders[p.holder];
          ++row.leases;
        }
        row.sub_streams.push_back(
            {{"sub_stream", s.index}, {"cursor", p.cursor}, {"lag", p.lag}, {"holder", p.holder}});
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

Result<json> ConsumersJson(grid::Instance& instance) {
  auto names = StreamNames(instance);
  if (!names) return std::unexpected(names.error());
  json groups = json::array();
  std::map<std::string, std::int64_t> dead_letters;  // per group, read once
  for (const auto& name : *names) {
    auto info = instance.GetStream(name)->Info();
    if (!info) return std::unexpected(info.error());
    for (auto& row : GroupRows(*info)) {
      const auto& g = row.position;
      auto known = dead_letters.find(g.group);
      if (known == dead_letters.end()) {
        auto size = instance.GetMap(saga::DeadLetterQueue::MapName(g.group))->Size();
        if (!size) return std::unexpected(size.error());
        known = dead_letters.emplace(g.group, *size).first;
      }
      groups.push_back({{"group", g.group},
                        {"stream", name},
                        {"lag", g.lag},
                        {"oldest_uncommitted_age_ms", AgeMs(g.oldest_uncommitted_ms)},
                        {"leases", row.leases},
                        {"consumers", row.holders},
                        {"dead_letters", known->second}});
    }
  }
  return json{{"groups", std::move(groups)}};
}

// ---- dead letters -----------------------------------------------------------------------

json DeadLetterJson(const saga::DeadLetter& l) {
  return {{"event_id", l.event.id},
          {"event_id_str", std::to_string(l.event.id)},  // ids pass 2^53: JavaScript needs text
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

map::Predicate DeadLetterPredicate(const DeadLetterFilter& f) {
  std::vector<map::Predicate> all;
  if (f.event_id != 0) all.push_back(map::Predicate::Equal("event.id", record::Value(f.event_id)));
  if (!f.type.empty()) all.push_back(map::Predicate::Equal("event.type", record::Value(f.type)));
  if (!f.key.empty()) all.push_back(map::Predicate::Equal("event.key", record::Value(f.key)));
  const std::int64_t now = NowMs();
  if (f.older_than_ms) {
    all.push_back(
        map::Predicate::LessEqual("last_failure_ms", record::Value(now - *f.older_than_ms)));
  }
  if (f.newer_than_ms) {
    all.push_back(
        map::Predicate::GreaterEqual("last_failure_ms", record::Value(now - *f.newer_than_ms)));
  }
  return AllOf(std::move(all));
}

Result<saga::ReplayRequest> ReplayDeadLetters(saga::DeadLetterQueue& dlq,
                                              const DeadLetterFilter& which, std::int64_t wait_ms,
                                              const std::function<void()>& waiting) {
  saga::ReplayRequest request;
  request.id = fmt::format(
      "{:016x}", std::random_device()() * 0x100000000ULL ^ static_cast<std::uint64_t>(NowMs()));
  request.event_id = which.event_id;
  request.type = which.type;
  request.key = which.key;
  request.requested_ms = NowMs();
  if (auto ok = dlq.RequestReplay(request); !ok) return std::unexpected(ok.error());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
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
                                        "(its consumers run replay requests), or wait longer",
                                        dlq.group(), wait_ms));
        }
        continue;  // claimed just now: wait for it
      }
      return base::Fail(base::ErrorCode::kTimeout,
                        fmt::format("replay request {} of group '{}' is still running on {} "
                                    "after {} ms; see its outcome in the dead letter list",
                                    request.id, dlq.group(), seen ? seen->by : "?", wait_ms));
    }
    if (waiting) waiting();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (seen->status == "failed") {
    return base::Fail(
        base::ErrorCode::kConflict,
        fmt::format("replay in group '{}' by {}: {} replayed, {} failed: {}", dlq.group(), seen->by,
                    seen->replayed, seen->failed, seen->error));
  }
  return *seen;
}

// ---- sagas and the outbox ---------------------------------------------------------------

json SagaJson(const saga::SagaRecord& s, bool with_steps) {
  json j = {
      {"id", s.id},
      {"type", s.type},
      {"status", std::string(saga::SagaStatusName(s.status))},
      {"current_step", s.current_step},
      {"step", s.current_step >= 0 && static_cast<std::size_t>(s.current_step) < s.steps.size()
                   ? s.steps[static_cast<std::size_t>(s.current_step)].name
                   : ""},
      {"age_ms", AgeMs(s.created_ms)},
      {"updated_age_ms", AgeMs(s.updated_ms)},
      {"deadline_ms", s.deadline_ms},
      {"failure_reason", s.failure_reason},
      {"version", s.version}};
  if (with_steps) {
    json steps = json::array();
    for (const auto& st : s.steps) {
      steps.push_back({{"name", st.name},
                       {"status", std::string(saga::StepStatusName(st.status))},
                       {"started_ms", st.started_ms},
                       {"finished_ms", st.finished_ms},
                       {"compensated_ms", st.compensated_ms},
                       {"result", st.result}});
    }
    j["steps"] = std::move(steps);
    j["data"] = ValueToJson(s.data.Encode());
  }
  return j;
}

map::Predicate SagaPredicate(const SagaFilter& f) {
  std::vector<map::Predicate> all;
  if (!f.status.empty()) all.push_back(map::Predicate::Equal("status", record::Value(f.status)));
  if (!f.type.empty()) all.push_back(map::Predicate::Equal("type", record::Value(f.type)));
  if (f.older_than_ms) {
    all.push_back(
        map::Predicate::LessEqual("created_ms", record::Value(NowMs() - *f.older_than_ms)));
  }
  return AllOf(std::move(all));
}

json SagaStatsJson(const std::vector<saga::SagaRecord>& sagas) {
  std::map<std::string, std::int64_t> by_status, by_type;
  std::vector<std::int64_t> durations;  // finished sagas: last change - start
  std::int64_t active = 0, oldest_active = 0;
  for (const auto& s : sagas) {
    ++by_status[std::string(saga::SagaStatusName(s.status))];
    ++by_type[s.type];
    if (saga::IsTerminal(s.status)) {
      durations.push_back(s.updated_ms - s.created_ms);
    } else {
      ++active;
      if (oldest_active == 0 || s.created_ms < oldest_active) oldest_active = s.created_ms;
    }
  }
  std::sort(durations.begin(), durations.end());
  auto pct = [&](double q) -> std::int64_t {
    if (durations.empty()) return 0;
    return durations[static_cast<std::size_t>(q * static_cast<double>(durations.size() - 1))];
  };
  return {
      {"sagas", sagas.size()},
      {"active", active},
      {"oldest_active_age_ms", AgeMs(oldest_active)},
      {"by_status", by_status},
      {"by_type", by_type},
      {"duration_ms",
       {{"p50", pct(0.5)}, {"p99", pct(0.99)}, {"max", durations.empty() ? 0 : durations.back()}}}};
}

Result<json> OutboxJson(grid::Instance& instance, std::uint32_t partition_count) {
  const partition::Partitioner partitioner(partition_count);
  auto entries = instance.GetMap(saga::kOutboxMap)->EntrySet();
  if (!entries) return std::unexpected(entries.error());
  struct Pending {
    std::int64_t events = 0;
    std::int64_t oldest_ms = 0;  // the oldest event's time
  };
  std::map<std::string, std::map<std::uint32_t, Pending>> by_service;
  std::int64_t unreadable = 0;
  for (const auto& [key, bytes] : *entries) {
    auto event = saga::DecodeEvent(bytes);
    if (!event) {
      ++unreadable;
      continue;
    }
    Pending& p = by_service[event->source][partitioner.PartitionOf(key)];
    ++p.events;
    if (p.oldest_ms == 0 || event->time_ms < p.oldest_ms) p.oldest_ms = event->time_ms;
  }
  json services = json::array();
  for (const auto& [service, partitions] : by_service) {
    std::int64_t total = 0, oldest = 0;
    json rows = json::array();
    for (const auto& [partition, p] : partitions) {
      total += p.events;
      if (oldest == 0 || p.oldest_ms < oldest) oldest = p.oldest_ms;
      rows.push_back(
          {{"partition", partition}, {"pending", p.events}, {"oldest_age_ms", AgeMs(p.oldest_ms)}});
    }
    services.push_back({{"service", service},
                        {"pending", total},
                        {"oldest_age_ms", AgeMs(oldest)},
                        {"partitions", std::move(rows)}});
  }
  return json{{"pending", static_cast<std::int64_t>(entries->size()) - unreadable},
              {"unreadable", unreadable},
              {"services", std::move(services)}};
}

}  // namespace tessera::admin
