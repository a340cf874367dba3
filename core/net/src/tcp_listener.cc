// The acceptor lives on shard 0's io_context and uses the async_accept overload that creates
// the socket on the target shard's io_context, so the socket never migrates between threads
// after the accept. Every touch of the acceptor and the retry timer happens under `mutex`, which
// is what makes Close() safe from a non-shard thread while shard 0 runs the accept loop.
// In-flight handlers share ownership of State, so the listener object can go away first.
#include "tessera/net/tcp_listener.h"

#include <spdlog/spdlog.h>
#include <algorithm>
#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cctype>
#include <chrono>
#include <mutex>

namespace tessera::net {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(100);

std::string Lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}
}  // namespace

struct TcpListener::State {
  State(runtime::ShardSet& shard_set, OnAccept callback, std::shared_ptr<spdlog::logger> logger)
      : shards(shard_set),
        acceptor(shard_set.Context(0)),
        retry_timer(shard_set.Context(0)),
        on_accept(std::move(callback)),
        log(std::move(logger)) {}

  runtime::ShardSet& shards;
  std::mutex mutex;  // guards acceptor and retry_timer
  tcp::acceptor acceptor;
  asio::steady_timer retry_timer;
  std::atomic<bool> closed{false};
  std::size_t next_shard = 0;  // guarded by mutex
  OnAccept on_accept;
  std::shared_ptr<spdlog::logger> log;
  std::uint16_t port = 0;
  std::string address;  // "host:port", for logs
};

namespace {

void StartAccept(const std::shared_ptr<TcpListener::State>& state);

void HandOver(const std::shared_ptr<TcpListener::State>& state, std::size_t shard,
              tcp::socket socket) {
  boost::system::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  state->shards.InvokeOn(shard, [state, shard, socket = std::move(socket)]() mutable {
    if (state->closed.load()) return;  // listener closed meanwhile: drop the socket
    state->on_accept(shard, std::move(socket));
  });
}

void RetryLater(const std::shared_ptr<TcpListener::State>& state,
                const boost::system::error_code& error) {
  state->log->warn("accept on {} failed: {}; retrying in {} ms", state->address, error.message(),
                   kAcceptRetryDelay.count());
  std::lock_guard lock(state->mutex);
  if (state->closed.load()) return;
  state->retry_timer.expires_after(kAcceptRetryDelay);
  state->retry_timer.async_wait([state](const boost::system::error_code& wait_error) {
    if (!wait_error) StartAccept(state);
  });
}

void StartAccept(const std::shared_ptr<TcpListener::State>& state) {
  std::lock_guard lock(state->mutex);
  if (state->closed.load()) return;
  const std::size_t shard = state->next_shard++ % state->shards.size();
  state->acceptor.async_accept(
      state->shards.Context(shard),
      [state, shard](const boost::system::error_code& error, tcp::socket socket) {
        if (state->closed.load() || error == asio::error::operation_aborted) return;
        if (error) {
          RetryLater(state, error);
          return;
        }
        HandOver(state, shard, std::move(socket));
        StartAccept(state);
      });
}

base::Result<asio::ip::address> ParseHost(const std::string& host) {
  boost::system::error_code error;
  auto address = asio::ip::make_address(host == "localhost" ? "127.0.0.1" : host, error);
  if (error) {
    return base::Fail(base::ErrorCode::kBadRequest,
                      "cannot listen on '" + host +
                          "': not an IP address; use a numeric address such as 127.0.0.1 or "
                          "0.0.0.0");
  }
  return address;
}

base::Result<void> Bind(tcp::acceptor& acceptor, const tcp::endpoint& endpoint,
                        const std::string& address_text) {
  boost::system::error_code error;
  acceptor.open(endpoint.protocol(), error);
  if (!error) acceptor.set_option(tcp::acceptor::reuse_address(true), error);
  if (!error) acceptor.bind(endpoint, error);
  if (!error) acceptor.listen(asio::socket_base::max_listen_connections, error);
  if (!error) return {};
  boost::system::error_code ignored;
  acceptor.close(ignored);
  std::string reason =
      error == asio::error::address_in_use ? "address already in use" : Lowercase(error.message());
  return base::Fail(
      base::ErrorCode::kConnectionFailed,
      "cannot listen on " + address_text + ": " + reason + "; pick another port with --port");
}

}  // namespace

base::Result<std::unique_ptr<TcpListener>> TcpListener::Listen(
    runtime::ShardSet& shards, const std::string& host, std::uint16_t port, OnAccept on_accept,
    std::shared_ptr<spdlog::logger> log) {
  auto address = ParseHost(host);
  if (!address) return std::unexpected(address.error());
  auto state = std::make_shared<State>(shards, std::move(on_accept), std::move(log));
  const tcp::endpoint endpoint(*address, port);
  state->address = host + ":" + std::to_string(port);
  if (auto bound = Bind(state->acceptor, endpoint, state->address); !bound) {
    return std::unexpected(bound.error());
  }
  boost::system::error_code error;
  state->port = state->acceptor.local_endpoint(error).port();
  state->address = host + ":" + std::to_string(state->port);
  state->log->info("listening on {}", state->address);
  StartAccept(state);
  return std::make_unique<TcpListener>(Passkey(), std::move(state));
}

TcpListener::TcpListener(Passkey, std::shared_ptr<State> state) : state_(std::move(state)) {}

TcpListener::~TcpListener() { Close(); }

std::uint16_t TcpListener::port() const { return state_->port; }

void TcpListener::Close() {
  std::lock_guard lock(state_->mutex);
  if (state_->closed.exchange(true)) return;
  boost::system::error_code ignored;
  state_->acceptor.close(ignored);
  state_->retry_timer.cancel();
  state_->log->info("stopped listening on {}", state_->address);
}

}  // namespace tessera::net
