#pragma once
// RunRespBench: map mode over RESP (--redis HOST:PORT without --stream): the op mix (get, set,
// putIfAbsentTtl only) against a RESP server (a member's RESP port, or redis-server), driven
// the way RunBench drives the native client, so the two protocols are measured by one
// client design: every connection on one I/O thread, up to `pipeline` commands in flight per
// connection, each reply issuing the next command, the writes of one turn of the loop sent
// together, and a command's latency counted from the moment it is issued to the moment its
// reply is parsed (redis-benchmark starts its clock only when a command is written and stops
// it at the first read, so it leaves out the time a command waits in the client). Same keys
// ("k" + zero-padded index, key_size bytes), values and fresh keys as RunBench.
//
// Thread-safety: a blocking call; safe from any thread.

#include "bench_options.h"
#include "bench_runner.h"
#include "tessera/base/error.h"

namespace tessera::tools::bench {

// Errors: kBadRequest (an op RESP mode does not run, a bad address), kConnectionFailed.
base::Result<BenchReport> RunRespBench(const BenchOptions& options);

}  // namespace tessera::tools::bench
