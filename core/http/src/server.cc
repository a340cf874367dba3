#include "tessera/http/server.h"

#include <utility>  // before Asio's awaitable header (Boost 1.74)

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <chrono>
#include <exception>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

namespace tessera::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bh = boost::beast::http;
using tcp = asio::ip::tcp;

std::string Request::Query(const std::string& name, std::string fallback) const {
  auto it = query.find(name);
  return it == query.end() ? std::move(fallback) : it->second;
}

std::string Request::Header(const std::string& lower_name, std::string fallback) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? std::move(fallback) : it->second;
}

Response Response::Json(int status, std::string body) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

Response Response::Error(int status, std::string_view code, std::string_view message) {
  nlohmann::json j = {{"error", {{"code", code}, {"message", message}}}};
  // A message may quote what the client sent (a path, a name): invalid UTF-8 in it becomes
  // U+FFFD instead of an exception.
  return Json(status, j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

Response Response::FromError(const base::Error& error) {
  using base::ErrorCode;
  switch (error.code()) {
    case ErrorCode::kBadRequest:
    case ErrorCode::kBadPredicate:
    case ErrorCode::kWrongType:
    case ErrorCode::kUnknownProcessor:
      return Error(400, "bad_request", error.message());
    case ErrorCode::kAuthFailed:
      return Error(401, "unauthorized", error.message());
    case ErrorCode::kNotFound:
      return Error(404, "not_found", error.message());
    case ErrorCode::kConflict:
      return Error(409, "conflict", error.message());
    case ErrorCode::kTimeout:
      return Error(504, "timeout", error.message() + "; try again");
    case ErrorCode::kOverloaded:
    case ErrorCode::kMemberLeft:
    case ErrorCode::kConnectionFailed:
    case ErrorCode::kNoQuorum:
    case ErrorCode::kNotOwner:
    case ErrorCode::kShuttingDown:
    case ErrorCode::kRecovering:
      return Error(503, "unavailable", error.message() + "; try again");
    default:
      return Error(500, "internal", error.message());
  }
}

std::string PercentDecode(std::string_view text) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      const int hi = hex(text[i + 1]), lo = hex(text[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(text[i]);
  }
  return out;
}

namespace {

std::vector<std::string> Segments(std::string_view path) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    if (i >= path.size()) break;
    const std::size_t end = path.find('/', i);
    out.emplace_back(path.substr(i, end == std::string_view::npos ? path.size() - i : end - i));
    i = end == std::string_view::npos ? path.size() : end;
  }
  return out;
}

struct RouteEntry {
  std::string method;
  std::vector<std::string> pattern;
  Handler handler;
};

}  // namespace

struct Server::Impl {
  explicit Impl(ServerOptions o) : options(std::move(o)), acceptor(io) {}

  ServerOptions options;
  std::vector<RouteEntry> routes;
  asio::io_context io;
  tcp::acceptor acceptor;
  std::vector<std::thread> threads;
  std::mutex mu;  // sessions
  std::set<std::shared_ptr<struct Session>> sessions;
  bool started = false, stopped = false;
  std::uint16_t bound_port = 0;

  Response Dispatch(Request& request) const;
  void Accept();
};

struct Session : std::enable_shared_from_this<Session> {
  Session(tcp::socket socket, Server::Impl* server) : stream(std::move(socket)), server(server) {}

  beast::tcp_stream stream;
  Server::Impl* server;  // outlives every session (it owns the io_context)
  beast::flat_buffer buffer;
  std::optional<bh::request_parser<bh::string_body>> parser;
  bh::response<bh::string_body> response;

