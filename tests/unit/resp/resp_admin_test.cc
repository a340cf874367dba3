#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "test_server.h"

using namespace tessera::resp::testing;

namespace {
tessera::resp::RespServerOptions WithSecret(std::string secret) {
  tessera::resp::RespServerOptions options;
  options.secret = std::move(secret);
  return options;
}
tessera::resp::RespServerOptions WithMaxBulk(std::int64_t bytes) {
  tessera::resp::RespServerOptions options;
  options.max_bulk_bytes = bytes;
  return options;
}
}  // namespace

TEST_CASE("PING, ECHO, SELECT, CLIENT, TIME", "[resp][admin]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"PING"}) == "+PONG\r\n");
  CHECK(c.Call({"PING", "hi"}) == Bulk("hi"));
  CHECK(c.Call({"ECHO", "x y"}) == Bulk("x y"));
  CHECK(c.Call({"SELECT", "0"}) == kOk);
  CHECK(c.Call({"SELECT", "1"}) == "-ERR DB index is out of range\r\n");
  CHECK(c.Call({"CLIENT", "GETNAME"}) == kNil);
  CHECK(c.Call({"CLIENT", "SETNAME", "worker-1"}) == kOk);
  CHECK(c.Call({"CLIENT", "GETNAME"}) == Bulk("worker-1"));
  CHECK(c.Call({"CLIENT", "SETNAME", "bad name"}) ==
        "-ERR Client names cannot contain spaces, newlines or special characters.\r\n");
  CHECK(c.Call({"CLIENT", "ID"}).rfind(":", 0) == 0);
  CHECK(c.Call({"TIME"}).rfind("*2\r\n", 0) == 0);
}

TEST_CASE("Unknown commands, wrong arity and syntax errors use Redis texts", "[resp][admin]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"FOO", "a", "b"}) ==
        "-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n");
  CHECK(c.Call({"GET"}) == "-ERR wrong number of arguments for 'get' command\r\n");
  CHECK(c.Call({"get", "a", "b"}) == "-ERR wrong number of arguments for 'get' command\r\n");
  CHECK(c.Call({"SET", "k", "v", "WHAT"}) == "-ERR syntax error\r\n");
  CHECK(c.Call({"PING"}) == "+PONG\r\n");  // the connection keeps serving
}

