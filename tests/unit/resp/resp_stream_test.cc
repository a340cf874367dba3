// Redis streams over Tessera streams: XADD .. XINFO against a member's RESP port.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <thread>

#include "tessera/map/stream_format.h"
#include "test_server.h"

using namespace tessera;
using namespace tessera::resp::testing;

namespace {

std::string Entry(const std::string& id, const std::vector<std::string>& fields) {
  std::string out = "*2\r\n" + Bulk(id) + "*" + std::to_string(fields.size()) + "\r\n";
  for (const auto& f : fields) out += Bulk(f);
  return out;
}

std::string Err(const std::string& text) { return "-" + text + "\r\n"; }

// The Tessera stream view of a Redis stream: its one sub-stream's meta record.
map::StreamMeta MetaOf(TestServer& server, const std::string& key) {
  map::MapRequest rq;
  rq.op = map::MapOp::kGet;
  rq.map_name = map::kStreamMap;
  rq.key = map::StreamMetaKey(map::SubStreamName(key, 0));
  std::promise<base::Result<map::MapResult>> done;
  server.maps().Execute(std::move(rq),
                        [&](base::Result<map::MapResult> r) { done.set_value(std::move(r)); });
  auto result = done.get_future().get();
  REQUIRE(result);
  REQUIRE(result->value);
  return map::ParseStreamMeta(*result->value);
}

}  // namespace

TEST_CASE("XADD gives growing IDs and refuses one not above the last", "[resp][stream]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"XADD", "s", "1-1", "a", "1", "b", "2"}) == Bulk("1-1"));
  CHECK(c.Call({"XADD", "s", "1-1", "a", "1"}) ==
        Err("ERR The ID specified in XADD is equal or smaller than the target stream top item"));
  CHECK(c.Call({"XADD", "s", "0-0", "a", "1"}) ==
        Err("ERR The ID specified in XADD must be greater than 0-0"));
  CHECK(c.Call({"XADD", "s", "1-*", "a", "2"}) == Bulk("1-2"));
  CHECK(c.Call({"XADD", "s", "5", "a", "3"}) == Bulk("5-0"));
  const std::string auto_id = c.Call({"XADD", "s", "*", "a", "4"});
  REQUIRE(auto_id.rfind("$", 0) == 0);
  const auto ms = std::stoull(auto_id.substr(auto_id.find("\r\n") + 2));
  CHECK(ms > 1'700'000'000'000ULL);  // wall-clock milliseconds
  CHECK(c.Call({"XLEN", "s"}) == Int(4));
  CHECK(c.Call({"XLEN", "missing"}) == Int(0));
  CHECK(c.Call({"XADD", "s", "x-1", "a", "1"}) ==
        Err("ERR Invalid stream ID specified as stream command argument"));
  CHECK(c.Call({"XADD", "s", "*", "odd"}) ==
        Err("ERR wrong number of arguments for 'xadd' command"));
  CHECK(c.Call({"XADD", "new", "NOMKSTREAM", "*", "a", "1"}) == kNil);
  CHECK(c.Call({"XLEN", "new"}) == Int(0));
  CHECK(c.Call({"XADD", "a@b", "*", "a", "1"}).rfind("-ERR the stream name 'a@b'", 0) == 0);
  CHECK(c.Call({"XLEN", "s"}) == Int(4));  // nothing stored by the bad commands
}

