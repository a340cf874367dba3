#include "tessera/base/unique_function.h"

#include <array>
#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

using tessera::base::UniqueFunction;

namespace {

// Counts its live copies, so a test sees every callable destroyed exactly once.
struct Counted {
  explicit Counted(int* live) : live(live) { ++*live; }
  Counted(Counted&& other) noexcept : live(other.live) { ++*live; }
  Counted(const Counted& other) : live(other.live) { ++*live; }
  ~Counted() { --*live; }
  int* live;
};

}  // namespace

TEST_CASE("UniqueFunction calls what it holds, inline or on the heap, and destroys it once",
          "[base][function]") {
  int live = 0;
  {
    // Small: kept inside.
    UniqueFunction<int(int), 64> small = [c = Counted(&live)](int x) { return x + 1; };
    CHECK(live == 1);
    CHECK(small(41) == 42);
    // Larger than the room: kept on the heap, called the same.
    std::array<char, 200> big_capture{};
    big_capture[199] = 7;
    UniqueFunction<int(int), 64> big = [c = Counted(&live), big_capture](int x) {
      return x + big_capture[199];
    };
    CHECK(live == 2);
    CHECK(big(1) == 8);
    // Moves leave the source empty and the callable alive once.
    UniqueFunction<int(int), 64> moved_small = std::move(small);
    UniqueFunction<int(int), 64> moved_big = std::move(big);
    CHECK_FALSE(small);  // NOLINT(bugprone-use-after-move): moved-from is empty, documented
    CHECK_FALSE(big);    // NOLINT(bugprone-use-after-move)
    CHECK(moved_small);
    CHECK(live == 2);
    CHECK(moved_small(1) == 2);
    CHECK(moved_big(1) == 8);
    // Assignment destroys what was held before.
    moved_small = std::move(moved_big);
    CHECK(live == 1);
    CHECK(moved_small(2) == 9);
    moved_small = nullptr;
    CHECK(live == 0);
    CHECK_FALSE(moved_small);
  }
  CHECK(live == 0);
}

TEST_CASE("UniqueFunction holds move-only callables and forwards move-only arguments",
          "[base][function]") {
  auto owned = std::make_unique<std::string>("payload");
  UniqueFunction<std::string(std::unique_ptr<int>), 64> f =
      [owned = std::move(owned)](std::unique_ptr<int> n) { return *owned + std::to_string(*n); };
  CHECK(f(std::make_unique<int>(3)) == "payload3");
  // A vector of them (as a connection's pending calls) moves them when it grows.
  std::vector<UniqueFunction<int(), 32>> calls;
  for (int i = 0; i < 100; ++i) calls.emplace_back([i] { return i; });
  int sum = 0;
  for (const auto& call : calls) sum += call();
  CHECK(sum == 4950);
}

TEST_CASE("An empty std::function or null pointer makes an empty UniqueFunction",
          "[base][function]") {
  std::function<void()> none;
  UniqueFunction<void()> from_none = none;
  CHECK_FALSE(from_none);
  void (*null_pointer)() = nullptr;
  UniqueFunction<void()> from_null = null_pointer;
  CHECK_FALSE(from_null);
  int calls = 0;
  std::function<void()> some = [&calls] { ++calls; };
  UniqueFunction<void()> from_some = some;
  REQUIRE(from_some);
  from_some();
  CHECK(calls == 1);
  UniqueFunction<void()> defaulted;
  CHECK_FALSE(defaulted);
}

TEST_CASE(
    "UniqueFunction drops a result for a void signature, calls through a const object, "
    "and survives being assigned what its own callable holds",
    "[base][function]") {
  int calls = 0;
  UniqueFunction<void(int)> drops = [&calls](int x) {
    ++calls;
    return x * 2;  // a result the void signature drops
  };
  drops(1);
  CHECK(calls == 1);
  // A callable with state, called through a const reference, keeps its state.
  const UniqueFunction<int()> counter = [n = 0]() mutable { return ++n; };
  CHECK(counter() == 1);
  CHECK(counter() == 2);
  // An empty UniqueFunction of another size converts to an empty one.
  UniqueFunction<void(int), 32> empty_other;
  UniqueFunction<void(int)> from_empty = std::move(empty_other);
  CHECK_FALSE(from_empty);
  // The next callback lives inside the current one and is assigned over it.
  int live = 0;
  UniqueFunction<int()> current;
  {
    UniqueFunction<int()> inner = [c = Counted(&live)] { return 7; };
    auto box = std::make_shared<UniqueFunction<int()>>(std::move(inner));
    current = [c = Counted(&live), box] { return 1; };
    CHECK(live == 2);
    UniqueFunction<int()>& next = *box;
    box.reset();  // now only the callable being replaced owns `next`
    current = std::move(next);
  }
  CHECK(live == 1);
  CHECK(current() == 7);
  current = nullptr;
  CHECK(live == 0);
}

// The client reuses a finished call's entry, whose callback is empty, for the next call: the
// assignment into an empty UniqueFunction is its own path (one relocation).
TEST_CASE("Assigning into an empty UniqueFunction takes the callable, inline or on the heap",
          "[base][function]") {
  int live = 0;
  {
    UniqueFunction<int(int), 64> slot;
    std::array<char, 200> big_capture{};
    big_capture[0] = 5;
    for (int round = 0; round < 3; ++round) {
      UniqueFunction<int(int), 64> small = [c = Counted(&live), round](int x) { return x + round; };
      UniqueFunction<int(int), 64> big = [c = Counted(&live), big_capture](int x) {
        return x * big_capture[0];
      };
      CHECK(live == 2);
      slot = std::move(small);  // slot is empty here
      CHECK_FALSE(small);       // NOLINT(bugprone-use-after-move): moved-from is empty
      CHECK(live == 2);
      CHECK(slot(10) == 10 + round);
      slot = nullptr;  // as a finished entry
      CHECK(live == 1);
      slot = std::move(big);
      CHECK_FALSE(big);  // NOLINT(bugprone-use-after-move)
      CHECK(live == 1);
      CHECK(slot(3) == 15);
      slot = nullptr;
      CHECK(live == 0);
    }
    // An empty one assigned to itself or from another empty one stays empty.
    UniqueFunction<int(int), 64> empty;
    auto& alias = slot;
    slot = std::move(alias);
    CHECK_FALSE(slot);
    slot = std::move(empty);
    CHECK_FALSE(slot);
  }
  CHECK(live == 0);
}
