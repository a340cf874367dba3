// Two ways of counting, one per allocator (alloc_counter.h):
// - glibc's malloc: malloc, calloc and realloc are replaced with counting wrappers over glibc's
//   own entry points (__libc_malloc & co., which glibc exports for this purpose); free and the
//   aligned variants stay glibc's, which is consistent since the memory comes from the same
//   allocator.
// - another malloc linked in (TESSERA_BENCH_MALLOC_LIBRARY: jemalloc, as redis-benchmark
//   links): it owns malloc and free, so the counting wrappers are C++'s replaceable operator
//   new instead, over that malloc; operator delete stays the library's, which frees with free.
#include "alloc_counter.h"

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

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
[[maybe_unused]] void Count() { allocations.fetch_add(1, std::memory_order_relaxed); }
}  // namespace

#if defined(TESSERA_BENCH_ASAN)
bool AllocationsCounted() { return false; }
std::uint64_t AllocationCount() { return 0; }
#else
bool AllocationsCounted() { return true; }
std::uint64_t AllocationCount() { return allocations.load(std::memory_order_relaxed); }
#endif

}  // namespace tessera::tools::bench

#if !defined(TESSERA_BENCH_ASAN) && !defined(TESSERA_BENCH_MALLOC_LIBRARY)
extern "C" {
void* __libc_malloc(std::size_t size);
void* __libc_calloc(std::size_t count, std::size_t size);
void* __libc_realloc(void* pointer, std::size_t size);

void* malloc(std::size_t size) {
  tessera::tools::bench::Count();
  return __libc_malloc(size);
}
void* calloc(std::size_t count, std::size_t size) {
  tessera::tools::bench::Count();
  return __libc_calloc(count, size);
}
void* realloc(void* pointer, std::size_t size) {
  tessera::tools::bench::Count();
  return __libc_realloc(pointer, size);
}
}
#endif

#if !defined(TESSERA_BENCH_ASAN) && defined(TESSERA_BENCH_MALLOC_LIBRARY)
namespace {
void* Allocate(std::size_t size) {
  tessera::tools::bench::Count();
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* AllocateAligned(std::size_t size, std::align_val_t align) {
  tessera::tools::bench::Count();
  const auto a = static_cast<std::size_t>(align);
  // aligned_alloc wants a size that is a multiple of the alignment.
  if (void* p = std::aligned_alloc(a, (size + a - 1) / a * a)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t size) { return Allocate(size); }
void* operator new[](std::size_t size) { return Allocate(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return Allocate(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return Allocate(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new(std::size_t size, std::align_val_t align) {
  return AllocateAligned(size, align);
}
void* operator new[](std::size_t size, std::align_val_t align) {
  return AllocateAligned(size, align);
}
#endif
