#pragma once
// RespWriter: appends RESP replies to a caller-owned byte string. The protocol version
// (2 or 3, chosen by HELLO) decides how nulls, maps and pushes are encoded; everything else
// is identical. Error texts must start with the error code ("ERR ...", "WRONGTYPE ...");
// CR/LF inside them are replaced by spaces so a reply can never break the framing.
//
// Value type holding a reference to the output; thread-compatible.

#include <cstdint>
#include <string>
#include <string_view>

namespace tessera::resp {

class RespWriter {
 public:
  // REQUIRES: `out` outlives the writer.
  explicit RespWriter(std::string& out, int protocol = 2) : out_(&out), protocol_(protocol) {}

  int protocol() const { return protocol_; }
  std::string& out() { return *out_; }

  void SimpleString(std::string_view text);  // +OK
  void Error(std::string_view text);         // -ERR ...
  void Integer(std::int64_t value);          // :42
  void Bulk(std::string_view data);          // $3\r\nabc
  void Null();                               // $-1 (RESP2) or _ (RESP3)
  void NullArray();                          // *-1 (RESP2) or _ (RESP3)
  void ArrayHeader(std::size_t count);       // *n
  void MapHeader(std::size_t pairs);         // *2n (RESP2) or %n (RESP3)
  void PushHeader(std::size_t count);        // *n (RESP2) or >n (RESP3)
  void Double(double value);                 // bulk text (RESP2) or ,value (RESP3)

  // Convenience: "-ERR wrong number of arguments for 'get' command".
  void WrongArity(std::string_view command);
  void SyntaxError() { Error("ERR syntax error"); }
  void NotInteger() { Error("ERR value is not an integer or out of range"); }

 private:
  void Header(char type, std::int64_t n);
  std::string* out_;
  int protocol_;
};

}  // namespace tessera::resp
