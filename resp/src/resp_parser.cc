// The parser keeps a command's progress as offsets into its own buffer (header parsed, bulk
// header read, arguments found so far), so a command that arrives over many reads is scanned
// once and a large bulk is never re-scanned. The buffer is compacted only when space runs
// out, so a partially received large value is moved at most once per growth.
#include "tessera/resp/resp_parser.h"

#include <fmt/format.h>
#include <algorithm>
#include <cstring>

namespace tessera::resp {

namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

char Unescape(char c) {
  switch (c) {
    case 'n':
      return '\n';
    case 'r':
      return '\r';
    case 't':
      return '\t';
    case 'b':
      return '\b';
    case 'a':
      return '\a';
    default:
      return c;
  }
}

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// Reads one double-quoted word starting after the opening quote; false on unbalanced quotes.
bool ReadDoubleQuoted(std::string_view line, std::size_t& i, std::string& word) {
  while (i < line.size()) {
    const char c = line[i];
    if (c == '\\' && i + 3 < line.size() && line[i + 1] == 'x' && HexDigit(line[i + 2]) >= 0 &&
        HexDigit(line[i + 3]) >= 0) {
      word.push_back(static_cast<char>(HexDigit(line[i + 2]) * 16 + HexDigit(line[i + 3])));
      i += 4;
    } else if (c == '\\' && i + 1 < line.size()) {
      word.push_back(Unescape(line[i + 1]));
      i += 2;
    } else if (c == '"') {
      ++i;
      return i == line.size() || IsSpace(line[i]);  // closing quote must end the word
    } else {
      word.push_back(c);
      ++i;
    }
  }
  return false;
}

bool ReadSingleQuoted(std::string_view line, std::size_t& i, std::string& word) {
  while (i < line.size()) {
    const char c = line[i];
    if (c == '\\' && i + 1 < line.size() && line[i + 1] == '\'') {
      word.push_back('\'');
      i += 2;
    } else if (c == '\'') {
      ++i;
      return i == line.size() || IsSpace(line[i]);
    } else {
      word.push_back(c);
      ++i;
    }
  }
  return false;
}

// Splits an inline command line like Redis' sdssplitargs; false on unbalanced quotes.
bool SplitInline(std::string_view line, std::vector<std::string>& words) {
  words.clear();
  std::size_t i = 0;
  while (true) {
    while (i < line.size() && IsSpace(line[i])) ++i;
    if (i == line.size()) return true;
    std::string& word = words.emplace_back();
    if (line[i] == '"') {
      ++i;
      if (!ReadDoubleQuoted(line, i, word)) return false;
    } else if (line[i] == '\'') {
      ++i;
      if (!ReadSingleQuoted(line, i, word)) return false;
    } else {
      while (i < line.size() && !IsSpace(line[i])) word.push_back(line[i++]);
    }
  }
}

}  // namespace

RespParser::RespParser(ParserLimits limits) : limits_(limits) { buffer_.resize(16 * 1024); }

std::span<char> RespParser::WritableSpace(std::size_t min_bytes) {
  args_.clear();
  std::size_t want = min_bytes;
  if (pending_bulk_ >= 0) {  // make room for the whole bulk being received, as Redis does
    const std::size_t bulk_end = scan_ + static_cast<std::size_t>(pending_bulk_) + 2;
    if (bulk_end > end_) want = std::max(want, bulk_end - end_);
  }
  if (buffer_.size() - end_ < want && pos_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + pos_, end_ - pos_);
    for (auto& offset : offsets_) offset.first -= pos_;
    if (expected_args_ >= 0) scan_ -= pos_;
    end_ -= pos_;
    pos_ = 0;
  }
  if (buffer_.size() - end_ < want) buffer_.resize(std::max(end_ + want, buffer_.size() * 2));
  return {buffer_.data() + end_, buffer_.size() - end_};
}

void RespParser::Commit(std::size_t n) { end_ += n; }

void RespParser::Feed(std::string_view data) {
  auto space = WritableSpace(data.size());
  std::memcpy(space.data(), data.data(), data.size());
  Commit(data.size());
}

void RespParser::Compact() {
  args_.clear();
  if (pos_ == end_ && expected_args_ < 0) {
    pos_ = 0;
    end_ = 0;
  }
}

RespParser::Status RespParser::Fail(std::string message) {
  failed_ = true;
  error_ = std::move(message);
  args_.clear();
  return Status::kError;
}

std::size_t RespParser::FindLineEnd(std::size_t from, std::size_t limit) const {
  const std::size_t stop = std::min(end_, from + limit + 2);
  const void* hit = std::memchr(buffer_.data() + from, '\n', stop > from ? stop - from : 0);
  return hit == nullptr ? std::string_view::npos
                        : static_cast<std::size_t>(static_cast<const char*>(hit) - buffer_.data());
}

bool RespParser::QuickNumber(std::size_t from, std::int64_t& out, std::size_t& next) const {
  const char* data = buffer_.data();
  const std::size_t stop = std::min(end_, from + 18);
  std::size_t i = from;
  std::int64_t value = 0;
  while (i < stop && data[i] >= '0' && data[i] <= '9') {
    value = value * 10 + (data[i] - '0');
    ++i;
  }
  if (i == from || i + 1 >= end_ || data[i] != '\r' || data[i + 1] != '\n') return false;
  out = value;
  next = i + 2;
  return true;
}

bool RespParser::ParseNumber(std::size_t begin, std::size_t end, std::int64_t& out) const {
  if (end > begin && buffer_[end - 1] == '\r') --end;
  if (begin == end || end - begin > 19) return false;
  bool negative = buffer_[begin] == '-';
  std::size_t i = begin + (negative ? 1 : 0);
  if (i == end) return false;
  std::int64_t value = 0;
  for (; i < end; ++i) {
    const char c = buffer_[i];
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  out = negative ? -value : value;
  return true;
}

void RespParser::FinishCommand(std::size_t next_pos) {
  args_.clear();
  for (const auto& [offset, length] : offsets_) args_.emplace_back(buffer_.data() + offset, length);
  offsets_.clear();
  expected_args_ = -1;
  pending_bulk_ = -1;
  pos_ = next_pos;
}

RespParser::Status RespParser::Next() {
  if (failed_) return Status::kError;
  args_.clear();
  while (true) {
    if (expected_args_ < 0 && pos_ == end_) return Status::kNeedMore;
    const Status status =
        (expected_args_ >= 0 || buffer_[pos_] == '*') ? ParseMultibulk() : ParseInline();
    if (status != Status::kCommand || !args_.empty()) return status;
    // An empty command ("*0", "*-1", blank inline line): skip it.
  }
}

RespParser::Status RespParser::ParseMultibulk() {
  if (expected_args_ < 0) {
    std::int64_t count = 0;
    std::size_t next = 0;
    const Status header = ReadHeaderNumber(pos_, "mbulk", "multibulk", count, next);
    if (header != Status::kCommand) return header;
    if (count > limits_.max_multibulk_count) {
      if (!limits_.unauthenticated) return Fail("invalid multibulk length");
      return Fail(
          fmt::format("unauthenticated multibulk length: {} arguments, and a client that has not "
                      "authenticated may send at most {}; AUTH first",
                      count, limits_.max_multibulk_count));
    }
    if (count <= 0) {
      FinishCommand(next);
      return Status::kCommand;  // empty: Next() skips it
    }
    expected_args_ = count;
    offsets_.clear();
    offsets_.reserve(static_cast<std::size_t>(std::min<std::int64_t>(count, 1024)));
    scan_ = next;
  }
  while (static_cast<std::int64_t>(offsets_.size()) < expected_args_) {
    if (pending_bulk_ < 0) {
      if (const Status status = ParseBulkHeader(); status != Status::kCommand) return status;
    }
    const auto length = static_cast<std::size_t>(pending_bulk_);
    if (end_ - scan_ < length + 2) return Status::kNeedMore;
    if (buffer_[scan_ + length] != '\r' || buffer_[scan_ + length + 1] != '\n') {
      return Fail("expected CRLF after bulk data");
    }
    offsets_.emplace_back(scan_, length);
    scan_ += length + 2;
    pending_bulk_ = -1;
  }
  FinishCommand(scan_);
  return Status::kCommand;
}

RespParser::Status RespParser::ReadHeaderNumber(std::size_t start, std::string_view count_name,
                                                std::string_view length_name, std::int64_t& value,
                                                std::size_t& next) {
  if (QuickNumber(start + 1, value, next)) return Status::kCommand;
  const std::size_t line_end = FindLineEnd(start + 1, limits_.max_inline_bytes);
  if (line_end == std::string_view::npos) {
    if (end_ - start > limits_.max_inline_bytes) {
      return Fail("too big " + std::string(count_name) + " count string");
    }
    return Status::kNeedMore;
  }
  if (!ParseNumber(start + 1, line_end, value)) {
    return Fail("invalid " + std::string(length_name) + " length");
  }
  next = line_end + 1;
  return Status::kCommand;
}

// Reads "$<len>\r\n" at scan_ into pending_bulk_. kCommand means "header read, go on".
RespParser::Status RespParser::ParseBulkHeader() {
  if (scan_ >= end_) return Status::kNeedMore;
  if (buffer_[scan_] != '$') {
    return Fail(std::string("expected '$', got '") + buffer_[scan_] + "'");
  }
  std::int64_t length = 0;
  std::size_t next = 0;
  const Status header = ReadHeaderNumber(scan_, "bulk", "bulk", length, next);
  if (header != Status::kCommand) return header;
  if (length > limits_.max_bulk_bytes && limits_.unauthenticated) {
    return Fail(fmt::format(
        "unauthenticated bulk length: an argument of {} bytes, and a client that has not "
        "authenticated may send at most {}; AUTH first",
        length, limits_.max_bulk_bytes));
  }
  if (length < 0 || length > limits_.max_bulk_bytes) return Fail("invalid bulk length");
  pending_bulk_ = length;
  scan_ = next;
  return Status::kCommand;
}

RespParser::Status RespParser::ParseInline() {
  const std::size_t line_end = FindLineEnd(pos_, limits_.max_inline_bytes);
  if (line_end == std::string_view::npos) {
    if (end_ - pos_ > limits_.max_inline_bytes) return Fail("too big inline request");
    return Status::kNeedMore;
  }
  std::size_t stop = line_end;
  if (stop > pos_ && buffer_[stop - 1] == '\r') --stop;
  const std::string_view line(buffer_.data() + pos_, stop - pos_);
  if (!SplitInline(line, inline_words_)) return Fail("unbalanced quotes in request");
  pos_ = line_end + 1;
  args_.clear();
  for (const auto& word : inline_words_) args_.emplace_back(word);
  return Status::kCommand;
}

}  // namespace tessera::resp
