#pragma once
// EmbeddedInvoker: the member's own Invoker. Requests go straight to the MapService; results
// and listener events are handed to the EventExecutor so user code never runs on a shard.
//
// Thread-safety: safe from any thread.

#include <memory>

#include "event_executor.h"
#include "tessera/grid/invoker.h"
#include "tessera/map/map_service.h"

namespace tessera::grid {

class EmbeddedInvoker final : public Invoker {
 public:
  // Both must outlive the invoker's use (the member keeps them until Shutdown).
  EmbeddedInvoker(map::MapService& service, EventExecutor& events)
      : service_(service), events_(events) {}

  void Invoke(map::MapRequest request, Callback done) override;
  base::Result<map::MapResult> InvokeSync(map::MapRequest request) override;
  base::Result<map::ListenerId> AddEntryListener(const std::string& map_name,
                                                 map::ListenerOptions options,
                                                 map::EntryListener listener) override;
  base::Result<bool> RemoveEntryListener(map::ListenerId id) override;

 private:
  map::MapService& service_;
  EventExecutor& events_;
};

}  // namespace tessera::grid
