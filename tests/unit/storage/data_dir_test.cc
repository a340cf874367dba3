#include "tessera/storage/data_dir.h"

#include "tessera/storage/crc32c.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include "temp_dir.h"

#include <filesystem>
#include <fstream>
#include <sstream>

using tessera::base::ErrorCode;
using tessera::storage::DataDir;

using tessera::storage::testing::ReadFile;
using tessera::storage::testing::TempDir;
using tessera::storage::testing::WriteFile;

TEST_CASE("A data directory made at the first open keeps the member's id across opens",
          "[storage]") {
  TempDir tmp;
  const auto dir = tmp.path / "member-a";  // made with its parents
  std::string id;
  {
    auto opened = DataDir::Open(dir, "orders", 271, "id-1");
    REQUIRE(opened);
    CHECK((*opened)->created());
    CHECK((*opened)->member_id() == "id-1");
    CHECK((*opened)->path() == dir);
    id = (*opened)->member_id();
  }
  auto again = DataDir::Open(dir, "orders", 271, "id-2");
  REQUIRE(again);
  CHECK(!(*again)->created());
  CHECK((*again)->member_id() == id);  // the directory's id, not the new one offered
  CHECK(ReadFile(dir / "member.id").find("cluster-name orders\n") != std::string::npos);
  CHECK(!std::filesystem::exists(dir / "member.id.tmp"));
}

TEST_CASE("A data directory is refused while another holder has it, and free once it is gone",
          "[storage]") {
  TempDir tmp;
  {
    auto first = DataDir::Open(tmp.path, "dev", 271, "id-1");
    REQUIRE(first);
    auto second = DataDir::Open(tmp.path, "dev", 271, "id-2");
    REQUIRE(!second);
    CHECK(second.error().code() == ErrorCode::kConflict);
    CHECK_THAT(second.error().message(),
               Catch::Contains(tmp.path.string()) && Catch::Contains("in use by another process") &&
                   Catch::Contains("(pid " + std::to_string(::getpid()) + ")"));
  }
  CHECK(DataDir::Open(tmp.path, "dev", 271, "id-2"));

  // Another process: its lock holds while it runs and goes with it when it is killed.
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto held = DataDir::Open(tmp.path, "dev", 271, "id-3");
    const char byte = held ? '1' : '0';
    (void)!::write(ready[1], &byte, 1);
    ::pause();  // until killed
    ::_exit(0);
  }
  char byte = 0;
  REQUIRE(::read(ready[0], &byte, 1) == 1);
  REQUIRE(byte == '1');
  auto refused = DataDir::Open(tmp.path, "dev", 271, "id-4");
  REQUIRE(!refused);
  CHECK_THAT(refused.error().message(), Catch::Contains("(pid " + std::to_string(child) + ")"));
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  auto after = DataDir::Open(tmp.path, "dev", 271, "id-4");
  REQUIRE(after);
  CHECK((*after)->member_id() == "id-1");
}

TEST_CASE("A data directory of another cluster or partition count is refused and left as it was",
          "[storage]") {
  TempDir tmp;
  REQUIRE(DataDir::Open(tmp.path, "orders", 271, "id-1"));
  const std::string before = ReadFile(tmp.path / "member.id");

  auto other_cluster = DataDir::Open(tmp.path, "payments", 271, "id-2");
  REQUIRE(!other_cluster);
  CHECK(other_cluster.error().code() == ErrorCode::kConflict);
  CHECK_THAT(other_cluster.error().message(),
             Catch::Contains("belongs to cluster 'orders', not 'payments'") &&
                 Catch::Contains("--cluster-name orders"));

  auto other_count = DataDir::Open(tmp.path, "orders", 64, "id-2");
  REQUIRE(!other_count);
  CHECK(other_count.error().code() == ErrorCode::kConflict);
  CHECK_THAT(other_count.error().message(),
             Catch::Contains("271 partitions, not 64") && Catch::Contains("--partitions 271"));

  CHECK(ReadFile(tmp.path / "member.id") == before);
  CHECK(DataDir::Open(tmp.path, "orders", 271, "id-3"));  // and the lock was given back
}

