// The REST admin API of grid-node --http-port (tessera/admin/admin_api.h), over HTTP on
// 127.0.0.1 against real processes: the cluster, maps and entries on every member, the
// framework's dead letters (replayed through the group's running consumer) and sagas, the
// secret, and bad input answered with 4xx JSON while the member keeps serving.
#include <utility>  // before Asio's awaitable header (Boost 1.74)

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>

#include "child_process.h"
#include "tessera/grid/member.h"
#include "tessera/saga/consumer.h"
#include "tessera/saga/dead_letter.h"
#include "tessera/saga/event.h"
#include "tessera/saga/inbox.h"

namespace tessera::integration {
namespace {

namespace asio = boost::asio;
namespace bh = boost::beast::http;
using nlohmann::json;

struct Reply {
  int status = 0;
  json body;
  std::string raw;
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
  std::map<std::string, std::string> headers;
};

Reply Call(std::uint16_t port, bh::verb verb, const std::string& target,
           const std::string& body = "", const std::string& token = "") {
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), port});
  bh::request<bh::string_body> req(verb, target, 11);
  req.set(bh::field::host, "127.0.0.1");
  if (!token.empty()) req.set(bh::field::authorization, "Bearer " + token);
  if (verb != bh::verb::get) req.set(bh::field::content_type, "application/json");
  req.body() = body;
  req.prepare_payload();
  boost::beast::error_code ec;
  bh::write(socket, req, ec);  // an oversized body is answered (413) before it is all sent
  boost::beast::flat_buffer buffer;
  bh::response<bh::string_body> res;
  bh::read(socket, buffer, res, ec);
  Reply r;
  r.status = static_cast<int>(res.result_int());
  r.raw = res.body();
  for (const auto& field : res) {
    r.headers[std::string(field.name_string())] = std::string(field.value());
  }
  r.body = json::parse(r.raw, nullptr, false);
  return r;
}

Reply Get(std::uint16_t port, const std::string& target, const std::string& token = "") {
  return Call(port, bh::verb::get, target, "", token);
}

std::uint16_t HttpPort(const NodeProcess& node) {
  std::smatch m;
  const std::string& line = node.ready_line();
  REQUIRE(std::regex_search(line, m, std::regex(R"(http 127\.0\.0\.1:([0-9]+))")));
  return static_cast<std::uint16_t>(std::stoi(m[1]));
}

// An error reply: the status, and a JSON error whose message contains `mentions`.
void RequireError(const Reply& r, int status, const std::string& mentions) {
  INFO(r.raw);
  CHECK(r.status == status);
  REQUIRE(r.body.is_object());
  REQUIRE(r.body.contains("error"));
  CHECK(r.body["error"]["code"].is_string());
  CHECK_THAT(r.body["error"]["message"].get<std::string>(), Catch::Contains(mentions));
}

