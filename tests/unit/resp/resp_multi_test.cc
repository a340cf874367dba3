// MULTI / EXEC / DISCARD: Redis's replies, executed as one partition transaction.
#include <catch2/catch.hpp>

#include "test_server.h"

using namespace tessera::resp::testing;

namespace {

const std::string kQueued = "+QUEUED\r\n";
const std::string kExecAbort = "-EXECABORT Transaction discarded because of previous errors.\r\n";

// Two keys in different partitions of `server`'s map service.
std::pair<std::string, std::string> KeysOfTwoPartitions(TestServer& server) {
  const auto& partitioner = server.maps().partitioner();
  for (int i = 1; i < 1000; ++i) {
    std::string other = "key-" + std::to_string(i);
    if (partitioner.PartitionOf(other) != partitioner.PartitionOf("key-0")) {
      return {"key-0", other};
    }
  }
  FAIL("no two partitions among 1000 keys");
  return {};
}

}  // namespace

TEST_CASE("EXEC runs the queued commands as one transaction and replies for each",
          "[resp][multi]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"SET", "{u1}:name", "old"}) == kOk);
  CHECK(c.Call({"MULTI"}) == kOk);
  CHECK(c.Call({"SET", "{u1}:name", "ada"}) == kQueued);
  CHECK(c.Call({"INCR", "{u1}:visits"}) == kQueued);
  CHECK(c.Call({"GET", "{u1}:name"}) == kQueued);
  CHECK(c.Call({"EXPIRE", "{u1}:visits", "100"}) == kQueued);
  CHECK(c.Call({"DEL", "{u1}:gone"}) == kQueued);
  // Nothing is applied before EXEC.
  RespClient other(server.port());
  CHECK(other.Call({"GET", "{u1}:name"}) == Bulk("old"));
  CHECK(c.Call({"EXEC"}) == "*5\r\n" + kOk + Int(1) + Bulk("ada") + Int(1) + Int(0));
  CHECK(other.Call({"GET", "{u1}:name"}) == Bulk("ada"));
  CHECK(other.Call({"GET", "{u1}:visits"}) == Bulk("1"));
  CHECK(other.Call({"TTL", "{u1}:visits"}) == Int(100));
}

TEST_CASE("MULTI ... EXEC sent in one pipeline, as node-redis sends it", "[resp][multi]") {
  TestServer server;
  RespClient c(server.port());
  c.SendRaw(
      "*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$6\r\n{t}:t1\r\n$1\r\nx\r\n"
      "*2\r\n$4\r\nINCR\r\n$6\r\n{t}:t2\r\n*1\r\n$4\r\nEXEC\r\n");
  CHECK(c.Read() == kOk);
  CHECK(c.Read() == kQueued);
  CHECK(c.Read() == kQueued);
  CHECK(c.Read() == "*2\r\n" + kOk + Int(1));
  CHECK(c.Call({"GET", "{t}:t1"}) == Bulk("x"));
}

TEST_CASE("Keys of two partitions in one block: CROSSSLOT, then EXECABORT, nothing applied",
          "[resp][multi]") {
  TestServer server;
  RespClient c(server.port());
  auto [a, b] = KeysOfTwoPartitions(server);
  CHECK(c.Call({"MULTI"}) == kOk);
  CHECK(c.Call({"SET", a, "1"}) == kQueued);
  const auto crossslot = c.Call({"INCR", b});
  CHECK(crossslot.rfind("-CROSSSLOT Keys in request don't hash to the same slot", 0) == 0);
  CHECK(crossslot.find("hash tag") != std::string::npos);
  CHECK(c.Call({"EXEC"}) == kExecAbort);
  CHECK(c.Call({"GET", a}) == kNil);
  CHECK(c.Call({"GET", b}) == kNil);
}

TEST_CASE("A queueing error (unknown command, wrong arity) aborts the block", "[resp][multi]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"MULTI"}) == kOk);
  CHECK(c.Call({"SET", "{t}:x", "1"}) == kQueued);
  CHECK(c.Call({"NOSUCHCMD", "{t}:x"}).rfind("-ERR unknown command", 0) == 0);
  CHECK(c.Call({"EXEC"}) == kExecAbort);
  CHECK(c.Call({"MULTI"}) == kOk);
  CHECK(c.Call({"SET", "{t}:x", "1"}) == kQueued);
  CHECK(c.Call({"GET"}) == "-ERR wrong number of arguments for 'get' command\r\n");
  CHECK(c.Call({"EXEC"}) == kExecAbort);
  CHECK(c.Call({"GET", "{t}:x"}) == kNil);
}

