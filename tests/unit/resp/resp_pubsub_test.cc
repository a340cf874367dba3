#include <catch2/catch.hpp>
#include <thread>

#include "test_server.h"

using namespace tessera::resp::testing;

namespace {
std::string Push(std::initializer_list<std::string> bulks, std::optional<std::int64_t> count) {
  std::string out = "*" + std::to_string(bulks.size() + (count ? 1 : 0)) + "\r\n";
  for (const auto& b : bulks) out += Bulk(b);
  if (count) out += Int(*count);
  return out;
}
}  // namespace

TEST_CASE("SUBSCRIBE receives PUBLISHed messages", "[resp][pubsub]") {
  TestServer server;
  RespClient sub(server.port());
  RespClient pub(server.port());
  CHECK(sub.Call({"SUBSCRIBE", "news", "sport"}) == Push({"subscribe", "news"}, 1));
  CHECK(sub.Read() == Push({"subscribe", "sport"}, 2));
  CHECK(pub.Call({"PUBLISH", "news", "hello"}) == Int(1));
  CHECK(sub.Read() == Push({"message", "news", "hello"}, std::nullopt));
  CHECK(pub.Call({"PUBLISH", "nobody", "x"}) == Int(0));
  CHECK(pub.Call({"PUBSUB", "NUMSUB", "news", "x"}) ==
        "*4\r\n" + Bulk("news") + Int(1) + Bulk("x") + Int(0));
  // Subscribe mode refuses ordinary commands; PING answers as a push.
  CHECK(sub.Call({"GET", "k"}) ==
        "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / "
        "RESET are allowed in this context\r\n");
  CHECK(sub.Call({"PING"}) == Push({"pong", ""}, std::nullopt));
  CHECK(sub.Call({"UNSUBSCRIBE", "news"}) == Push({"unsubscribe", "news"}, 1));
  CHECK(pub.Call({"PUBLISH", "news", "late"}) == Int(0));
  CHECK(sub.Call({"UNSUBSCRIBE"}) == Push({"unsubscribe", "sport"}, 0));
  CHECK(sub.Call({"GET", "k"}) == kNil);  // back to normal mode
  CHECK(sub.Call({"UNSUBSCRIBE"}) == "*3\r\n" + Bulk("unsubscribe") + kNil + Int(0));
}

TEST_CASE("PSUBSCRIBE matches Redis globs", "[resp][pubsub]") {
  TestServer server;
  RespClient sub(server.port());
  RespClient pub(server.port());
  CHECK(sub.Call({"PSUBSCRIBE", "news.*"}) == Push({"psubscribe", "news.*"}, 1));
  CHECK(pub.Call({"PUBLISH", "news.tech", "chip"}) == Int(1));
  CHECK(sub.Read() == Push({"pmessage", "news.*", "news.tech", "chip"}, std::nullopt));
  CHECK(pub.Call({"PUBLISH", "weather", "rain"}) == Int(0));
  CHECK(pub.Call({"PUBSUB", "NUMPAT"}) == Int(1));
  CHECK(sub.Call({"PUNSUBSCRIBE"}) == Push({"punsubscribe", "news.*"}, 0));
}

TEST_CASE("Closing a subscriber drops its subscriptions", "[resp][pubsub]") {
  TestServer server;
  RespClient pub(server.port());
  {
    RespClient sub(server.port());
    CHECK(sub.Call({"SUBSCRIBE", "c"}) == Push({"subscribe", "c"}, 1));
  }
  std::string reply;
  for (int i = 0; i < 100; ++i) {  // the close is noticed asynchronously
    reply = pub.Call({"PUBLISH", "c", "x"});
    if (reply == Int(0)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(reply == Int(0));
}

TEST_CASE(
    "A subscriber that does not read is disconnected once its unread messages pass the limit, "
    "and the publisher goes on",
    "[resp][pubsub]") {
  tessera::resp::RespServerOptions options;
  options.max_subscriber_output_bytes = 1024 * 1024;
  TestServer server(options);
  RespClient sub(server.port());
  RespClient pub(server.port());
  CHECK(sub.Call({"SUBSCRIBE", "news"}) == Push({"subscribe", "news"}, 1));
  // The subscriber reads nothing from here on: the socket buffers fill (a few MiB on
  // loopback), then the member's own buffer, up to the limit.
  const std::string payload(64 * 1024, 'm');
  int published = 0;
  std::string reply = Int(1);
  while (reply == Int(1) && published < 2000) {  // at most 128 MiB
    reply = pub.Call({"PUBLISH", "news", payload});
    ++published;
  }
  INFO("published " << published);
  CHECK(reply == Int(0));  // nobody listens any more
  CHECK(published > 16);   // the limit, not the first message, ended it
  CHECK(sub.WaitClosed());
  CHECK(pub.Call({"PING"}) == "+PONG\r\n");
  const std::string info = pub.Call({"INFO", "stats"});
  CHECK(info.find("output_limit_disconnects:1\r\n") != std::string::npos);
}
