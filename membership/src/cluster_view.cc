#include "tessera/membership/cluster_view.h"

#include <algorithm>

namespace tessera::membership {

const MemberInfo* MemberList::Find(const std::string& uuid) const {
  auto it = std::find_if(members.begin(), members.end(),
                         [&](const MemberInfo& m) { return m.uuid == uuid; });
  return it == members.end() ? nullptr : &*it;
}

const MemberInfo* MemberList::FindByAddress(const std::string& address) const {
  auto it = std::find_if(members.begin(), members.end(),
                         [&](const MemberInfo& m) { return m.address == address; });
  return it == members.end() ? nullptr : &*it;
}

std::vector<std::string> MemberList::Uuids() const {
  std::vector<std::string> out;
  out.reserve(members.size());
  for (const auto& m : members) out.push_back(m.uuid);
  return out;
}

bool ClusterView::AllReplicasPresent() const {
  const std::size_t want =
      std::min<std::size_t>(partitions.backup_count + 1, members.members.size());
  if (want == 0) return false;
  return std::all_of(partitions.replicas.begin(), partitions.replicas.end(),
                     [&](const std::vector<std::string>& replicas) {
                       if (replicas.size() < want) return false;
                       return std::all_of(replicas.begin(), replicas.end(),
                                          [&](const std::string& m) { return members.Find(m); });
                     });
}

}  // namespace tessera::membership
