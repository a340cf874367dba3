#pragma once
// RespParser: incremental parser for client-to-server RESP2 traffic. It owns the connection's
// input buffer: the reader writes received bytes into WritableSpace()/Commit(), then calls
// Next() until it returns kNeedMore, then Compact(). Each command's arguments are views into
// the buffer (or, for inline commands, into unescaped words), valid until the next call to
// Next(), Compact() or WritableSpace(): execute a command before asking for the next one.
// Multibulk arguments are never copied.
//
// Accepted forms (as Redis does):
//   multibulk  "*<n>\r\n" then n times "$<len>\r\n<len bytes>\r\n"; "*0" and "*-1" are skipped
//   inline     a line of space-separated words ending in "\n" (optional "\r"); words may be
//              quoted "..." (escapes \n \r \t \b \a \\ \" \xHH) or '...' (escape \'); empty
//              lines are skipped
// State is kept across reads, so a command split over many reads is scanned once.
//
// Limits (violations are protocol errors): multibulk count <= 1024*1024, bulk length <=
// ParserLimits::max_bulk_bytes (default 512 MB), an inline line or a "*"/"$" header line
// <= 64 KB; tighter ones before a connection authenticated (ParserLimits::unauthenticated). After a
// protocol error the parser stays failed; the caller replies
// "-ERR Protocol error: ..." and closes the connection.
//
// Thread-safety: none; one parser per connection, used by the connection's shard.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::resp {

struct ParserLimits {
  std::int64_t max_bulk_bytes = 512LL * 1024 * 1024;
  std::int64_t max_multibulk_count = 1024 * 1024;
  std::size_t max_inline_bytes = 64 * 1024;
  // The limits of a connection that has not authenticated yet (RespServerOptions): a count or
  // length over them fails as "unauthenticated multibulk length" / "unauthenticated bulk
  // length" (Redis's names), saying what is allowed before AUTH.
  bool unauthenticated = false;
};

class RespParser {
 public:
  enum class Status { kCommand, kNeedMore, kError };

  explicit RespParser(ParserLimits limits = {});
  // Limits for the commands parsed from here on (AUTH succeeded: the connection's own); the
  // command being parsed keeps what it was checked against.
  void SetLimits(ParserLimits limits) { limits_ = limits; }

  // A writable region of at least `min_bytes` at the end of the buffered data (grows the
  // buffer if needed). Invalidates argument views.
  std::span<char> WritableSpace(std::size_t min_bytes = 16 * 1024);
  // Marks `n` bytes of the last WritableSpace() as received.
  void Commit(std::size_t n);
  // Appends bytes (tests, and callers that already hold the data).
  void Feed(std::string_view data);

  // Parses the next complete command. kCommand: args() holds it (non-empty). kNeedMore: all
  // complete commands were returned. kError: error() names the problem (without the
  // "ERR Protocol error: " prefix); every later call returns kError.
  Status Next();
  std::span<const std::string_view> args() const { return args_; }
  const std::string& error() const { return error_; }

  // Discards consumed bytes. Invalidates argument views.
  void Compact();

  // Bytes received but not yet returned as commands.
  std::size_t buffered() const { return end_ - pos_; }

 private:
  Status ParseMultibulk();
  Status ParseBulkHeader();
  Status ParseInline();
  Status Fail(std::string message);
  // Finds "\n" from `from` within the header-line limit; npos if not there yet.
  std::size_t FindLineEnd(std::size_t from, std::size_t limit) const;
  // The common header number in one pass: 1-18 digits then "\r\n" at `from`; `next` is the
  // byte after it. False for anything else (sign, incomplete, malformed, longer), which the
  // general path (FindLineEnd + ParseNumber) then handles, errors included.
  bool QuickNumber(std::size_t from, std::int64_t& out, std::size_t& next) const;
  bool ParseNumber(std::size_t begin, std::size_t end, std::int64_t& out) const;
  // The number of the "*" or "$" header line whose type byte is at `start`: kCommand with
  // `value` and `next` (the byte after the line) set, kNeedMore, or kError ("too big
  // <count_name> count string", "invalid <length_name> length").
  Status ReadHeaderNumber(std::size_t start, std::string_view count_name,
                          std::string_view length_name, std::int64_t& value, std::size_t& next);
  void FinishCommand(std::size_t next_pos);

  ParserLimits limits_;
  std::vector<char> buffer_;
  std::size_t pos_ = 0;  // start of the command being parsed
  std::size_t end_ = 0;  // end of received data

  // Multibulk progress (offsets relative to buffer_.data()).
  std::int64_t expected_args_ = -1;  // -1: header not parsed yet
  std::size_t scan_ = 0;             // where parsing of the next argument starts
  std::int64_t pending_bulk_ = -1;   // length of the bulk whose header was read, or -1
  std::vector<std::pair<std::size_t, std::size_t>> offsets_;  // (offset, length) per arg

  std::vector<std::string_view> args_;
  std::vector<std::string> inline_words_;  // unescaped inline arguments
  std::string error_;
  bool failed_ = false;
};

}  // namespace tessera::resp
