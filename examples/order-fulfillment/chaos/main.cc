// order-chaos: the parts of scripts/chaos-orders that a Python process does too slowly or
// that need the grid's API.
//
//   order-chaos duplicate --shared HOST:PORT --stream NAME --count K [--shared-cluster NAME]
//
// Publishes K events of stream NAME again, as a producer that lost an append's answer and
// published again would: the same event (type, key, saga headers, payload) under a new event
// id, so the stream's id dedup does not absorb it and the consumers get it twice. It takes the
// newest events of each sub-stream, round robin. Prints {"stream": NAME, "duplicated": N}.
//
//   order-chaos load --target HOST:PORT [--target ...] --orders FILE --rate R
//                    [--connections N] [--give-up-s S]
//
// Places the orders of FILE (one JSON order with an "id" per line) by POST /orders at a steady
// R orders/s (open loop: order i is due at start + i/R), over N keep-alive connections (16),
// each order to target (i + attempt) mod targets. An order is sent again (another connection,
// the next target) until it is accepted (201, or 200: placed before) or refused (400, 409), or
// S seconds (120) passed. Prints {"accepted": [ids], "refused": [{"id","status","body"}],
// "not_accepted": [ids], "seconds": S, "late_ms_p99": L}: late is how far behind its due time
// an order's first POST went out, so a figure where the load generator fell behind is seen.
//
// Exit 0; 1 on an error; 2 on bad usage.
#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tessera/grid/client.h"
#include "tessera/grid/id_generator.h"
#include "tessera/grid/stream.h"
#include "tessera/saga/event.h"

namespace {

[[noreturn]] void Usage(const std::string& problem) {
  std::fprintf(stderr,
               "order-chaos: %s\nusage: order-chaos duplicate --shared HOST:PORT --stream NAME "
               "--count K [--shared-cluster NAME]\n"
               "       order-chaos load --target HOST:PORT [--target ...] --orders FILE "
               "--rate R [--connections N] [--give-up-s S]\n",
               problem.c_str());
  std::exit(2);
}

double ParseNumber(const std::string& flag, const std::string& value, double min) {
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !(v >= min)) {
    Usage(flag + " takes a number >= " + std::to_string(static_cast<long>(min)));
  }
  return v;
}

int Duplicate(int argc, char** argv);
int Load(int argc, char** argv);

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) Usage("name a command: duplicate or load");
  const std::string command = argv[1];
  if (command == "duplicate") return Duplicate(argc, argv);
  if (command == "load") return Load(argc, argv);
  Usage("unknown command '" + command + "': the commands are duplicate and load");
}

