#include "embedded_invoker.h"

namespace tessera::grid {

void EmbeddedInvoker::Invoke(map::MapRequest request, Callback done) {
  EventExecutor* events = &events_;
  // The map service and the event executor take copyable callbacks: `done` (move-only) is
  // shared between their copies and called once.
  auto shared = std::make_shared<Callback>(std::move(done));
  service_.Execute(std::move(request), [events, shared](base::Result<map::MapResult> r) mutable {
    events->Post([shared, r = std::move(r)]() mutable {
      auto done = std::move(*shared);  // ends with the call, on the event thread
      done(std::move(r));
    });
  });
}

base::Result<map::MapResult> EmbeddedInvoker::InvokeSync(map::MapRequest request) {
  return service_.ExecuteSync(std::move(request));
}

base::Result<map::ListenerId> EmbeddedInvoker::AddEntryListener(const std::string& map_name,
                                                                map::ListenerOptions options,
                                                                map::EntryListener listener) {
  EventExecutor* events = &events_;
  auto shared = std::make_shared<map::EntryListener>(std::move(listener));
  return service_.AddEntryListener(map_name, std::move(options),
                                   [events, shared](const map::EntryEvent& event) {
                                     events->Post([shared, event] { (*shared)(event); });
                                   });
}

base::Result<bool> EmbeddedInvoker::RemoveEntryListener(map::ListenerId id) {
  return service_.RemoveEntryListener(id);
}

}  // namespace tessera::grid
