#include "tessera/topic/glob.h"

#include <catch2/catch.hpp>

using tessera::topic::GlobIsLiteral;
using tessera::topic::GlobMatch;

TEST_CASE("Glob star and question mark", "[topic][glob]") {
  CHECK(GlobMatch("*", ""));
  CHECK(GlobMatch("*", "anything"));
  CHECK(GlobMatch("news.*", "news.sport"));
  CHECK(GlobMatch("news.*", "news."));
  CHECK_FALSE(GlobMatch("news.*", "new"));
  CHECK(GlobMatch("h?llo", "hello"));
  CHECK_FALSE(GlobMatch("h?llo", "hllo"));
  CHECK(GlobMatch("*a*b", "xxaxxb"));
  CHECK_FALSE(GlobMatch("*a*b", "xxaxxbc"));
  CHECK(GlobMatch("a*b*c", "abbbc"));
  CHECK(GlobMatch("", ""));
  CHECK_FALSE(GlobMatch("", "a"));
}

TEST_CASE("Glob character classes", "[topic][glob]") {
  CHECK(GlobMatch("h[ae]llo", "hello"));
  CHECK(GlobMatch("h[ae]llo", "hallo"));
  CHECK_FALSE(GlobMatch("h[ae]llo", "hillo"));
  CHECK(GlobMatch("h[^e]llo", "hallo"));
  CHECK_FALSE(GlobMatch("h[^e]llo", "hello"));
  CHECK(GlobMatch("h[a-c]llo", "hbllo"));
  CHECK_FALSE(GlobMatch("h[a-c]llo", "hdllo"));
  CHECK(GlobMatch("key[0-9][0-9]", "key42"));
}

TEST_CASE("Glob escapes make metacharacters literal", "[topic][glob]") {
  CHECK(GlobMatch("a\\*b", "a*b"));
  CHECK_FALSE(GlobMatch("a\\*b", "axb"));
  CHECK(GlobMatch("what\\?", "what?"));
  CHECK_FALSE(GlobMatch("what\\?", "whatx"));
  CHECK(GlobMatch("[\\]]", "]"));
}

TEST_CASE("Pathological glob patterns finish quickly", "[topic][glob]") {
  const std::string text(5000, 'a');
  CHECK_FALSE(GlobMatch("*a*a*a*a*a*a*a*a*a*a*b", text));
  CHECK(GlobMatch("*a*a*a*a*a*a*a*a*a*a*", text));
}

TEST_CASE("GlobIsLiteral detects metacharacters", "[topic][glob]") {
  CHECK(GlobIsLiteral("plain.topic"));
  CHECK_FALSE(GlobIsLiteral("a*"));
  CHECK_FALSE(GlobIsLiteral("a?"));
  CHECK_FALSE(GlobIsLiteral("[a]"));
  CHECK_FALSE(GlobIsLiteral("a\\b"));
}
