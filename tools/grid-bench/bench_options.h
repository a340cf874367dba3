#pragma once
// BenchOptions: grid-bench's flags, parsed and validated (usage errors exit with code 2).
//
// Thread-safety: plain values; thread-compatible.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/base/clock.h"
#include "tessera/base/error.h"
#include "tessera/grid/client.h"

namespace tessera::tools::bench {

// tx3: a partition transaction of three sets (the key and two keys in its partition), with a
// random id (the default Transaction: the owner remembers it, and a retry is applied once);
// tx3NoId: the same batch without an id (no deduplication marker; what RESP's MULTI/EXEC
// promises, so the two compare like for like).
enum class OpKind { kGet, kSet, kPut, kPutIfAbsentTtl, kRemove, kTx3, kTx3NoId };
inline constexpr std::size_t kOpKinds = 7;
std::string_view OpKindName(OpKind kind);

struct OpWeight {
  OpKind kind;
  int weight;  // > 0; the share of ops is weight / sum of weights
};

struct BenchOptions {
  grid::ClientOptions client;
  std::string map_name = "bench";
  std::vector<OpWeight> mix = {{OpKind::kGet, 50}, {OpKind::kSet, 50}};
  std::int64_t keys = 100000;    // key space of get/set/put/remove
  std::size_t key_size = 16;     // bytes per key
  std::size_t value_size = 100;  // bytes per value
  // TTL for putIfAbsentTtl (default 60000) and, when given, for set/put too.
  base::Millis ttl_ms = 60000;
  bool ttl_given = false;
  int connections = 1;  // one Client each
  int pipeline = 1;     // in-flight async calls per connection
  // Client threads: the connections share this many grid::ClientLoops (round robin), as
  // redis-benchmark runs all its connections on one thread; 0 = a loop per client.
  int io_threads = 1;
  int protocol = 3;  // highest native protocol version offered (client.max_protocol_version)
  double duration_s = 10;
  double warmup_s = 1;
  bool preload = false;
  // Topic mode (--topic NAME): `connections` publishers publish value_size-byte messages as
  // fast as their calls return; one subscriber client (connected to subscribe_address, default
  // the first address) measures publish-to-receive latency and received messages/s.
  std::string topic;
  std::string subscribe_address;
  bool reliable = false;  // topic mode: the reliable topic (stored, replicated, polled)
  // Stream mode (--stream NAME; stream_bench.h): append, consume and end-to-end figures of a
  // Tessera stream, or of a Redis stream with --redis HOST:PORT.
  std::string stream;
  std::string redis;
  std::uint64_t events = 200'000;  // appended, then consumed
  int consumers = 1;               // of the consume phase
  int rate = 2'000;                // end-to-end phase: events appended per second, in total
  int batch = 1;  // append phase: events per call (AppendAll / XADDs sent together)
  bool json = false;
  bool help = false;
};

// Parses argv (argv[0] is the program name). Errors: kBadRequest naming the bad flag.
base::Result<BenchOptions> ParseBenchOptions(int argc, const char* const argv[]);
// Parses an op mix such as "get=50,set=50" or "putIfAbsentTtl=100".
base::Result<std::vector<OpWeight>> ParseOpMix(std::string_view text);
std::string BenchHelpText();

}  // namespace tessera::tools::bench
