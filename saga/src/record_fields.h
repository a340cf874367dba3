#pragma once
// Reading a record's fields into a struct: Into(record.GetInt64("x"), out.x) stores the value
// or returns the field's error, so a decoder lists its fields once and stops at the first bad
// one.
//
// Thread-safety: a pure function.

#include <utility>

#include "tessera/base/error.h"

namespace tessera::saga {

template <typename T, typename U>
base::Result<void> Into(base::Result<T> value, U& out) {
  if (!value) return std::unexpected(value.error());
  out = static_cast<U>(std::move(*value));
  return {};
}

}  // namespace tessera::saga
