#include "test_server.h"

#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>
#include <stdexcept>

namespace tessera::resp::testing {

namespace asio = boost::asio;

namespace {
std::shared_ptr<spdlog::logger> NullLogger(const std::string& name) {
  return std::make_shared<spdlog::logger>(name, std::make_shared<spdlog::sinks::null_sink_mt>());
}
}  // namespace

TestServer::TestServer(RespServerOptions options, const base::Clock* clock) {
  const base::Clock& c = clock != nullptr ? *clock : steady_;
  processors_.RegisterBuiltins();
  shards_.Start();
  maps_ = std::make_unique<map::MapService>(shards_, partition::Partitioner(), c, processors_,
                                            NullLogger("map"));
  maps_->Start();
  topics_ = std::make_unique<topic::TopicService>(shards_, NullLogger("topic"));
  options.host = "127.0.0.1";
  options.port = 0;
  server_ = std::make_unique<RespServer>(shards_, *maps_, *topics_, c, options, NullLogger("resp"));
  auto started = server_->Start();
  if (!started) throw std::runtime_error(started.error().ToString());
}

TestServer::~TestServer() {
  server_->Stop();
  maps_->Stop();
  shards_.Stop();
}

RespClient::RespClient(std::uint16_t port) {
  socket_.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  timeval timeout{5, 0};
  ::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
}

void RespClient::SendRaw(std::string_view bytes) {
  asio::write(socket_, asio::buffer(bytes.data(), bytes.size()));
}

void RespClient::Send(const std::vector<std::string>& args) {
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (const auto& a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  SendRaw(out);
}

char RespClient::NextByte() {
  if (pos_ == buffer_.size()) {
    buffer_.clear();
    pos_ = 0;
    char chunk[4096];
    const ssize_t n = ::recv(socket_.native_handle(), chunk, sizeof(chunk), 0);
    if (n <= 0) throw std::runtime_error("connection closed or read timed out");
    buffer_.assign(chunk, static_cast<std::size_t>(n));
  }
  return buffer_[pos_++];
}

std::string RespClient::ReadLine() {
  std::string line;
  while (line.size() < 2 || line.compare(line.size() - 2, 2, "\r\n") != 0) {
    line.push_back(NextByte());
  }
  return line;
}

std::string RespClient::Read() {
  std::string line = ReadLine();
  const char type = line[0];
  const long long n = (type == '+' || type == '-' || type == '_' || type == ',')
                          ? 0
                          : std::stoll(line.substr(1, line.size() - 3));
  if (type == '$' && n >= 0) {
    for (long long i = 0; i < n + 2; ++i) line.push_back(NextByte());
  } else if (type == '*' || type == '>' || type == '%') {
    const long long items = type == '%' ? n * 2 : n;
    for (long long i = 0; i < items; ++i) line += Read();
  }
  return line;
}

bool RespClient::WaitClosed() {
  try {
    while (true) NextByte();
  } catch (const std::runtime_error&) {
    char probe;
    return ::recv(socket_.native_handle(), &probe, 1, 0) == 0;
  }
}

std::string Bulk(std::string_view s) {
  return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n";
}

std::string Int(std::int64_t n) { return ":" + std::to_string(n) + "\r\n"; }

}  // namespace tessera::resp::testing
