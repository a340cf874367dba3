#pragma once
// A member's data directory: where it keeps what must outlive its process. One process at a
// time: opening takes an exclusive lock (flock on DIR/LOCK, which the kernel releases however
// the process ends, so a crash leaves no stale lock) and writes the holder's pid into it for
// the error a second process gets.
//
// The identity file DIR/member.id says whose directory it is: the member's persistent id (made
// at the first open; a member keeps it across restarts, also at another address or port), the
// cluster's name and its partition count. A directory of another cluster or partition count is
// refused, never reused or wiped. The file is written whole (a temporary file, fsync, rename,
// fsync of the directory) and carries a CRC-32C, so it is either the old or the new one, and a
// damaged one is named, not guessed at.
//
// Format of member.id (text, one field a line, values to the end of the line):
//   tessera-data-dir 1
//   member-id <id>
//   cluster-name <name>
//   partition-count <n>
//   crc32c <8 hex digits: the CRC-32C of the lines above, newlines included>
//
// Thread-safety: Open on any thread; a DataDir is immutable once open (its accessors may be
// read from any thread). The lock lasts as long as the object.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "tessera/base/error.h"

namespace tessera::storage {

class DataDir {
 public:
  // The identity format this build writes; a directory of a later one is refused.
  static constexpr int kFormat = 1;
  // The identity file's name in the directory.
  static constexpr std::string_view kIdentityFile = "member.id";

  // Opens the directory at `path`, creating it (and its parents) when absent, for a member of
  // cluster `cluster_name` with `partition_count` partitions. A directory without an identity
  // file gets one, with `new_member_id` as the member's id; otherwise the file's id is kept.
  // Errors, each naming the path and what to do:
  //   kConflict: another process holds the directory; or it belongs to another cluster name
  //     or partition count (both values named).
  //   kStorage: the directory cannot be created, locked, read or written; its identity file is
  //     damaged (checksum, a missing or malformed line) or of a later format.
  //   kBadRequest: an empty path, cluster name or member id, or a zero partition count.
  static base::Result<std::unique_ptr<DataDir>> Open(const std::filesystem::path& path,
                                                     std::string_view cluster_name,
                                                     std::uint32_t partition_count,
                                                     std::string_view new_member_id);

  ~DataDir();  // releases the lock
  DataDir(const DataDir&) = delete;
  DataDir& operator=(const DataDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // The member's persistent id (the file's, or `new_member_id` when this open made it).
  const std::string& member_id() const { return member_id_; }
  // Whether this open made the identity file (a new directory, or one without it).
  bool created() const { return created_; }

  // A small text file of the directory (`name`, a plain file name), written whole as member.id
  // is, with a checksum line appended: afterwards it is the old or the new text whatever
  // happens. Errors: kStorage naming the file and the system's reason.
  base::Result<void> WriteChecked(std::string_view name, std::string_view text) const;
  // Reads what WriteChecked wrote: nullopt when the file is absent. Errors: kStorage naming
  // the file (unreadable; damaged: no checksum line, checksum mismatch).
  base::Result<std::optional<std::string>> ReadChecked(std::string_view name) const;

 private:
  DataDir(std::filesystem::path path, int lock_fd, std::string member_id, bool created);

  std::filesystem::path path_;
  int lock_fd_;
  std::string member_id_;
  bool created_;
};

}  // namespace tessera::storage