TEST_CASE("A command a partition transaction cannot run is refused while queueing",
          "[resp][multi]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"MULTI"}) == kOk);
  CHECK(c.Call({"SET", "{t}:x", "1"}) == kQueued);
  const auto keys = c.Call({"KEYS", "*"});
  CHECK(keys.rfind("-ERR 'keys' cannot be queued in MULTI", 0) == 0);
  CHECK(c.Call({"MGET", "{t}:x", "{t}:y"}).rfind("-ERR 'mget' cannot be queued in MULTI", 0) == 0);
  CHECK(c.Call({"EXEC"}) == kExecAbort);
  CHECK(c.Call({"GET", "{t}:x"}) == kNil);
}

TEST_CASE("An argument error found while queueing is EXEC's reply for that command",
          "[resp][multi]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"MULTI"}) == kOk);
  CHECK(c.Call({"SET", "{t}:a", "1"}) == kQueued);
  CHECK(c.Call({"INCRBY", "{t}:b", "x"}) == kQueued);  // Redis queues it too
  CHECK(c.Call({"EXEC"}) == "*2\r\n" + kOk + "-ERR value is not an integer or out of range\r\n");
  CHECK(c.Call({"GET", "{t}:a"}) == Bulk("1"));
}

TEST_CASE("A command failing at run time fails EXEC and nothing of the block is applied",
          "[resp][multi]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"SET", "{t}:s", "not-a-number"}) == kOk);
  CHECK(c.Call({"MULTI"}) == kOk);
  CHECK(c.Call({"SET", "{t}:n", "5"}) == kQueued);
  CHECK(c.Call({"INCR", "{t}:s"}) == kQueued);
  const auto exec = c.Call({"EXEC"});
  CHECK(exec.front() == '-');
  CHECK(exec.find("nothing was applied") != std::string::npos);
  CHECK(c.Call({"GET", "{t}:n"}) == kNil);
  CHECK(c.Call({"GET", "{t}:s"}) == Bulk("not-a-number"));
}

TEST_CASE("Nested MULTI, EXEC or DISCARD without MULTI, DISCARD drops the block", "[resp][multi]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"EXEC"}) == "-ERR EXEC without MULTI\r\n");
  CHECK(c.Call({"DISCARD"}) == "-ERR DISCARD without MULTI\r\n");
  CHECK(c.Call({"MULTI"}) == kOk);
  CHECK(c.Call({"MULTI"}) == "-ERR MULTI calls can not be nested\r\n");  // the block goes on
  CHECK(c.Call({"SET", "{t}:k", "v1"}) == kQueued);
  CHECK(c.Call({"EXEC"}) == "*1\r\n" + kOk);
  CHECK(c.Call({"MULTI"}) == kOk);
  CHECK(c.Call({"SET", "{t}:k", "v2"}) == kQueued);
  CHECK(c.Call({"DISCARD"}) == kOk);
  CHECK(c.Call({"GET", "{t}:k"}) == Bulk("v1"));
  CHECK(c.Call({"MULTI"}) == kOk);
  CHECK(c.Call({"EXEC"}) == "*0\r\n");  // an empty block
}

TEST_CASE("RESET inside MULTI discards the block and QUIT still closes", "[resp][multi]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"MULTI"}) == kOk);
  CHECK(c.Call({"SET", "{t}:r", "1"}) == kQueued);
  CHECK(c.Call({"RESET"}) == "+RESET\r\n");
  CHECK(c.Call({"GET", "{t}:r"}) == kNil);  // runs at once: the block is gone
  CHECK(c.Call({"EXEC"}) == "-ERR EXEC without MULTI\r\n");
  CHECK(c.Call({"MULTI"}) == kOk);
  CHECK(c.Call({"QUIT"}) == kOk);
  CHECK(c.WaitClosed());
}

