#pragma once
// Private to tessera::map: the text syntax of Predicate (see Predicate::Parse for the
// grammar). Split from predicate.cc so each file stays one concern.

#include <string_view>

#include "tessera/base/error.h"
#include "tessera/map/predicate.h"

namespace tessera::map::internal {

// Parses the SQL-like text into a predicate. Errors: kBadPredicate naming the column
// (1-based) and what was expected there.
base::Result<Predicate> ParsePredicateText(std::string_view text);

// True if `path` can be written bare (unquoted) in the text syntax: identifier segments
// separated by single dots, and not a keyword. Other paths are written "double quoted".
bool IsBarePath(std::string_view path);

}  // namespace tessera::map::internal
