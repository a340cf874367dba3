#include <algorithm>
#include <catch2/catch.hpp>
#include <set>
#include <thread>

#include "test_server.h"

using namespace tessera::resp::testing;

namespace {
// Splits a flat array reply of bulk strings into its items.
std::vector<std::string> BulkItems(const std::string& reply) {
  std::vector<std::string> items;
  std::size_t pos = reply.find("\r\n") + 2;
  while (pos < reply.size()) {
    const std::size_t eol = reply.find("\r\n", pos);
    const auto len = std::stoul(reply.substr(pos + 1, eol - pos - 1));
    items.push_back(reply.substr(eol + 2, len));
    pos = eol + 2 + len + 2;
  }
  return items;
}
}  // namespace

TEST_CASE("DEL and EXISTS count keys, including hashes", "[resp][keys]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"MSET", "a", "1", "b", "2", "c", "3"}) == kOk);
  CHECK(c.Call({"HSET", "h", "f", "v"}) == Int(1));
  CHECK(c.Call({"EXISTS", "a", "b", "nope", "a"}) == Int(3));
  CHECK(c.Call({"EXISTS", "h"}) == Int(1));
  CHECK(c.Call({"TYPE", "a"}) == "+string\r\n");
  CHECK(c.Call({"TYPE", "h"}) == "+hash\r\n");
  CHECK(c.Call({"TYPE", "nope"}) == "+none\r\n");
  CHECK(c.Call({"DEL", "a", "b", "nope"}) == Int(2));
  CHECK(c.Call({"DEL", "h"}) == Int(1));
  CHECK(c.Call({"HLEN", "h"}) == Int(0));
  CHECK(c.Call({"EXISTS", "a", "b", "c", "h"}) == Int(1));
  CHECK(c.Call({"UNLINK", "c"}) == Int(1));
}

