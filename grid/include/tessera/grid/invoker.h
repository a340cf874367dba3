#pragma once
// Invoker: how a Map proxy reaches the data. The embedded member invokes its MapService
// directly; the client sends the request over the native protocol. One Map implementation
// serves both (see map.h), so embedded and client behave the same.
//
// Thread-safety: implementations are safe to call from any thread.

#include <functional>
#include <memory>

#include "tessera/base/error.h"
#include "tessera/base/unique_function.h"
#include "tessera/map/map_request.h"
#include "tessera/map/map_service.h"

namespace tessera::grid {

class Invoker {
 public:
  // Move-only, with room for a callback that captures a few pointers and another callback
  // (no allocation per call for it); any callable converts to it, as to a std::function.
  using Callback = base::UniqueFunction<void(base::Result<map::MapResult>), 64>;
  virtual ~Invoker() = default;

  // Runs the request; `done` is called exactly once, on an internal thread (never inline
  // with a lock held by the caller). It must not block.
  virtual void Invoke(map::MapRequest request, Callback done) = 0;
  // The same for a request the caller keeps (to send it again, say). An implementation that
  // holds requests for its retries anyway (the client) shares it; the default copies it.
  virtual void InvokeShared(std::shared_ptr<const map::MapRequest> request, Callback done) {
    Invoke(map::MapRequest(*request), std::move(done));
  }
  // A call on one key with at most a value and write options (get, set, put, putIfAbsent,
  // remove, delete, containsKey, replace): Map's async calls. The same as Invoke with the
  // request these make, which the default builds; the client encodes them straight into a
  // lean frame instead.
  virtual void InvokeKeyed(map::MapOp op, const std::string& map_name, std::string_view key,
                           std::string_view value, const map::WriteOptions& options,
                           Callback done) {
    map::MapRequest request;
    request.op = op;
    request.map_name = map_name;
    request.key = std::string(key);
    request.value = std::string(value);
    request.options = options;
    Invoke(std::move(request), std::move(done));
  }
  // Blocking form with the instance's call timeout. Errors: kTimeout, kConnectionFailed, and
  // whatever the operation reports. REQUIRES: not called from a shard or client I/O thread.
  virtual base::Result<map::MapResult> InvokeSync(map::MapRequest request) = 0;
  // The same for a request the caller keeps (Instance::Transact's Transaction, which may be
  // sent again). The client reads it where it is; the default copies it.
  virtual base::Result<map::MapResult> InvokeSyncKept(const map::MapRequest& request) {
    return InvokeSync(map::MapRequest(request));
  }

  // Entry listeners: `listener` is called on an event thread (not a shard thread), in event
  // order per key. It may block briefly; it delays later events of this instance while it does.
  virtual base::Result<map::ListenerId> AddEntryListener(const std::string& map_name,
                                                         map::ListenerOptions options,
                                                         map::EntryListener listener) = 0;
  virtual base::Result<bool> RemoveEntryListener(map::ListenerId id) = 0;
};

}  // namespace tessera::grid
