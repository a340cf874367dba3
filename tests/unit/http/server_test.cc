// http::Server over real sockets on 127.0.0.1: routes, captures, queries, keep-alive, and what
// a client gets wrong (malformed requests, oversized bodies, unknown paths and methods).
#include <utility>  // before Asio's awaitable header (Boost 1.74)

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/http/server.h"

namespace tessera::http {
namespace {

namespace asio = boost::asio;
namespace bh = boost::beast::http;
using tcp = asio::ip::tcp;

struct Client {
  explicit Client(std::uint16_t port) : socket(io) {
    socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  }
  bh::response<bh::string_body> Send(bh::verb verb, const std::string& target,
                                     const std::string& body = "") {
    bh::request<bh::string_body> req(verb, target, 11);
    req.set(bh::field::host, "127.0.0.1");
    req.body() = body;
    req.prepare_payload();
    bh::write(socket, req);
    return Receive();
  }
  void SendRaw(const std::string& bytes) { asio::write(socket, asio::buffer(bytes)); }
  bh::response<bh::string_body> Receive() {
    bh::response<bh::string_body> res;
    bh::read(socket, buffer, res);
    return res;
  }
  asio::io_context io;
  tcp::socket socket;
  boost::beast::flat_buffer buffer;
};

std::unique_ptr<Server> Started(ServerOptions o = {}) {
  auto s = std::make_unique<Server>(o);
  s->Route("GET", "/orders/{id}", [](const Request& r) {
    return Response::Json(200, "{\"id\":\"" + r.params.at("id") + "\",\"view\":\"" +
                                   r.Query("view", "short") + "\"}");
  });
  s->Route("POST", "/orders", [](const Request& r) { return Response::Json(201, r.body); });
  s->Route("GET", "/boom", [](const Request&) -> Response { throw std::runtime_error("kaput"); });
  REQUIRE(s->Start());
  REQUIRE(s->port() != 0);
  return s;
}

TEST_CASE("A route's captures and query parameters reach the handler, percent-decoded", "[http]") {
  auto server = Started();
  Client c(server->port());
  auto res = c.Send(bh::verb::get, "/orders/o%2D1?view=full%20view");
  CHECK(res.result_int() == 200);
  CHECK(res.body() == R"({"id":"o-1","view":"full view"})");
  CHECK(res[bh::field::content_type] == "application/json");
  // Keep-alive: the same connection serves the next request.
  res = c.Send(bh::verb::post, "/orders", R"({"a":1})");
  CHECK(res.result_int() == 201);
  CHECK(res.body() == R"({"a":1})");
}

TEST_CASE("Unknown paths are 404, other methods 405 with Allow, a throwing handler 500", "[http]") {
  auto server = Started();
  Client c(server->port());
  auto res = c.Send(bh::verb::get, "/nothing/here");
  CHECK(res.result_int() == 404);
  CHECK(res.body().find("\"not_found\"") != std::string::npos);
  res = c.Send(bh::verb::delete_, "/orders/o-1");
  CHECK(res.result_int() == 405);
  CHECK(res[bh::field::allow] == "GET");
  res = c.Send(bh::verb::get, "/boom");
  CHECK(res.result_int() == 500);
  CHECK(res.body().find("kaput") != std::string::npos);
  CHECK(c.Send(bh::verb::get, "/orders/x").result_int() == 200);  // still serving
}

TEST_CASE("A path that is not UTF-8 is answered 404 or 405 with a JSON error, and serving goes on",
          "[http]") {
  auto server = Started();
  Client c(server->port());
  auto res = c.Send(bh::verb::get, "/%FF%FE");  // decodes to bytes that are not UTF-8
  CHECK(res.result_int() == 404);
  CHECK(res.body().find("\"not_found\"") != std::string::npos);
  res = c.Send(bh::verb::patch, "/orders/%FF");
  CHECK(res.result_int() == 405);
  // A handler that puts the bytes into its own JSON error gets 500, the process goes on.
  res = c.Send(bh::verb::get, "/orders/o-1");
  CHECK(res.result_int() == 200);
}

TEST_CASE("A grid error becomes the HTTP status a client can act on", "[http]") {
  using base::Error;
  using base::ErrorCode;
  const std::vector<std::pair<ErrorCode, int>> cases = {
      {ErrorCode::kBadRequest, 400}, {ErrorCode::kBadPredicate, 400}, {ErrorCode::kWrongType, 400},
      {ErrorCode::kAuthFailed, 401}, {ErrorCode::kNotFound, 404},     {ErrorCode::kConflict, 409},
      {ErrorCode::kTimeout, 504},    {ErrorCode::kMemberLeft, 503},   {ErrorCode::kNotOwner, 503},
      {ErrorCode::kNoQuorum, 503},   {ErrorCode::kShuttingDown, 503}, {ErrorCode::kInternal, 500},
  };
  for (const auto& [code, status] : cases) {
    INFO(base::ErrorCodeName(code));
    const auto r = Response::FromError(Error(code, "what happened"));
    CHECK(r.status == status);
    CHECK(r.content_type == "application/json");
    CHECK(r.body.find("what happened") != std::string::npos);
    // What passes says so.
    CHECK((r.body.find("try again") != std::string::npos) == (status == 503 || status == 504));
  }
}

TEST_CASE("A body over the limit is 413, a malformed request 400, and the server goes on",
          "[http]") {
  ServerOptions o;
  o.max_body_bytes = 1000;
  auto server = Started(o);
  {
    Client c(server->port());
    auto res = c.Send(bh::verb::post, "/orders", std::string(5000, 'x'));
    CHECK(res.result_int() == 413);
    CHECK(res.body().find("1000 bytes") != std::string::npos);
  }
  {
    Client c(server->port());
    c.SendRaw("THIS IS NOT HTTP\r\n\r\n");
    auto res = c.Receive();
    CHECK(res.result_int() == 400);
    CHECK(res.body().find("malformed HTTP request") != std::string::npos);
  }
  Client c(server->port());
  CHECK(c.Send(bh::verb::post, "/orders", "{}").result_int() == 201);
}

TEST_CASE("A port in use is a clear error, and Stop closes open connections", "[http]") {
  auto server = Started();
  ServerOptions o;
  o.port = server->port();
  Server second(o);
  auto started = second.Start();
  REQUIRE_FALSE(started);
  CHECK(started.error().code() == base::ErrorCode::kConnectionFailed);
  CHECK(started.error().message().find("127.0.0.1:" + std::to_string(o.port)) != std::string::npos);

  Client c(server->port());
  CHECK(c.Send(bh::verb::get, "/orders/a").result_int() == 200);
  server->Stop();
  CHECK_THROWS(c.Send(bh::verb::get, "/orders/a"));
}

}  // namespace
}  // namespace tessera::http