TEST_CASE("XRANGE and XREVRANGE read by ID with bounds and COUNT", "[resp][stream]") {
  TestServer server;
  RespClient c(server.port());
  for (int i = 1; i <= 5; ++i) {
    REQUIRE(c.Call({"XADD", "s", std::to_string(i) + "-0", "n", std::to_string(i)}) ==
            Bulk(std::to_string(i) + "-0"));
  }
  CHECK(c.Call({"XRANGE", "s", "-", "+", "COUNT", "2"}) ==
        "*2\r\n" + Entry("1-0", {"n", "1"}) + Entry("2-0", {"n", "2"}));
  CHECK(c.Call({"XRANGE", "s", "(2-0", "4"}) ==
        "*2\r\n" + Entry("3-0", {"n", "3"}) + Entry("4-0", {"n", "4"}));
  CHECK(c.Call({"XREVRANGE", "s", "+", "(3-0"}) ==
        "*2\r\n" + Entry("5-0", {"n", "5"}) + Entry("4-0", {"n", "4"}));
  CHECK(c.Call({"XRANGE", "s", "6", "+"}) == "*0\r\n");
  CHECK(c.Call({"XRANGE", "missing", "-", "+"}) == "*0\r\n");
  CHECK(c.Call({"XRANGE", "s", "-", "+", "COUNT", "0"}) == "*0\r\n");
  CHECK(c.Call({"XRANGE", "s", "(-", "+"}) ==
        Err("ERR Invalid stream ID specified as stream command argument"));
  CHECK(c.Call({"XRANGE", "s", "-", "(0-0"}) == Err("ERR invalid end ID for the interval"));
  CHECK(c.Call({"XREAD", "COUNT", "1", "STREAMS", "s", "missing", "3-0", "0"}) ==
        "*1\r\n*2\r\n" + Bulk("s") + "*1\r\n" + Entry("4-0", {"n", "4"}));
  CHECK(c.Call({"XREAD", "STREAMS", "s", "$"}) == "*-1\r\n");
  CHECK(c.Call({"XREAD", "STREAMS", "s", "t", "0"}) ==
        Err("ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be "
            "specified."));
}

