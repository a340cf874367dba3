#include "tessera/wire/capnp_io.h"

#include <capnp/any.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "tessera/base/bytes.h"

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

// Copies a message's root into canonical form: the rules of Cap'n Proto's encoding spec
// ("Canonicalization") for the pointer kinds it takes; Copy returns false on any other (a far
// pointer, a list of primitives or pointers, a capability), and the caller falls back to
// capnp::canonicalize. The input is a segment this process built, but every offset is still
// range-checked, so a bad one means the fallback rather than a bad read.
class Canonicalizer {
 public:
  Canonicalizer(const std::uint64_t* in, std::size_t in_words) : in_(in), in_words_(in_words) {}

  // Writes the canonical words of the root struct (its pointer first) to `out`, zeroed, of
  // `capacity` words: how many, or 0 when this cannot (then the caller falls back).
  std::size_t Run(std::uint64_t* out, std::size_t capacity) {
    out_ = out;
    capacity_ = capacity;
    size_ = 0;
    // (A null root is left to the fallback, which reads it as an empty struct.)
    if (in_words_ == 0 || in_[0] == 0 || Kind(in_[0]) != kStruct || !Append(1)) return 0;
    return Copy(0, 0, 0) ? size_ : 0;
  }

 private:
  static constexpr std::uint32_t kStruct = 0, kList = 1;
  static constexpr std::uint32_t kByteElements = 2, kCompositeElements = 7;
  static constexpr int kMaxDepth = 64;
  // A zero-sized struct's pointer: offset -1, so that it is not null.
  static constexpr std::uint64_t kEmptyStruct = 0xfffffffcULL;

  static std::uint32_t Kind(std::uint64_t ptr) { return static_cast<std::uint32_t>(ptr) & 3; }
  static std::int64_t Offset(std::uint64_t ptr) {
    return static_cast<std::int32_t>(static_cast<std::uint32_t>(ptr)) >> 2;
  }
  static std::uint32_t Upper(std::uint64_t ptr) { return static_cast<std::uint32_t>(ptr >> 32); }
  static std::uint64_t Pointer(std::size_t at, std::size_t target, std::uint32_t kind,
                               std::uint32_t upper) {
    const auto offset = static_cast<std::uint32_t>(target - (at + 1));
    return static_cast<std::uint64_t>(upper) << 32 | (offset << 2 | kind);
  }

  bool InRange(std::int64_t start, std::uint64_t words) const {
    return start >= 0 && static_cast<std::uint64_t>(start) <= in_words_ &&
           words <= in_words_ - static_cast<std::uint64_t>(start);
  }
  // Reserves `words` at the end of the output: their index, or nullopt when they do not fit
  // (two pointers to one object in the input could make the copy larger than the input).
  std::optional<std::size_t> Append(std::size_t words) {
    if (words > capacity_ - size_) return std::nullopt;
    const std::size_t at = size_;
    size_ += words;
    return at;
  }
  // A section's size without its trailing zero words (data) or null pointers (pointers).
  unsigned Trimmed(std::size_t at, unsigned words) const {
    while (words > 0 && in_[at + words - 1] == 0) --words;
    return words;
  }

  // The object the pointer in_[from] refers to, appended to out_, which out_[to] points to.
  bool Copy(std::size_t from, std::size_t to, int depth) {
    const std::uint64_t ptr = in_[from];
    if (ptr == 0) return true;
    if (depth > kMaxDepth) return false;
    const std::int64_t target = static_cast<std::int64_t>(from) + 1 + Offset(ptr);
    if (Kind(ptr) == kStruct) {
      const unsigned data = Upper(ptr) & 0xffff, ptrs = Upper(ptr) >> 16;
      return InRange(target, data + ptrs) && CopyStruct(target, data, ptrs, to, depth);
    }
    if (Kind(ptr) != kList) return false;
    const std::uint32_t elements = Upper(ptr) & 7, count = Upper(ptr) >> 3;
    if (elements == kByteElements) {
      const std::size_t words = (count + 7) / 8;
      if (!InRange(target, words)) return false;
      const auto at = Append(words);
      if (!at) return false;
      std::memcpy(out_ + *at, in_ + target, count);
      out_[to] = Pointer(to, *at, kList, kByteElements | count << 3);
      return true;
    }
    if (elements == kCompositeElements) return CopyStructList(target, count, to, depth);
    return false;
  }

