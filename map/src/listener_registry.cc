#include "listener_registry.h"

#include <algorithm>

namespace tessera::map {

ListenerId ListenerRegistry::Add(const std::string& map_name, ListenerOptions options,
                                 EntryListener fn) {
  std::lock_guard lock(mu_);
  auto listener = std::make_shared<Listener>();
  listener->id = next_id_++;
  listener->options = std::move(options);
  listener->fn = std::move(fn);
  listener->active = std::make_shared<std::atomic<bool>>(true);
  auto next = std::make_shared<std::vector<std::shared_ptr<const Listener>>>();
  if (auto it = by_map_.find(map_name); it != by_map_.end() && it->second) *next = *it->second;
  next->push_back(listener);
  by_map_[map_name] = std::move(next);
  version_.fetch_add(1, std::memory_order_acq_rel);
  return listener->id;
}

bool ListenerRegistry::Remove(ListenerId id) {
  std::lock_guard lock(mu_);
  for (auto& [name, snapshot] : by_map_) {
    if (!snapshot) continue;
    auto it = std::find_if(snapshot->begin(), snapshot->end(),
                           [id](const auto& l) { return l->id == id; });
    if (it == snapshot->end()) continue;
    (*it)->active->store(false, std::memory_order_release);
    auto next = std::make_shared<std::vector<std::shared_ptr<const Listener>>>(*snapshot);
    next->erase(next->begin() + (it - snapshot->begin()));
    snapshot = next->empty() ? nullptr : Snapshot(std::move(next));
    version_.fetch_add(1, std::memory_order_acq_rel);
    return true;
  }
  return false;
}

ListenerRegistry::Snapshot ListenerRegistry::SnapshotOf(const std::string& map_name) const {
  std::lock_guard lock(mu_);
  auto it = by_map_.find(map_name);
  return it == by_map_.end() ? nullptr : it->second;
}

std::vector<std::pair<std::string, std::size_t>> ListenerRegistry::Counts() const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<std::string, std::size_t>> counts;
  counts.reserve(by_map_.size());
  for (const auto& [name, snapshot] : by_map_) {
    counts.emplace_back(name, snapshot ? snapshot->size() : 0);
  }
  return counts;
}

bool ListenerRegistry::WantsValues(const Snapshot& snapshot) {
  if (!snapshot) return false;
  return std::any_of(snapshot->begin(), snapshot->end(),
                     [](const auto& l) { return l->options.include_values; });
}

namespace {
bool Accepts(const ListenerOptions& options, const EntryEvent& event) {
  if (!options.key.empty() && options.key != event.key) return false;
  if (options.types.empty()) return true;
  return std::find(options.types.begin(), options.types.end(), event.type) != options.types.end();
}
}  // namespace

void ListenerRegistry::Deliver(const Snapshot& snapshot, const EntryEvent& event) {
  if (!snapshot) return;
  for (const auto& listener : *snapshot) {
    if (!listener->active->load(std::memory_order_acquire)) continue;
    if (!Accepts(listener->options, event)) continue;
    if (listener->options.include_values || event.type == EntryEventType::kCleared) {
      listener->fn(event);
      continue;
    }
    EntryEvent bare = event;  // the cleared count stays: it is the event's payload
    bare.value.reset();
    bare.old_value.reset();
    listener->fn(bare);
  }
}

}  // namespace tessera::map
