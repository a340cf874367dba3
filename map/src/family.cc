// The family registry (family.h): one slot per MapOp and per ValueKind, filled before any
// MapService runs and read without locks afterwards.
#include "tessera/map/family.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <deque>
#include <mutex>

#include "op_support.h"
#include "tessera/base/check.h"

namespace tessera::map {
namespace {

constexpr std::string_view kWrongKindText =
    "Operation against a key holding the wrong kind of value";

struct Registry {
  std::mutex mu;                 // registration only
  std::deque<FamilySpec> specs;  // stable addresses
  std::array<std::atomic<const FamilySpec*>, 256> by_op{};
  std::array<std::atomic<const FamilySpec*>, 256> by_kind{};
  std::atomic<const FamilySpec*> companions[8] = {};  // families with companion maps
};

void Add(Registry& r, const FamilySpec& spec);

Registry& Families() {
  static Registry* registry = [] {
    auto* r = new Registry;  // never destroyed: shards may look up while the process exits
    return r;
  }();
  return *registry;
}

void Add(Registry& r, const FamilySpec& spec) {
  const FamilySpec* before = r.by_op[static_cast<std::size_t>(spec.op)].load();
  TESSERA_CHECK(before == nullptr || before->name == spec.name,
                "two families registered for one op");
  if (before != nullptr) return;  // registered already (every member and RESP server asks)
  const FamilySpec& stored = r.specs.emplace_back(spec);
  r.by_op[static_cast<std::size_t>(spec.op)].store(&stored);
  for (std::size_t i = 0; i < spec.kind_count; ++i) {
    r.by_kind[static_cast<std::size_t>(spec.kinds[i])].store(&stored);
  }
  if (spec.companion_owner == nullptr) return;
  for (auto& slot : r.companions) {
    const FamilySpec* f = slot.load();
    if (f == nullptr || f->name == spec.name) {
      slot.store(&stored);
      return;
    }
  }
  TESSERA_CHECK(false, "too many families with companion maps");
}

}  // namespace

void RegisterFamily(const FamilySpec& spec) {
  TESSERA_CHECK(spec.run != nullptr && spec.writes != nullptr,
                "a family needs a handler and a writes() judgment");
  Registry& r = Families();
  std::lock_guard lock(r.mu);
  Add(r, spec);
}

const FamilySpec* FamilyOfOp(MapOp op) {
  return Families().by_op[static_cast<std::size_t>(op)].load(std::memory_order_acquire);
}

const FamilySpec* FamilyOfKind(ValueKind kind) {
  return Families().by_kind[static_cast<std::size_t>(kind)].load(std::memory_order_acquire);
}

bool HasCompanion(ValueKind kind) {
  const FamilySpec* f = FamilyOfKind(kind);
  return f != nullptr && f->has_companion != nullptr && f->has_companion(kind);
}

std::optional<CompanionOwner> CompanionOf(std::string_view map_name) {
  for (const auto& slot : Families().companions) {
    const FamilySpec* f = slot.load(std::memory_order_acquire);
    if (f == nullptr) break;
    if (auto owner = f->companion_owner(map_name)) {
      return CompanionOwner{f, std::move(owner->first), std::move(owner->second)};
    }
  }
  return std::nullopt;
}

base::Error WrongKindError() {
  return base::Error(base::ErrorCode::kWrongType, std::string(kWrongKindText),
                     base::ErrorReason::kWrongKind);
}

base::Result<void> RequireKind(const Record* r, std::initializer_list<ValueKind> kinds) {
  if (r == nullptr || std::find(kinds.begin(), kinds.end(), r->kind()) != kinds.end()) return {};
  return std::unexpected(WrongKindError());
}

bool IsWrongKindError(const base::Error& error) {
  // The text stands for the reason when the error comes from a member that predates error
  // reasons on the wire.
  return error.code() == base::ErrorCode::kWrongType &&
         (error.reason() == base::ErrorReason::kWrongKind || error.message() == kWrongKindText);
}

std::string_view ValueKindName(ValueKind kind) {
  if (kind == ValueKind::kPlain) return "string";
  const FamilySpec* family = FamilyOfKind(kind);
  return family != nullptr ? family->kind_name : "unknown";
}

void ClearLive(RecordStore& store, OpContext& ctx) { (void)detail::OpClear(store, ctx); }

}  // namespace tessera::map
