// ClusterMessage <-> Cap'n Proto (src/membership.capnp). The partition table travels as
// indices into the view's member list (2 bytes per replica instead of a 36-byte uuid).
// Decoding copies into word-aligned storage, reads with limits proportional to the input and
// turns every failure into kBadRequest.
#include "tessera/membership/cluster_message.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstring>
#include <unordered_map>

#include "membership.capnp.h"

namespace tessera::membership {
namespace {

using base::ErrorCode;
using base::Fail;
namespace schema = capnp_schema;

std::string FromText(capnp::Text::Reader t) { return std::string(t.cStr(), t.size()); }

void WriteMember(schema::MemberInfo::Builder out, const MemberInfo& m) {
  out.setUuid(m.uuid);
  out.setAddress(m.address);
  out.setStartWallMs(m.start_wall_ms);
  if (!m.member_id.empty()) out.setMemberId(m.member_id);
}

MemberInfo ReadMember(schema::MemberInfo::Reader in) {
  return {FromText(in.getUuid()), FromText(in.getAddress()), in.getStartWallMs(),
          FromText(in.getMemberId())};
}

void WriteView(schema::View::Builder out, const ClusterView& view) {
  out.setListVersion(view.members.version);
  out.setTableVersion(view.partitions.version);
  out.setBackupCount(view.partitions.backup_count);
  out.setRecovered(view.partitions.recovered);
  const auto& members = view.members.members;
  auto list = out.initMembers(static_cast<unsigned>(members.size()));
  std::unordered_map<std::string, std::uint16_t> index;
  for (std::size_t i = 0; i < members.size(); ++i) {
    WriteMember(list[static_cast<unsigned>(i)], members[i]);
    index[members[i].uuid] = static_cast<std::uint16_t>(i);
  }
  const auto& replicas = view.partitions.replicas;
  auto partitions = out.initPartitions(static_cast<unsigned>(replicas.size()));
  for (std::size_t p = 0; p < replicas.size(); ++p) {
    auto slots =
        partitions.init(static_cast<unsigned>(p), static_cast<unsigned>(replicas[p].size()));
    for (std::size_t i = 0; i < replicas[p].size(); ++i) {
      auto it = index.find(replicas[p][i]);
      slots.set(static_cast<unsigned>(i), it == index.end() ? 0xffff : it->second);
    }
  }
}

base::Result<ClusterView> ReadView(schema::View::Reader in) {
  ClusterView view;
  view.members.version = in.getListVersion();
  view.partitions.version = in.getTableVersion();
  view.partitions.backup_count = in.getBackupCount();
  view.partitions.recovered = in.getRecovered();
  for (auto m : in.getMembers()) view.members.members.push_back(ReadMember(m));
  const std::size_t count = view.members.members.size();
  for (auto slots : in.getPartitions()) {
    std::vector<std::string> replicas;
    for (std::uint16_t i : slots) {
      if (i >= count) {
        return Fail(ErrorCode::kBadRequest,
                    "not a valid cluster message: partition replica names member index " +
                        std::to_string(i) + " of a " + std::to_string(count) + "-member list");
      }
      replicas.push_back(view.members.members[i].uuid);
    }
    view.partitions.replicas.push_back(std::move(replicas));
  }
  return view;
}

void WriteRecovery(schema::RecoveryReport::Builder out, const RecoveryReport& r) {
  out.setMemberId(r.member_id);
  out.setTableVersion(r.table_version);
  auto members = out.initTableMembers(static_cast<unsigned>(r.table_members.size()));
  for (unsigned i = 0; i < members.size(); ++i) members.set(i, r.table_members[i]);
  auto versions = out.initVersions(static_cast<unsigned>(r.versions.size()));
  for (unsigned i = 0; i < versions.size(); ++i) versions.set(i, r.versions[i]);
  auto held = out.initHeld(static_cast<unsigned>(r.held.size()));
  for (unsigned i = 0; i < held.size(); ++i) held.set(i, r.held[i]);
  auto owned = out.initOwned(static_cast<unsigned>(r.owned.size()));
  for (unsigned i = 0; i < owned.size(); ++i) owned.set(i, r.owned[i]);
}

RecoveryReport ReadRecovery(schema::RecoveryReport::Reader in) {
  RecoveryReport r;
  r.member_id = FromText(in.getMemberId());
  r.table_version = in.getTableVersion();
  for (auto m : in.getTableMembers()) r.table_members.push_back(FromText(m));
  for (auto v : in.getVersions()) r.versions.push_back(v);
  for (bool h : in.getHeld()) r.held.push_back(h);
  for (bool o : in.getOwned()) r.owned.push_back(o);
  return r;
}

}  // namespace

std::string_view MessageTypeName(MessageType type) {
  switch (type) {
    case MessageType::kJoinRequest:
      return "JoinRequest";
    case MessageType::kJoinRefused:
      return "JoinRefused";
    case MessageType::kJoinRedirect:
      return "JoinRedirect";
    case MessageType::kView:
      return "View";
    case MessageType::kHeartbeat:
      return "Heartbeat";
    case MessageType::kLeave:
      return "Leave";
    case MessageType::kNotMember:
      return "NotMember";
    case MessageType::kSplitProbe:
      return "SplitProbe";
    case MessageType::kSplitProbeReply:
      return "SplitProbeReply";
    case MessageType::kMergeInto:
      return "MergeInto";
  }
  return "Unknown";
}

std::string EncodeClusterMessage(const ClusterMessage& message) {
  capnp::MallocMessageBuilder builder;
  auto out = builder.initRoot<schema::ClusterMessage>();
  out.setType(static_cast<std::uint16_t>(message.type));
  WriteMember(out.initFrom(), message.from);
  out.setClusterName(message.settings.cluster_name);
  out.setProtocolVersion(message.settings.protocol_version);
  out.setPartitionCount(message.settings.partition_count);
  out.setReason(message.reason);
  out.setMasterAddress(message.master_address);
  out.setListVersion(message.list_version);
  out.setTableVersion(message.table_version);
  if (!message.master.uuid.empty()) WriteMember(out.initMaster(), message.master);
  out.setMemberCount(message.member_count);
  out.setMigrationsPending(message.migrations_pending);
  if (!message.member_uuids.empty()) {
    auto uuids = out.initMemberUuids(static_cast<unsigned>(message.member_uuids.size()));
    for (unsigned i = 0; i < uuids.size(); ++i) uuids.set(i, message.member_uuids[i]);
  }
  if (message.recovery) {
    out.setHasRecovery(true);
    WriteRecovery(out.initRecovery(), *message.recovery);
  }
  if (message.view) {
    out.setHasView(true);
    WriteView(out.initView(), *message.view);
  }
  kj::Array<capnp::word> words = capnp::messageToFlatArray(builder);
  auto bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

base::Result<ClusterMessage> DecodeClusterMessage(std::string_view bytes) {
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0) {
    return Fail(ErrorCode::kBadRequest,
                "not a valid cluster message: " + std::to_string(bytes.size()) +
                    " bytes is not a whole number of 8-byte words");
  }
  auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = words.size() * 4 + 64;
    capnp::FlatArrayMessageReader reader(words, options);
    auto in = reader.getRoot<schema::ClusterMessage>();
    ClusterMessage out;
    const std::uint16_t type = in.getType();
    if (type < 1 || type > static_cast<std::uint16_t>(MessageType::kMergeInto)) {
      return Fail(ErrorCode::kBadRequest,
                  "not a valid cluster message: unknown type " + std::to_string(type));
    }
    out.type = static_cast<MessageType>(type);
    out.from = ReadMember(in.getFrom());
    out.settings = {FromText(in.getClusterName()), in.getProtocolVersion(), in.getPartitionCount()};
    out.reason = FromText(in.getReason());
    out.master_address = FromText(in.getMasterAddress());
    out.list_version = in.getListVersion();
    out.table_version = in.getTableVersion();
    if (in.hasMaster()) out.master = ReadMember(in.getMaster());
    out.member_count = in.getMemberCount();
    out.migrations_pending = in.getMigrationsPending();
    for (auto uuid : in.getMemberUuids()) out.member_uuids.push_back(FromText(uuid));
    if (in.getHasRecovery()) out.recovery = ReadRecovery(in.getRecovery());
    if (in.getHasView()) {
      auto view = ReadView(in.getView());
      if (!view) return std::unexpected(view.error());
      out.view = std::move(*view);
    }
    return out;
  } catch (const kj::Exception& e) {
    return Fail(ErrorCode::kBadRequest,
                std::string("not a valid cluster message: ") + e.getDescription().cStr());
  }
}

}  // namespace tessera::membership
