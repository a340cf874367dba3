#pragma once
// Counts the heap allocations of the whole grid-bench process (every thread, every library),
// for the client's allocations per operation. With glibc's malloc the counting
// functions wrap malloc, calloc and realloc (which operator new and Cap'n Proto use); with
// jemalloc linked in (the default release build, TESSERA_JEMALLOC, as redis-benchmark links
// it) they are C++'s operator new, which every C++ allocation of the client and Cap'n Proto
// goes through (the C library's own mallocs, rare on these paths, are not counted then). A
// build with AddressSanitizer, which must own malloc itself, counts nothing.
//
// Thread-safety: the count is a relaxed atomic; safe from any thread.

#include <cstdint>

namespace tessera::tools::bench {

// Whether allocations are counted in this build.
bool AllocationsCounted();
// Allocations since the process started (0 when not counted).
std::uint64_t AllocationCount();

}  // namespace tessera::tools::bench
