#include "tessera/resp/resp_writer.h"

#include <fmt/format.h>
#include <charconv>

namespace tessera::resp {

void RespWriter::Header(char type, std::int64_t n) {
  char buf[24];
  buf[0] = type;
  auto [end, ec] = std::to_chars(buf + 1, buf + sizeof(buf) - 2, n);
  *end++ = '\r';
  *end++ = '\n';
  out_->append(buf, end);
}

void RespWriter::SimpleString(std::string_view text) {
  out_->push_back('+');
  for (char c : text) out_->push_back(c == '\r' || c == '\n' ? ' ' : c);
  out_->append("\r\n");
}

void RespWriter::Error(std::string_view text) {
  out_->push_back('-');
  for (char c : text) out_->push_back(c == '\r' || c == '\n' ? ' ' : c);
  out_->append("\r\n");
}

void RespWriter::Integer(std::int64_t value) { Header(':', value); }

void RespWriter::Bulk(std::string_view data) {
  Header('$', static_cast<std::int64_t>(data.size()));
  out_->append(data);
  out_->append("\r\n");
}

void RespWriter::Null() { out_->append(protocol_ >= 3 ? "_\r\n" : "$-1\r\n"); }

void RespWriter::NullArray() { out_->append(protocol_ >= 3 ? "_\r\n" : "*-1\r\n"); }

void RespWriter::ArrayHeader(std::size_t count) { Header('*', static_cast<std::int64_t>(count)); }

void RespWriter::MapHeader(std::size_t pairs) {
  if (protocol_ >= 3) {
    Header('%', static_cast<std::int64_t>(pairs));
  } else {
    Header('*', static_cast<std::int64_t>(pairs * 2));
  }
}

void RespWriter::PushHeader(std::size_t count) {
  Header(protocol_ >= 3 ? '>' : '*', static_cast<std::int64_t>(count));
}

void RespWriter::Double(double value) {
  const std::string text = fmt::format("{}", value);
  if (protocol_ >= 3) {
    out_->push_back(',');
    out_->append(text);
    out_->append("\r\n");
  } else {
    Bulk(text);
  }
}

void RespWriter::WrongArity(std::string_view command) {
  out_->append("-ERR wrong number of arguments for '");
  for (char c : command) out_->push_back(c == '\r' || c == '\n' ? ' ' : c);
  out_->append("' command\r\n");
}

}  // namespace tessera::resp
