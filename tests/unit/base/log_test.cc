#include "tessera/base/log.h"

#include <spdlog/spdlog.h>
#include <catch2/catch.hpp>

#include <thread>
#include <vector>

namespace tessera::base {

TEST_CASE("Components created on many threads at once share one named logger") {
  // A member or client made on several threads concurrently asks for its logger at the same
  // moment; none may fail because another thread registered the name first.
  constexpr int kThreads = 8;
  std::vector<std::shared_ptr<spdlog::logger>> got(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&got, i] { got[i] = NamedLogger("log_test_race"); });
  }
  for (auto& t : threads) t.join();
  for (const auto& logger : got) {
    REQUIRE(logger != nullptr);
    CHECK(logger == got[0]);
  }
  CHECK(spdlog::get("log_test_race") == got[0]);
}

TEST_CASE("A logger the application registered under the name is used as is") {
  auto own = std::make_shared<spdlog::logger>("log_test_own");
  spdlog::register_logger(own);
  CHECK(NamedLogger("log_test_own") == own);
}

}  // namespace tessera::base
