#include <catch2/catch.hpp>
#include <thread>

#include "test_server.h"

using namespace tessera::resp::testing;

TEST_CASE("GET/SET/GETDEL/GETSET/STRLEN", "[resp][strings]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"GET", "k"}) == kNil);
  CHECK(c.Call({"SET", "k", "v1"}) == kOk);
  CHECK(c.Call({"get", "k"}) == Bulk("v1"));
  CHECK(c.Call({"SET", "k", "v2", "GET"}) == Bulk("v1"));
  CHECK(c.Call({"GETSET", "k", "v3"}) == Bulk("v2"));
  CHECK(c.Call({"STRLEN", "k"}) == Int(2));
  CHECK(c.Call({"GETDEL", "k"}) == Bulk("v3"));
  CHECK(c.Call({"GET", "k"}) == kNil);
  CHECK(c.Call({"SET", "bin", std::string("a\0\r\nb", 5)}) == kOk);
  CHECK(c.Call({"GET", "bin"}) == Bulk(std::string("a\0\r\nb", 5)));
}

TEST_CASE("SET NX and XX follow putIfAbsent/replace semantics", "[resp][strings]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"SET", "k", "a", "XX"}) == kNil);
  CHECK(c.Call({"GET", "k"}) == kNil);
  CHECK(c.Call({"SET", "k", "a", "NX"}) == kOk);
  CHECK(c.Call({"SET", "k", "b", "NX"}) == kNil);
  CHECK(c.Call({"GET", "k"}) == Bulk("a"));
  CHECK(c.Call({"SET", "k", "c", "XX"}) == kOk);
  CHECK(c.Call({"SET", "k", "d", "NX", "GET"}) == Bulk("c"));
  CHECK(c.Call({"GET", "k"}) == Bulk("c"));
  CHECK(c.Call({"SETNX", "k", "e"}) == Int(0));
  CHECK(c.Call({"SETNX", "k2", "e"}) == Int(1));
  CHECK(c.Call({"SET", "k", "x", "NX", "XX"}) == "-ERR syntax error\r\n");
  CHECK(c.Call({"SET", "k", "x", "EX", "1", "PX", "5"}) == "-ERR syntax error\r\n");
  CHECK(c.Call({"SET", "k", "x", "BOGUS"}) == "-ERR syntax error\r\n");
}

TEST_CASE("SET with PX expires, NX PX is putIfAbsent with TTL", "[resp][strings][ttl]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"SET", "lock", "owner-1", "NX", "PX", "1000"}) == kOk);
  CHECK(c.Call({"SET", "lock", "owner-2", "NX", "PX", "1000"}) == kNil);
  const auto pttl = c.Call({"PTTL", "lock"});
  const auto ms = std::stoll(pttl.substr(1));
  CHECK(ms > 0);
  CHECK(ms <= 1000);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  CHECK(c.Call({"GET", "lock"}) == kNil);
  CHECK(c.Call({"SET", "lock", "owner-2", "NX", "PX", "10000"}) == kOk);
  CHECK(c.Call({"GET", "lock"}) == Bulk("owner-2"));
}

TEST_CASE("SET expiry options and their errors", "[resp][strings][ttl]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"SET", "k", "v", "EX", "100"}) == kOk);
  CHECK(c.Call({"TTL", "k"}) == Int(100));
  CHECK(c.Call({"SET", "k", "v2", "KEEPTTL"}) == kOk);
  CHECK(c.Call({"TTL", "k"}) == Int(100));
  CHECK(c.Call({"SET", "k", "v3"}) == kOk);
  CHECK(c.Call({"TTL", "k"}) == Int(-1));
  const auto wall_s = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  CHECK(c.Call({"SET", "k", "v", "EXAT", std::to_string(wall_s + 50)}) == kOk);
  const auto ttl = std::stoll(c.Call({"TTL", "k"}).substr(1));
  CHECK(ttl >= 48);
  CHECK(ttl <= 50);
  CHECK(c.Call({"SET", "k", "v", "EX", "0"}) == "-ERR invalid expire time in 'set' command\r\n");
  CHECK(c.Call({"SET", "k", "v", "PX", "-5"}) == "-ERR invalid expire time in 'set' command\r\n");
  CHECK(c.Call({"SET", "k", "v", "EX", "abc"}) ==
        "-ERR value is not an integer or out of range\r\n");
  CHECK(c.Call({"SETEX", "s", "100", "v"}) == kOk);
  CHECK(c.Call({"TTL", "s"}) == Int(100));
  CHECK(c.Call({"PSETEX", "p", "100000", "v"}) == kOk);
  CHECK(c.Call({"TTL", "p"}) == Int(100));
  CHECK(c.Call({"SETEX", "s", "0", "v"}) == "-ERR invalid expire time in 'setex' command\r\n");
}

TEST_CASE("INCR family uses decimal text values", "[resp][strings]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"INCR", "n"}) == Int(1));
  CHECK(c.Call({"INCRBY", "n", "41"}) == Int(42));
  CHECK(c.Call({"DECR", "n"}) == Int(41));
  CHECK(c.Call({"DECRBY", "n", "50"}) == Int(-9));
  CHECK(c.Call({"GET", "n"}) == Bulk("-9"));
  CHECK(c.Call({"SET", "s", "abc"}) == kOk);
  CHECK(c.Call({"INCR", "s"}) == "-ERR value is not an integer or out of range\r\n");
  CHECK(c.Call({"INCRBY", "n", "x"}) == "-ERR value is not an integer or out of range\r\n");
  CHECK(c.Call({"SET", "max", "9223372036854775807"}) == kOk);
  CHECK(c.Call({"INCR", "max"}) == "-ERR value is not an integer or out of range\r\n");
}

