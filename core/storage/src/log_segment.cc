// Log segments: a writer that buffers and writes in batches (its caller decides when to sync),
// and a reader that sorts what a crash can leave (a torn tail, cut off) from what it cannot
// (damage in the middle, refused by default).
#include "tessera/storage/log_segment.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tessera/base/bytes.h"
#include "tessera/base/check.h"
#include "tessera/storage/crc32c.h"

namespace tessera::storage {
namespace {

using base::ErrorCode;
using base::Fail;
using base::LoadLE;
using base::PutLE;

constexpr std::string_view kMagic{"TSRLOG\0\0", 8};

std::string Header() {
  std::string header(kMagic);
  PutLE<std::uint32_t>(header, kSegmentFormat);
  PutLE<std::uint32_t>(header, Crc32c(header));
  return header;
}

base::Error StorageError(const std::filesystem::path& path, std::string_view what, int err) {
  return base::Error(ErrorCode::kStorage,
                     std::string(what) + " " + path.string() + ": " + std::strerror(err));
}

// Whether a whole, checksummed record starts at `at`: its payload's length if so.
std::optional<std::uint32_t> RecordAt(std::string_view file, std::size_t at) {
  if (file.size() - at < kRecordHeaderBytes) return std::nullopt;
  const auto length = LoadLE<std::uint32_t>(file.data() + at);
  const auto crc = LoadLE<std::uint32_t>(file.data() + at + 4);
  if (length == 0 || length > kMaxRecordBytes) return std::nullopt;
  if (file.size() - at - kRecordHeaderBytes < length) return std::nullopt;
  if (Crc32c(file.substr(at + kRecordHeaderBytes, length)) != crc) return std::nullopt;
  return length;
}

// The offset of the first good record at or after `from`, if any (a byte-wise search: only
// on the damaged path).
std::optional<std::size_t> NextRecord(std::string_view file, std::size_t from) {
  for (std::size_t at = from; at + kRecordHeaderBytes <= file.size(); ++at) {
    if (RecordAt(file, at)) return at;
  }
  return std::nullopt;
}

}  // namespace

base::Result<std::unique_ptr<SegmentWriter>> SegmentWriter::Create(
    const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return std::unexpected(StorageError(path, "cannot create log segment", errno));
  auto writer = std::unique_ptr<SegmentWriter>(new SegmentWriter(path, fd));
  writer->buffer_ = Header();
  if (auto synced = writer->Sync(); !synced) return std::unexpected(synced.error());
  if (auto synced = SyncDirectory(path.parent_path()); !synced) {
    return std::unexpected(synced.error());
  }
  return writer;
}

base::Result<void> SyncDirectory(const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    auto error = StorageError(dir, "cannot fsync the folder", errno);
    if (fd >= 0) ::close(fd);
    return std::unexpected(error);
  }
  ::close(fd);
  return {};
}

SegmentWriter::SegmentWriter(std::filesystem::path path, int fd)
    : path_(std::move(path)), fd_(fd) {}

SegmentWriter::~SegmentWriter() { ::close(fd_); }

void EncodeRecord(std::string& out, std::string_view payload) {
  TESSERA_CHECK(!payload.empty() && payload.size() <= kMaxRecordBytes,
                "a log record holds 1 to kMaxRecordBytes bytes");
  PutLE<std::uint32_t>(out, static_cast<std::uint32_t>(payload.size()));
  PutLE<std::uint32_t>(out, Crc32c(payload));
  out.append(payload);
}

void SegmentWriter::Append(std::string_view payload) { EncodeRecord(buffer_, payload); }

base::Result<void> SegmentWriter::Failed(std::string_view what) {
  failed_ = StorageError(path_, what, errno);
  return std::unexpected(*failed_);
}

base::Result<void> SegmentWriter::Write() {
  if (failed_) return std::unexpected(*failed_);
  std::size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Failed("cannot write log segment");
    done += static_cast<std::size_t>(n);
    written_ += static_cast<std::uint64_t>(n);
  }
  buffer_.clear();
  return {};
}

base::Result<void> SegmentWriter::Sync() {
  if (auto written = Write(); !written) return written;
  if (::fdatasync(fd_) != 0) return Failed("cannot fsync log segment");
  return {};
}

base::Result<SegmentContents> ReadSegment(const std::filesystem::path& path,
                                          SegmentReadOptions options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::unexpected(StorageError(path, "cannot open log segment", errno));
  std::stringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) return std::unexpected(StorageError(path, "cannot read log segment", errno));
  const std::string text = bytes.str();
  const std::string_view file = text;
  const auto damaged = [&path](std::uint64_t offset, std::string_view what) {
    return Fail(ErrorCode::kStorage,
                "log segment " + path.string() + " is damaged at offset " + std::to_string(offset) +
                    " (" + std::string(what) +
                    "); restore the member's data directory from a backup, or start it with "
                    "damaged records skipped (grid-node --log-skip-damaged true; what they held "
                    "is lost)");
  };
  SegmentContents out;
  out.file_bytes = file.size();
  if (file.size() < kSegmentHeaderBytes) {
    // A crash while the header was written: a segment that holds nothing yet.
    out.torn_at = 0;
    return out;
  }
  if (file.substr(0, 8) != kMagic ||
      LoadLE<std::uint32_t>(file.data() + 12) != Crc32c(file.substr(0, 12))) {
    return damaged(0, "not a Tessera log segment header");
  }
  if (const auto format = LoadLE<std::uint32_t>(file.data() + 8); format != kSegmentFormat) {
    return Fail(ErrorCode::kStorage, "log segment " + path.string() + " has format " +
                                         std::to_string(format) + "; this Tessera reads " +
                                         std::to_string(kSegmentFormat));
  }
  std::size_t at = kSegmentHeaderBytes;
  out.valid_bytes = at;
  while (at < file.size()) {
    if (auto length = RecordAt(file, at)) {
      out.records.emplace_back(file.substr(at + kRecordHeaderBytes, *length));
      at += kRecordHeaderBytes + *length;
      out.valid_bytes = at;
      continue;
    }
    // Not a good record at `at`. A torn tail if no good record follows (a crash mid-append
    // leaves a cut or half-written last record, or zeros); damage in the middle otherwise.
    const std::optional<std::size_t> next = NextRecord(file, at + 1);
    if (!next) {
      out.torn_at = at;
      return out;
    }
    if (!options.skip_damaged) {
      const auto claimed = LoadLE<std::uint32_t>(file.data() + at);
      return damaged(
          at, claimed == 0 || claimed > kMaxRecordBytes
                  ? "impossible record length " + std::to_string(claimed)
                  : "checksum mismatch; a good record follows at offset " + std::to_string(*next));
    }
    out.skipped_at.push_back(at);
    at = *next;
  }
  return out;
}

base::Result<void> TruncateSegment(const std::filesystem::path& path, std::uint64_t valid_bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return std::unexpected(StorageError(path, "cannot open log segment", errno));
  if (::ftruncate(fd, static_cast<off_t>(valid_bytes)) != 0 || ::fdatasync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return std::unexpected(StorageError(path, "cannot cut the torn tail of log segment", err));
  }
  ::close(fd);
  return {};
}

base::Result<void> CopyFilePrefix(const std::filesystem::path& from,
                                  const std::filesystem::path& to, std::uint64_t bytes) {
  auto fail = [](const std::filesystem::path& file, const char* what) {
    return base::Fail(ErrorCode::kStorage, std::string("cannot ") + what + " " + file.string() +
                                               " for a copy: " + std::strerror(errno));
  };
  const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return fail(from, "read");
  const int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (out < 0) {
    ::close(in);
    return fail(to, "create");
  }
  base::Result<void> result;
  std::uint64_t left = bytes;
  bool in_kernel = true;  // copy_file_range, or read and write where a file system lacks it
  std::string buffer;
  while (left > 0 && result) {
    ssize_t n = 0;
    if (in_kernel) {
      n = ::copy_file_range(in, nullptr, out, nullptr, left, 0);
      if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
        in_kernel = false;
        continue;
      }
    } else {
      buffer.resize(std::min<std::uint64_t>(left, 1 << 20));
      n = ::read(in, buffer.data(), buffer.size());
      if (n > 0 && ::write(out, buffer.data(), static_cast<std::size_t>(n)) != n) {
        result = fail(to, "write");
        break;
      }
    }
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      result = n < 0 ? fail(to, "write") : fail(from, "read the whole of");
    } else {
      left -= static_cast<std::uint64_t>(n);
    }
  }
  if (result && ::fsync(out) != 0) result = fail(to, "sync");
  ::close(in);
  ::close(out);
  return result;
}

}  // namespace tessera::storage
