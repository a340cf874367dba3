// Entry listeners: registered on every member connection (each member reports the events of
// the partitions it owns). AddEntryListener returns once every member connection open or being
// opened at the call answered, so events of writes made after it returns are reported.
#include "client_impl.h"
#include "native_protocol.h"
#include "tessera/map/map_codec.h"
#include "tessera/record/generic_record.h"

namespace tessera::grid {

using base::ErrorCode;
using Clock = Client::Impl::Clock;
template <typename T>
using Result = base::Result<T>;

wire::Message Client::Impl::AddListenerMessage(const ListenerEntry& entry) {
  std::string payload = record::GenericRecord::Build()
                            .String("map", entry.map_name)
                            .BytesField("options", map::EncodeListenerOptions(entry.options))
                            .Done()
                            .Encode();
  return wire::Message::MakeRequest(0, -1, wire::Service::kMap, native::kMapAddListener,
                                    std::move(payload));
}

Result<std::int64_t> Client::Impl::ServerIdOf(Result<wire::Message> response) {
  if (!response) return std::unexpected(response.error());
  auto rec = record::GenericRecord::Decode(response->payload);
  if (!rec) return std::unexpected(rec.error());
  return rec->GetInt64("id");
}

wire::Message Client::Impl::RemoveListenerMessage(std::int64_t server_id) {
  auto payload = record::GenericRecord::Build().Int64("id", server_id).Done().Encode();
  return wire::Message::MakeRequest(0, -1, wire::Service::kMap, native::kMapRemoveListener,
                                    std::move(payload));
}

void Client::Impl::OnRegistered(const std::string& address, std::uint64_t generation,
                                map::ListenerId id, Result<std::int64_t> server_id) {
  std::shared_ptr<net::ClientConnection> undo;
  bool stale = false;
  {
    std::lock_guard lock(mu);
    auto it = peers.find(address);
    stale = it == peers.end() || it->second.generation != generation;
    if (!stale) {
      Peer& peer = it->second;
      if (!server_id) {
        peer.server_ids.erase(id);
        if (listeners.count(id) != 0) {
          peer.refused.insert_or_assign(
              id, base::Error(server_id.error().code(), "registering the listener on member " +
                                                            address + ": " +
                                                            server_id.error().message()));
        }
      } else if (listeners.count(id) == 0) {
        undo = peer.conn;
        peer.server_ids.erase(id);
      } else {
        peer.server_ids[id] = *server_id;
      }
    }
  }
  connected_cv.notify_all();
  if (!server_id) {
    if (!stale) {
      log->warn("could not register entry listener {} on member {}: {}", id, address,
                server_id.error().message());
    }
    return;
  }
  if (undo) undo->Call(RemoveListenerMessage(*server_id), options.call_timeout, [](auto) {});
}

Result<void> Client::Impl::WaitForRegistrations(map::ListenerId id,
                                                const std::vector<PeerAttempt>& attempts,
                                                Clock::time_point deadline) {
  std::unique_lock lock(mu);
  std::optional<base::Error> error;
  std::string waiting_for;
  auto done = [&] {
    waiting_for.clear();
    for (const auto& [address, generation] : attempts) {
      auto it = peers.find(address);
      if (stopping || it == peers.end() || it->second.generation != generation) continue;
      const Peer& peer = it->second;
      if (auto refused = peer.refused.find(id); refused != peer.refused.end()) {
        error = refused->second;
        return true;
      }
      auto registered = peer.server_ids.find(id);
      if (peer.connecting || (registered != peer.server_ids.end() && registered->second == 0)) {
        waiting_for = address;
        return false;
      }
    }
    return true;
  };
  if (!connected_cv.wait_until(lock, deadline, done)) {
    return base::Fail(ErrorCode::kTimeout,
                      "member " + waiting_for +
                          " did not answer the listener registration within the connect and "
                          "call timeouts; is it overloaded? The listener was not added");
  }
  if (error) return std::unexpected(*error);
  return {};
}

Result<map::ListenerId> Client::Impl::AddEntryListener(const std::string& map_name,
                                                       map::ListenerOptions options_in,
                                                       map::EntryListener listener) {
  ListenerEntry entry{map_name, std::move(options_in),
                      std::make_shared<map::EntryListener>(std::move(listener))};
  auto message = AddListenerMessage(entry);
  struct On {
    std::string address;
    std::uint64_t generation;
    std::shared_ptr<net::ClientConnection> conn;
  };
  std::vector<On> on;
  std::vector<PeerAttempt> involved;  // every member connected or being connected to
  map::ListenerId id = 0;
  {
    std::lock_guard lock(mu);
    id = next_listener_id++;
    listeners.emplace(id, std::move(entry));
    for (auto& [address, peer] : peers) {
      if (peer.conn && peer.conn->is_open()) {
        peer.server_ids[id] = 0;
        on.push_back({address, peer.generation, peer.conn});
        involved.push_back({address, peer.generation});
      } else if (peer.connecting) {
        involved.push_back({address, peer.generation});  // OnPeerConnected registers it
      }
    }
  }
  // Every member at once; each answers before our call returns, so events of writes made
  // after this call are reported.
  std::weak_ptr<Impl> weak = weak_from_this();
  for (auto& o : on) {
    o.conn->Call(
        message, options.call_timeout,
        [weak, address = o.address, generation = o.generation, id](Result<wire::Message> r) {
          if (auto self = weak.lock()) {
            self->OnRegistered(address, generation, id, ServerIdOf(std::move(r)));
          }
        });
  }
  auto registered = WaitForRegistrations(
      id, involved, Clock::now() + options.connect_timeout + options.call_timeout);
  if (!registered) {
    (void)RemoveEntryListener(id);
    return std::unexpected(registered.error());
  }
  return id;
}

Result<bool> Client::Impl::RemoveEntryListener(map::ListenerId id) {
  std::vector<std::pair<std::shared_ptr<net::ClientConnection>, std::int64_t>> registered;
  {
    std::lock_guard lock(mu);
    if (listeners.erase(id) == 0) return false;
    for (auto& [address, peer] : peers) {
      peer.refused.erase(id);
      auto it = peer.server_ids.find(id);
      if (it == peer.server_ids.end()) continue;
      // 0: still registering; OnRegistered undoes it when the answer comes.
      if (it->second != 0 && peer.conn) registered.emplace_back(peer.conn, it->second);
      if (it->second != 0) peer.server_ids.erase(it);
    }
  }
  std::optional<base::Error> error;
  for (auto& [conn, server_id] : registered) {
    auto r = conn->CallSync(RemoveListenerMessage(server_id), options.call_timeout);
    // A member that went away dropped the listener with the connection.
    if (!r && r.error().code() != ErrorCode::kMemberLeft &&
        r.error().code() != ErrorCode::kConnectionFailed && !error) {
      error = r.error();
    }
  }
  if (error) return std::unexpected(*error);
  return true;
}

void Client::Impl::OnPeerEvent(const std::string& address, wire::Message event) {
  if (event.service != wire::Service::kMap || event.op != native::kMapEntryEvent) return;
  auto rec = record::GenericRecord::Decode(event.payload);
  if (!rec) return;
  auto server_id = rec->GetInt64("listener");
  const record::Value* bytes = rec->Find("event");
  if (!server_id || !bytes || bytes->type() != record::FieldType::kBytes) return;
  auto decoded = map::DecodeEvent(bytes->AsBytes().data);
  if (!decoded) {
    log->warn("dropping an undecodable entry event: {}", decoded.error().message());
    return;
  }
  std::shared_ptr<map::EntryListener> target;
  {
    std::lock_guard lock(mu);
    auto peer = peers.find(address);
    if (peer == peers.end()) return;
    for (auto& [id, sid] : peer->second.server_ids) {
      if (sid != *server_id) continue;
      auto it = listeners.find(id);
      if (it != listeners.end()) target = it->second.listener;
    }
  }
  if (!target) return;
  events.Post([target, e = std::move(*decoded)] { (*target)(e); });
}

}  // namespace tessera::grid
