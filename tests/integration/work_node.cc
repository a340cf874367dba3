// work-node: grid-node (same flags, same ready line) with one partition-owned work type
// registered, "ticker": a shard timer per owned partition, so the tests can watch where each
// partition's work runs (tessera_partition_work_* in the member's metrics) while members are
// SIGKILLed and join. A test program, not a tool.
#include <boost/asio/steady_timer.hpp>
#include <cstdio>
#include <exception>

#include "node_main.h"

namespace {

class Ticker final : public tessera::grid::PartitionWork {
 public:
  explicit Ticker(tessera::grid::PartitionWorkContext& context)
      : context_(context), timer_(context.shard_context()) {
    Arm();
  }

 private:
  void Arm() {
    timer_.expires_after(std::chrono::milliseconds(100));
    timer_.async_wait([this, life = context_.lifetime()](const boost::system::error_code& ec) {
      if (ec || life.expired() || !context_.owned()) return;
      Arm();
    });
  }
  tessera::grid::PartitionWorkContext& context_;
  boost::asio::steady_timer timer_;
};

}  // namespace

int main(int argc, char** argv) {
  try {
    return tessera::tools::node::RunNode(argc, argv, [](tessera::grid::Member& member) {
      member.RegisterPartitionWork("ticker", [](tessera::grid::PartitionWorkContext& context) {
        return std::make_unique<Ticker>(context);
      });
    });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "work-node: internal error: %s\n", e.what());
    return 1;
  }
}
