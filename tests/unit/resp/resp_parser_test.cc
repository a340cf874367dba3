#include "tessera/resp/resp_parser.h"

#include <catch2/catch.hpp>
#include <random>

#include "tessera/resp/resp_writer.h"

using tessera::resp::ParserLimits;
using tessera::resp::RespParser;
using tessera::resp::RespWriter;
using Status = RespParser::Status;
using Command = std::vector<std::string>;

namespace {

// Drains every complete command; stops at kNeedMore or kError.
std::vector<Command> Drain(RespParser& parser, Status* last = nullptr) {
  std::vector<Command> commands;
  Status status;
  while ((status = parser.Next()) == Status::kCommand) {
    commands.emplace_back(parser.args().begin(), parser.args().end());
  }
  if (last != nullptr) *last = status;
  return commands;
}

std::string Encode(const Command& command) {
  std::string out = "*" + std::to_string(command.size()) + "\r\n";
  for (const auto& arg : command) out += "$" + std::to_string(arg.size()) + "\r\n" + arg + "\r\n";
  return out;
}

}  // namespace

TEST_CASE("Parser reads multibulk commands", "[resp][parser]") {
  RespParser parser;
  parser.Feed("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nva\r\nl\r\n");
  Status status;
  auto commands = Drain(parser, &status);
  REQUIRE(commands.size() == 1);
  CHECK(commands[0] == Command{"SET", "k", "va\r\nl"});  // binary-safe bulk
  CHECK(status == Status::kNeedMore);
}

TEST_CASE("Parser handles pipelined commands split at every byte", "[resp][parser]") {
  const std::vector<Command> sent = {{"PING"},
                                     {"SET", "key", std::string("v\0x", 3)},
                                     {"GET", "key"},
                                     {"MSET", "a", "", "b", "2"}};
  std::string wire;
  for (const auto& c : sent) wire += Encode(c);
  wire += "PING inline\r\n";
  RespParser parser;
  std::vector<Command> got;
  for (char c : wire) {
    parser.Feed(std::string_view(&c, 1));
    for (auto& cmd : Drain(parser)) got.push_back(cmd);
    parser.Compact();
  }
  auto expected = sent;
  expected.push_back({"PING", "inline"});
  CHECK(got == expected);
  CHECK(parser.buffered() == 0);
}

TEST_CASE("Parser reads inline commands with quotes", "[resp][parser]") {
  RespParser parser;
  parser.Feed("SET k \"hello world\\n\" \r\n\r\nGET 'it\\'s'\nECHO \"\\x41\\x42\"\n");
  auto commands = Drain(parser);
  REQUIRE(commands.size() == 3);
  CHECK(commands[0] == Command{"SET", "k", "hello world\n"});
  CHECK(commands[1] == Command{"GET", "it's"});
  CHECK(commands[2] == Command{"ECHO", "AB"});
}

TEST_CASE("Parser skips empty multibulk", "[resp][parser]") {
  RespParser parser;
  parser.Feed("*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n");
  auto commands = Drain(parser);
  REQUIRE(commands.size() == 1);
  CHECK(commands[0] == Command{"PING"});
}

TEST_CASE("Parser rejects malformed input with Redis error texts", "[resp][parser]") {
  struct Case {
    std::string input;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"*abc\r\n", "invalid multibulk length"},
      {"*2000000\r\n", "invalid multibulk length"},
      {"*1\r\n$-5\r\n", "invalid bulk length"},
      {"*1\r\n$x\r\n", "invalid bulk length"},
      {"*1\r\n+PING\r\n", "expected '$', got '+'"},
      {"*1\r\n$4\r\nPINGXX", "expected CRLF after bulk data"},
      {"GET \"unterminated\r\n", "unbalanced quotes in request"},
      {"GET \"a\"b\r\n", "unbalanced quotes in request"},
  };
  for (const auto& c : cases) {
    RespParser parser;
    parser.Feed(c.input);
    Status status;
    Drain(parser, &status);
    INFO(c.input);
    CHECK(status == Status::kError);
    CHECK(parser.error() == c.error);
    CHECK(parser.Next() == Status::kError);  // stays failed
  }
}

TEST_CASE("Parser enforces the configured bulk limit", "[resp][parser]") {
  RespParser parser(ParserLimits{.max_bulk_bytes = 10});
  parser.Feed("*2\r\n$3\r\nGET\r\n$10\r\n0123456789\r\n");
  auto commands = Drain(parser);
  REQUIRE(commands.size() == 1);
  parser.Feed("*2\r\n$3\r\nGET\r\n$11\r\n");
  Status status;
  Drain(parser, &status);
  CHECK(status == Status::kError);
  CHECK(parser.error() == "invalid bulk length");
}