namespace {

int Duplicate(int argc, char** argv) {
  namespace grid = tessera::grid;
  namespace saga = tessera::saga;
  std::vector<std::string> shared;
  std::string stream_name, cluster = "shared";
  long count = -1;
  for (int i = 2; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) Usage(flag + " needs a value");
    const std::string value = argv[i + 1];
    if (flag == "--shared") {
      shared.push_back(value);
    } else if (flag == "--stream") {
      stream_name = value;
    } else if (flag == "--shared-cluster") {
      cluster = value;
    } else if (flag == "--count") {
      char* end = nullptr;
      count = std::strtol(value.c_str(), &end, 10);
      if (*end != '\0' || count < 1) Usage("--count takes a whole number >= 1");
    } else {
      Usage("unknown option '" + flag + "'");
    }
  }
  if (shared.empty() || stream_name.empty() || count < 1) {
    Usage("--shared, --stream and --count are required");
  }
  grid::ClientOptions co;
  co.addresses = shared;
  co.cluster_name = cluster;
  co.client_name = "order-chaos";
  auto client = grid::Client::Connect(co);
  if (!client) {
    std::fprintf(stderr, "order-chaos: %s\n", client.error().message().c_str());
    return 1;
  }
  auto ids = grid::IdGenerator::Create(**client);
  if (!ids) {
    std::fprintf(stderr, "order-chaos: %s\n", ids.error().message().c_str());
    return 1;
  }
  auto stream = (*client)->GetStream(stream_name);
  auto info = stream->Info();
  if (!info) {
    std::fprintf(stderr, "order-chaos: stream %s: %s\n", stream_name.c_str(),
                 info.error().message().c_str());
    return 1;
  }
  // The newest `count` events of each sub-stream, then round robin over the sub-streams.
  std::vector<std::vector<grid::StreamEvent>> newest;
  for (const auto& sub : info->sub_streams) {
    if (sub.tail < sub.head) continue;
    const std::int64_t from = std::max(sub.head, sub.tail - count + 1);
    auto slice = stream->Read(sub.index, from, static_cast<int>(count));
    if (!slice) {
      std::fprintf(stderr, "order-chaos: %s\n", slice.error().message().c_str());
      return 1;
    }
    newest.push_back(std::move(slice->events));
  }
  std::vector<grid::StreamAppend> again;
  for (std::size_t round = 0; static_cast<long>(again.size()) < count; ++round) {
    bool any = false;
    for (const auto& events : newest) {
      if (round >= events.size() || static_cast<long>(again.size()) >= count) continue;
      any = true;
      const auto& e = events[events.size() - 1 - round];
      auto event = saga::DecodeEvent(e.payload);
      if (!event) continue;  // not an Event: nothing a consumer would handle
      event->id = (*ids)->Next();
      again.push_back({e.key, saga::EncodeEvent(*event), std::to_string(event->id)});
    }
    if (!any) break;
  }
  for (const auto& a : again) {
    if (auto r = stream->Append(a.key, a.payload, a.id); !r) {
      std::fprintf(stderr, "order-chaos: append: %s\n", r.error().message().c_str());
      return 1;
    }
  }
  std::printf("%s\n",
              nlohmann::json{{"stream", stream_name}, {"duplicated", again.size()}}.dump().c_str());
  return 0;
}

// One keep-alive HTTP/1.1 connection to one target; reconnects after an error.
class Connection {
 public:
  explicit Connection(std::string target) : target_(std::move(target)) {}

  // POSTs `body` to /orders: (status, body), or status 0 and the reason on a connection error.
  std::pair<int, std::string> Post(const std::string& body) {
    namespace http = boost::beast::http;
    boost::beast::error_code ec;
    for (int attempt = 0; attempt < 2; ++attempt) {  // a kept-alive connection may have closed
      if (!socket_ && !Open(ec)) return {0, ec.message()};
      http::request<http::string_body> req{http::verb::post, "/orders", 11};
      req.set(http::field::host, target_);
      req.set(http::field::content_type, "application/json");
      req.keep_alive(true);
      req.body() = body;
      req.prepare_payload();
      http::write(*socket_, req, ec);
      http::response<http::string_body> res;
      if (!ec) http::read(*socket_, buffer_, res, ec);
      if (!ec) {
        if (!res.keep_alive()) socket_.reset();
        return {static_cast<int>(res.result_int()), res.body()};
      }
      socket_.reset();
      buffer_.clear();
    }
    return {0, ec.message()};
  }

 private:
  bool Open(boost::beast::error_code& ec) {
    namespace asio = boost::asio;
    const auto colon = target_.rfind(':');
    asio::ip::tcp::resolver resolver(io_);
    auto endpoints = resolver.resolve(target_.substr(0, colon), target_.substr(colon + 1), ec);
    if (ec) return false;
    auto socket = std::make_unique<asio::ip::tcp::socket>(io_);
    asio::connect(*socket, endpoints, ec);
    if (ec) return false;
    socket->set_option(asio::ip::tcp::no_delay(true));
    socket_ = std::move(socket);
    return true;
  }

  std::string target_;
  boost::asio::io_context io_;
  std::unique_ptr<boost::asio::ip::tcp::socket> socket_;
  boost::beast::flat_buffer buffer_;
};

