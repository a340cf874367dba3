// DataDir: lock first (so two processes never both write the identity file), then read the
// identity file or write a new one atomically. Every failure names the file and the remedy.
#include "tessera/storage/data_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "tessera/storage/crc32c.h"

namespace tessera::storage {
namespace {

using base::ErrorCode;
using base::Fail;

constexpr std::string_view kIdentityFile = DataDir::kIdentityFile;
constexpr std::string_view kLockFile = "LOCK";
constexpr std::string_view kMagic = "tessera-data-dir";

std::string Errno() { return std::strerror(errno); }

std::string Hex32(std::uint32_t v) {
  char out[9];
  std::snprintf(out, sizeof out, "%08x", v);
  return out;
}

// Writes `bytes` to `file` through a temporary file, fsyncs it, renames it into place and
// fsyncs the directory: afterwards the file is whole, old or new, whatever happens.
base::Result<void> WriteAtomically(const std::filesystem::path& dir, std::string_view name,
                                   std::string_view bytes) {
  const auto final_path = dir / name;
  const auto temp_path = dir / (std::string(name) + ".tmp");
  const int fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return Fail(ErrorCode::kStorage, "cannot create " + temp_path.string() + ": " + Errno());
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = Errno();
      ::close(fd);
      return Fail(ErrorCode::kStorage, "cannot write " + temp_path.string() + ": " + why);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const std::string why = Errno();
    ::close(fd);
    return Fail(ErrorCode::kStorage, "cannot fsync " + temp_path.string() + ": " + why);
  }
  ::close(fd);
  if (::rename(temp_path.c_str(), final_path.c_str()) != 0) {
    return Fail(ErrorCode::kStorage, "cannot rename " + temp_path.string() + " to " +
                                         final_path.string() + ": " + Errno());
  }
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0 || ::fsync(dir_fd) != 0) {
    const std::string why = Errno();
    if (dir_fd >= 0) ::close(dir_fd);
    return Fail(ErrorCode::kStorage, "cannot fsync directory " + dir.string() + ": " + why);
  }
  ::close(dir_fd);
  return {};
}

// The text before a file's checksum line ("crc32c <8 hex digits>", the CRC-32C of everything
// before it), or what is wrong with it.
std::expected<std::string, std::string> CheckedBody(const std::string& text) {
  const auto crc_at = text.rfind("crc32c ");
  if (crc_at == std::string::npos || (crc_at != 0 && text[crc_at - 1] != '\n')) {
    return std::unexpected("no checksum line");
  }
  std::string body = text.substr(0, crc_at);
  std::string stored = text.substr(crc_at + 7);
  if (!stored.empty() && stored.back() == '\n') stored.pop_back();
  if (stored != Hex32(Crc32c(body))) return std::unexpected("checksum mismatch");
  return body;
}

struct Identity {
  std::string member_id;
  std::string cluster_name;
  std::uint32_t partition_count = 0;
};

std::string EncodeIdentity(const Identity& id) {
  std::string body = std::string(kMagic) + " " + std::to_string(DataDir::kFormat) + "\n";
  body += "member-id " + id.member_id + "\n";
  body += "cluster-name " + id.cluster_name + "\n";
  body += "partition-count " + std::to_string(id.partition_count) + "\n";
  return body + "crc32c " + Hex32(Crc32c(body)) + "\n";
}

base::Result<Identity> DecodeIdentity(const std::filesystem::path& file, const std::string& text) {
  const auto damaged = [&file](const std::string& what) {
    return Fail(ErrorCode::kStorage,
                "the identity file " + file.string() + " is damaged (" + what +
                    "); restore it from a backup of this directory, or move the directory "
                    "aside to start this member without its data");
  };
  const auto checked = CheckedBody(text);
  if (!checked) return damaged(checked.error());
  const std::string& body = *checked;
  std::map<std::string, std::string, std::less<>> fields;
  std::istringstream lines(body);
  std::string line;
  while (std::getline(lines, line)) {
    const auto space = line.find(' ');
    if (space == std::string::npos) return damaged("malformed line '" + line + "'");
    fields[line.substr(0, space)] = line.substr(space + 1);
  }
  const auto format = fields.find(kMagic);
  if (format == fields.end()) return damaged("not a Tessera data directory identity");
  if (format->second != std::to_string(DataDir::kFormat)) {
    return Fail(ErrorCode::kStorage,
                "the data directory " + file.parent_path().string() + " has format " +
                    format->second + "; this Tessera reads format " +
                    std::to_string(DataDir::kFormat) + " (run the release that wrote it)");
  }
  Identity id;
  for (const auto* name : {"member-id", "cluster-name", "partition-count"}) {
    if (!fields.count(name)) return damaged(std::string("no ") + name + " line");
  }
  id.member_id = fields["member-id"];
  id.cluster_name = fields["cluster-name"];
  const std::string& count = fields["partition-count"];
  auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), id.partition_count);
  if (ec != std::errc() || end != count.data() + count.size() || id.partition_count == 0 ||
      id.member_id.empty()) {
    return damaged("bad member-id or partition-count");
  }
  return id;
}