TEST_CASE("WATCH: EXEC applies when the watched keys did not change, else answers nil",
          "[resp][multi][watch]") {
  TestServer server;
  RespClient c(server.port());
  RespClient other(server.port());
  CHECK(c.Call({"SET", "{w}:balance", "10"}) == kOk);
  // Unchanged: applied.
  CHECK(c.Call({"WATCH", "{w}:balance"}) == kOk);
  CHECK(c.Call({"GET", "{w}:balance"}) == Bulk("10"));
  CHECK(c.Call({"MULTI"}) == kOk);
  CHECK(c.Call({"SET", "{w}:balance", "20"}) == kQueued);
  CHECK(c.Call({"EXEC"}) == "*1\r\n" + kOk);
  // Changed by another client between WATCH and EXEC: nil, nothing applied.
  CHECK(c.Call({"WATCH", "{w}:balance"}) == kOk);
  CHECK(other.Call({"SET", "{w}:balance", "99"}) == kOk);
  CHECK(c.Call({"MULTI"}) == kOk);
  CHECK(c.Call({"SET", "{w}:balance", "30"}) == kQueued);
  CHECK(c.Call({"SET", "{w}:log", "x"}) == kQueued);
  CHECK(c.Call({"EXEC"}) == "*-1\r\n");
  CHECK(c.Call({"GET", "{w}:balance"}) == Bulk("99"));
  CHECK(c.Call({"GET", "{w}:log"}) == kNil);
  // EXEC forgot the watch: the next block applies whatever happens meanwhile.
  CHECK(other.Call({"SET", "{w}:balance", "100"}) == kOk);
  CHECK(c.Call({"MULTI"}) == kOk);
  CHECK(c.Call({"SET", "{w}:log", "y"}) == kQueued);
  CHECK(c.Call({"EXEC"}) == "*1\r\n" + kOk);
  // A watched key that was absent and is created meanwhile.
  CHECK(c.Call({"WATCH", "{w}:new"}) == kOk);
  CHECK(other.Call({"SET", "{w}:new", "1"}) == kOk);
  CHECK(c.Call({"MULTI"}) == kOk);
  CHECK(c.Call({"SET", "{w}:log", "z"}) == kQueued);
  CHECK(c.Call({"EXEC"}) == "*-1\r\n");
  // UNWATCH drops it.
  CHECK(c.Call({"WATCH", "{w}:balance"}) == kOk);
  CHECK(other.Call({"SET", "{w}:balance", "101"}) == kOk);
  CHECK(c.Call({"UNWATCH"}) == kOk);
  CHECK(c.Call({"MULTI"}) == kOk);
  CHECK(c.Call({"SET", "{w}:log", "w"}) == kQueued);
  CHECK(c.Call({"EXEC"}) == "*1\r\n" + kOk);
  CHECK(c.Call({"GET", "{w}:log"}) == Bulk("w"));
}

TEST_CASE("WATCH pipelined with its block, inside MULTI, and of another partition",
          "[resp][multi][watch]") {
  TestServer server;
  RespClient c(server.port());
  c.SendRaw(
      "*2\r\n$5\r\nWATCH\r\n$5\r\n{p}:k\r\n*1\r\n$5\r\nMULTI\r\n"
      "*3\r\n$3\r\nSET\r\n$5\r\n{p}:k\r\n$1\r\nv\r\n*1\r\n$4\r\nEXEC\r\n");
  CHECK(c.Read() == kOk);
  CHECK(c.Read() == kOk);
  CHECK(c.Read() == kQueued);
  CHECK(c.Read() == "*1\r\n" + kOk);
  CHECK(c.Call({"MULTI"}) == kOk);
  CHECK(c.Call({"WATCH", "{p}:k"}) == "-ERR WATCH inside MULTI is not allowed\r\n");
  CHECK(c.Call({"EXEC"}) == "*0\r\n");  // the error did not abort the block
  auto [a, b] = KeysOfTwoPartitions(server);
  CHECK(c.Call({"WATCH", b}) == kOk);
  CHECK(c.Call({"MULTI"}) == kOk);
  CHECK(c.Call({"SET", a, "1"}) == kQueued);
  CHECK(c.Call({"EXEC"}).rfind("-CROSSSLOT", 0) == 0);
  CHECK(c.Call({"GET", a}) == kNil);
}