TEST_CASE("AUTH gates commands when a secret is set", "[resp][admin][auth]") {
  TestServer server(WithSecret("s3cret"));
  RespClient c(server.port());
  CHECK(c.Call({"GET", "k"}) == "-NOAUTH Authentication required.\r\n");
  CHECK(c.Call({"PING"}) == "-NOAUTH Authentication required.\r\n");
  CHECK(c.Call({"AUTH", "wrong"}) ==
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
  CHECK(c.Call({"AUTH", "s3cret"}) == kOk);
  CHECK(c.Call({"GET", "k"}) == kNil);
  RespClient h(server.port());
  CHECK(h.Call({"HELLO", "3", "AUTH", "default", "s3cret"}).rfind("%7\r\n", 0) == 0);
  CHECK(h.Call({"GET", "k"}) == "_\r\n");
}

TEST_CASE(
    "Before AUTH a client may send only small commands: more arguments or a longer one closes "
    "the connection with an error naming the limit, before the member reads it",
    "[resp][admin][auth]") {
  TestServer server(WithSecret("s3cret"));
  RespClient many(server.port());
  many.SendRaw("*11\r\n");
  CHECK(many.Read() ==
        "-ERR Protocol error: unauthenticated multibulk length: 11 arguments, and a client that "
        "has not authenticated may send at most 10; AUTH first\r\n");
  CHECK(many.WaitClosed());
  // A gigabyte announced: refused at its header, nothing of it read or allocated.
  RespClient big(server.port());
  big.SendRaw("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1073741824\r\n");
  CHECK(big.Read() ==
        "-ERR Protocol error: unauthenticated bulk length: an argument of 1073741824 bytes, and a "
        "client that has not authenticated may send at most 16384; AUTH first\r\n");
  CHECK(big.WaitClosed());

  // Within the limits: the usual NOAUTH, the connection stays; once authenticated, the
  // connection's own limits.
  RespClient c(server.port());
  const std::vector<std::string> ten = {"MSET", "a", "1", "b", "2", "c", "3", "d", "4", "e"};
  CHECK(c.Call(ten) == "-NOAUTH Authentication required.\r\n");
  CHECK(c.Call({"AUTH", std::string(16 * 1024, 'x')}) ==
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
  CHECK(c.Call({"AUTH", "s3cret"}) == kOk);
  CHECK(c.Call({"MSET", "a", "1", "b", "2", "c", "3", "d", "4", "e", "5", "f", "6"}) == kOk);
  const std::string value(100 * 1024, 'v');
  CHECK(c.Call({"SET", "big", value}) == kOk);
  CHECK(c.Call({"GET", "big"}) == Bulk(value));
  // RESET makes the connection unauthenticated again, with the limits before AUTH.
  CHECK(c.Call({"RESET"}) == "+RESET\r\n");
  c.SendRaw("*12\r\n");
  CHECK(c.Read().rfind("-ERR Protocol error: unauthenticated multibulk length: 12", 0) == 0);
  CHECK(c.WaitClosed());

  RespClient admin(server.port());
  CHECK(admin.Call({"AUTH", "s3cret"}) == kOk);
  const std::string info = admin.Call({"INFO", "stats"});
  CHECK(info.find("unauthenticated_rejected:3\r\n") != std::string::npos);
  CHECK(info.find("protocol_errors:3\r\n") != std::string::npos);
}

TEST_CASE(
    "A connection that has not authenticated within the timeout is told so and closed, one that "
    "has stays open",
    "[resp][admin][auth]") {
  auto options = WithSecret("s3cret");
  // Long enough that the client that logs in at once does so in time on a busy machine.
  options.unauthenticated_timeout = std::chrono::milliseconds(1000);
  TestServer server(options);
  RespClient silent(server.port());
  RespClient slow(server.port());
  CHECK(slow.Call({"PING"}) == "-NOAUTH Authentication required.\r\n");  // not a login
  RespClient quick(server.port());
  CHECK(quick.Call({"AUTH", "s3cret"}) == kOk);
  const std::string expected =
      "-ERR Protocol error: not authenticated within 1000 ms of connecting; a client of a member "
      "with a secret sends AUTH <password> (or HELLO ... AUTH) first\r\n";
  CHECK(silent.Read() == expected);
  CHECK(silent.WaitClosed());
  CHECK(slow.Read() == expected);
  CHECK(slow.WaitClosed());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // past its timeout too
  CHECK(quick.Call({"PING"}) == "+PONG\r\n");
  const std::string info = quick.Call({"INFO", "stats"});
  CHECK(info.find("unauthenticated_rejected:2\r\n") != std::string::npos);
}

TEST_CASE("Without a secret a client's commands have the connection's limits from the start",
          "[resp][admin][auth]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"MSET", "a", "1", "b", "2", "c", "3", "d", "4", "e", "5", "f", "6"}) == kOk);
  CHECK(c.Call({"SET", "big", std::string(100 * 1024, 'v')}) == kOk);
}

TEST_CASE("AUTH without a configured secret is an error", "[resp][admin][auth]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"AUTH", "x"}).rfind("-ERR AUTH <password> called without any password", 0) == 0);
  CHECK(c.Call({"HELLO", "4"}) == "-NOPROTO unsupported protocol version\r\n");
  const auto hello = c.Call({"HELLO", "2", "SETNAME", "me"});
  CHECK(hello.rfind("*14\r\n", 0) == 0);
  CHECK(hello.find(Bulk("proto") + Int(2)) != std::string::npos);
  CHECK(c.Call({"CLIENT", "GETNAME"}) == Bulk("me"));
}

TEST_CASE("INFO reports real figures", "[resp][admin][info]") {
  TestServer server;
  RespClient c(server.port());
  RespClient other(server.port());
  CHECK(other.Call({"PING"}) == "+PONG\r\n");
  CHECK(c.Call({"MSET", "a", "1", "b", "2", "c", "3"}) == kOk);
  CHECK(c.Call({"HSET", "h", "f", "v"}) == Int(1));
  const std::string info = c.Call({"INFO"});
  CHECK(info.find("connected_clients:2\r\n") != std::string::npos);
  CHECK(info.find("db0:keys=4,") != std::string::npos);  // the hash is a key of the keyspace
  CHECK(info.find("map_h:") == std::string::npos);
  CHECK(info.find("tcp_port:" + std::to_string(server.port())) != std::string::npos);
  const auto rss_at = info.find("used_memory_rss:");
  REQUIRE(rss_at != std::string::npos);
  CHECK(std::stoll(info.substr(rss_at + 16)) > 1024 * 1024);
  const auto commands_at = info.find("total_commands_processed:");
  REQUIRE(commands_at != std::string::npos);
  CHECK(std::stoll(info.substr(commands_at + 25)) >= 3);
  const std::string keyspace = c.Call({"INFO", "keyspace"});
  CHECK(keyspace.find("# Server") == std::string::npos);
  CHECK(keyspace.find("db0:keys=4") != std::string::npos);
}

TEST_CASE("COMMAND and CONFIG GET answer what tools ask", "[resp][admin]") {
  TestServer server;
  RespClient c(server.port());
  const auto count = std::stoll(c.Call({"COMMAND", "COUNT"}).substr(1));
  CHECK(count > 40);
  CHECK(c.Call({"COMMAND"}).rfind("*" + std::to_string(count) + "\r\n", 0) == 0);
  CHECK(c.Call({"COMMAND", "INFO", "get"}) == "*1\r\n*6\r\n" + Bulk("get") + Int(2) +
                                                  "*2\r\n+readonly\r\n+fast\r\n" + Int(1) + Int(1) +
                                                  Int(1));
  CHECK(c.Call({"COMMAND", "DOCS"}) == "*0\r\n");
  CHECK(c.Call({"CONFIG", "GET", "save"}) == "*2\r\n" + Bulk("save") + Bulk(""));
  CHECK(c.Call({"CONFIG", "GET", "appendonly"}) == "*2\r\n" + Bulk("appendonly") + Bulk("no"));
  CHECK(c.Call({"CONFIG", "GET", "nothing-like-this"}) == "*0\r\n");
}

TEST_CASE("A protocol error closes only that connection", "[resp][protocol]") {
  TestServer server;
  RespClient good(server.port());
  RespClient bad(server.port());
  CHECK(good.Call({"SET", "k", "v"}) == kOk);
  bad.SendRaw("*1\r\n$-3\r\n");
  CHECK(bad.Read() == "-ERR Protocol error: invalid bulk length\r\n");
  CHECK(bad.WaitClosed());
  RespClient bad2(server.port());
  bad2.SendRaw("*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n");  // a command, then half of one
  CHECK(bad2.Read() == "+PONG\r\n");
  bad2.SendRaw("x\r\n");  // garbage where a bulk header belongs
  CHECK(bad2.Read() == "-ERR Protocol error: expected '$', got 'x'\r\n");
  CHECK(bad2.WaitClosed());
  CHECK(good.Call({"GET", "k"}) == Bulk("v"));
  CHECK(server.server().Stats().protocol_errors == 2);
}

TEST_CASE("Oversized bulk is refused with the configured limit", "[resp][protocol]") {
  TestServer server(WithMaxBulk(1024));
  RespClient c(server.port());
  CHECK(c.Call({"SET", "k", std::string(1024, 'x')}) == kOk);
  c.SendRaw("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1025\r\n");
  CHECK(c.Read() == "-ERR Protocol error: invalid bulk length\r\n");
  CHECK(c.WaitClosed());
}

TEST_CASE("QUIT replies OK and closes", "[resp][admin]") {
  TestServer server;
  RespClient c(server.port());
  c.SendRaw("PING\r\nQUIT\r\nPING\r\n");
  CHECK(c.Read() == "+PONG\r\n");
  CHECK(c.Read() == kOk);
  CHECK(c.WaitClosed());
}