// Locks DIR/LOCK for this process; returns its descriptor.
base::Result<int> Lock(const std::filesystem::path& dir) {
  const auto lock_path = dir / kLockFile;
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return Fail(ErrorCode::kStorage, "cannot open " + lock_path.string() + ": " + Errno());
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder;
    char buffer[32] = {};
    if (::pread(fd, buffer, sizeof buffer - 1, 0) > 0) holder = buffer;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
      return Fail(ErrorCode::kConflict,
                  "the data directory " + dir.string() + " is in use by another process" +
                      (holder.empty() ? "" : " (pid " + holder + ")") +
                      "; stop it, or give this member another data directory");
    }
    return Fail(ErrorCode::kStorage,
                "cannot lock " + lock_path.string() + ": " + std::strerror(err));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    const std::string why = Errno();
    ::close(fd);
    return Fail(ErrorCode::kStorage, "cannot write " + lock_path.string() + ": " + why);
  }
  return fd;
}

}  // namespace

base::Result<std::unique_ptr<DataDir>> DataDir::Open(const std::filesystem::path& path,
                                                     std::string_view cluster_name,
                                                     std::uint32_t partition_count,
                                                     std::string_view new_member_id) {
  if (path.empty() || cluster_name.empty() || new_member_id.empty() || partition_count == 0) {
    return Fail(ErrorCode::kBadRequest,
                "a data directory needs a path, a cluster name, a member id and a partition count");
  }
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) {
    return Fail(ErrorCode::kStorage, "cannot create the data directory " + path.string() + ": " +
                                         ec.message() + "; choose a writable path");
  }
  auto lock = Lock(path);
  if (!lock) return std::unexpected(lock.error());
  const int fd = *lock;
  const auto release = [fd](base::Error error) -> base::Result<std::unique_ptr<DataDir>> {
    ::close(fd);
    return std::unexpected(std::move(error));
  };
  const auto file = path / kIdentityFile;
  if (!std::filesystem::exists(file, ec)) {
    Identity id{std::string(new_member_id), std::string(cluster_name), partition_count};
    if (auto written = WriteAtomically(path, kIdentityFile, EncodeIdentity(id)); !written) {
      return release(written.error());
    }
    return std::unique_ptr<DataDir>(new DataDir(path, fd, id.member_id, true));
  }
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return release(base::Error(ErrorCode::kStorage, "cannot read " + file.string()));
  auto id = DecodeIdentity(file, text.str());
  if (!id) return release(id.error());
  if (id->cluster_name != cluster_name) {
    return release(base::Error(ErrorCode::kConflict,
                               "the data directory " + path.string() + " belongs to cluster '" +
                                   id->cluster_name + "', not '" + std::string(cluster_name) +
                                   "'; start the member with --cluster-name " + id->cluster_name +
                                   ", or give it another data directory"));
  }
  if (id->partition_count != partition_count) {
    return release(base::Error(
        ErrorCode::kConflict,
        "the data directory " + path.string() + " holds a cluster of " +
            std::to_string(id->partition_count) + " partitions, not " +
            std::to_string(partition_count) + "; start the member with --partitions " +
            std::to_string(id->partition_count) + ", or give it another data directory"));
  }
  return std::unique_ptr<DataDir>(new DataDir(path, fd, id->member_id, false));
}

DataDir::DataDir(std::filesystem::path path, int lock_fd, std::string member_id, bool created)
    : path_(std::move(path)),
      lock_fd_(lock_fd),
      member_id_(std::move(member_id)),
      created_(created) {}

DataDir::~DataDir() { ::close(lock_fd_); }

base::Result<void> DataDir::WriteChecked(std::string_view name, std::string_view text) const {
  std::string body(text);
  if (!body.empty() && body.back() != '\n') body += '\n';
  return WriteAtomically(path_, name, body + "crc32c " + Hex32(Crc32c(body)) + "\n");
}

base::Result<std::optional<std::string>> DataDir::ReadChecked(std::string_view name) const {
  const auto file = path_ / std::string(name);
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return std::optional<std::string>();
  std::ifstream in(file, std::ios::binary);
  std::stringstream read;
  read << in.rdbuf();
  if (!in && !in.eof()) {
    return Fail(ErrorCode::kStorage, "cannot read " + file.string() + ": " + Errno());
  }
  const std::string text = read.str();
  const auto damaged = [&file](const std::string& what) {
    return Fail(ErrorCode::kStorage, file.string() + " is damaged (" + what +
                                         "); restore it from a backup of this directory, or "
                                         "move it aside");
  };
  auto checked = CheckedBody(text);
  if (!checked) return damaged(checked.error());
  return std::optional<std::string>(std::move(*checked));
}

}  // namespace tessera::storage