int Load(int argc, char** argv) {
  using Clock = std::chrono::steady_clock;
  std::vector<std::string> targets;
  std::string orders_file;
  double rate = 0, give_up_s = 120;
  int connections = 16;
  for (int i = 2; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) Usage(flag + " needs a value");
    const std::string value = argv[i + 1];
    if (flag == "--target") {
      if (value.rfind(':') == std::string::npos) Usage("--target takes HOST:PORT");
      targets.push_back(value);
    } else if (flag == "--orders") {
      orders_file = value;
    } else if (flag == "--rate") {
      rate = ParseNumber(flag, value, 1);
    } else if (flag == "--connections") {
      connections = static_cast<int>(ParseNumber(flag, value, 1));
    } else if (flag == "--give-up-s") {
      give_up_s = ParseNumber(flag, value, 1);
    } else {
      Usage("unknown option '" + flag + "'");
    }
  }
  if (targets.empty() || orders_file.empty() || rate <= 0) {
    Usage("--target, --orders and --rate are required");
  }
  std::ifstream in(orders_file);
  if (!in) {
    std::fprintf(stderr, "order-chaos: cannot read %s\n", orders_file.c_str());
    return 1;
  }
  std::vector<std::string> bodies, ids;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    auto order = nlohmann::json::parse(line, nullptr, false);
    if (order.is_discarded() || !order.contains("id") || !order["id"].is_string()) {
      std::fprintf(stderr, "order-chaos: %s line %zu is not a JSON order with an \"id\"\n",
                   orders_file.c_str(), bodies.size() + 1);
      return 1;
    }
    ids.push_back(order["id"].get<std::string>());
    bodies.push_back(std::move(line));
  }
  enum class Outcome { kNone, kAccepted, kRefused, kGaveUp };
  std::vector<Outcome> outcome(bodies.size(), Outcome::kNone);
  std::vector<std::pair<int, std::string>> refusal(bodies.size());
  std::vector<double> late_ms(bodies.size(), 0);
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < connections; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::unique_ptr<Connection>> conns;
      for (const auto& target : targets) conns.push_back(std::make_unique<Connection>(target));
      for (std::size_t i = t; i < bodies.size(); i += connections) {
        const auto due = start + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(i / rate));
        std::this_thread::sleep_until(due);
        late_ms[i] = std::chrono::duration<double, std::milli>(Clock::now() - due).count();
        const auto give_up = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::duration<double>(give_up_s));
        for (std::size_t attempt = 0;; ++attempt) {
          auto [status, body] = conns[(i + attempt) % conns.size()]->Post(bodies[i]);
          if (status == 200 || status == 201) {
            outcome[i] = Outcome::kAccepted;
            break;
          }
          if (status == 400 || status == 409) {
            outcome[i] = Outcome::kRefused;
            refusal[i] = {status, std::move(body)};
            break;
          }
          if (Clock::now() >= give_up) {
            outcome[i] = Outcome::kGaveUp;
            break;
          }
          std::this_thread::sleep_for(
              std::chrono::milliseconds(std::min<std::size_t>(1000, 50 * (attempt + 1))));
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  nlohmann::json out{{"accepted", nlohmann::json::array()},
                     {"refused", nlohmann::json::array()},
                     {"not_accepted", nlohmann::json::array()},
                     {"seconds", seconds}};
  for (std::size_t i = 0; i < bodies.size(); ++i) {
    if (outcome[i] == Outcome::kAccepted) out["accepted"].push_back(ids[i]);
    if (outcome[i] == Outcome::kRefused) {
      out["refused"].push_back(
          {{"id", ids[i]}, {"status", refusal[i].first}, {"body", refusal[i].second}});
    }
    if (outcome[i] == Outcome::kGaveUp) out["not_accepted"].push_back(ids[i]);
  }
  std::sort(late_ms.begin(), late_ms.end());
  out["late_ms_p99"] =
      late_ms.empty() ? 0.0 : late_ms[std::min(late_ms.size() - 1, late_ms.size() * 99 / 100)];
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace
