#pragma once
// Log segments: the append-only files a member's shards log their writes to. A segment is a
// header and then records; each record is its payload's length and CRC-32C, then the payload.
// The payload is opaque here (the caller's encoded state update).
//
//   header:  "TSRLOG\0\0" (8 bytes), format (u32 LE), CRC-32C of the 12 bytes before (u32 LE)
//   record:  length (u32 LE, 1..kMaxRecordBytes), CRC-32C of the payload (u32 LE), payload
//
// Reading tells three endings apart. A clean end. A torn tail, what a crash in the middle of
// an append leaves: the last record cut short, a last record whose checksum fails with nothing
// after it, or zeros to the end of the file (a file system that extended the file before the
// data reached it); the records before it are good and the tail is to be cut off. And damage
// in the middle: a record whose checksum fails (or whose length is impossible) with more bytes
// after it, which no crash explains; reading stops with an error naming the file and offset,
// unless the caller asked to skip it (then the reader resynchronises at the next record whose
// length and checksum hold, and reports what it skipped).
//
// Thread-safety: a SegmentWriter belongs to one thread at a time; ReadSegment is a pure
// function of the file.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/base/error.h"

namespace tessera::storage {

inline constexpr std::uint32_t kSegmentFormat = 1;
inline constexpr std::size_t kSegmentHeaderBytes = 16;
inline constexpr std::size_t kRecordHeaderBytes = 8;
inline constexpr std::uint32_t kMaxRecordBytes = 64u * 1024 * 1024;

// fsyncs the directory `dir`: a file created, renamed or deleted in it stays so after a power
// cut. Errors: kStorage naming the directory.
base::Result<void> SyncDirectory(const std::filesystem::path& dir);

// Appends one record (header and payload) to `out`, as a segment holds it.
// REQUIRES: 1 <= payload.size() <= kMaxRecordBytes.
void EncodeRecord(std::string& out, std::string_view payload);

// Appends records to a new segment file. Append only buffers; Write hands the buffer to the
// OS (write(2)); Sync makes what was written durable (fdatasync). Every error is kStorage and
// names the file and the system's reason ("No space left on device" for a full disk); after an
// error the writer is failed for good (a write that failed half-way leaves a torn tail, and a
// failed fsync may have lost pages the OS had accepted: the caller must stop acknowledging
// writes it logs here).
class SegmentWriter {
 public:
  // Creates `path` (it must not exist), writes the header and syncs it and its folder.
  // Errors: kStorage.
  static base::Result<std::unique_ptr<SegmentWriter>> Create(const std::filesystem::path& path);
  ~SegmentWriter();
  SegmentWriter(const SegmentWriter&) = delete;
  SegmentWriter& operator=(const SegmentWriter&) = delete;

  // Buffers one record. REQUIRES: 1 <= payload.size() <= kMaxRecordBytes.
  void Append(std::string_view payload);
  // Buffers records already encoded by EncodeRecord.
  void AppendEncoded(std::string_view records) { buffer_.append(records); }
  // Writes the buffered records to the file. Errors: kStorage.
  base::Result<void> Write();
  // Write, then fdatasync. Errors: kStorage.
  base::Result<void> Sync();

  const std::filesystem::path& path() const { return path_; }
  // Bytes in the file once everything appended is written (header included).
  std::uint64_t size() const { return written_ + buffer_.size(); }
  std::size_t buffered_bytes() const { return buffer_.size(); }

 private:
  SegmentWriter(std::filesystem::path path, int fd);
  base::Result<void> Failed(std::string_view what);

  std::filesystem::path path_;
  int fd_;
  std::string buffer_;
  std::uint64_t written_ = 0;
  std::optional<base::Error> failed_;
};

struct SegmentReadOptions {
  // Skip damaged records in the middle instead of failing (an operator's explicit choice:
  // what they held is lost).
  bool skip_damaged = false;
};

struct SegmentContents {
  std::vector<std::string> records;  // the good records, in order
  // Bytes from the start of the file through the last good record: where a torn tail is cut.
  std::uint64_t valid_bytes = 0;
  std::uint64_t file_bytes = 0;
  // Set when the file ends in a torn tail (what a crash mid-append leaves): its offset.
  std::optional<std::uint64_t> torn_at;
  // With skip_damaged: the offsets of the damaged records skipped.
  std::vector<std::uint64_t> skipped_at;
};

// Reads the segment at `path`. Errors (kStorage, naming the file and the offset): the file
// cannot be read; its header is missing, damaged or of a later format; a damaged record with
// more bytes after it (unless options.skip_damaged).
base::Result<SegmentContents> ReadSegment(const std::filesystem::path& path,
                                          SegmentReadOptions options = {});

// Cuts the file at `path` to `valid_bytes` and syncs it (a torn tail's removal). Errors:
// kStorage.
base::Result<void> TruncateSegment(const std::filesystem::path& path, std::uint64_t valid_bytes);

// Copies the first `bytes` bytes of the file `from` into the new file `to` (it must not
// exist) and fsyncs it (not its folder). Errors: kStorage naming the file (also when `from` is
// shorter).
base::Result<void> CopyFilePrefix(const std::filesystem::path& from,
                                  const std::filesystem::path& to, std::uint64_t bytes);

}  // namespace tessera::storage
