#pragma once
// Redis-style glob matching, shared by pattern subscriptions (PSUBSCRIBE) and key patterns
// (KEYS, SCAN MATCH) so both follow one rule:
//   *        any run of characters (also empty)
//   ?        exactly one character
//   [abc]    one of the listed characters; ranges [a-z]; [^a] or [!a] negates
//   \x       the character x literally (also inside brackets)
// Matching is bytewise and case-sensitive. An unterminated '[' matches the rest of the class
// as written, as Redis does.
//
// Thread-safety: pure function, safe from any thread.

#include <string_view>

namespace tessera::topic {

// True if `text` matches the whole `pattern`.
bool GlobMatch(std::string_view pattern, std::string_view text);

// True if `pattern` contains no glob metacharacter, so it can only match itself.
bool GlobIsLiteral(std::string_view pattern);

}  // namespace tessera::topic
