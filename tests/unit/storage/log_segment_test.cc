#include "tessera/storage/log_segment.h"

#include <unistd.h>
#include <catch2/catch.hpp>

#include "temp_dir.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

using tessera::base::ErrorCode;
using tessera::storage::kRecordHeaderBytes;
using tessera::storage::kSegmentHeaderBytes;
using tessera::storage::ReadSegment;
using tessera::storage::SegmentReadOptions;
using tessera::storage::SegmentWriter;
using tessera::storage::TruncateSegment;

using tessera::storage::testing::ReadFile;
using tessera::storage::testing::TempDir;
using tessera::storage::testing::WriteFile;

namespace {

// A segment with records "record-0" .. "record-<n-1>" of growing sizes; returns each record's
// offset.
std::vector<std::uint64_t> WriteRecords(const std::filesystem::path& file, int n) {
  auto writer = SegmentWriter::Create(file);
  REQUIRE(writer);
  std::vector<std::uint64_t> offsets;
  for (int i = 0; i < n; ++i) {
    offsets.push_back((*writer)->size());
    (*writer)->Append("record-" + std::to_string(i) + std::string(i * 10, 'x'));
    if (i % 3 == 0) REQUIRE((*writer)->Write());
  }
  REQUIRE((*writer)->Sync());
  return offsets;
}

std::string Record(int i) { return "record-" + std::to_string(i) + std::string(i * 10, 'x'); }

}  // namespace

TEST_CASE("A segment's records read back in order, whatever the write batches were", "[storage]") {
  TempDir tmp;
  const auto file = tmp.path / "0001.log";
  WriteRecords(file, 20);
  auto read = ReadSegment(file);
  REQUIRE(read);
  REQUIRE(read->records.size() == 20);
  for (int i = 0; i < 20; ++i) CHECK(read->records[i] == Record(i));
  CHECK(!read->torn_at);
  CHECK(read->valid_bytes == read->file_bytes);
  CHECK(read->file_bytes == std::filesystem::file_size(file));

  auto again = SegmentWriter::Create(file);  // never over an existing segment
  REQUIRE(!again);
  CHECK(again.error().code() == ErrorCode::kStorage);
  CHECK_THAT(again.error().message(), Catch::Contains(file.string()));
}

TEST_CASE("A torn tail, whatever its shape, is reported with the good records before it",
          "[storage]") {
  TempDir tmp;
  const auto file = tmp.path / "0001.log";
  const auto offsets = WriteRecords(file, 10);
  const std::string whole = ReadFile(file);
  const std::uint64_t last = offsets.back();

  SECTION("cut inside the last record's payload") {
    WriteFile(file, whole.substr(0, whole.size() - 3));
  }
  SECTION("cut inside the last record's header") { WriteFile(file, whole.substr(0, last + 5)); }
  SECTION("the last record's payload half written (bytes changed, length whole)") {
    std::string torn = whole;
    torn[torn.size() - 2] ^= 0x20;
    WriteFile(file, torn);
  }
  SECTION("zeros after the last good record (the file grew before its data arrived)") {
    WriteFile(file, whole.substr(0, last) + std::string(4096, '\0'));
  }
  auto read = ReadSegment(file);
  REQUIRE(read);
  CHECK(read->records.size() == 9);
  CHECK(read->records.back() == Record(8));
  REQUIRE(read->torn_at);
  CHECK(*read->torn_at == last);
  CHECK(read->valid_bytes == last);

  REQUIRE(TruncateSegment(file, read->valid_bytes));
  auto cut = ReadSegment(file);
  REQUIRE(cut);
  CHECK(cut->records.size() == 9);
  CHECK(!cut->torn_at);
}

TEST_CASE("Damage in the middle stops the read with the file and offset, or is skipped on request",
          "[storage]") {
  TempDir tmp;
  const auto file = tmp.path / "0001.log";
  const auto offsets = WriteRecords(file, 10);
  std::string bytes = ReadFile(file);

  SECTION("a flipped payload byte") {
    bytes[offsets[4] + kRecordHeaderBytes + 2] ^= 0x01;
    WriteFile(file, bytes);
    auto read = ReadSegment(file);
    REQUIRE(!read);
    CHECK(read.error().code() == ErrorCode::kStorage);
    CHECK_THAT(read.error().message(),
               Catch::Contains(file.string()) &&
                   Catch::Contains("damaged at offset " + std::to_string(offsets[4])) &&
                   Catch::Contains("checksum mismatch"));

    auto skipped = ReadSegment(file, SegmentReadOptions{.skip_damaged = true});
    REQUIRE(skipped);
    REQUIRE(skipped->records.size() == 9);
    CHECK(skipped->records[3] == Record(3));
    CHECK(skipped->records[4] == Record(5));
    CHECK(skipped->skipped_at == std::vector<std::uint64_t>{offsets[4]});
    CHECK(!skipped->torn_at);
  }
  SECTION("a length that runs past the end, with good records after it") {
    bytes[offsets[2] + 2] = 0x7f;  // about 8 MB: not a crash's torn tail, records follow
    WriteFile(file, bytes);
    auto read = ReadSegment(file);
    REQUIRE(!read);
    CHECK_THAT(read.error().message(),
               Catch::Contains("damaged at offset " + std::to_string(offsets[2])));
  }
  SECTION("a damaged header") {
    bytes[3] ^= 0x01;
    WriteFile(file, bytes);
    auto read = ReadSegment(file);
    REQUIRE(!read);
    CHECK_THAT(read.error().message(), Catch::Contains("not a Tessera log segment header"));
  }
}

TEST_CASE("A segment cut inside its header holds nothing and is a torn tail", "[storage]") {
  TempDir tmp;
  const auto file = tmp.path / "0001.log";
  WriteRecords(file, 1);
  WriteFile(file, ReadFile(file).substr(0, kSegmentHeaderBytes - 4));
  auto read = ReadSegment(file);
  REQUIRE(read);
  CHECK(read->records.empty());
  REQUIRE(read->torn_at);
  CHECK(*read->torn_at == 0);
}
