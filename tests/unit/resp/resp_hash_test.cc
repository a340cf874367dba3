#include <catch2/catch.hpp>

#include "test_server.h"

using namespace tessera::resp::testing;

TEST_CASE("Hash commands on a hash that is one key of the keyspace", "[resp][hash]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"HSET", "user:1", "name", "ada", "age", "36"}) == Int(2));
  CHECK(c.Call({"HSET", "user:1", "name", "ada l", "city", "london"}) == Int(1));
  CHECK(c.Call({"HGET", "user:1", "name"}) == Bulk("ada l"));
  CHECK(c.Call({"HGET", "user:1", "nope"}) == kNil);
  CHECK(c.Call({"HSETNX", "user:1", "name", "x"}) == Int(0));
  CHECK(c.Call({"HSETNX", "user:1", "lang", "en"}) == Int(1));
  CHECK(c.Call({"HLEN", "user:1"}) == Int(4));
  CHECK(c.Call({"HEXISTS", "user:1", "age"}) == Int(1));
  CHECK(c.Call({"HEXISTS", "user:1", "zip"}) == Int(0));
  CHECK(c.Call({"HMGET", "user:1", "age", "zip", "city"}) ==
        "*3\r\n" + Bulk("36") + kNil + Bulk("london"));
  CHECK(c.Call({"HSTRLEN", "user:1", "city"}) == Int(6));
  CHECK(c.Call({"HINCRBY", "user:1", "age", "4"}) == Int(40));
  CHECK(c.Call({"HINCRBY", "user:1", "visits", "1"}) == Int(1));
  CHECK(c.Call({"HINCRBY", "user:1", "city", "1"}) == "-ERR hash value is not an integer\r\n");
  CHECK(c.Call({"HDEL", "user:1", "lang", "visits", "zip"}) == Int(2));
  CHECK(c.Call({"HMSET", "user:2", "a", "1"}) == kOk);
  CHECK(c.Call({"HSET", "user:1", "odd"}) ==
        "-ERR wrong number of arguments for 'hset' command\r\n");
  // One keyspace: a string command on a hash is refused, as by Redis, and the hash is intact.
  CHECK(c.Call({"GET", "user:1"}) ==
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");
  CHECK(c.Call({"HLEN", "user:1"}) == Int(3));
}

TEST_CASE("HGETALL, HKEYS and HVALS return the whole hash", "[resp][hash]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"HGETALL", "empty"}) == "*0\r\n");
  CHECK(c.Call({"HSET", "h", "f1", "v1", "f2", "v2", "f3", "v3"}) == Int(3));
  const std::string all = c.Call({"HGETALL", "h"});
  CHECK(all.rfind("*6\r\n", 0) == 0);
  for (const auto* part :
       {"$2\r\nf1\r\n$2\r\nv1\r\n", "$2\r\nf2\r\n$2\r\nv2\r\n", "$2\r\nf3\r\n$2\r\nv3\r\n"}) {
    CHECK(all.find(part) != std::string::npos);
  }
  const std::string keys = c.Call({"HKEYS", "h"});
  CHECK(keys.rfind("*3\r\n", 0) == 0);
  CHECK(keys.find(Bulk("f2")) != std::string::npos);
  const std::string vals = c.Call({"HVALS", "h"});
  CHECK(vals.rfind("*3\r\n", 0) == 0);
  CHECK(vals.find(Bulk("v3")) != std::string::npos);
  // RESP3 renders HGETALL as a map.
  CHECK(c.Call({"HELLO", "3"}).rfind("%7\r\n", 0) == 0);
  CHECK(c.Call({"HGETALL", "h"}).rfind("%3\r\n", 0) == 0);
  CHECK(c.Call({"HGET", "h", "zz"}) == "_\r\n");
}