TEST_CASE("EXPIRE, TTL, PTTL, PERSIST", "[resp][keys][ttl]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"TTL", "k"}) == Int(-2));
  CHECK(c.Call({"PTTL", "k"}) == Int(-2));
  CHECK(c.Call({"EXPIRE", "k", "10"}) == Int(0));
  CHECK(c.Call({"SET", "k", "v"}) == kOk);
  CHECK(c.Call({"TTL", "k"}) == Int(-1));
  CHECK(c.Call({"PERSIST", "k"}) == Int(0));
  CHECK(c.Call({"EXPIRE", "k", "100"}) == Int(1));
  CHECK(c.Call({"TTL", "k"}) == Int(100));
  CHECK(c.Call({"PERSIST", "k"}) == Int(1));
  CHECK(c.Call({"TTL", "k"}) == Int(-1));
  CHECK(c.Call({"PEXPIRE", "k", "100"}) == Int(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(c.Call({"GET", "k"}) == kNil);
  CHECK(c.Call({"SET", "k", "v"}) == kOk);
  CHECK(c.Call({"EXPIRE", "k", "0"}) == Int(1));  // non-positive deletes, as Redis
  CHECK(c.Call({"EXISTS", "k"}) == Int(0));
  CHECK(c.Call({"EXPIRE", "k", "x"}) == "-ERR value is not an integer or out of range\r\n");
  CHECK(c.Call({"EXPIRE", "k"}) == "-ERR wrong number of arguments for 'expire' command\r\n");
}

TEST_CASE("TTL is exact under a manual clock", "[resp][keys][ttl]") {
  tessera::base::ManualClock clock;
  TestServer server({}, &clock);
  RespClient c(server.port());
  CHECK(c.Call({"SET", "k", "v", "PX", "5000"}) == kOk);
  CHECK(c.Call({"PTTL", "k"}) == Int(5000));
  clock.Advance(1200);
  CHECK(c.Call({"PTTL", "k"}) == Int(3800));
  CHECK(c.Call({"TTL", "k"}) == Int(4));  // rounded like Redis
  clock.Advance(3800);
  CHECK(c.Call({"GET", "k"}) == kNil);
  CHECK(c.Call({"TTL", "k"}) == Int(-2));
}

TEST_CASE("DBSIZE, KEYS, FLUSHDB", "[resp][keys]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"MSET", "user:1", "a", "user:2", "b", "order:1", "c"}) == kOk);
  CHECK(c.Call({"DBSIZE"}) == Int(3));
  auto keys = BulkItems(c.Call({"KEYS", "user:*"}));
  std::sort(keys.begin(), keys.end());
  CHECK(keys == std::vector<std::string>{"user:1", "user:2"});
  CHECK(BulkItems(c.Call({"KEYS", "*"})).size() == 3);
  CHECK(BulkItems(c.Call({"KEYS", "order:[0-9]"})) == std::vector<std::string>{"order:1"});
  CHECK(c.Call({"FLUSHDB"}) == kOk);
  CHECK(c.Call({"DBSIZE"}) == Int(0));
  CHECK(c.Call({"FLUSHDB", "bogus"}) == "-ERR syntax error\r\n");
}

TEST_CASE("FLUSHALL clears every map but the transaction id markers", "[resp][keys]") {
  using tessera::map::MapOp;
  using tessera::map::MapRequest;
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"SET", "k", "v"}) == kOk);
  MapRequest tx;  // a committed transaction with an id leaves a marker
  tx.op = MapOp::kTransact;
  tx.key = "p";
  tx.transaction_id = "t-1";
  auto& op = tx.transaction.emplace_back().request;
  op.op = MapOp::kSet;
  op.map_name = "orders";
  op.key = "o-1@p";
  op.value = "x";
  REQUIRE(server.maps().ExecuteSync(tx));
  CHECK(c.Call({"FLUSHALL"}) == kOk);
  CHECK(c.Call({"DBSIZE"}) == Int(0));
  MapRequest get;
  get.op = MapOp::kGet;
  get.map_name = "orders";
  get.key = "o-1@p";
  CHECK_FALSE(server.maps().ExecuteSync(get)->value.has_value());
  // The marker stays (it expires by itself): the same transaction is not applied again.
  REQUIRE(server.maps().ExecuteSync(tx));
  CHECK_FALSE(server.maps().ExecuteSync(get)->value.has_value());
}

TEST_CASE("SCAN visits every key exactly once across cursor pages", "[resp][keys][scan]") {
  TestServer server;
  RespClient c(server.port());
  std::vector<std::string> mset{"MSET"};
  for (int i = 0; i < 250; ++i) {
    mset.push_back("k" + std::to_string(i));
    mset.push_back("v");
  }
  mset.push_back("other");
  mset.push_back("v");
  CHECK(c.Call(mset) == kOk);
  std::multiset<std::string> seen;
  std::string cursor = "0";
  int pages = 0;
  do {
    const std::string reply = c.Call({"SCAN", cursor, "MATCH", "k*", "COUNT", "20"});
    // *2 $len cursor *n items...
    const std::size_t cursor_len_end = reply.find("\r\n", 4);
    const auto len = std::stoul(reply.substr(5, cursor_len_end - 5));
    cursor = reply.substr(cursor_len_end + 2, len);
    const std::string rest = reply.substr(cursor_len_end + 2 + len + 2);
    for (auto& key : BulkItems(rest)) seen.insert(key);
    ++pages;
  } while (cursor != "0" && pages < 100);
  CHECK(cursor == "0");
  CHECK(pages >= 12);
  CHECK(seen.size() == 250);
  CHECK(std::set<std::string>(seen.begin(), seen.end()).size() == 250);
  CHECK(c.Call({"SCAN", "abc"}) == "-ERR invalid cursor\r\n");
  CHECK(c.Call({"SCAN", "0", "COUNT", "0"}) == "-ERR syntax error\r\n");
}
