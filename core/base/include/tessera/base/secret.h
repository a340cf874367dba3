#pragma once
// Comparing secrets (a shared secret in a Hello, RESP AUTH, an HTTP bearer token) without
// telling an attacker, by the time the answer takes, how much of a guess was right.

#include <string_view>

namespace tessera::base {

// Whether `given` equals `expected`, in time that depends only on the two lengths, not on the
// bytes or where they first differ.
bool ConstantTimeEquals(std::string_view given, std::string_view expected);

}  // namespace tessera::base
