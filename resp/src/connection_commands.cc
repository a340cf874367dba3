// Connection family: PING, ECHO, QUIT, RESET, AUTH, HELLO, SELECT, CLIENT. These touch only
// the connection's own state and reply at once.
#include "command_util.h"
#include "tessera/base/secret.h"

namespace tessera::resp {

namespace {

constexpr std::string_view kServerVersion = "7.0.0";

void Ping(Connection& conn, Args args) {
  if (args.size() > 2) return conn.Reply().WrongArity("ping");
  auto writer = conn.Reply();
  if (conn.protocol() < 3 && conn.SubscriptionCount() > 0) {
    writer.ArrayHeader(2);
    writer.Bulk("pong");
    writer.Bulk(args.size() == 2 ? args[1] : "");
  } else if (args.size() == 2) {
    writer.Bulk(args[1]);
  } else {
    writer.SimpleString("PONG");
  }
}

void Echo(Connection& conn, Args args) { conn.Reply().Bulk(args[1]); }

void Quit(Connection& conn, Args) {
  conn.Reply().SimpleString("OK");
  conn.CloseAfterReplies();
}

void Reset(Connection& conn, Args) {
  conn.multi().reset();  // discards a MULTI block and the watched keys, as Redis does
  conn.watch().versions.clear();
  for (const auto& channel : conn.Channels()) conn.UnsubscribeChannel(channel);
  for (const auto& pattern : conn.Patterns()) conn.UnsubscribePattern(pattern);
  conn.set_protocol(2);
  conn.set_name("");
  conn.set_authenticated(conn.server().options.secret.empty());
  conn.Reply().SimpleString("RESET");
}

// Checks credentials; writes the error and returns false when they are wrong.
bool CheckAuth(Connection& conn, std::string_view user, std::string_view password) {
  const auto& secret = conn.server().options.secret;
  if (secret.empty()) {
    conn.Reply().Error(
        "ERR AUTH <password> called without any password configured for the default user. "
        "Are you sure your configuration is correct?");
    return false;
  }
  // Both compared whatever the first says (a wrong user takes as long as a wrong password).
  const bool user_ok = user == "default";
  if (!base::ConstantTimeEquals(password, secret) || !user_ok) {
    conn.Reply().Error("WRONGPASS invalid username-password pair or user is disabled.");
    return false;
  }
  conn.set_authenticated(true);
  return true;
}

void Auth(Connection& conn, Args args) {
  if (args.size() > 3) return conn.Reply().SyntaxError();
  const std::string_view user = args.size() == 3 ? args[1] : "default";
  if (CheckAuth(conn, user, args.back())) conn.Reply().SimpleString("OK");
}

bool ValidClientName(std::string_view name) {
  for (char c : name) {
    if (c < '!' || c > '~') return false;
  }
  return true;
}

void WriteHello(Connection& conn) {
  auto writer = conn.Reply();
  writer.MapHeader(7);
  writer.Bulk("server");
  writer.Bulk("redis");
  writer.Bulk("version");
  writer.Bulk(kServerVersion);
  writer.Bulk("proto");
  writer.Integer(conn.protocol());
  writer.Bulk("id");
  writer.Integer(static_cast<std::int64_t>(conn.id()));
  writer.Bulk("mode");
  writer.Bulk("standalone");
  writer.Bulk("role");
  writer.Bulk("master");
  writer.Bulk("modules");
  writer.ArrayHeader(0);
}

// HELLO [protover [AUTH username password] [SETNAME clientname]]
void Hello(Connection& conn, Args args) {
  std::int64_t version = conn.protocol();
  if (args.size() >= 2 && (!ParseInt64(args[1], version))) {
    return conn.Reply().Error("ERR Protocol version is not an integer or out of range");
  }
  if (version != 2 && version != 3) {
    return conn.Reply().Error("NOPROTO unsupported protocol version");
  }
  std::optional<std::string> name;
  for (std::size_t i = 2; i < args.size(); ++i) {
    if (EqualsIgnoreCase(args[i], "auth") && i + 2 < args.size()) {
      if (!CheckAuth(conn, args[i + 1], args[i + 2])) return;
      i += 2;
    } else if (EqualsIgnoreCase(args[i], "setname") && i + 1 < args.size()) {
      name.emplace(args[++i]);
    } else {
      return conn.Reply().Error("ERR Syntax error in HELLO option '" + std::string(args[i]) + "'");
    }
  }
  if (!conn.authenticated()) {
    return conn.Reply().Error(
        "NOAUTH HELLO must be called with the client already authenticated, otherwise the "
        "HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and "
        "select the RESP protocol version at the same time");
  }
  if (name) {
    if (!ValidClientName(*name)) {
      return conn.Reply().Error(
          "ERR Client names cannot contain spaces, newlines or special characters.");
    }
    conn.set_name(std::move(*name));
  }
  conn.set_protocol(static_cast<int>(version));
  WriteHello(conn);
}

void Select(Connection& conn, Args args) {
  std::int64_t db = 0;
  if (!ParseInt64(args[1], db)) return conn.Reply().NotInteger();
  if (db != 0) return conn.Reply().Error("ERR DB index is out of range");
  conn.Reply().SimpleString("OK");
}

void ClientInfo(Connection& conn, RespWriter& writer) {
  writer.Bulk("id=" + std::to_string(conn.id()) + " addr=" + conn.address() +
              " name=" + conn.name() + " db=0 sub=" + std::to_string(conn.Channels().size()) +
              " psub=" + std::to_string(conn.Patterns().size()) +
              " resp=" + std::to_string(conn.protocol()) + "\n");
}

// CLIENT ID | GETNAME | SETNAME name | SETINFO attr value | INFO | LIST
void Client(Connection& conn, Args args) {
  auto writer = conn.Reply();
  const std::string sub = Lowercase(args[1]);
  if (sub == "id" && args.size() == 2) {
    writer.Integer(static_cast<std::int64_t>(conn.id()));
  } else if (sub == "getname" && args.size() == 2) {
    if (conn.name().empty()) return writer.Null();
    writer.Bulk(conn.name());
  } else if (sub == "setname" && args.size() == 3) {
    if (!ValidClientName(args[2])) {
      return writer.Error(
          "ERR Client names cannot contain spaces, newlines or special characters.");
    }
    conn.set_name(std::string(args[2]));
    writer.SimpleString("OK");
  } else if (sub == "setinfo" && args.size() == 4) {
    writer.SimpleString("OK");  // library name/version: accepted, not kept
  } else if ((sub == "info" && args.size() == 2) || (sub == "list" && args.size() == 2)) {
    ClientInfo(conn, writer);  // LIST shows this connection only
  } else {
    writer.Error("ERR unknown subcommand or wrong number of arguments for '" +
                 std::string(args[1]) + "'. Try CLIENT HELP.");
  }
}

}  // namespace

void RegisterConnectionCommands(CommandTable& table) {
  table.Add({"ping", -1, kFast | kPubSub, 0, 0, 0, Ping});
  table.Add({"echo", 2, kFast, 0, 0, 0, Echo});
  table.Add({"quit", -1, kNoAuth | kPubSub | kFast | kMultiControl, 0, 0, 0, Quit});
  table.Add({"reset", 1, kNoAuth | kPubSub | kFast | kMultiControl, 0, 0, 0, Reset});
  table.Add({"auth", -2, kNoAuth | kFast, 0, 0, 0, Auth});
  table.Add({"hello", -1, kNoAuth | kFast, 0, 0, 0, Hello});
  table.Add({"select", 2, kFast, 0, 0, 0, Select});
  table.Add({"client", -2, kAdmin, 0, 0, 0, Client});
}

}  // namespace tessera::resp
