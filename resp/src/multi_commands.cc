// MULTI / EXEC / DISCARD over one partition transaction (map_service_tx.cc).
//
// A command queued inside MULTI is compiled at once: its handler runs with the connection in
// capture mode (Connection::capture), so the Call* helpers collect its keyed requests and the
// code that formats its reply instead of running them. Every key of the block must share one
// partition (the first key's); a command on another partition is refused with Redis Cluster's
// CROSSSLOT error, a command that cannot run in a partition transaction (whole-map work,
// several steps) with an error naming it, and either makes EXEC answer EXECABORT, as Redis
// does after a queueing error. EXEC sends the requests as one transaction and answers one
// reply per queued command, formatted as the command alone would have been.
//
// WATCH records the version of each watched string key (0: absent); EXEC puts them first in
// its transaction as version-equals preconditions, so a key changed since makes EXEC answer
// nil and apply nothing. A pipelined EXEC waits for the WATCH reads before it.
//
// Differences from Redis (docs/resp.md): the block is all-or-nothing: a command that fails at
// run time (INCR of a non-number) fails EXEC with that error and nothing is applied, where
// Redis applies the others; an argument error found while queueing (INCRBY k x) is returned
// in the command's place, as in Redis.
#include <algorithm>
#include <iterator>
#include <map>
#include <memory>

#include "command_util.h"