TEST_CASE("Parser limits inline and header lines", "[resp][parser]") {
  RespParser parser;
  parser.Feed(std::string(70 * 1024, 'a'));
  Status status;
  Drain(parser, &status);
  CHECK(status == Status::kError);
  CHECK(parser.error() == "too big inline request");

  RespParser header;
  header.Feed("*1\r\n$" + std::string(70 * 1024, '1'));
  Drain(header, &status);
  CHECK(status == Status::kError);
  CHECK(header.error() == "too big bulk count string");
}

TEST_CASE("Parser receives a large bulk over many reads", "[resp][parser]") {
  const std::string value(3 * 1024 * 1024 + 7, 'v');
  const std::string wire = Encode({"SET", "big", value}) + Encode({"GET", "big"});
  RespParser parser;
  std::vector<Command> got;
  for (std::size_t offset = 0; offset < wire.size();) {
    auto space = parser.WritableSpace(4096);
    const std::size_t n = std::min({space.size(), wire.size() - offset, std::size_t{65536}});
    std::copy_n(wire.data() + offset, n, space.data());
    parser.Commit(n);
    offset += n;
    for (auto& cmd : Drain(parser)) got.push_back(cmd);
    parser.Compact();
  }
  REQUIRE(got.size() == 2);
  CHECK(got[0][2] == value);
  CHECK(got[1] == Command{"GET", "big"});
}

TEST_CASE("Parser survives random bytes and mutated commands", "[resp][parser][fuzz]") {
  std::mt19937 rng(12345);
  const std::vector<std::string> seeds = {Encode({"SET", "key", "value"}),
                                          Encode({"MGET", "a", "b", "c"}), "PING\r\n",
                                          "SET \"a b\" 'c'\r\n", Encode({"HSET", "h", "f", "v"})};
  std::uniform_int_distribution<int> byte(0, 255);
  std::size_t commands = 0;
  std::size_t errors = 0;
  for (int i = 0; i < 5000; ++i) {
    std::string input;
    if (i % 2 == 0) {
      input.resize(rng() % 200);
      for (auto& c : input) c = static_cast<char>(byte(rng));
    } else {
      for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k)
        input += seeds[rng() % seeds.size()];
      for (int m = 0; m < 1 + static_cast<int>(rng() % 5); ++m) {
        const std::size_t at = rng() % input.size();
        switch (rng() % 3) {
          case 0:
            input[at] = static_cast<char>(byte(rng));
            break;
          case 1:
            input.erase(at, 1);
            break;
          default:
            input.insert(at, 1, "*$\r\n-0123456789"[rng() % 16]);
            break;
        }
        if (input.empty()) input = "x";
      }
    }
    RespParser parser(ParserLimits{.max_bulk_bytes = 1 << 20, .max_multibulk_count = 1 << 16});
    std::size_t offset = 0;
    Status status = Status::kNeedMore;
    while (offset < input.size() && status != Status::kError) {
      const std::size_t n = std::min<std::size_t>(1 + rng() % 32, input.size() - offset);
      parser.Feed(std::string_view(input).substr(offset, n));
      offset += n;
      while ((status = parser.Next()) == Status::kCommand) {
        REQUIRE_FALSE(parser.args().empty());
        ++commands;
      }
      parser.Compact();
    }
    if (status == Status::kError) {
      ++errors;
      CHECK_FALSE(parser.error().empty());
    }
  }
  // The corpus exercises both paths.
  CHECK(commands > 100);
  CHECK(errors > 100);
}

TEST_CASE("Writer encodes RESP2 and RESP3 values", "[resp][writer]") {
  std::string out;
  RespWriter w2(out, 2);
  w2.SimpleString("OK");
  w2.Error("ERR bad\r\nthing");
  w2.Integer(-42);
  w2.Bulk("ab");
  w2.Null();
  w2.MapHeader(1);
  w2.WrongArity("get");
  CHECK(out ==
        "+OK\r\n-ERR bad  thing\r\n:-42\r\n$2\r\nab\r\n$-1\r\n*2\r\n"
        "-ERR wrong number of arguments for 'get' command\r\n");
  std::string out3;
  RespWriter w3(out3, 3);
  w3.Null();
  w3.MapHeader(2);
  w3.PushHeader(3);
  CHECK(out3 == "_\r\n%2\r\n>3\r\n");
}
