#pragma once
// Test helpers of the storage tests: a fresh temporary directory removed at the end of the
// test, and whole-file reads and writes.

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tessera::storage::testing {

struct TempDir {
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "tessera-storage-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::filesystem::path path;
};

inline std::string ReadFile(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline void WriteFile(const std::filesystem::path& file, const std::string& bytes) {
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
}

}  // namespace tessera::storage::testing
