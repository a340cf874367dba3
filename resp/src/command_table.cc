#include "command_table.h"

#include <algorithm>
#include <string>

#include "connection.h"

namespace tessera::resp {

namespace {

constexpr std::size_t kMaxNameLength = 64;

char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// "-ERR unknown command 'foo', with args beginning with: 'a' 'b' " (as Redis words it).
void UnknownCommand(RespWriter& writer, Args args) {
  std::string text = "ERR unknown command '";
  text.append(args[0].substr(0, 128));
  text.append("', with args beginning with: ");
  std::size_t budget = 128;
  for (std::size_t i = 1; i < args.size() && budget > 0; ++i) {
    const auto arg = args[i].substr(0, budget);
    budget -= arg.size();
    text.append("'").append(arg).append("' ");
  }
  writer.Error(text);
}

bool ArityOk(int arity, std::size_t argc) {
  const auto n = static_cast<std::size_t>(arity < 0 ? -arity : arity);
  return arity < 0 ? argc >= n : argc == n;
}

}  // namespace

CommandTable::CommandTable() {
  RegisterStringCommands(*this);
  RegisterKeyCommands(*this);
  RegisterHashCommands(*this);
  RegisterPubSubCommands(*this);
  RegisterConnectionCommands(*this);
  RegisterServerCommands(*this);
  RegisterMultiCommands(*this);
  RegisterStreamCommands(*this);
}

void CommandTable::Add(CommandSpec spec) {
  by_name_[spec.name] = specs_.size();
  specs_.push_back(spec);
}

const CommandSpec* CommandTable::Find(std::string_view name) const {
  if (name.size() > kMaxNameLength) return nullptr;
  char lower[kMaxNameLength];
  std::transform(name.begin(), name.end(), lower, Lower);
  auto it = by_name_.find(std::string_view(lower, name.size()));
  return it == by_name_.end() ? nullptr : &specs_[it->second];
}

void CommandTable::Dispatch(Connection& conn, Args args) const {
  auto& cache = conn.command_cache();
  const CommandSpec* spec = cache.spec != nullptr && args[0] == cache.name ? cache.spec : nullptr;
  if (spec == nullptr) {
    spec = Find(args[0]);
    if (spec != nullptr) cache = {std::string(args[0]), spec};
  }
  // A command refused inside MULTI makes EXEC fail (EXECABORT), as in Redis.
  auto refused = [&conn] {
    if (conn.multi()) conn.multi()->dirty = true;
  };
  if (spec == nullptr) {
    auto writer = conn.Reply();
    if (!conn.authenticated()) {
      writer.Error("NOAUTH Authentication required.");
    } else {
      UnknownCommand(writer, args);
    }
    return refused();
  }
  if (!conn.authenticated() && (spec->flags & kNoAuth) == 0) {
    conn.Reply().Error("NOAUTH Authentication required.");
    return refused();
  }
  if (!ArityOk(spec->arity, args.size())) {
    conn.Reply().WrongArity(spec->name);
    return refused();
  }
  if (conn.multi() && (spec->flags & kMultiControl) == 0) return QueueInMulti(conn, *spec, args);
  if (conn.protocol() < 3 && conn.SubscriptionCount() > 0 && (spec->flags & kPubSub) == 0) {
    conn.Reply().Error("ERR Can't execute '" + std::string(spec->name) +
                       "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are "
                       "allowed in this context");
    return;
  }
  spec->handler(conn, args);
}

}  // namespace tessera::resp
