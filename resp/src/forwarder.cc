// The outbox is sent by a handler posted to the home shard's own io_context when its first
// command is queued: asio runs it after the handlers already queued (the rest of the poll
// round), which is what gathers many connections' commands into one post. Commands run with
// MapService::ExecuteIfLocal on the owner; one that is no longer local there (partitions moved
// to another member) takes MapService::Execute and replies on its own, as does a write that
// waits for its log record (MapService::WhenLogged).
#include "forwarder.h"

#include <boost/asio/post.hpp>
#include <utility>

#include "connection.h"

namespace tessera::resp {

Forwarder::Forwarder(runtime::ShardSet& shards, map::MapService& maps)
    : shards_(shards), maps_(maps), outboxes_(shards.size()) {
  for (auto& outbox : outboxes_) outbox.to.resize(shards.size());
}

void Forwarder::Add(std::size_t from, std::size_t to, ForwardedCommand command) {
  Outbox& outbox = outboxes_[from];
  outbox.to[to].push_back(std::move(command));
  if (outbox.send_posted) return;
  outbox.send_posted = true;
  boost::asio::post(shards_.Context(from), [self = shared_from_this(), from] {
    self->outboxes_[from].send_posted = false;
    self->Send(from);
  });
}

void Forwarder::Send(std::size_t from) {
  Outbox& outbox = outboxes_[from];
  for (std::size_t to = 0; to < outbox.to.size(); ++to) {
    if (outbox.to[to].empty()) continue;
    auto batch = std::make_shared<std::vector<ForwardedCommand>>(std::move(outbox.to[to]));
    outbox.to[to].clear();
    outbox.to[to].reserve(batch->size());
    shards_.InvokeOn(to, [self = shared_from_this(), from, batch] { self->Run(from, *batch); });
  }
}

void Forwarder::Run(std::size_t from, std::vector<ForwardedCommand>& batch) {
  auto replies = std::make_shared<std::vector<Reply>>();
  replies->reserve(batch.size());
  for (auto& command : batch) {
    map::MapService::LogTicket ticket;
    auto local = maps_.ExecuteIfLocal(command.request, ticket);
    if (!local) {
      maps_.Execute(
          std::move(command.request),
          [conn = std::move(command.conn), seq = command.seq, protocol = command.protocol,
           format = std::move(command.format)](base::Result<map::MapResult> result) mutable {
            std::string data;
            RespWriter writer(data, protocol);
            format(writer, result);
            conn->DoneWithData(seq, std::move(data), /*forwarded=*/true);
          });
      continue;
    }
    std::string data;
    RespWriter writer(data, command.protocol);
    command.format(writer, *local);
    if (ticket.wait != map::Persistence::kNone) {  // replies once its log record allows
      maps_.WhenLogged(ticket, [conn = std::move(command.conn), seq = command.seq,
                                protocol = command.protocol, format = std::move(command.format),
                                data = std::move(data)](base::Result<void> logged) mutable {
        if (!logged) {
          data.clear();
          RespWriter error_writer(data, protocol);
          base::Result<map::MapResult> failed = std::unexpected(logged.error());
          format(error_writer, failed);
        }
        conn->DoneWithData(seq, std::move(data), /*forwarded=*/true);
      });
      continue;
    }
    replies->push_back({std::move(command.conn), command.seq, std::move(data)});
  }
  if (replies->empty()) return;
  shards_.InvokeOn(from, [replies] { Deliver(*replies); });
}

void Forwarder::Deliver(std::vector<Reply>& replies) {
  for (auto& reply : replies) reply.conn->DeliverReply(reply.seq, std::move(reply.data), true);
  // A connection's replies are adjacent (its commands were queued together): once per run.
  for (std::size_t i = 0; i < replies.size(); ++i) {
    if (i == 0 || replies[i].conn != replies[i - 1].conn) replies[i].conn->AfterDelivery();
  }
}

}  // namespace tessera::resp
