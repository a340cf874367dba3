#pragma once
// A member with a RESP front-end on 127.0.0.1 (ephemeral port) and a tiny blocking RESP
// client over a real socket, for the RESP command tests.

#include <utility>

#include <boost/asio/ip/tcp.hpp>
#include <memory>
#include <string>
#include <vector>

#include "tessera/base/clock.h"
#include "tessera/map/entry_processor.h"
#include "tessera/map/map_service.h"
#include "tessera/resp/resp_server.h"
#include "tessera/runtime/shard_set.h"
#include "tessera/topic/topic_service.h"

namespace tessera::resp::testing {

class TestServer {
 public:
  // `clock` nullptr: a real steady clock.
  explicit TestServer(RespServerOptions options = {}, const base::Clock* clock = nullptr);
  ~TestServer();

  std::uint16_t port() const { return server_->port(); }
  RespServer& server() { return *server_; }
  map::MapService& maps() { return *maps_; }

 private:
  base::SteadyClock steady_;
  runtime::ShardSet shards_{2};
  map::EntryProcessorRegistry processors_;
  std::unique_ptr<map::MapService> maps_;
  std::unique_ptr<topic::TopicService> topics_;
  std::unique_ptr<RespServer> server_;
};

// Blocking RESP client; every read gives up after 5 s (the test then fails, never hangs).
class RespClient {
 public:
  explicit RespClient(std::uint16_t port);

  void SendRaw(std::string_view bytes);
  void Send(const std::vector<std::string>& args);
  // Reads one complete reply and returns its raw RESP text ("+OK\r\n", "$1\r\na\r\n", ...).
  std::string Read();
  std::string Call(const std::vector<std::string>& args) {
    Send(args);
    return Read();
  }
  // True if the server closed the connection (reads EOF within 5 s).
  bool WaitClosed();

 private:
  char NextByte();
  std::string ReadLine();
  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_{io_};
  std::string buffer_;
  std::size_t pos_ = 0;
};

// RESP encodings for expected replies.
std::string Bulk(std::string_view s);
std::string Int(std::int64_t n);
inline const std::string kOk = "+OK\r\n";
inline const std::string kNil = "$-1\r\n";

}  // namespace tessera::resp::testing
