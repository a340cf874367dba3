// One keyspace (issue 19 part 3): strings and hashes are entries of one map, each of its kind,
// so the key commands see every kind and a command of the wrong kind answers WRONGTYPE.
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "tessera/hash/redis_hash.h"
#include "tessera/map/stream_format.h"
#include "test_server.h"

using namespace tessera;
using namespace tessera::resp::testing;

namespace {
const std::string kWrongType =
    "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

// Entries in the field map of spilled hash `key` (what a removed hash must not leave behind).
std::int64_t FieldMapSize(TestServer& server, const std::string& key) {
  map::MapRequest size;
  size.op = map::MapOp::kSize;
  size.map_name = tessera::hash::HashFieldMap("default", key);
  auto result = server.maps().ExecuteSync(size);
  REQUIRE(result);
  return result->count;
}

// HSET key f0 v f1 v ... with `fields` fields.
std::vector<std::string> BigHset(const std::string& key, int fields) {
  std::vector<std::string> args{"HSET", key};
  for (int i = 0; i < fields; ++i) {
    args.push_back("f" + std::to_string(i));
    args.push_back("v" + std::to_string(i));
  }
  return args;
}
}  // namespace

TEST_CASE("One keyspace: SCAN KEYS DBSIZE and TYPE see hashes and WRONGTYPE guards each kind",
          "[resp][keyspace]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"SET", "s", "v"}) == kOk);
  CHECK(c.Call({"HSET", "h", "f", "v"}) == Int(1));
  CHECK(c.Call({"DBSIZE"}) == Int(2));
  const std::string keys = c.Call({"KEYS", "*"});
  CHECK(keys.rfind("*2\r\n", 0) == 0);
  CHECK(keys.find(Bulk("h")) != std::string::npos);
  const std::string scan = c.Call({"SCAN", "0", "COUNT", "100"});
  CHECK(scan.find(Bulk("h")) != std::string::npos);
  CHECK(scan.find(Bulk("s")) != std::string::npos);
  CHECK(c.Call({"SCAN", "0", "COUNT", "100", "TYPE", "hash"}) ==
        "*2\r\n" + Bulk("0") + "*1\r\n" + Bulk("h"));
  CHECK(c.Call({"SCAN", "0", "COUNT", "100", "TYPE", "string"}) ==
        "*2\r\n" + Bulk("0") + "*1\r\n" + Bulk("s"));
  CHECK(c.Call({"TYPE", "s"}) == "+string\r\n");
  CHECK(c.Call({"TYPE", "h"}) == "+hash\r\n");
  CHECK(c.Call({"TYPE", "nope"}) == "+none\r\n");

  // Wrong kind, both ways; nothing changes.
  CHECK(c.Call({"GET", "h"}) == kWrongType);
  CHECK(c.Call({"INCR", "h"}) == kWrongType);
  CHECK(c.Call({"GETSET", "h", "x"}) == kWrongType);
  CHECK(c.Call({"GETDEL", "h"}) == kWrongType);
  CHECK(c.Call({"HSET", "s", "f", "v"}) == kWrongType);
  CHECK(c.Call({"HGET", "s", "f"}) == kWrongType);
  CHECK(c.Call({"HLEN", "s"}) == kWrongType);
  CHECK(c.Call({"SET", "h", "x", "XX", "GET"}) == kWrongType);  // and the hash stays
  CHECK(c.Call({"SET", "h", "x", "NX", "GET"}) == kWrongType);
  CHECK(c.Call({"SET", "s", "w", "XX", "GET"}) == Bulk("v"));
  CHECK(c.Call({"SET", "s", "v", "XX", "GET"}) == Bulk("w"));
  CHECK(c.Call({"SET", "nx", "1", "NX", "GET"}) == kNil);
  CHECK(c.Call({"DEL", "nx"}) == Int(1));
  CHECK(c.Call({"HSET", "h", "n", "007"}) == Int(1));
  CHECK(c.Call({"HINCRBY", "h", "n", "1"}) == "-ERR hash value is not an integer\r\n");
  CHECK(c.Call({"HDEL", "h", "n"}) == Int(1));
  CHECK(c.Call({"MGET", "s", "h"}) == "*2\r\n" + Bulk("v") + kNil);
  CHECK(c.Call({"HGET", "h", "f"}) == Bulk("v"));
  CHECK(c.Call({"GET", "s"}) == Bulk("v"));

  // EXPIRE, TTL, PERSIST act on a hash as on a string.
  CHECK(c.Call({"EXPIRE", "h", "100"}) == Int(1));
  CHECK(c.Call({"TTL", "h"}) == Int(100));
  CHECK(c.Call({"PERSIST", "h"}) == Int(1));
  CHECK(c.Call({"TTL", "h"}) == Int(-1));

  // SET replaces any kind, as Redis's SET does; DEL and EXISTS count a hash once.
  CHECK(c.Call({"SET", "h", "now a string"}) == kOk);
  CHECK(c.Call({"TYPE", "h"}) == "+string\r\n");
  CHECK(c.Call({"HSET", "h2", "a", "1", "b", "2"}) == Int(2));
  CHECK(c.Call({"EXISTS", "h2", "s", "nope"}) == Int(2));
  CHECK(c.Call({"DEL", "h2", "nope"}) == Int(1));
  CHECK(c.Call({"HLEN", "h2"}) == Int(0));
  CHECK(c.Call({"DBSIZE"}) == Int(2));
}

