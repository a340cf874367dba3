#pragma once
// A small HTTP/1.1 server (Boost.Beast) for JSON APIs: the services of examples/ and, later,
// the member's health, metrics and admin endpoints. Routes are a method and a path
// pattern whose "{name}" segments capture (Request::params); handlers return a Response.
//
// It runs on threads of its own (ServerOptions::threads), never on a member's shards, so a
// handler may block on the grid and a slow client slows only its own connection. Keep-alive,
// a per-connection idle timeout, and limits on header and body size. What a client gets wrong
// is answered, never fatal: a malformed request is 400 and the connection closes, a body over
// max_body_bytes 413, an unknown path 404, a known path with another method 405 (with Allow),
// a handler that throws 500; error bodies are JSON: {"error": {"code": ..., "message": ...}}.
//
// Thread-safety: Route before Start; Start/Stop from any one thread, Stop also from a handler
// (the server must then outlive that handler); handlers run on the server's threads, several
// at once when threads > 1, and block only their own connection: with all threads blocked
// (the grid frozen), other requests wait, so give it more threads than slow handlers.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/base/error.h"

namespace tessera::http {

struct Request {
  std::string method;                          // "GET", "POST", ...
  std::string target;                          // as sent: path and query
  std::string path;                            // percent-decoded, without the query
  std::map<std::string, std::string> query;    // percent-decoded; a repeated name keeps the last
  std::map<std::string, std::string> params;   // the route's {name} captures
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;

  // The query parameter or header, or `fallback`.
  std::string Query(const std::string& name, std::string fallback = "") const;
  std::string Header(const std::string& lower_name, std::string fallback = "") const;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;

  // A JSON body (already serialized).
  static Response Json(int status, std::string body);
  // {"error": {"code": code, "message": message}}: code is a stable word ("not_found",
  // "bad_request", ...) for programs, message a sentence for people.
  static Response Error(int status, std::string_view code, std::string_view message);
  // A failed call as an HTTP error, one mapping for every server: 400 bad_request (bad
  // request, predicate, type, processor), 401 unauthorized, 404 not_found, 409 conflict,
  // 504 timeout and 503 unavailable (member left, not owner, overloaded, no quorum, shutting
  // down, connection failed: both say "try again"), 500 internal for the rest.
  static Response FromError(const base::Error& error);
};

using Handler = std::function<Response(const Request&)>;

struct ServerOptions {
  std::string host = "127.0.0.1";  // a numeric address
  std::uint16_t port = 0;          // 0 = pick a free port (read it back with port())
  int threads = 2;
  std::size_t max_body_bytes = 1024 * 1024;
  std::size_t max_header_bytes = 16 * 1024;
  std::int64_t idle_timeout_ms = 30'000;  // a connection silent this long is closed
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();  // Stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // `pattern` is a path whose segments are literal or "{name}" (one segment each), e.g.
  // "/orders/{id}". The first route that matches wins. REQUIRES: before Start.
  void Route(std::string method, std::string pattern, Handler handler);

  // Binds and starts serving. Errors: kBadRequest for a host that is not a numeric address;
  // kConnectionFailed when the port cannot be bound (the message names the address).
  base::Result<void> Start();
  // Stops accepting, closes every connection and joins the threads. Idempotent.
  void Stop();
  std::uint16_t port() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Percent-decoding ("+" stays "+"); nullopt-free: a malformed escape is kept as it is.
std::string PercentDecode(std::string_view text);

}  // namespace tessera::http