TEST_CASE("A consumer group delivers each entry once and keeps it pending until XACK",
          "[resp][stream]") {
  TestServer server;
  RespClient c(server.port());
  CHECK(c.Call({"XGROUP", "CREATE", "s", "g", "$"}) ==
        Err("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may "
            "want to use the MKSTREAM option to create an empty stream automatically."));
  CHECK(c.Call({"XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"}) == kOk);
  CHECK(c.Call({"XGROUP", "CREATE", "s", "g", "0"}) ==
        Err("BUSYGROUP Consumer Group name already exists"));
  for (int i = 1; i <= 3; ++i) c.Call({"XADD", "s", std::to_string(i) + "-0", "n", "x"});
  CHECK(c.Call({"XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">"}) ==
        "*1\r\n*2\r\n" + Bulk("s") + "*2\r\n" + Entry("1-0", {"n", "x"}) +
            Entry("2-0", {"n", "x"}));
  CHECK(c.Call({"XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"}) ==
        "*1\r\n*2\r\n" + Bulk("s") + "*1\r\n" + Entry("3-0", {"n", "x"}));
  CHECK(c.Call({"XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"}) == "*-1\r\n");
  CHECK(c.Call({"XPENDING", "s", "g"}) == "*4\r\n:3\r\n" + Bulk("1-0") + Bulk("3-0") +
                                              "*2\r\n*2\r\n" + Bulk("alice") + Bulk("2") +
                                              "*2\r\n" + Bulk("bob") + Bulk("1"));
  CHECK(c.Call({"XACK", "s", "g", "1-0", "9-0"}) == Int(1));
  CHECK(c.Call({"XACK", "s", "nogroup", "2-0"}) == Int(0));
  // alice's history: what she was given and did not acknowledge, delivered again.
  CHECK(c.Call({"XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"}) ==
        "*1\r\n*2\r\n" + Bulk("s") + "*1\r\n" + Entry("2-0", {"n", "x"}));
  const std::string detail = c.Call({"XPENDING", "s", "g", "-", "+", "10", "alice"});
  CHECK(detail.rfind("*1\r\n*4\r\n" + Bulk("2-0") + Bulk("alice") + ":", 0) == 0);
  CHECK(detail.ends_with(":2\r\n"));  // delivered twice
  CHECK(c.Call({"XREADGROUP", "GROUP", "nope", "c", "STREAMS", "s", ">"}) ==
        Err("NOGROUP No such key 's' or consumer group 'nope' in XREADGROUP with GROUP option"));
  CHECK(c.Call({"XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "$"})
            .rfind("-ERR The $ ID is meaningless", 0) == 0);
  // The group is a Tessera group too: its committed cursor is where everything is acknowledged.
  CHECK(MetaOf(server, "s").groups == std::vector<std::pair<std::string, std::int64_t>>{{"g", 1}});
  CHECK(c.Call({"XACK", "s", "g", "2-0", "3-0"}) == Int(2));
  CHECK(MetaOf(server, "s").groups == std::vector<std::pair<std::string, std::int64_t>>{{"g", 3}});
  CHECK(c.Call({"XPENDING", "s", "g"}) == "*4\r\n:0\r\n$-1\r\n$-1\r\n*-1\r\n");
  const std::string groups = c.Call({"XINFO", "GROUPS", "s"});
  CHECK(groups == "*1\r\n*12\r\n" + Bulk("name") + Bulk("g") + Bulk("consumers") + Int(2) +
                      Bulk("pending") + Int(0) + Bulk("last-delivered-id") + Bulk("3-0") +
                      Bulk("entries-read") + Int(3) + Bulk("lag") + Int(0));
  CHECK(c.Call({"XGROUP", "DESTROY", "s", "g"}) == Int(1));
  CHECK(c.Call({"XGROUP", "DESTROY", "s", "g"}) == Int(0));
  CHECK(MetaOf(server, "s").groups.empty());
}

TEST_CASE("XCLAIM and XAUTOCLAIM move pending entries between consumers", "[resp][stream]") {
  TestServer server;
  RespClient c(server.port());
  c.Call({"XGROUP", "CREATE", "s", "g", "0", "MKSTREAM"});
  for (int i = 1; i <= 3; ++i) c.Call({"XADD", "s", std::to_string(i) + "-0", "n", "x"});
  c.Call({"XREADGROUP", "GROUP", "g", "dead", "STREAMS", "s", ">"});
  // Not idle long enough: nothing claimed.
  CHECK(c.Call({"XCLAIM", "s", "g", "live", "60000", "1-0"}) == "*0\r\n");
  CHECK(c.Call({"XCLAIM", "s", "g", "live", "0", "1-0", "7-0"}) ==
        "*1\r\n" + Entry("1-0", {"n", "x"}));
  CHECK(c.Call({"XCLAIM", "s", "g", "live", "0", "2-0", "JUSTID", "RETRYCOUNT", "5"}) ==
        "*1\r\n" + Bulk("2-0"));
  CHECK(c.Call({"XAUTOCLAIM", "s", "g", "other", "0", "0", "COUNT", "1"}) ==
        "*3\r\n" + Bulk("2-0") + "*1\r\n" + Entry("1-0", {"n", "x"}) + "*0\r\n");
  CHECK(c.Call({"XAUTOCLAIM", "s", "g", "other", "0", "2-0", "JUSTID"}) ==
        "*3\r\n" + Bulk("0-0") + "*2\r\n" + Bulk("2-0") + Bulk("3-0") + "*0\r\n");
  CHECK(c.Call({"XGROUP", "CREATECONSUMER", "s", "g", "fresh"}) == Int(1));
  CHECK(c.Call({"XGROUP", "CREATECONSUMER", "s", "g", "fresh"}) == Int(0));
  CHECK(c.Call({"XGROUP", "CREATECONSUMER", "s", "nope", "x"}) ==
        Err("NOGROUP No such consumer group 'nope' for key name 's'"));
  const std::string consumers = c.Call({"XINFO", "CONSUMERS", "s", "g"});
  CHECK(consumers.rfind("*4\r\n*8\r\n" + Bulk("name") + Bulk("dead") + Bulk("pending") + Int(0),
                        0) == 0);
  CHECK(consumers.find(Bulk("other") + Bulk("pending") + Int(3)) != std::string::npos);
  // Deleting a consumer drops its pending entries: the group's cursor moves past them.
  CHECK(c.Call({"XGROUP", "DELCONSUMER", "s", "g", "other"}) == Int(3));
  CHECK(MetaOf(server, "s").groups == std::vector<std::pair<std::string, std::int64_t>>{{"g", 3}});
  CHECK(c.Call({"XCLAIM", "s", "g", "x", "bad", "1-0"}) ==
        Err("ERR Invalid min-idle-time argument for XCLAIM"));
}

TEST_CASE("Trimming stops at entries a group has not acknowledged", "[resp][stream]") {
  resp::RespServerOptions options;
  options.stream_max_entries = 4;
  TestServer server(options);
  RespClient c(server.port());
  for (int i = 1; i <= 6; ++i) c.Call({"XADD", "s", std::to_string(i) + "-0", "n", "x"});
  // Without groups the newest 4 stay (room is made from the oldest).
  CHECK(c.Call({"XLEN", "s"}) == Int(4));
  CHECK(c.Call({"XTRIM", "s", "MAXLEN", "=", "3"}) == Int(1));
  CHECK(c.Call({"XGROUP", "CREATE", "s", "g", "0"}) == kOk);
  c.Call({"XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "s", ">"});
  CHECK(c.Call({"XACK", "s", "g", "4-0"}) == Int(1));
  // 4-0 is acknowledged; 5-0 and 6-0 are owed to the group, so MAXLEN 0 keeps them.
  CHECK(c.Call({"XTRIM", "s", "MAXLEN", "0"}) == Int(1));
  CHECK(c.Call({"XADD", "s", "MINID", "9", "7-0", "n", "x"}) == Bulk("7-0"));
  CHECK(c.Call({"XRANGE", "s", "-", "+"}) ==
        "*3\r\n" + Entry("5-0", {"n", "x"}) + Entry("6-0", {"n", "x"}) + Entry("7-0", {"n", "x"}));
  c.Call({"XADD", "s", "8-0", "n", "x"});
  // Full, and every entry is owed to the group: XADD fails naming it, nothing is dropped.
  const std::string full = c.Call({"XADD", "s", "9-0", "n", "x"});
  CHECK(full.rfind("-ERR stream 's' is full (4 entries", 0) == 0);
  CHECK(full.find("group 'g'") != std::string::npos);
  CHECK(c.Call({"XLEN", "s"}) == Int(4));
  CHECK(c.Call({"XTRIM", "s", "MAXLEN", "=", "1", "LIMIT", "2"}) ==
        Err("ERR syntax error, LIMIT cannot be used without the special ~ option"));
  CHECK(c.Call({"XTRIM", "s", "MAXLEN", "-1"}) == Err("ERR The MAXLEN argument must be >= 0."));
  const std::string info = c.Call({"XINFO", "STREAM", "s"});
  CHECK(info.find(Bulk("length") + Int(4)) != std::string::npos);
  CHECK(info.find(Bulk("last-generated-id") + Bulk("8-0")) != std::string::npos);
  CHECK(info.find(Bulk("entries-added") + Int(8)) != std::string::npos);
  CHECK(info.find(Bulk("first-entry") + Entry("5-0", {"n", "x"})) != std::string::npos);
  CHECK(c.Call({"XINFO", "STREAM", "missing"}) == Err("ERR no such key"));
}

TEST_CASE("XREAD and XREADGROUP with BLOCK wait for the next entry", "[resp][stream]") {
  TestServer server;
  RespClient reader(server.port());
  RespClient writer(server.port());
  writer.Call({"XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"});
  // Times out: a nil array, after the time asked for.
  auto start = std::chrono::steady_clock::now();
  CHECK(reader.Call({"XREAD", "BLOCK", "100", "STREAMS", "s", "$"}) == "*-1\r\n");
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(100));

  reader.Send({"XREAD", "BLOCK", "0", "STREAMS", "s", "$"});
  reader.Send({"PING"});  // waits behind the blocked read
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(writer.Call({"XADD", "s", "1-0", "k", "v"}) == Bulk("1-0"));
  CHECK(reader.Read() == "*1\r\n*2\r\n" + Bulk("s") + "*1\r\n" + Entry("1-0", {"k", "v"}));
  CHECK(reader.Read() == "+PONG\r\n");

  CHECK(reader.Call({"XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"}) ==
        "*1\r\n*2\r\n" + Bulk("s") + "*1\r\n" + Entry("1-0", {"k", "v"}));
  reader.Send({"XREADGROUP", "GROUP", "g", "c", "BLOCK", "5000", "STREAMS", "s", ">"});
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  writer.Call({"XADD", "s", "2-0", "k", "w"});
  CHECK(reader.Read() == "*1\r\n*2\r\n" + Bulk("s") + "*1\r\n" + Entry("2-0", {"k", "w"}));
  CHECK(writer.Call({"XPENDING", "s", "g"}).rfind("*4\r\n:2\r\n", 0) == 0);
  CHECK(reader.Call({"XREAD", "BLOCK", "x", "STREAMS", "s", "$"}) ==
        Err("ERR timeout is not an integer or out of range"));
}

TEST_CASE("XCLAIM FORCE of an entry not delivered keeps the group's cursor below it",
          "[resp][stream]") {
  TestServer server;
  RespClient c(server.port());
  c.Call({"XGROUP", "CREATE", "s", "g", "0", "MKSTREAM"});
  for (int i = 1; i <= 3; ++i) c.Call({"XADD", "s", std::to_string(i) + "-0", "n", "x"});
  c.Call({"XREADGROUP", "GROUP", "g", "a", "COUNT", "1", "STREAMS", "s", ">"});
  CHECK(c.Call({"XCLAIM", "s", "g", "b", "0", "3-0", "FORCE", "JUSTID"}) == "*1\r\n" + Bulk("3-0"));
  CHECK(c.Call({"XACK", "s", "g", "1-0"}) == Int(1));
  // 2-0 was never delivered: the cursor stays below it and trimming keeps it.
  CHECK(MetaOf(server, "s").groups == std::vector<std::pair<std::string, std::int64_t>>{{"g", 1}});
  CHECK(c.Call({"XTRIM", "s", "MAXLEN", "0"}) == Int(1));
  // Reading on delivers 2-0, then 3-0 once (it stays one pending entry, now a's).
  CHECK(c.Call({"XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">"}) ==
        "*1\r\n*2\r\n" + Bulk("s") + "*2\r\n" + Entry("2-0", {"n", "x"}) +
            Entry("3-0", {"n", "x"}));
  CHECK(c.Call({"XPENDING", "s", "g"}) ==
        "*4\r\n:2\r\n" + Bulk("2-0") + Bulk("3-0") + "*1\r\n*2\r\n" + Bulk("a") + Bulk("2"));
  CHECK(c.Call({"XACK", "s", "g", "2-0", "3-0"}) == Int(2));
  CHECK(MetaOf(server, "s").groups == std::vector<std::pair<std::string, std::int64_t>>{{"g", 3}});
  // FORCE of an entry the group acknowledged makes it owed again: the cursor moves back.
  CHECK(c.Call({"XCLAIM", "s", "g", "b", "0", "3-0", "FORCE", "JUSTID"}) == "*1\r\n" + Bulk("3-0"));
  CHECK(MetaOf(server, "s").groups == std::vector<std::pair<std::string, std::int64_t>>{{"g", 2}});
}

TEST_CASE("NOACK delivers without a pending entry and a full XADD leaves the count right",
          "[resp][stream]") {
  resp::RespServerOptions options;
  options.stream_max_entries = 3;
  TestServer server(options);
  RespClient c(server.port());
  c.Call({"XGROUP", "CREATE", "s", "g", "0", "MKSTREAM"});
  for (int i = 1; i <= 3; ++i) c.Call({"XADD", "s", std::to_string(i) + "-0", "n", "x"});
  CHECK(c.Call({"XREADGROUP", "GROUP", "g", "a", "COUNT", "1", "NOACK", "STREAMS", "s", ">"}) ==
        "*1\r\n*2\r\n" + Bulk("s") + "*1\r\n" + Entry("1-0", {"n", "x"}));
  CHECK(c.Call({"XPENDING", "s", "g"}) == "*4\r\n:0\r\n$-1\r\n$-1\r\n*-1\r\n");
  // Full: 1-0 (read without ack) makes room, then 2-0 and 3-0 are owed and XADD fails.
  CHECK(c.Call({"XADD", "s", "4-0", "n", "x"}) == Bulk("4-0"));
  CHECK(c.Call({"XADD", "s", "5-0", "n", "x"}).rfind("-ERR stream 's' is full (3 entries", 0) == 0);
  CHECK(c.Call({"XLEN", "s"}) == Int(3));
  CHECK(c.Call({"XRANGE", "s", "-", "+", "COUNT", "1"}) == "*1\r\n" + Entry("2-0", {"n", "x"}));
}

TEST_CASE(
    "XREADGROUP lists a key read by ID even when empty and a key read by > only with "
    "entries",
    "[resp][stream]") {
  TestServer server;
  RespClient c(server.port());
  c.Call({"XGROUP", "CREATE", "a", "g", "$", "MKSTREAM"});
  c.Call({"XGROUP", "CREATE", "b", "g", "$", "MKSTREAM"});
  CHECK(c.Call({"XREADGROUP", "GROUP", "g", "c", "STREAMS", "a", "b", ">", "0"}) ==
        "*1\r\n*2\r\n" + Bulk("b") + "*0\r\n");
}

TEST_CASE("A blocked read whose client disconnects takes nothing from the group",
          "[resp][stream]") {
  TestServer server;
  RespClient writer(server.port());
  writer.Call({"XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"});
  {
    RespClient gone(server.port());
    gone.Send({"XREADGROUP", "GROUP", "g", "gone", "BLOCK", "0", "STREAMS", "s", ">"});
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }  // disconnects while blocked
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  writer.Call({"XADD", "s", "1-0", "k", "v"});
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(writer.Call({"XREADGROUP", "GROUP", "g", "live", "STREAMS", "s", ">"}) ==
        "*1\r\n*2\r\n" + Bulk("s") + "*1\r\n" + Entry("1-0", {"k", "v"}));
  CHECK(writer.Call({"XREAD", "BLOCK", "99999999999999999", "STREAMS", "s", "$"}) ==
        Err("ERR timeout is out of range"));
}

TEST_CASE("TYPE EXISTS and DEL see streams and a deleted stream starts afresh", "[resp][stream]") {
  TestServer server;
  RespClient c(server.port());
  c.Call({"XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"});
  for (int i = 1; i <= 3; ++i) c.Call({"XADD", "s", std::to_string(i) + "-0", "n", "x"});
  c.Call({"SET", "k", "v"});
  CHECK(c.Call({"TYPE", "s"}) == "+stream\r\n");
  CHECK(c.Call({"TYPE", "k"}) == "+string\r\n");
  CHECK(c.Call({"TYPE", "nothing"}) == "+none\r\n");
  CHECK(c.Call({"EXISTS", "s", "k", "nothing", "s"}) == Int(3));
  CHECK(c.Call({"DEL", "s", "nothing", "k"}) == Int(2));
  CHECK(c.Call({"EXISTS", "s", "k"}) == Int(0));
  CHECK(c.Call({"XLEN", "s"}) == Int(0));
  CHECK(c.Call({"XINFO", "STREAM", "s"}) == Err("ERR no such key"));
  CHECK(c.Call({"XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"}).rfind("-NOGROUP", 0) == 0);
  // Nothing of the old stream is left: IDs start again, and no group holds entries back.
  CHECK(c.Call({"XADD", "s", "1-0", "n", "again"}) == Bulk("1-0"));
  CHECK(c.Call({"XRANGE", "s", "-", "+"}) == "*1\r\n" + Entry("1-0", {"n", "again"}));
  CHECK(c.Call({"XINFO", "GROUPS", "s"}) == "*0\r\n");
  // Inside MULTI, DEL sees string keys only (the block stays in one partition).
  c.Call({"SET", "{t}a", "1"});
  CHECK(c.Call({"MULTI"}) == kOk);
  CHECK(c.Call({"DEL", "{t}a"}) == "+QUEUED\r\n");
  CHECK(c.Call({"EXEC"}) == "*1\r\n" + Int(1));
}

TEST_CASE("A stream of the Tessera API is not a key to DEL", "[resp][stream]") {
  TestServer server;
  RespClient c(server.port());
  map::MapRequest append;
  append.op = map::MapOp::kStreamAppend;
  append.map_name = map::kStreamMap;
  append.key = map::StreamMetaKey(map::SubStreamName("api", 0));
  append.entries.emplace_back("order-1", "created");
  std::promise<base::Result<map::MapResult>> done;
  server.maps().Execute(std::move(append),
                        [&](base::Result<map::MapResult> r) { done.set_value(std::move(r)); });
  REQUIRE(done.get_future().get());
  CHECK(c.Call({"XLEN", "api"}) == Int(1));  // the stream commands read it
  CHECK(c.Call({"EXISTS", "api"}) == Int(0));
  CHECK(c.Call({"TYPE", "api"}) == "+none\r\n");
  CHECK(c.Call({"DEL", "api"}) == Int(0));
  CHECK(c.Call({"XLEN", "api"}) == Int(1));  // left alone
}
