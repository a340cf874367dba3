#pragma once
// Counts the heap allocations of the whole grid-bench process (every thread, every library:
// malloc, calloc and realloc, which operator new and Cap'n Proto use), for the client's
// allocations per operation (issue 17). The counting functions wrap glibc's allocator and take
// its place for the process; a build with AddressSanitizer, which must own malloc itself,
// counts nothing.
//
// Thread-safety: the count is a relaxed atomic; safe from any thread.

#include <cstdint>

namespace tessera::tools::bench {

// Whether allocations are counted in this build.
bool AllocationsCounted();
// Allocations since the process started (0 when not counted).
std::uint64_t AllocationCount();

}  // namespace tessera::tools::bench
