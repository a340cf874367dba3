#pragma once
// UniqueFunction<R(Args...), kInlineBytes>: a move-only std::function with room for a callable
// of up to kInlineBytes inside it. libstdc++'s std::function keeps only trivially copyable
// callables of at most 16 bytes inline, so a callback that captures a shared_ptr and another
// callback costs a heap allocation per call; on the client's hot path (a call's reply
// callback, retries' state included) that was one of the heap allocations of every map get.
//
// Differences from std::function: move-only (so it holds move-only callables too); calling an
// empty one is a TESSERA_CHECK failure, not an exception; an empty std::function,
// UniqueFunction or null function pointer given to it makes an empty UniqueFunction. A callable
// larger than kInlineBytes, or one that may throw when moved, is kept on the heap.
//
// Thread-compatible, like std::function.

#include <cstddef>
#include <functional>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include "tessera/base/check.h"

namespace tessera::base {

template <typename Signature, std::size_t kInlineBytes = 64>
class UniqueFunction;

template <typename R, typename... Args, std::size_t kInlineBytes>
class UniqueFunction<R(Args...), kInlineBytes> {
 public:
  UniqueFunction() noexcept = default;
  UniqueFunction(std::nullptr_t) noexcept {}  // NOLINT: as std::function

  template <typename F, typename D = std::decay_t<F>,
            typename = std::enable_if_t<!std::is_same_v<D, UniqueFunction> &&
                                        std::is_invocable_r_v<R, D&, Args...>>>
  UniqueFunction(F&& f) {  // NOLINT: converts implicitly, as std::function does
    if constexpr (std::is_pointer_v<D> || std::is_member_pointer_v<D> || IsStdFunction<D>::value ||
                  IsUniqueFunction<D>::value) {
      if (!f) return;  // empty stays empty
    }
    if constexpr (kFitsInline<D>) {
      ::new (static_cast<void*>(storage_)) D(std::forward<F>(f));
      ops_ = &kInlineOps<D>;
    } else {
      *reinterpret_cast<D**>(storage_) = new D(std::forward<F>(f));
      ops_ = &kHeapOps<D>;
    }
  }

  UniqueFunction(UniqueFunction&& other) noexcept { TakeFrom(other); }
  UniqueFunction& operator=(UniqueFunction&& other) noexcept {
    if (ops_ == nullptr) {  // nothing held, so `other` cannot live inside it: one relocation
      TakeFrom(other);
      return *this;
    }
    // `other` may live inside the callable this one holds: taken before that is destroyed.
    UniqueFunction taken(std::move(other));
    Reset();
    TakeFrom(taken);
    return *this;
  }
  UniqueFunction& operator=(std::nullptr_t) noexcept {
    Reset();
    return *this;
  }
  UniqueFunction(const UniqueFunction&) = delete;
  UniqueFunction& operator=(const UniqueFunction&) = delete;
  ~UniqueFunction() { Reset(); }

  explicit operator bool() const noexcept { return ops_ != nullptr; }

  // REQUIRES: not empty.
  R operator()(Args... args) const {
    TESSERA_CHECK(ops_ != nullptr, "called an empty UniqueFunction");
    return ops_->invoke(storage_, std::forward<Args>(args)...);
  }

 private:
  template <typename T>
  struct IsStdFunction : std::false_type {};
  template <typename S>
  struct IsStdFunction<std::function<S>> : std::true_type {};
  template <typename T>
  struct IsUniqueFunction : std::false_type {};
  template <typename S, std::size_t N>
  struct IsUniqueFunction<UniqueFunction<S, N>> : std::true_type {};

  template <typename D>
  static constexpr bool kFitsInline =
      sizeof(D) <= kInlineBytes &&
      alignof(D) <= alignof(std::max_align_t) && std::is_nothrow_move_constructible_v<D>;

  // A callable's result is dropped for a void signature, as std::function drops it.
  template <typename D>
  static R Call(D& callable, Args&&... args) {
    if constexpr (std::is_void_v<R>) {
      std::invoke(callable, std::forward<Args>(args)...);
    } else {
      return std::invoke(callable, std::forward<Args>(args)...);
    }
  }

  struct Ops {
    R (*invoke)(void* storage, Args&&... args);
    // Moves the callable from `from` into `to` (raw storage) and ends it in `from`.
    void (*relocate)(void* from, void* to) noexcept;
    void (*destroy)(void* storage) noexcept;
  };

  template <typename D>
  static constexpr Ops kInlineOps{[](void* s, Args&&... args) -> R {
                                    return Call(*static_cast<D*>(s), std::forward<Args>(args)...);
                                  },
                                  [](void* from, void* to) noexcept {
                                    ::new (to) D(std::move(*static_cast<D*>(from)));
                                    static_cast<D*>(from)->~D();
                                  },
                                  [](void* s) noexcept { static_cast<D*>(s)->~D(); }};

  template <typename D>
  static constexpr Ops kHeapOps{
      [](void* s, Args&&... args) -> R {
        return Call(**static_cast<D**>(s), std::forward<Args>(args)...);
      },
      [](void* from, void* to) noexcept { *static_cast<D**>(to) = *static_cast<D**>(from); },
      [](void* s) noexcept { delete *static_cast<D**>(s); }};

  void TakeFrom(UniqueFunction& other) noexcept {
    if (other.ops_ == nullptr) return;
    other.ops_->relocate(other.storage_, storage_);
    ops_ = other.ops_;
    other.ops_ = nullptr;
  }
  void Reset() noexcept {
    if (ops_ == nullptr) return;
    const Ops* ops = ops_;
    ops_ = nullptr;
    ops->destroy(storage_);
  }

  static_assert(kInlineBytes >= sizeof(void*), "room for at least the heap pointer");
  // mutable: a call on a const UniqueFunction may change its callable's state, as with
  // std::function.
  alignas(std::max_align_t) mutable unsigned char storage_[kInlineBytes];
  const Ops* ops_ = nullptr;
};

}  // namespace tessera::base