  void Read() {
    parser.emplace();
    parser->body_limit(server->options.max_body_bytes);
    parser->header_limit(static_cast<std::uint32_t>(server->options.max_header_bytes));
    stream.expires_after(std::chrono::milliseconds(server->options.idle_timeout_ms));
    bh::async_read(
        stream, buffer, *parser,
        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (ec == bh::error::body_limit) {
      return Write(Response::Error(413, "body_too_large",
                                   "the request body is over the limit of " +
                                       std::to_string(server->options.max_body_bytes) + " bytes"),
                   false);
    }
    if (ec == bh::error::header_limit) {
      return Write(Response::Error(431, "headers_too_large", "the request headers are too large"),
                   false);
    }
    if (ec && &ec.category() == &bh::make_error_code(bh::error::bad_target).category() &&
        ec != bh::error::end_of_stream && ec != bh::error::partial_message) {
      return Write(Response::Error(400, "bad_request", "malformed HTTP request: " + ec.message()),
                   false);
    }
    if (ec) return Close();
    const auto& msg = parser->get();
    Request r;
    r.method = std::string(msg.method_string());
    r.target = std::string(msg.target());
    const std::size_t q = r.target.find('?');
    r.path = PercentDecode(std::string_view(r.target).substr(0, q));
    if (q != std::string::npos) {
      std::string_view rest = std::string_view(r.target).substr(q + 1);
      while (!rest.empty()) {
        const std::size_t amp = rest.find('&');
        const std::string_view pair = rest.substr(0, amp);
        const std::size_t eq = pair.find('=');
        if (!pair.empty()) {
          r.query[PercentDecode(pair.substr(0, eq))] =
              eq == std::string_view::npos ? "" : PercentDecode(pair.substr(eq + 1));
        }
        rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
      }
    }
    for (const auto& field : msg) {
      std::string name(field.name_string());
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      r.headers[name] = std::string(field.value());
    }
    r.body = msg.body();
    const bool keep_alive = msg.keep_alive();
    Response reply;
    try {
      reply = server->Dispatch(r);
    } catch (const std::exception& e) {  // never out of an io thread: that would end the process
      reply = Response::Error(500, "internal", std::string("the request failed: ") + e.what());
    }
    Write(std::move(reply), keep_alive);
  }

  void Write(Response r, bool keep_alive) {
    response = {};
    response.version(11);
    response.result(static_cast<unsigned>(r.status));
    response.set(bh::field::server, "tessera");
    response.set(bh::field::content_type, r.content_type);
    for (auto& [name, value] : r.headers) response.set(name, value);
    response.body() = std::move(r.body);
    response.keep_alive(keep_alive);
    response.prepare_payload();
    stream.expires_after(std::chrono::milliseconds(server->options.idle_timeout_ms));
    bh::async_write(stream, response,
                    [self = shared_from_this(), keep_alive](beast::error_code ec, std::size_t) {
                      if (ec || !keep_alive) return self->Close();
                      self->Read();
                    });
  }

  void Close() {
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream.socket().close(ignored);
    std::lock_guard lock(server->mu);
    server->sessions.erase(shared_from_this());
  }
};

Response Server::Impl::Dispatch(Request& request) const {
  const auto segments = Segments(request.path);
  std::vector<std::string> allowed;
  for (const auto& route : routes) {
    if (route.pattern.size() != segments.size()) continue;
    std::map<std::string, std::string> params;
    bool match = true;
    for (std::size_t i = 0; i < segments.size() && match; ++i) {
      const auto& p = route.pattern[i];
      if (p.size() > 2 && p.front() == '{' && p.back() == '}') {
        params[p.substr(1, p.size() - 2)] = segments[i];
      } else {
        match = p == segments[i];
      }
    }
    if (!match) continue;
    if (route.method != request.method) {
      allowed.push_back(route.method);
      continue;
    }
    request.params = std::move(params);
    try {
      return route.handler(request);
    } catch (const std::exception& e) {
      return Response::Error(500, "internal", std::string("the handler failed: ") + e.what());
    }
  }
  if (!allowed.empty()) {
    std::string allow;
    for (const auto& m : allowed) allow += (allow.empty() ? "" : ", ") + m;
    auto r = Response::Error(
        405, "method_not_allowed",
        request.method + " is not allowed on " + request.path + "; allowed: " + allow);
    r.headers.emplace_back("Allow", allow);
    return r;
  }
  return Response::Error(404, "not_found", "no such resource: " + request.path);
}

void Server::Impl::Accept() {
  acceptor.async_accept(asio::make_strand(io), [self = this](beast::error_code ec,
                                                             tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !self->acceptor.is_open()) return;
    if (ec) {  // EMFILE and the like: try again a little later instead of spinning
      auto timer = std::make_shared<asio::steady_timer>(self->io, std::chrono::milliseconds(100));
      timer->async_wait([self, timer](beast::error_code) { self->Accept(); });
      return;
    }
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    auto session = std::make_shared<Session>(std::move(socket), self);
    {
      std::lock_guard lock(self->mu);
      if (self->stopped) return;
      self->sessions.insert(session);
    }
    session->Read();
    self->Accept();
  });
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Server::~Server() { Stop(); }

void Server::Route(std::string method, std::string pattern, Handler handler) {
  impl_->routes.push_back({std::move(method), Segments(pattern), std::move(handler)});
}

base::Result<void> Server::Start() {
  auto& o = impl_->options;
  beast::error_code ec;
  const auto address = asio::ip::make_address(o.host == "localhost" ? "127.0.0.1" : o.host, ec);
  if (ec) {
    return base::Fail(base::ErrorCode::kBadRequest,
                      "invalid HTTP host '" + o.host + "': expected a numeric address");
  }
  const std::string where = o.host + ":" + std::to_string(o.port);
  auto fail = [&](const char* what) {
    return base::Fail(base::ErrorCode::kConnectionFailed, std::string("cannot serve HTTP on ") +
                                                              where + ": " + what + ": " +
                                                              ec.message() + "; pick another port");
  };
  const tcp::endpoint endpoint(address, o.port);
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (ec) return fail("open");
  impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  impl_->acceptor.bind(endpoint, ec);
  if (ec) return fail("bind");
  impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return fail("listen");
  impl_->bound_port = impl_->acceptor.local_endpoint(ec).port();
  impl_->started = true;
  impl_->Accept();
  for (int i = 0; i < std::max(1, o.threads); ++i) {
    impl_->threads.emplace_back([impl = impl_.get()] { impl->io.run(); });
  }
  return {};
}

void Server::Stop() {
  if (!impl_->started) return;
  std::set<std::shared_ptr<Session>> sessions;
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stopped) return;
    impl_->stopped = true;
    sessions.swap(impl_->sessions);
  }
  impl_->io.stop();
  for (auto& t : impl_->threads) {
    if (!t.joinable()) continue;
    if (t.get_id() == std::this_thread::get_id()) {
      t.detach();  // Stop from a handler: this thread ends when the handler returns
      continue;
    }
    t.join();
  }
  impl_->threads.clear();
  // No thread runs the io_context now: close what is open; handlers still queued are
  // destroyed with the io_context.
  beast::error_code ignored;
  impl_->acceptor.close(ignored);
  for (auto& s : sessions) s->stream.socket().close(ignored);
}

std::uint16_t Server::port() const {
  return impl_->started ? impl_->bound_port : impl_->options.port;
}

}  // namespace tessera::http