TEST_CASE("The REST API shows the cluster and its maps from every member, and edits entries",
          "[http][admin][integration]") {
  auto a = NodeProcess::StartOrFail({"--http-port", "0"});
  auto b = NodeProcess::StartOrFail({"--http-port", "0", "--join", a->address()});
  auto c = NodeProcess::StartOrFail({"--http-port", "0", "--join", a->address()});
  WaitForMembers(*a, 3);
  WaitForMembers(*c, 3);
  const std::vector<std::uint16_t> ports = {HttpPort(*a), HttpPort(*b), HttpPort(*c)};

  auto cluster = Get(ports[1], "/api/v1/cluster");
  REQUIRE(cluster.status == 200);
  CHECK(cluster.body["members"].size() == 3);
  CHECK(cluster.body["members"][0]["master"] == true);
  CHECK(cluster.body["members"][0]["address"] == a->address());
  CHECK(cluster.body["members"][1]["this_member"] == true);
  CHECK(cluster.body["partition_count"] == 271);
  CHECK(cluster.body["health"]["ready"]["ok"] == true);
  auto partitions = Get(ports[0], "/api/v1/partitions");
  REQUIRE(partitions.status == 200);
  CHECK(partitions.body["partitions"].size() == 271);
  CHECK(partitions.body["summary"].size() == 3);

  // One entry lives on two of the three members; every member lists its map.
  {
    auto client = ConnectOrFail(*a);
    REQUIRE(client->GetMap("orders")->Put("o-1", "first"));
  }
  for (auto port : ports) {
    INFO("port " << port);
    auto maps = Get(port, "/api/v1/maps");
    REQUIRE(maps.status == 200);
    REQUIRE(maps.body["maps"].size() == 1);
    CHECK(maps.body["maps"][0]["map"] == "orders");
    CHECK(maps.body["maps"][0]["entries"] == 1);
    CHECK(maps.body["maps"][0]["memory_bytes"].get<std::int64_t>() > 0);
    CHECK(maps.body["unreachable_members"].empty());
  }
  auto one = Get(ports[2], "/api/v1/maps/orders/entries/o-1");
  REQUIRE(one.status == 200);
  CHECK(one.body["value"] == "first");

  // Write: 201 for a new entry, 200 with the previous value after; records are JSON.
  auto put = Call(ports[2], bh::verb::put, "/api/v1/maps/orders/entries/o-2",
                  R"({"record": {"status": "open", "total": 120}})");
  CHECK(put.status == 201);
  put = Call(ports[2], bh::verb::put, "/api/v1/maps/orders/entries/o-2",
             R"({"record": {"status": "paid", "total": 120}, "ttl_ms": 600000})");
  CHECK(put.status == 200);
  CHECK(put.body["previous"]["status"] == "open");
  REQUIRE(Call(ports[0], bh::verb::put, "/api/v1/maps/orders/entries/o-3",
               R"({"record": {"status": "open", "total": 80}})")
              .status == 201);
  auto query = Get(ports[1], "/api/v1/maps/orders/entries?where=status%20%3D%20'open'");
  REQUIRE(query.status == 200);
  CHECK(query.body["count"] == 1);
  CHECK(query.body["entries"][0]["key"] == "o-3");
  CHECK(query.body["entries"][0]["value"]["total"] == 80);
  auto limited = Get(ports[1], "/api/v1/maps/orders/entries?limit=2");
  CHECK(limited.body["count"] == 3);
  CHECK(limited.body["entries"].size() == 2);
  CHECK(limited.body["truncated"] == true);
  auto stats = Get(ports[0], "/api/v1/maps/orders");
  CHECK(stats.body["entries"] == 3);
  auto removed = Call(ports[0], bh::verb::delete_, "/api/v1/maps/orders/entries/o-1");
  CHECK(removed.status == 200);
  CHECK(removed.body["removed"] == "first");
  {
    auto client = ConnectOrFail(*b);
    auto gone = client->GetMap("orders")->Get("o-1");
    REQUIRE(gone);
    CHECK_FALSE(gone->has_value());
  }

  // Bad input: 4xx with a JSON error naming the problem; the member keeps serving.
  RequireError(Call(ports[0], bh::verb::delete_, "/api/v1/maps/orders/entries/o-1"), 404,
               "no entry 'o-1'");
  RequireError(Get(ports[0], "/api/v1/maps/nosuchmap"), 404, "no map 'nosuchmap'");
  RequireError(Get(ports[0], "/api/v1/maps/nosuchmap/entries"), 404, "no map 'nosuchmap'");
  RequireError(Call(ports[0], bh::verb::put, "/api/v1/maps/orders/entries/x", "{not json"), 400,
               "JSON object");
  RequireError(Call(ports[0], bh::verb::put, "/api/v1/maps/orders/entries/x", R"({"v": 1})"), 400,
               "\"value\"");
  RequireError(Call(ports[0], bh::verb::put, "/api/v1/maps/orders/entries/x",
                    R"({"value": "v", "ttl_ms": -5})"),
               400, "ttl_ms");
  RequireError(Get(ports[0], "/api/v1/maps/orders/entries?where=status%20%3D%3D"), 400, "");
  RequireError(Get(ports[0], "/api/v1/maps/orders/entries?limit=ten"), 400, "limit");
  RequireError(Get(ports[0], "/api/v1/nothing"), 404, "");
  RequireError(Call(ports[0], bh::verb::put, "/api/v1/maps/orders/entries/big",
                    R"({"value": ")" + std::string(10 * 1024 * 1024, 'x') + "\"}"),
               413, "limit");
  RequireError(Call(ports[0], bh::verb::put, "/api/v1/maps/__sagas/entries/x", R"({"value": "v"})"),
               403, "internal");
  {  // A change that is not a JSON request (what a page of another origin can send): refused.
    asio::io_context io;
    asio::ip::tcp::socket socket(io);
    socket.connect({asio::ip::make_address("127.0.0.1"), ports[0]});
    bh::request<bh::string_body> req(bh::verb::delete_, "/api/v1/maps/orders/entries/o-2", 11);
    req.set(bh::field::host, "127.0.0.1");
    req.set(bh::field::content_type, "text/plain");
    req.prepare_payload();
    bh::write(socket, req);
    boost::beast::flat_buffer buffer;
    bh::response<bh::string_body> res;
    bh::read(socket, buffer, res);
    CHECK(res.result_int() == 415);
    CHECK(Get(ports[0], "/api/v1/maps/orders/entries/o-2").status == 200);  // still there
  }
  RequireError(Get(ports[0], "/api/v1/dlq/g/99999999999999999999999"), 400, "not a positive");
  CHECK(Get(ports[0], "/api/v1/maps/orders").status == 200);  // still serving
  // Topics: counted on every member, summed.
  {
    auto client = ConnectOrFail(*b);
    REQUIRE(client->GetTopic("news")->Publish("hello"));
  }
  auto topics = Get(ports[2], "/api/v1/topics");
  REQUIRE(topics.status == 200);
  CHECK(topics.body["topics"]["news"]["published"] == 1);
  CHECK(topics.body["unreachable_members"].empty());
  // The console's page is served, and / leads to it.
  auto page = Get(ports[0], "/console");
  CHECK(page.status == 200);
  CHECK(page.header("Content-Type") == "text/html; charset=utf-8");
  CHECK_THAT(page.raw, Catch::Contains("<title>Tessera console</title>"));
  auto root = Get(ports[0], "/");
  CHECK(root.status == 302);
  CHECK(root.header("Location") == "/console");
}