TEST_CASE("A damaged or unknown identity file stops the open with an error naming the file",
          "[storage]") {
  TempDir tmp;
  REQUIRE(DataDir::Open(tmp.path, "dev", 271, "id-1"));
  const auto file = tmp.path / "member.id";
  const std::string good = ReadFile(file);

  SECTION("a flipped byte") {
    std::string bad = good;
    bad[bad.find("id-1") + 3] = '7';
    WriteFile(file, bad);
    auto opened = DataDir::Open(tmp.path, "dev", 271, "id-2");
    REQUIRE(!opened);
    CHECK(opened.error().code() == ErrorCode::kStorage);
    CHECK_THAT(opened.error().message(), Catch::Contains(file.string()) &&
                                             Catch::Contains("checksum mismatch") &&
                                             Catch::Contains("move the directory aside"));
  }
  SECTION("cut short") {
    WriteFile(file, good.substr(0, good.size() / 2));
    auto opened = DataDir::Open(tmp.path, "dev", 271, "id-2");
    REQUIRE(!opened);
    CHECK(opened.error().code() == ErrorCode::kStorage);
    CHECK_THAT(opened.error().message(), Catch::Contains("damaged"));
  }
  SECTION("empty") {
    WriteFile(file, "");
    auto opened = DataDir::Open(tmp.path, "dev", 271, "id-2");
    REQUIRE(!opened);
    CHECK(opened.error().code() == ErrorCode::kStorage);
  }
  SECTION("a later format") {
    const std::string body =
        "tessera-data-dir 2\nmember-id x\ncluster-name dev\npartition-count 271\n";
    char crc[9];
    std::snprintf(crc, sizeof crc, "%08x", tessera::storage::Crc32c(body));
    WriteFile(file, body + "crc32c " + crc + "\n");
    auto opened = DataDir::Open(tmp.path, "dev", 271, "id-2");
    REQUIRE(!opened);
    CHECK(opened.error().code() == ErrorCode::kStorage);
    CHECK_THAT(opened.error().message(),
               Catch::Contains("has format 2; this Tessera reads format 1"));
  }
  CHECK(std::filesystem::exists(file));  // nothing is deleted
}

TEST_CASE("A data directory that cannot be made or locked is a storage error naming the path",
          "[storage]") {
  TempDir tmp;
  WriteFile(tmp.path / "plain-file", "x");
  auto under_file = DataDir::Open(tmp.path / "plain-file" / "data", "dev", 271, "id-1");
  REQUIRE(!under_file);
  CHECK(under_file.error().code() == ErrorCode::kStorage);
  CHECK_THAT(under_file.error().message(),
             Catch::Contains((tmp.path / "plain-file" / "data").string()));

  auto empty = DataDir::Open("", "dev", 271, "id-1");
  REQUIRE(!empty);
  CHECK(empty.error().code() == ErrorCode::kBadRequest);
}

TEST_CASE(
    "A data directory keeps small checked files whole: absent reads as none, a damaged one is "
    "named",
    "[storage]") {
  TempDir tmp;
  auto dir = DataDir::Open(tmp.path / "d", "dev", 271, "m-1");
  REQUIRE(dir);
  auto none = (*dir)->ReadChecked("cluster.state");
  REQUIRE(none);
  CHECK(!none->has_value());
  REQUIRE((*dir)->WriteChecked("cluster.state", "table-version 3\nowned 1,2\n"));
  auto read = (*dir)->ReadChecked("cluster.state");
  REQUIRE(read);
  CHECK(**read == "table-version 3\nowned 1,2\n");
  REQUIRE((*dir)->WriteChecked("cluster.state", "table-version 4"));  // replaced whole
  CHECK(**(*dir)->ReadChecked("cluster.state") == "table-version 4\n");
  {
    std::fstream f(tmp.path / "d" / "cluster.state", std::ios::in | std::ios::out);
    f.seekp(14);
    f.put('9');
  }
  auto damaged = (*dir)->ReadChecked("cluster.state");
  REQUIRE(!damaged);
  CHECK(damaged.error().code() == ErrorCode::kStorage);
  CHECK(damaged.error().message().find("cluster.state is damaged (checksum mismatch)") !=
        std::string::npos);
}