namespace tessera::resp {

namespace {

void Multi(Connection& conn, Args) {
  if (conn.multi()) return conn.Reply().Error("ERR MULTI calls can not be nested");
  conn.multi().emplace();
  conn.Reply().SimpleString("OK");
}

void Discard(Connection& conn, Args) {
  if (!conn.multi()) return conn.Reply().Error("ERR DISCARD without MULTI");
  conn.multi().reset();
  conn.watch().versions.clear();
  conn.Reply().SimpleString("OK");
}

// WATCH key...: reads each key's version; the reply (and anything waiting for it) comes once
// every version is recorded, on the connection's shard.
void Watch(Connection& conn, Args args) {
  if (conn.multi()) return conn.Reply().Error("ERR WATCH inside MULTI is not allowed");
  ReplySlot slot = conn.Defer();
  auto self = conn.shared_from_this();
  auto remaining = std::make_shared<std::size_t>(args.size() - 1);
  auto failure = std::make_shared<std::optional<base::Error>>();
  ++conn.watch().pending;
  for (std::size_t i = 1; i < args.size(); ++i) {
    conn.maps().Execute(KeyRequest(map::MapOp::kGetEntryView, conn.default_map(), args[i]),
                        [self, slot, remaining, failure,
                         key = std::string(args[i])](base::Result<map::MapResult> result) mutable {
                          self->server().shards.InvokeOn(
                              self->shard(), [self, slot, remaining, failure, key = std::move(key),
                                              result = std::move(result)]() mutable {
                                if (!result) {
                                  if (!*failure) *failure = result.error();
                                  // Unknown: a version no entry has, so EXEC answers nil.
                                  self->watch().versions[key] = -1;
                                } else {
                                  self->watch().versions[key] =
                                      result->value && result->view ? result->view->version : 0;
                                }
                                if (--*remaining > 0) return;
                                slot.Fill([&](RespWriter& writer) {
                                  if (*failure) return WriteServiceError(writer, **failure);
                                  writer.SimpleString("OK");
                                });
                                WatchState& watch = self->watch();
                                if (--watch.pending > 0) return;
                                auto after = std::move(watch.after);
                                watch.after.clear();
                                for (auto& fn : after) fn();
                              });
                        });
  }
}

void Unwatch(Connection& conn, Args) {
  conn.watch().versions.clear();
  conn.Reply().SimpleString("OK");
}

// Each queued command's replies, in order: its immediate reply, or its requests' results.
void WriteExecReplies(RespWriter& writer, std::vector<CompiledCommand>& commands,
                      std::vector<map::MapResult>& results) {
  writer.ArrayHeader(commands.size());
  std::size_t next = 0;
  for (auto& command : commands) {
    if (command.requests.empty()) {
      writer.out().append(command.immediate);
      continue;
    }
    Results mine;
    mine.reserve(command.requests.size());
    for (std::size_t i = 0; i < command.requests.size(); ++i) {
      mine.emplace_back(next < results.size() ? std::move(results[next]) : map::MapResult{});
      ++next;
    }
    command.finish(writer, mine);
  }
}

// Runs a block: the watched keys' versions as preconditions, then its commands; replies
// through `slot`.
void RunBlock(Connection& conn, MultiState state, ReplySlot slot) {
  std::map<std::string, std::int64_t, std::less<>> watched = std::move(conn.watch().versions);
  conn.watch().versions.clear();
  map::MapRequest transaction;
  transaction.op = map::MapOp::kTransact;
  const auto& partitioner = conn.maps().partitioner();
  for (const auto& [key, version] : watched) {
    if (state.first_key.empty()) state.first_key = key;
    if (partitioner.PartitionOf(key) != partitioner.PartitionOf(state.first_key)) {
      return slot.Fill([&](RespWriter& writer) {
        writer.Error("CROSSSLOT Keys in request don't hash to the same slot: watched key '" + key +
                     "' is not in the partition of '" + state.first_key +
                     "'; watch keys of the block's partition (a hash tag co-locates them)");
      });
    }
    map::TxOp& op = transaction.transaction.emplace_back();
    op.request = KeyRequest(map::MapOp::kContainsKey, conn.default_map(), key);
    op.condition = map::TxCondition::kVersionEquals;
    op.condition_version = version;
  }
  const std::size_t preconditions = transaction.transaction.size();
  transaction.key = state.first_key;
  for (auto& command : state.commands) {
    for (auto& request : command.requests) {
      map::TxOp& op = transaction.transaction.emplace_back();
      op.request = std::move(request);
    }
  }
  auto commands = std::make_shared<std::vector<CompiledCommand>>(std::move(state.commands));
  if (transaction.transaction.empty()) {  // nothing to run: immediate replies only, or none
    std::vector<map::MapResult> none;
    return slot.Fill([&](RespWriter& writer) { WriteExecReplies(writer, *commands, none); });
  }
  conn.maps().Execute(std::move(transaction),
                      [slot, commands, preconditions](base::Result<map::MapResult> result) mutable {
                        slot.Fill([&](RespWriter& writer) {
                          if (!result) return WriteServiceError(writer, result.error());
                          if (!result->flag) return writer.NullArray();  // a watched key changed
                          std::vector<map::MapResult> results(
                              std::make_move_iterator(result->results.begin() +
                                                      static_cast<std::ptrdiff_t>(std::min(
                                                          preconditions, result->results.size()))),
                              std::make_move_iterator(result->results.end()));
                          WriteExecReplies(writer, *commands, results);
                        });
                      });
}

void Exec(Connection& conn, Args) {
  if (!conn.multi()) return conn.Reply().Error("ERR EXEC without MULTI");
  MultiState state = std::move(*conn.multi());
  conn.multi().reset();
  if (state.dirty) {
    conn.watch().versions.clear();
    return conn.Reply().Error("EXECABORT Transaction discarded because of previous errors.");
  }
  ReplySlot slot = conn.Defer();
  WatchState& watch = conn.watch();
  if (watch.pending == 0) return RunBlock(conn, std::move(state), slot);
  // A WATCH sent just before (pipelined) has not recorded its versions yet: run after it.
  auto self = conn.shared_from_this();
  auto held = std::make_shared<MultiState>(std::move(state));
  watch.after.push_back([self, held, slot] { RunBlock(*self, std::move(*held), slot); });
}

}  // namespace

void QueueInMulti(Connection& conn, const CommandSpec& spec, Args args) {
  MultiState& state = *conn.multi();
  auto refuse = [&](const std::string& message) {
    state.dirty = true;
    conn.Reply().Error(message);
  };
  if ((spec.flags & kMulti) == 0) {
    return refuse("ERR '" + std::string(spec.name) +
                  "' cannot be queued in MULTI: a Tessera transaction runs on one partition "
                  "and takes the commands on single keys (docs/resp.md lists them)");
  }
  CompiledCommand compiled;
  {
    conn.set_capture(&compiled);
    struct EndCapture {
      Connection& conn;
      ~EndCapture() { conn.set_capture(nullptr); }  // also if the handler throws
    } end{conn};
    spec.handler(conn, args);
  }
  if (!compiled.unsupported.empty()) {
    return refuse("ERR '" + std::string(spec.name) + "' cannot be queued in MULTI here: it needs " +
                  compiled.unsupported + ", which a partition transaction cannot do");
  }
  const auto& partitioner = conn.maps().partitioner();
  for (const auto& request : compiled.requests) {
    const std::uint32_t partition = partitioner.PartitionOf(request.key);
    if (!state.partition) {
      state.partition = partition;
      state.first_key = request.key;
    } else if (*state.partition != partition) {
      return refuse("CROSSSLOT Keys in request don't hash to the same slot: '" + request.key +
                    "' is not in the partition of '" + state.first_key +
                    "'; a MULTI block runs on one partition: co-locate its keys with a hash tag "
                    "({user1}:a, {user1}:b) or a partition key (a@user1, b@user1)");
    }
  }
  state.commands.push_back(std::move(compiled));
  conn.Reply().SimpleString("QUEUED");
}

void RegisterMultiCommands(CommandTable& table) {
  table.Add({"multi", 1, kFast | kMultiControl, 0, 0, 0, Multi});
  table.Add({"exec", 1, kMultiControl, 0, 0, 0, Exec});
  table.Add({"discard", 1, kFast | kMultiControl, 0, 0, 0, Discard});
  table.Add({"watch", -2, kFast | kMultiControl, 1, -1, 1, Watch});
  table.Add({"unwatch", 1, kFast | kMultiControl, 0, 0, 0, Unwatch});
}

}  // namespace tessera::resp
