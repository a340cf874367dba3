#pragma once
// CommandTable: command name -> handler, arity and flags, filled by one Register* function per
// command family (strings, keys, hashes, pub/sub, connection, server). Dispatch() does the
// checks every command shares (unknown name, arity, AUTH, subscribe mode) before the handler.
//
// Thread-safety: filled once at construction, then read-only.

#include <cstdint>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tessera::resp {

class Connection;

using Args = std::span<const std::string_view>;
// A handler replies exactly once, either through conn.Reply() before returning or through a
// slot from conn.Defer(). args[0] is the command name as the client sent it.
using CommandHandler = void (*)(Connection& conn, Args args);

enum CommandFlag : std::uint32_t {
  kWrite = 1 << 0,
  kReadOnly = 1 << 1,
  kNoAuth = 1 << 2,  // allowed before AUTH
  kPubSub = 1 << 3,  // allowed in RESP2 subscribe mode
  kFast = 1 << 4,
  kAdmin = 1 << 5,
  // Queued inside MULTI and run in EXEC's partition transaction: the handler only replies at
  // once or calls CallMap, CallMapRaw, CallMapGather or CallMapSum with keyed requests
  // (multi_commands.cc compiles it).
  kMulti = 1 << 6,
  kMultiControl = 1 << 7,  // runs at once inside MULTI (MULTI, EXEC, DISCARD, RESET, QUIT)
};

struct CommandSpec {
  std::string_view name;  // lowercase
  int arity = 0;          // Redis rule: n = exactly n args (with the name), -n = at least n
  std::uint32_t flags = 0;
  int first_key = 0, last_key = 0, key_step = 0;
  CommandHandler handler = nullptr;
};

class CommandTable {
 public:
  CommandTable();

  void Add(CommandSpec spec);
  // Case-insensitive; nullptr if unknown.
  const CommandSpec* Find(std::string_view name) const;
  const std::vector<CommandSpec>& all() const { return specs_; }

  // Runs args (non-empty) on conn, replying with the shared errors when a check fails.
  void Dispatch(Connection& conn, Args args) const;

 private:
  std::vector<CommandSpec> specs_;
  std::unordered_map<std::string_view, std::size_t> by_name_;
};

void RegisterStringCommands(CommandTable& table);
void RegisterKeyCommands(CommandTable& table);
void RegisterHashCommands(CommandTable& table);
void RegisterPubSubCommands(CommandTable& table);
void RegisterConnectionCommands(CommandTable& table);
void RegisterServerCommands(CommandTable& table);
void RegisterMultiCommands(CommandTable& table);
void RegisterStreamCommands(CommandTable& table);      // stream_commands.cc
void RegisterStreamReadCommands(CommandTable& table);  // stream_read.cc
// Inside MULTI: compiles the command and replies QUEUED, or refuses it (the block then ends
// in EXECABORT). multi_commands.cc.
void QueueInMulti(Connection& conn, const CommandSpec& spec, Args args);

}  // namespace tessera::resp
