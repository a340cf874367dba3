// The member's per-map metric families (Member::MetricsText): what the partitions this member
// owns hold and served, by map (MapService::LocalMapStats).
#include <algorithm>

#include "member_impl.h"

namespace tessera::grid {

void SetMapMetrics(metrics::MetricsRegistry& registry,
                   std::vector<std::pair<std::string, map::MapStats>> stats) {
  if (stats.size() > kMaxMapSeries) {
    std::partial_sort(
        stats.begin(), stats.begin() + kMaxMapSeries, stats.end(),
        [](const auto& a, const auto& b) { return a.second.entries > b.second.entries; });
    stats.resize(kMaxMapSeries);
  }
  using Counters = std::vector<std::pair<metrics::Labels, std::int64_t>>;
  using Values = std::vector<std::pair<metrics::Labels, double>>;
  Values entries, memory, get_s, put_s, remove_s;
  Counters hits, misses, gets, puts, removes, expirations, evictions;
  for (const auto& [name, s] : stats) {
    const metrics::Labels labels = {{"map", name}};
    entries.emplace_back(labels, static_cast<double>(s.entries));
    memory.emplace_back(labels, static_cast<double>(s.memory_bytes));
    hits.emplace_back(labels, s.hits);
    misses.emplace_back(labels, s.misses);
    gets.emplace_back(labels, s.gets);
    puts.emplace_back(labels, s.puts);
    removes.emplace_back(labels, s.removes);
    expirations.emplace_back(labels, s.expirations);
    evictions.emplace_back(labels, s.evictions);
    get_s.emplace_back(labels, static_cast<double>(s.get_latency_ns) / 1e9);
    put_s.emplace_back(labels, static_cast<double>(s.put_latency_ns) / 1e9);
    remove_s.emplace_back(labels, static_cast<double>(s.remove_latency_ns) / 1e9);
  }
  constexpr const char* kOwned = " in the partitions this member owns";
  auto help = [kOwned](const char* what) { return std::string(what) + kOwned; };
  registry.SetGaugeFamily("tessera_map_entries",
                          help("Entries of the map (expired ones not yet swept included)"),
                          std::move(entries));
  registry.SetGaugeFamily("tessera_map_memory_bytes", help("Memory the map's entries take"),
                          std::move(memory));
  registry.SetCounterFamily("tessera_map_hits_total", help("Reads of the map that found an entry"),
                            std::move(hits));
  registry.SetCounterFamily("tessera_map_misses_total",
                            help("Reads of the map that found no entry"), std::move(misses));
  registry.SetCounterFamily("tessera_map_gets_total", help("Gets served"), std::move(gets));
  registry.SetCounterFamily("tessera_map_puts_total", help("Writes served"), std::move(puts));
  registry.SetCounterFamily("tessera_map_removes_total", help("Removes served"),
                            std::move(removes));
  registry.SetCounterFamily("tessera_map_expirations_total", help("Entries expired (TTL, idle)"),
                            std::move(expirations));
  registry.SetCounterFamily("tessera_map_evictions_total", help("Entries evicted (max entries)"),
                            std::move(evictions));
  registry.SetFractionalCounterFamily("tessera_map_get_seconds_total",
                                      help("Time spent serving the map's gets"), std::move(get_s));
  registry.SetFractionalCounterFamily("tessera_map_put_seconds_total",
                                      help("Time spent serving the map's writes"),
                                      std::move(put_s));
  registry.SetFractionalCounterFamily("tessera_map_remove_seconds_total",
                                      help("Time spent serving the map's removes"),
                                      std::move(remove_s));
}

}  // namespace tessera::grid
