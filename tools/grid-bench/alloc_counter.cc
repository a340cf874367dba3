// Replaces malloc, calloc and realloc with counting wrappers over glibc's own entry points
// (__libc_malloc & co., which glibc exports for this purpose); free and the aligned variants
// stay glibc's, which is consistent since the memory comes from the same allocator.
#include "alloc_counter.h"

#include <atomic>
#include <cstddef>

// AddressSanitizer owns malloc: gcc says so with __SANITIZE_ADDRESS__, clang with a feature.
#if defined(__SANITIZE_ADDRESS__)
#define TESSERA_BENCH_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TESSERA_BENCH_ASAN 1
#endif
#endif

namespace tessera::tools::bench {
namespace {
std::atomic<std::uint64_t> allocations{0};
}  // namespace

#if defined(TESSERA_BENCH_ASAN)
bool AllocationsCounted() { return false; }
std::uint64_t AllocationCount() { return 0; }
#else
bool AllocationsCounted() { return true; }
std::uint64_t AllocationCount() { return allocations.load(std::memory_order_relaxed); }
#endif

}  // namespace tessera::tools::bench

#if !defined(TESSERA_BENCH_ASAN)
extern "C" {
void* __libc_malloc(std::size_t size);
void* __libc_calloc(std::size_t count, std::size_t size);
void* __libc_realloc(void* pointer, std::size_t size);

void* malloc(std::size_t size) {
  tessera::tools::bench::allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_malloc(size);
}
void* calloc(std::size_t count, std::size_t size) {
  tessera::tools::bench::allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_calloc(count, size);
}
void* realloc(void* pointer, std::size_t size) {
  tessera::tools::bench::allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_realloc(pointer, size);
}
}
#endif