TEST_CASE("A large hash keeps its fields in a map of its own and takes it when it goes",
          "[resp][keyspace][hash]") {
  TestServer server;
  RespClient c(server.port());
  // Past 128 fields: spilled.
  CHECK(c.Call(BigHset("big", 200)) == Int(200));
  CHECK(FieldMapSize(server, "big") == 200);
  CHECK(c.Call({"HLEN", "big"}) == Int(200));
  CHECK(c.Call({"HGET", "big", "f150"}) == Bulk("v150"));
  CHECK(c.Call({"HSET", "big", "f1", "new", "f200", "v"}) == Int(1));
  CHECK(c.Call({"HGET", "big", "f1"}) == Bulk("new"));
  CHECK(c.Call({"HDEL", "big", "f1", "f2", "none"}) == Int(2));
  CHECK(c.Call({"HLEN", "big"}) == Int(199));
  CHECK(c.Call({"HGETALL", "big"}).rfind("*398\r\n", 0) == 0);
  CHECK(c.Call({"HINCRBY", "big", "n", "5"}) == Int(5));
  CHECK(c.Call({"TYPE", "big"}) == "+hash\r\n");
  CHECK(c.Call({"DBSIZE"}) == Int(1));  // its fields are not keys
  CHECK(c.Call({"KEYS", "*"}) == "*1\r\n" + Bulk("big"));

  // A value over 64 bytes spills a one-field hash; DEL takes its fields.
  CHECK(c.Call({"HSET", "wide", "f", std::string(100, 'x')}) == Int(1));
  CHECK(FieldMapSize(server, "wide") == 1);
  CHECK(c.Call({"HGET", "wide", "f"}) == Bulk(std::string(100, 'x')));
  CHECK(c.Call({"DEL", "wide"}) == Int(1));
  CHECK(FieldMapSize(server, "wide") == 0);

  // SET over a large hash, and its expiry, clear the fields too.
  CHECK(c.Call({"SET", "big", "s"}) == kOk);
  CHECK(FieldMapSize(server, "big") == 0);
  CHECK(c.Call({"HLEN", "big"}) == kWrongType);
  CHECK(c.Call(BigHset("brief", 150)) == Int(150));
  CHECK(c.Call({"PEXPIRE", "brief", "20"}) == Int(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  CHECK(c.Call({"HLEN", "brief"}) == Int(0));
  CHECK(FieldMapSize(server, "brief") == 0);

  // Emptied field by field, the hash goes.
  CHECK(c.Call(BigHset("shrink", 130)) == Int(130));
  std::vector<std::string> hdel{"HDEL", "shrink"};
  for (int i = 0; i < 130; ++i) hdel.push_back("f" + std::to_string(i));
  CHECK(c.Call(hdel) == Int(130));
  CHECK(c.Call({"EXISTS", "shrink"}) == Int(0));
}

TEST_CASE("RENAME and RENAMENX move a key of any kind within its partition",
          "[resp][keyspace][rename]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"SET", "{t}a", "1"}) == kOk);
  CHECK(c.Call({"EXPIRE", "{t}a", "100"}) == Int(1));
  CHECK(c.Call({"RENAME", "{t}a", "{t}b"}) == kOk);
  CHECK(c.Call({"GET", "{t}b"}) == Bulk("1"));
  CHECK(c.Call({"TTL", "{t}b"}) == Int(100));  // the TTL moves with it
  CHECK(c.Call({"EXISTS", "{t}a"}) == Int(0));
  CHECK(c.Call({"RENAME", "{t}missing", "{t}x"}) == "-ERR no such key\r\n");
  CHECK(c.Call({"RENAME", "{t}a", "{u}b"}).rfind("-CROSSSLOT", 0) == 0);

  // A small hash, and a large one with its fields; RENAMENX leaves an existing target alone.
  CHECK(c.Call({"HSET", "{t}h", "f", "v"}) == Int(1));
  CHECK(c.Call({"RENAMENX", "{t}h", "{t}b"}) == Int(0));
  CHECK(c.Call({"RENAMENX", "{t}h", "{t}h2"}) == Int(1));
  CHECK(c.Call({"HGET", "{t}h2", "f"}) == Bulk("v"));
  CHECK(c.Call(BigHset("{t}big", 140)) == Int(140));
  CHECK(c.Call({"RENAME", "{t}big", "{t}h2"}) == kOk);  // replaces the small hash
  CHECK(c.Call({"HLEN", "{t}h2"}) == Int(140));
  CHECK(c.Call({"HGET", "{t}h2", "f139"}) == Bulk("v139"));
  CHECK(FieldMapSize(server, "{t}big") == 0);
  CHECK(FieldMapSize(server, "{t}h2") == 140);
  CHECK(c.Call({"TYPE", "{t}big"}) == "+none\r\n");
}

TEST_CASE("Hash commands join MULTI blocks and a failed block leaves no hash behind",
          "[resp][keyspace][multi]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"MULTI"}) == kOk);
  CHECK(c.Call({"HSET", "{t}h", "f", "v"}) == "+QUEUED\r\n");
  CHECK(c.Call({"HGET", "{t}h", "f"}) == "+QUEUED\r\n");
  CHECK(c.Call({"HLEN", "{t}h"}) == "+QUEUED\r\n");
  CHECK(c.Call({"SET", "{t}s", "1"}) == "+QUEUED\r\n");
  CHECK(c.Call({"EXEC"}) == "*4\r\n" + Int(1) + Bulk("v") + Int(1) + kOk);

  // A large hash written in a block whose later command fails: nothing of it stays, not even
  // the fields its spill wrote into the field map.
  CHECK(c.Call({"MULTI"}) == kOk);
  CHECK(c.Call(BigHset("{t}big", 150)) == "+QUEUED\r\n");
  CHECK(c.Call({"INCR", "{t}h"}) == "+QUEUED\r\n");
  const std::string failed = c.Call({"EXEC"});
  CHECK(failed.rfind("-", 0) == 0);
  CHECK(c.Call({"EXISTS", "{t}big"}) == Int(0));
  CHECK(FieldMapSize(server, "{t}big") == 0);
  CHECK(c.Call({"HLEN", "{t}h"}) == Int(1));
}

namespace {
// XLEN of `key` once it is `want`, or what it was after 2 s (a stream's records go right after
// its key; the owner sends that removal before it answers).
std::string XLenSettles(RespClient& c, const std::string& key, std::int64_t want) {
  std::string got;
  for (int i = 0; i < 200; ++i) {
    got = c.Call({"XLEN", key});
    if (got == Int(want)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return got;
}

// Whether stream `key`'s records are gone within 2 s (asked of the member directly: a RESP
// stream command on a key of another kind answers WRONGTYPE).
bool StreamGone(TestServer& server, const std::string& key) {
  for (int i = 0; i < 200; ++i) {
    map::MapRequest len;
    len.op = map::MapOp::kRedisStream;
    len.map_name = map::kStreamMap;
    len.key = map::StreamMetaKey(key + "#0");
    len.argument = record::GenericRecord::Build().String("cmd", "len").Done();
    auto result = server.maps().ExecuteSync(len);
    if (result && !result->flag && result->count == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}
}  // namespace

TEST_CASE(
    "Streams are keys: SCAN DBSIZE TYPE EXPIRE and WRONGTYPE see them and their entries go "
    "with their key",
    "[resp][keyspace][stream]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"XADD", "s", "1-0", "a", "1"}) == Bulk("1-0"));
  CHECK(c.Call({"SET", "str", "v"}) == kOk);
  CHECK(c.Call({"DBSIZE"}) == Int(2));
  CHECK(c.Call({"SCAN", "0", "COUNT", "100", "TYPE", "stream"}) ==
        "*2\r\n" + Bulk("0") + "*1\r\n" + Bulk("s"));
  CHECK(c.Call({"KEYS", "s"}) == "*1\r\n" + Bulk("s"));
  CHECK(c.Call({"TYPE", "s"}) == "+stream\r\n");
  CHECK(c.Call({"EXISTS", "s", "str"}) == Int(2));
  CHECK(c.Call({"GET", "s"}) == kWrongType);
  CHECK(c.Call({"HSET", "s", "f", "v"}) == kWrongType);
  CHECK(c.Call({"XADD", "{r}st", "1-0", "a", "1"}) == Bulk("1-0"));
  CHECK(
      c.Call({"RENAME", "{r}st", "{r}st2"}).rfind("-ERR RENAME of a stream is not supported", 0) ==
      0);
  CHECK(c.Call({"SET", "{r}str", "v"}) == kOk);
  CHECK(c.Call({"RENAME", "{r}str", "{r}st"}).rfind("-ERR RENAME onto a stream", 0) == 0);
  CHECK(c.Call({"DEL", "{r}st", "{r}str"}) == Int(2));
  CHECK(c.Call({"XLEN", "s"}) == Int(1));

  // SET replaces the stream, as in Redis: its entries go.
  CHECK(c.Call({"SET", "s", "now a string"}) == kOk);
  CHECK(c.Call({"TYPE", "s"}) == "+string\r\n");
  CHECK(c.Call({"XLEN", "s"}) == kWrongType);
  CHECK(StreamGone(server, "s"));
  CHECK(c.Call({"GET", "s"}) == Bulk("now a string"));

  // A stream with a TTL goes, entries and all, when it expires.
  CHECK(c.Call({"XADD", "brief", "*", "a", "1"}).rfind("$", 0) == 0);
  CHECK(c.Call({"PEXPIRE", "brief", "30"}) == Int(1));
  CHECK(c.Call({"PTTL", "brief"}).rfind(":", 0) == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  CHECK(c.Call({"TYPE", "brief"}) == "+none\r\n");
  CHECK(XLenSettles(c, "brief", 0) == Int(0));

  // A group made with MKSTREAM makes the key too; DEL takes the stream and its groups.
  CHECK(c.Call({"XGROUP", "CREATE", "g", "grp", "$", "MKSTREAM"}) == kOk);
  CHECK(c.Call({"TYPE", "g"}) == "+stream\r\n");
  CHECK(c.Call({"DEL", "g"}) == Int(1));
  CHECK(c.Call({"TYPE", "g"}) == "+none\r\n");
  CHECK(c.Call({"XINFO", "GROUPS", "g"}).rfind("-ERR no such key", 0) == 0);
  CHECK(c.Call({"DBSIZE"}) == Int(2));  // s (a string now) and str

  // Stream commands on a key of another kind are refused and change nothing.
  CHECK(c.Call({"XADD", "str", "*", "a", "1"}) == kWrongType);
  CHECK(c.Call({"XLEN", "str"}) == kWrongType);
  CHECK(c.Call({"XRANGE", "str", "-", "+"}) == kWrongType);
  CHECK(c.Call({"XGROUP", "CREATE", "str", "g", "$", "MKSTREAM"}) == kWrongType);
  CHECK(c.Call({"XADD", "str", "NOMKSTREAM", "*", "a", "1"}) == kWrongType);
  CHECK(c.Call({"XREAD", "STREAMS", "str", "0"}) == kWrongType);
  CHECK(c.Call({"XREADGROUP", "GROUP", "g", "c", "STREAMS", "str", ">"}) == kWrongType);
  CHECK(c.Call({"GET", "str"}) == Bulk("v"));
  CHECK(c.Call({"TYPE", "str"}) == "+string\r\n");

  // Pipelined after the XADD that makes the stream, EXPIRE finds the key.
  c.SendRaw(
      "*5\r\n$4\r\nXADD\r\n$1\r\np\r\n$3\r\n1-0\r\n$1\r\na\r\n$1\r\n1\r\n"
      "*3\r\n$6\r\nEXPIRE\r\n$1\r\np\r\n$3\r\n100\r\n");
  CHECK(c.Read() == Bulk("1-0"));
  CHECK(c.Read() == Int(1));
  CHECK(c.Call({"TTL", "p"}) == Int(100));

  // DEL, then XADD of the same key in the same pipeline: the removal of the old stream, which
  // its keyspace entry's owner sends after the DEL, leaves the new one alone.
  for (int i = 0; i < 3; ++i) {
    CHECK(c.Call({"XADD", "again", "*", "old", "1"}).rfind("$", 0) == 0);
  }
  auto del_then_xadd = [&c](char value) {
    c.SendRaw(std::string("*2\r\n$3\r\nDEL\r\n$5\r\nagain\r\n"
                          "*5\r\n$4\r\nXADD\r\n$5\r\nagain\r\n$1\r\n*\r\n$3\r\nnew\r\n$1\r\n") +
              value + "\r\n");
    CHECK(c.Read() == Int(1));
    CHECK(c.Read().rfind("$", 0) == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    CHECK(c.Call({"XLEN", "again"}) == Int(1));
    CHECK(c.Call({"TYPE", "again"}) == "+stream\r\n");
  };
  del_then_xadd('1');
  // The same after SET over the stream and DEL of the string.
  CHECK(c.Call({"SET", "again", "x"}) == kOk);
  del_then_xadd('2');
  CHECK(c.Call({"DEL", "again"}) == Int(1));

  // FLUSHDB takes streams with it.
  CHECK(c.Call({"FLUSHDB"}) == kOk);
  CHECK(XLenSettles(c, "p", 0) == Int(0));
  CHECK(c.Call({"XADD", "p", "1-0", "a", "1"}) == Bulk("1-0"));  // a new stream, from 1-0
}

TEST_CASE("SET NX or XX with GET inside MULTI refuses a hash and applies nothing",
          "[resp][keyspace][multi]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"HSET", "{t}h", "f", "v"}) == Int(1));
  CHECK(c.Call({"MULTI"}) == kOk);
  CHECK(c.Call({"SET", "{t}s", "1"}) == "+QUEUED\r\n");
  CHECK(c.Call({"SET", "{t}h", "x", "XX", "GET"}) == "+QUEUED\r\n");
  CHECK(c.Call({"EXEC"}).rfind("-WRONGTYPE", 0) == 0);
  CHECK(c.Call({"TYPE", "{t}h"}) == "+hash\r\n");
  CHECK(c.Call({"EXISTS", "{t}s"}) == Int(0));
}
