// Partition-owned work across real processes (work-node: grid-node plus a registered work
// type): each partition's work runs on exactly one live member, moves when a member joins,
// and resumes on the new owners within the failure timeout plus a few seconds after SIGKILL.
#include <signal.h>

#include <catch2/catch.hpp>
#include <regex>
#include <thread>

#include "child_process.h"

namespace tessera::integration {
namespace {

using Clock = std::chrono::steady_clock;

// One metric's value from a member's Prometheus text; -1 when it is not there.
std::int64_t Metric(const NodeProcess& node, const std::string& name) {
  auto client = grid::Client::Connect(ClientOptionsFor(node, 2000ms));
  if (!client) return -1;
  auto text = (*client)->FetchMetricsText();
  if (!text) return -1;
  std::smatch m;
  if (!std::regex_search(*text, m, std::regex("\\n" + name + " ([0-9.e+]+)\\n"))) return -1;
  return static_cast<std::int64_t>(std::stod(m[1]));
}

// Every partition's work runs on exactly one of `nodes`: each runs work for exactly the
// partitions it owns, and those add up to every partition once.
bool OnePerPartition(const std::vector<const NodeProcess*>& nodes) {
  std::int64_t total = 0;
  for (const auto* node : nodes) {
    const auto owned = Metric(*node, "tessera_member_partitions_owned");
    const auto running = Metric(*node, "tessera_partition_work_partitions");
    if (owned < 0 || running != owned) return false;
    total += running;
  }
  return total == 271;
}

bool WaitFor(const std::function<bool()>& done, std::chrono::seconds limit) {
  auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(100ms);
  }
  return done();
}

}  // namespace

TEST_CASE("Partition work runs on exactly one live member and resumes after SIGKILL",
          "[tools][cluster][work]") {
  auto a = NodeProcess::StartProgramOrFail(WORK_NODE_PATH, FastClusterArgs({}));
  auto b =
      NodeProcess::StartProgramOrFail(WORK_NODE_PATH, FastClusterArgs({"--join", a->address()}));
  auto c =
      NodeProcess::StartProgramOrFail(WORK_NODE_PATH, FastClusterArgs({"--join", a->address()}));
  WaitForMembers(*a, 3);
  REQUIRE(WaitFor([&] { return OnePerPartition({a.get(), b.get(), c.get()}); }, 20s));
  const auto c_running = Metric(*c, "tessera_partition_work_partitions");
  CHECK(c_running > 50);

  const auto killed_at = Clock::now();
  c->Stop(SIGKILL);
  REQUIRE(WaitFor([&] { return OnePerPartition({a.get(), b.get()}); }, 20s));
  const auto resumed_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - killed_at).count();
  INFO("the dead member's " << c_running << " partitions resumed after " << resumed_ms << " ms");
  CHECK(resumed_ms < 1500 + 5000);  // failure timeout + a few seconds

  auto d =
      NodeProcess::StartProgramOrFail(WORK_NODE_PATH, FastClusterArgs({"--join", a->address()}));
  WaitForMembers(*a, 3);
  REQUIRE(WaitFor([&] { return OnePerPartition({a.get(), b.get(), d.get()}); }, 20s));
  CHECK(Metric(*d, "tessera_partition_work_partitions") > 50);
  CHECK(Metric(*a, "tessera_partition_work_started_total") >
        Metric(*a, "tessera_partition_work_partitions"));  // it took some of c's
}

}  // namespace tessera::integration