TEST_CASE("With a secret the API needs it as a Bearer token, probes and the console stay open",
          "[http][admin][integration]") {
  auto node = NodeProcess::StartOrFail({"--http-port", "0", "--secret", "s3cret"});
  const auto port = HttpPort(*node);
  auto denied = Get(port, "/api/v1/cluster");
  RequireError(denied, 401, "Authorization: Bearer");
  CHECK(denied.header("WWW-Authenticate") == "Bearer");
  RequireError(Get(port, "/api/v1/maps", "wrong"), 401, "secret");
  CHECK(Get(port, "/api/v1/cluster", "s3cret").status == 200);
  CHECK(Get(port, "/health/live").status == 200);
  CHECK(Get(port, "/metrics").status == 200);
  CHECK(Get(port, "/console").status == 200);
}

saga::Event Placed(std::int64_t id) {
  saga::Event e;
  e.id = id;
  e.type = "Placed";
  e.key = "order@cust-7";
  e.source = "orders-svc";
  e.time_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  e.payload = record::GenericRecord::Build().Int64("n", id).Done();
  return e;
}

TEST_CASE("Dead letters are listed, replayed through the group's consumer and discarded over REST",
          "[http][admin][integration][dlq]") {
  auto node = NodeProcess::StartOrFail({"--http-port", "0"});
  const auto port = HttpPort(*node);
  std::shared_ptr<grid::Instance> shared = ConnectOrFail(*node);
  grid::MemberOptions service_options;  // the service's embedded member
  service_options.port = 0;
  service_options.threads = 1;
  service_options.cluster_name = "billing-svc";
  grid::Member service(service_options);
  REQUIRE(service.Start());
  saga::Inbox inbox(service);
  saga::ConsumerOptions o;
  o.group = "billing";
  o.streams = {"orders"};
  o.stream_config.sub_streams = 2;
  o.retry.max_attempts = 1;
  o.maintenance_ms = 50;
  auto billing = std::make_unique<saga::Consumer>(shared, service, inbox, o);
  std::atomic<bool> broken{true};
  billing->On("Placed", [&](const saga::Event&, saga::HandlerContext&) -> base::Result<void> {
    if (broken) return base::Fail(base::ErrorCode::kBadRequest, "cannot bill");
    return {};
  });
  REQUIRE(billing->Start());
  auto stream = shared->GetStream("orders", o.stream_config);
  for (std::int64_t id : {901, 902}) {
    const auto e = Placed(id);
    REQUIRE(stream->Append(e.key, saga::EncodeEvent(e), std::to_string(e.id)));
  }
  for (int i = 0; i < 2000 && billing->stats().dead_lettered + billing->stats().parked < 2; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  auto list = Get(port, "/api/v1/dlq/billing");
  REQUIRE(list.status == 200);
  REQUIRE(list.body["count"] == 2);
  CHECK(list.body["dead_letters"][0]["event_id"] == 901);
  CHECK(list.body["dead_letters"][0]["error"] == "cannot bill");
  CHECK(list.body["dead_letters"][1]["parked"] == true);
  CHECK(Get(port, "/api/v1/dlq/billing?type=Shipped").body["count"] == 0);
  CHECK(Get(port, "/api/v1/dlq/billing/902").body["parked"] == true);
  auto consumers = Get(port, "/api/v1/consumers");
  REQUIRE(consumers.body["groups"].size() == 1);
  CHECK(consumers.body["groups"][0]["dead_letters"] == 2);
  auto streams = Get(port, "/api/v1/streams/orders");
  REQUIRE(streams.status == 200);
  CHECK(streams.body["groups"][0]["group"] == "billing");
  CHECK(streams.body["sub_streams"].size() == 2);

  // Still broken: the consumer runs the replay, it fails, the API says so (409).
  RequireError(Call(port, bh::verb::post, "/api/v1/dlq/billing/901/replay"), 409,
               "0 replayed, 1 failed: cannot bill");
  broken = false;
  auto replayed = Call(port, bh::verb::post, "/api/v1/dlq/billing/901/replay");
  INFO(replayed.raw);
  REQUIRE(replayed.status == 200);
  CHECK(replayed.body["status"] == "done");
  CHECK(replayed.body["replayed"] == 2);  // and the event parked behind it
  CHECK(Get(port, "/api/v1/dlq/billing").body["count"] == 0);

  // Discard: an event nobody will run again.
  saga::DeadLetterQueue dlq(shared, "billing");
  saga::DeadLetter letter;
  letter.event = Placed(903);
  letter.group = "billing";
  letter.handler = "Placed";
  letter.error = "expired card";
  REQUIRE(dlq.Add(letter));
  auto discarded = Call(port, bh::verb::delete_, "/api/v1/dlq/billing/903?reason=refunded");
  CHECK(discarded.status == 200);
  CHECK(discarded.body["reason"] == "refunded");
  RequireError(Get(port, "/api/v1/dlq/billing/903"), 404, "no dead letter of event 903");
  RequireError(Get(port, "/api/v1/dlq/billing/abc"), 400, "'abc'");
  RequireError(Get(port, "/api/v1/dlq/billing?older_than_ms=-1"), 400, "older_than_ms");

  // Nobody consumes the group: the request is withdrawn, 504 says what to do.
  billing.reset();
  REQUIRE(dlq.Add(letter));
  RequireError(Call(port, bh::verb::post, "/api/v1/dlq/billing/903/replay?wait_ms=300"), 504,
               "no consumer of group 'billing' took the replay request within 300 ms");
  RequireError(Get(port, "/api/v1/streams/nosuch"), 404, "no stream 'nosuch'");
  RequireError(Get(port, "/api/v1/sagas/nosuch"), 404, "no saga 'nosuch'");
  CHECK(Get(port, "/api/v1/sagas").body["sagas"].empty());
  CHECK(Get(port, "/api/v1/outbox").body["pending"] == 0);
}

}  // namespace
}  // namespace tessera::integration
