#include "tessera/wire/capnp_io.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace tessera::wire {
namespace {

constexpr std::size_t kWordBytes = sizeof(capnp::word);
// Scratch first segment: 16 KiB per thread. Larger messages get a segment of their own.
constexpr std::size_t kScratchWords = 2048;
// Decode buffer kept per thread: up to 64 KiB (a larger one is freed after use).
constexpr std::size_t kKeptAlignedWords = 8192;

struct ThreadBuffers {
  // Zeroed whenever not in use: MallocMessageBuilder requires a zeroed first segment and zeroes
  // the part it used when it is destroyed.
  // As uint64_t: capnp::word cannot be copied or moved, which std::vector needs.
  std::vector<std::uint64_t> scratch = std::vector<std::uint64_t>(kScratchWords, 0);
  bool scratch_taken = false;
  std::vector<std::uint64_t> aligned;
  bool aligned_taken = false;
};

ThreadBuffers& Buffers() {
  thread_local ThreadBuffers buffers;
  return buffers;
}

unsigned SegmentWords(std::size_t bytes) {
  return static_cast<unsigned>(std::min<std::size_t>(bytes / kWordBytes + 32, 1u << 20));
}

}  // namespace

ScratchBuilder::ScratchBuilder(std::size_t size_hint_bytes) {
  ThreadBuffers& buffers = Buffers();
  const unsigned words = SegmentWords(size_hint_bytes);
  if (!buffers.scratch_taken && words <= kScratchWords) {
    buffers.scratch_taken = true;
    owns_scratch_ = true;
    builder_.emplace(kj::arrayPtr(reinterpret_cast<capnp::word*>(buffers.scratch.data()),
                                  buffers.scratch.size()));
  } else {
    builder_.emplace(words);
  }
}

ScratchBuilder::~ScratchBuilder() {
  builder_.reset();  // zeroes the part of the scratch it used
  if (owns_scratch_) Buffers().scratch_taken = false;
}

void AppendFlat(capnp::MessageBuilder& message, std::string& out) {
  auto segments = message.getSegmentsForOutput();
  // Segment table: (count - 1), then each segment's size in words, as little-endian uint32,
  // padded to a whole word.
  const std::size_t table_entries = segments.size() + 1;
  const std::size_t table_bytes = (table_entries * 4 + kWordBytes - 1) / kWordBytes * kWordBytes;
  std::size_t total = table_bytes;
  for (const auto& segment : segments) total += segment.size() * kWordBytes;
  const std::size_t start = out.size();
  out.resize(start + total);
  char* p = out.data() + start;
  std::memset(p, 0, table_bytes);
  auto put32 = [&p](std::size_t index, std::uint32_t value) {
    const unsigned char bytes[4] = {
        static_cast<unsigned char>(value), static_cast<unsigned char>(value >> 8),
        static_cast<unsigned char>(value >> 16), static_cast<unsigned char>(value >> 24)};
    std::memcpy(p + index * 4, bytes, 4);
  };
  put32(0, static_cast<std::uint32_t>(segments.size() - 1));
  for (std::size_t i = 0; i < segments.size(); ++i) {
    put32(i + 1, static_cast<std::uint32_t>(segments[i].size()));
  }
  p += table_bytes;
  for (const auto& segment : segments) {
    std::memcpy(p, segment.begin(), segment.size() * kWordBytes);
    p += segment.size() * kWordBytes;
  }
}

std::string FlatString(capnp::MessageBuilder& message) {
  std::string out;
  AppendFlat(message, out);
  return out;
}

AlignedWords::AlignedWords(std::string_view bytes) {
  const std::size_t count = bytes.size() / kWordBytes;
  if (reinterpret_cast<std::uintptr_t>(bytes.data()) % alignof(capnp::word) == 0) {
    words_ = kj::arrayPtr(reinterpret_cast<const capnp::word*>(bytes.data()), count);
    return;
  }
  ThreadBuffers& buffers = Buffers();
  if (buffers.aligned_taken) {
    own_ = kj::heapArray<capnp::word>(count);
    std::memcpy(own_.begin(), bytes.data(), bytes.size());
    words_ = own_.asPtr();
    return;
  }
  buffers.aligned_taken = true;
  owns_scratch_ = true;
  if (buffers.aligned.size() < count) buffers.aligned.resize(count);
  std::memcpy(buffers.aligned.data(), bytes.data(), count * kWordBytes);
  words_ = kj::arrayPtr(reinterpret_cast<const capnp::word*>(buffers.aligned.data()), count);
}

AlignedWords::~AlignedWords() {
  if (!owns_scratch_) return;
  ThreadBuffers& buffers = Buffers();
  if (buffers.aligned.size() > kKeptAlignedWords) {
    std::vector<std::uint64_t>().swap(buffers.aligned);  // do not keep a large buffer forever
  }
  buffers.aligned_taken = false;
}

}  // namespace tessera::wire