  bool CopyStruct(std::size_t at, unsigned data, unsigned ptrs, std::size_t to, int depth) {
    const unsigned d = Trimmed(at, data), p = Trimmed(at + data, ptrs);
    if (d == 0 && p == 0) {
      out_[to] = kEmptyStruct;
      return true;
    }
    const auto dst = Append(d + p);
    if (!dst) return false;
    std::memcpy(out_ + *dst, in_ + at, d * sizeof(std::uint64_t));
    out_[to] = Pointer(to, *dst, kStruct, d | p << 16);
    for (unsigned j = 0; j < p; ++j) {
      if (!Copy(at + data + j, *dst + d + j, depth + 1)) return false;
    }
    return true;
  }

  // A list of structs: a tag word (element count, each element's section sizes), then the
  // elements, each cut to the largest element's trimmed sizes; then their children.
  bool CopyStructList(std::int64_t tag_at, std::uint32_t list_words, std::size_t to, int depth) {
    if (!InRange(tag_at, 1)) return false;
    const std::uint64_t tag = in_[tag_at];
    if (Kind(tag) != kStruct) return false;
    const std::uint64_t count = static_cast<std::uint32_t>(tag) >> 2;
    const unsigned data = Upper(tag) & 0xffff, ptrs = Upper(tag) >> 16;
    const std::uint64_t step = data + ptrs;
    if (count * step > list_words || !InRange(tag_at + 1, count * step)) return false;
    const std::size_t first = static_cast<std::size_t>(tag_at) + 1;
    unsigned d = 0, p = 0;
    for (std::uint64_t i = 0; i < count; ++i) {
      d = std::max(d, Trimmed(first + i * step, data));
      p = std::max(p, Trimmed(first + i * step + data, ptrs));
    }
    const std::size_t out_step = d + p;
    const auto dst = Append(1 + count * out_step);
    if (!dst) return false;
    out_[*dst] = static_cast<std::uint64_t>(d | p << 16) << 32 | (count << 2 | kStruct);
    for (std::uint64_t i = 0; i < count; ++i) {
      std::memcpy(out_ + *dst + 1 + i * out_step, in_ + first + i * step,
                  d * sizeof(std::uint64_t));
    }
    out_[to] = Pointer(to, *dst, kList,
                       kCompositeElements | static_cast<std::uint32_t>(count * out_step) << 3);
    for (std::uint64_t i = 0; i < count; ++i) {
      for (unsigned j = 0; j < p; ++j) {
        if (!Copy(first + i * step + data + j, *dst + 1 + i * out_step + d + j, depth + 1)) {
          return false;
        }
      }
    }
    return true;
  }

  const std::uint64_t* in_;
  std::size_t in_words_;
  std::uint64_t* out_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t size_ = 0;
};

// The flat format's table for one segment of `words`: (count - 1) = 0, then the size, as
// little-endian uint32.
void PutOneSegmentTable(char* at, std::size_t words) {
  const auto size = static_cast<std::uint32_t>(words);
  std::memset(at, 0, kWordBytes);
  base::StoreLE(at + 4, size);
}

}  // namespace

std::string CanonicalFlatString(capnp::MessageBuilder& message, bool* copied) {
  static_assert(std::endian::native == std::endian::little, "words are read as little-endian");
  auto segments = message.getSegmentsForOutput();
  std::string out;
  if (segments.size() == 1) {
    // The copy is written straight into the string (a heap buffer, so word-aligned), sized
    // for the whole segment and then cut to what the copy took.
    const std::size_t capacity = segments[0].size();
    out.assign((capacity + 1) * kWordBytes, '\0');
    Canonicalizer canonicalizer(reinterpret_cast<const std::uint64_t*>(segments[0].begin()),
                                capacity);
    auto* words = reinterpret_cast<std::uint64_t*>(out.data() + kWordBytes);
    if (const std::size_t used = canonicalizer.Run(words, capacity); used > 0) {
      PutOneSegmentTable(out.data(), used);
      out.resize((used + 1) * kWordBytes);
      if (copied != nullptr) *copied = true;
      return out;
    }
  }
  if (copied != nullptr) *copied = false;
  const kj::Array<capnp::word> canonical =
      message.getRoot<capnp::AnyStruct>().asReader().canonicalize();
  const auto bytes = canonical.asBytes();
  out.assign(kWordBytes + bytes.size(), '\0');
  PutOneSegmentTable(out.data(), canonical.size());
  std::memcpy(out.data() + kWordBytes, bytes.begin(), bytes.size());
  return out;
}

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