TEST_CASE("MSET and MGET span partitions and keep key order", "[resp][strings]") {
  TestServer server;
  RespClient c(server.port());
  std::vector<std::string> mset{"MSET"};
  std::vector<std::string> mget{"MGET"};
  std::string expected = "*21\r\n";
  for (int i = 0; i < 20; ++i) {
    mset.push_back("key" + std::to_string(i));
    mset.push_back("value" + std::to_string(i));
    mget.push_back("key" + std::to_string(i));
    expected += Bulk("value" + std::to_string(i));
  }
  mget.push_back("missing");
  expected += kNil;
  CHECK(c.Call(mset) == kOk);
  CHECK(c.Call(mget) == expected);
  CHECK(c.Call({"MSET", "a"}) == "-ERR wrong number of arguments for 'mset' command\r\n");
  CHECK(c.Call({"MSET", "a", "1", "b"}) == "-ERR wrong number of arguments for 'mset' command\r\n");
}

TEST_CASE("Pipelined commands get replies in order across shards", "[resp][pipeline]") {
  TestServer server;
  RespClient c(server.port());
  std::string batch;
  std::string expected;
  for (int i = 0; i < 200; ++i) {
    const std::string key = "p" + std::to_string(i);
    batch += "*3\r\n$3\r\nSET\r\n$" + std::to_string(key.size()) + "\r\n" + key + "\r\n$" +
             std::to_string(key.size()) + "\r\n" + key + "\r\n";
    batch += "*2\r\n$3\r\nGET\r\n$" + std::to_string(key.size()) + "\r\n" + key + "\r\n";
    batch += "PING\r\n";
    expected += kOk + Bulk(key) + "+PONG\r\n";
  }
  // Split the batch at odd places to exercise partial reads.
  for (std::size_t offset = 0; offset < batch.size(); offset += 777) {
    c.SendRaw(std::string_view(batch).substr(offset, 777));
  }
  std::string got;
  for (int i = 0; i < 600; ++i) got += c.Read();
  CHECK(got == expected);
}

// Keyed commands owned by another shard are forwarded in batches; a command that fans out
// to every shard (MGET, EXISTS, DEL, DBSIZE) later in the same pipeline must still see them.
TEST_CASE("A pipeline's writes are visible to its later multi-key commands", "[resp][pipeline]") {
  TestServer server;
  RespClient c(server.port());
  auto command = [](const std::vector<std::string>& args) {
    std::string out = "*" + std::to_string(args.size()) + "\r\n";
    for (const auto& a : args) out += Bulk(a);
    return out;
  };
  std::string batch;
  std::string expected;
  int replies = 0;
  for (int round = 0; round < 20; ++round) {
    std::vector<std::string> keys;
    std::vector<std::string> values;
    for (int i = 0; i < 16; ++i) {
      keys.push_back("r" + std::to_string(round) + "k" + std::to_string(i));
      values.push_back("v" + std::to_string(round * 100 + i));
      batch += command({"SET", keys.back(), values.back()});
      expected += kOk;
    }
    std::vector<std::string> mget{"MGET"};
    std::vector<std::string> exists{"EXISTS"};
    mget.insert(mget.end(), keys.begin(), keys.end());
    exists.insert(exists.end(), keys.begin(), keys.end());
    batch += command(mget) + command(exists) + command({"DBSIZE"});
    expected += "*16\r\n";
    for (const auto& v : values) expected += Bulk(v);
    expected += Int(16) + Int(round * 14 + 16);  // earlier rounds each deleted 2 keys
    batch += command({"DEL", keys[1], keys[2]}) + command({"MGET", keys[1], keys[3]});
    expected += Int(2) + "*2\r\n" + kNil + Bulk(values[3]);
    replies += 16 + 5;
  }
  c.SendRaw(batch);
  std::string got;
  for (int i = 0; i < replies; ++i) got += c.Read();
  CHECK(got == expected);
}

// The Forwarder carries the commands of every connection of a shard in one post: replies must
// still reach the right connection, in its order.
TEST_CASE("Connections pipelining at once each get their own replies in order",
          "[resp][pipeline]") {
  TestServer server;
  constexpr int kConnections = 8;
  constexpr int kKeys = 300;
  std::vector<std::unique_ptr<RespClient>> clients;
  std::vector<std::string> expected(kConnections);
  for (int c = 0; c < kConnections; ++c) {
    clients.push_back(std::make_unique<RespClient>(server.port()));
    std::string batch;
    for (int i = 0; i < kKeys; ++i) {
      const std::string key = "c" + std::to_string(c) + ":" + std::to_string(i);
      const std::string value = key + "=" + std::to_string(i * 7 + c);
      batch += "*3\r\n$3\r\nSET\r\n" + Bulk(key) + Bulk(value);
      batch += "*2\r\n$3\r\nGET\r\n" + Bulk(key);
      expected[c] += kOk + Bulk(value);
    }
    clients.back()->SendRaw(batch);  // every connection's pipeline is out before any is read
  }
  for (int c = 0; c < kConnections; ++c) {
    std::string got;
    for (int i = 0; i < 2 * kKeys; ++i) got += clients[c]->Read();
    INFO("connection " << c);
    CHECK(got == expected[c]);
  }
}
