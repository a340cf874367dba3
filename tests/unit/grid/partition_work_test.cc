// Partition-owned work (partition_work.h) on in-process members over loopback: it runs once
// per owned partition, on one member at a time, follows the partition table, and sees its
// partition's entries. Multi-process (SIGKILL): tests/integration.
#include "tessera/grid/partition_work.h"

#include <boost/asio/steady_timer.hpp>
#include <catch2/catch.hpp>
#include <map>
#include <mutex>
#include <set>

#include "cluster_test_util.h"
#include "tessera/grid/member.h"

using namespace tessera;  // NOLINT
using grid::Member;
using grid::testing::AddressOf;
using grid::testing::AllList;
using grid::testing::ClusterMember;
using grid::testing::WaitUntil;

namespace {

// Which members run each partition's work now, and how often work started anywhere.
struct Ledger {
  std::mutex mu;
  std::map<std::uint32_t, std::multiset<std::string>> running;  // partition -> members
  int starts = 0;
  int overlaps = 0;  // a start while another member ran the partition's work

  // A work type that enters `member` into the ledger while it runs.
  grid::PartitionWorkFactory Factory(std::string member) {
    return [this, member](grid::PartitionWorkContext& context) {
      struct Entry : grid::PartitionWork {
        Entry(Ledger& ledger, std::string member, std::uint32_t partition)
            : ledger(ledger), member(std::move(member)), partition(partition) {
          std::lock_guard lock(ledger.mu);
          auto& set = ledger.running[partition];
          ledger.overlaps += !set.empty();
          set.insert(this->member);
          ++ledger.starts;
        }
        ~Entry() override {
          std::lock_guard lock(ledger.mu);
          auto& set = ledger.running[partition];
          set.erase(set.find(member));
        }
        Ledger& ledger;
        std::string member;
        std::uint32_t partition;
      };
      return std::make_unique<Entry>(*this, member, context.partition());
    };
  }

  // Every partition's work runs on exactly one member, and that member owns the partition.
  bool OnePerPartition(const std::map<std::string, Member*>& members, std::uint32_t partitions) {
    std::lock_guard lock(mu);
    for (std::uint32_t p = 0; p < partitions; ++p) {
      auto it = running.find(p);
      if (it == running.end() || it->second.size() != 1) return false;
      if (!members.at(*it->second.begin())->map_service().RunsPartitionWork(p)) return false;
    }
    return true;
  }
  std::size_t Total() {
    std::lock_guard lock(mu);
    std::size_t n = 0;
    for (const auto& [p, set] : running) n += set.size();
    return n;
  }
};

}  // namespace

TEST_CASE("An embedded member runs each partition's work once and stops it at shutdown",
          "[grid][work]") {
  grid::MemberOptions options;
  options.listen = false;
  options.threads = 2;
  Member member(options);
  Ledger ledger;
  member.RegisterPartitionWork("ledger", ledger.Factory("solo"));
  std::atomic<int> ticks{0};
  std::atomic<int> foreign{0}, scanned{0};
  // A second type: a shard timer that scans the partition's entries.
  member.RegisterPartitionWork("scanner", [&](grid::PartitionWorkContext& context) {
    struct Scanner : grid::PartitionWork {
      explicit Scanner(grid::PartitionWorkContext& c) : context(c), timer(c.shard_context()) {
        Arm();
      }
      void Arm() {
        timer.expires_after(std::chrono::milliseconds(20));
        timer.async_wait([this, life = context.lifetime()](const boost::system::error_code& ec) {
          if (ec || life.expired() || !context.owned()) return;
          context.ScanLocal("orders", [this](std::string_view key, std::string_view) {
            if (partition::Partitioner().PartitionOf(key) != context.partition()) ++*foreign;
            ++*scanned;
          });
          ++*ticks;
          Arm();
        });
      }
      grid::PartitionWorkContext& context;
      boost::asio::steady_timer timer;
      std::atomic<int>* ticks = nullptr;
      std::atomic<int>* foreign = nullptr;
      std::atomic<int>* scanned = nullptr;
    };
    auto scanner = std::make_unique<Scanner>(context);
    scanner->ticks = &ticks;
    scanner->foreign = &foreign;
    scanner->scanned = &scanned;
    return scanner;
  });
  REQUIRE(member.Start());
  auto orders = member.GetMap("orders");
  for (int i = 0; i < 50; ++i) REQUIRE(orders->Set("o" + std::to_string(i), "x"));
  CHECK(WaitUntil([&] { return ledger.Total() == 271; }));
  CHECK(ledger.OnePerPartition({{"solo", &member}}, 271));
  CHECK(WaitUntil([&] { return ticks.load() > 271 * 2; }));
  CHECK(WaitUntil([&] { return scanned.load() >= 100; }));  // every entry, in each scan
  CHECK(foreign.load() == 0);
  CHECK_THAT(member.MetricsText(), Catch::Contains("tessera_partition_work_partitions 271"));
  member.Shutdown();
  CHECK(ledger.Total() == 0);
  CHECK(ledger.starts == 271);
}

TEST_CASE(
    "Partition work follows the partition table: one member per partition as members "
    "join and leave",
    "[grid][work][cluster]") {
  Ledger ledger;
  auto a = std::make_unique<Member>(ClusterMember());
  a->RegisterPartitionWork("ledger", ledger.Factory("a"));
  REQUIRE(a->Start());
  auto b = std::make_unique<Member>(ClusterMember({AddressOf(*a)}));
  b->RegisterPartitionWork("ledger", ledger.Factory("b"));
  REQUIRE(b->Start());
  REQUIRE(WaitUntil([&] { return AllList({a.get(), b.get()}, 2); }));
  std::map<std::string, Member*> members = {{"a", a.get()}, {"b", b.get()}};
  CHECK(WaitUntil([&] { return ledger.OnePerPartition(members, 271); }));

  auto c = std::make_unique<Member>(ClusterMember({AddressOf(*a)}));
  c->RegisterPartitionWork("ledger", ledger.Factory("c"));
  REQUIRE(c->Start());
  members["c"] = c.get();
  REQUIRE(WaitUntil([&] { return AllList({a.get(), b.get(), c.get()}, 3); }));
  CHECK(WaitUntil([&] { return ledger.OnePerPartition(members, 271); }));
  CHECK(WaitUntil([&] { return c->map_service().AwaitingPartitionCount() == 0; }));
  std::size_t on_c = 0;
  {
    std::lock_guard lock(ledger.mu);
    for (const auto& [p, set] : ledger.running) on_c += set.count("c");
  }
  CHECK(on_c > 50);  // about a third moved to the joiner

  b->Shutdown();  // graceful: its partitions move to a and c, its work stops first
  members.erase("b");
  REQUIRE(WaitUntil([&] { return AllList({a.get(), c.get()}, 2); }));
  CHECK(WaitUntil([&] { return ledger.OnePerPartition(members, 271); }));
  // Handovers within a running cluster never overlapped: a stop precedes the copy that lets
  // the next owner start, or the handoff when it held a backup already.
  CHECK(ledger.overlaps == 0);
  c->Shutdown();
  a->Shutdown();
  CHECK(ledger.Total() == 0);
}
