#pragma once
// Cap'n Proto messages to and from byte strings with as few allocations and copies as the
// format allows; every codec of the native protocol (frames, map requests and results) uses
// these on its hot path (many of a map call's heap allocations on the client used to be made
// here).
//   - ScratchBuilder: a builder whose first segment is this thread's reusable scratch space,
//     so a small message costs no allocation (and no zeroing) of its first segment.
//   - AppendFlat: the message in the standard flat format (segment table, then the segments)
//     appended to a string: one copy, where messageToFlatArray + a string cost two.
//   - CanonicalFlatString: the message in canonical form, for values that are stored.
//   - AlignedWords: bytes as the word-aligned array a reader needs: the bytes themselves when
//     they are aligned (a string's heap buffer is), else a copy in this thread's reusable buffer.
//
// Thread-safety: each object uses its own thread's buffers; a second object alive on the same
// thread at once (nested use) falls back to its own allocation, so nesting is safe.

#include <capnp/message.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace tessera::wire {

class ScratchBuilder {
 public:
  // `size_hint_bytes`: about how many bytes the message carries (its blobs and texts).
  explicit ScratchBuilder(std::size_t size_hint_bytes);
  ~ScratchBuilder();
  ScratchBuilder(const ScratchBuilder&) = delete;
  ScratchBuilder& operator=(const ScratchBuilder&) = delete;

  capnp::MessageBuilder& message() { return *builder_; }

 private:
  bool owns_scratch_ = false;
  std::optional<capnp::MallocMessageBuilder> builder_;
};

// The root struct of `message` in Cap'n Proto's canonical form (one segment, objects in
// preorder, each struct without its trailing zero data words and null pointers), in the flat
// format: a one-segment table, then the words capnp::canonicalize gives. For values kept for a
// long time (a transaction id's marker holds one), where the form's smaller size pays.
// A message of one segment whose pointers are structs, lists of structs and lists of bytes
// (Data, Text) is copied in one pass; capnp::canonicalize (a copy, a second pass that checks
// it, two allocations: several times the cost for a small result) handles any other.
// `copied`, when given, says which of the two wrote it (true: the one-pass copy).
// REQUIRES: the root is a struct.
std::string CanonicalFlatString(capnp::MessageBuilder& message, bool* copied = nullptr);

// Appends `message` to `out` in the flat format capnp::messageToFlatArray produces.
void AppendFlat(capnp::MessageBuilder& message, std::string& out);
// The flat bytes of `message` as a string.
std::string FlatString(capnp::MessageBuilder& message);

class AlignedWords {
 public:
  // REQUIRES: bytes.size() is a multiple of 8 (callers check it and report their own error).
  explicit AlignedWords(std::string_view bytes);
  ~AlignedWords();
  AlignedWords(const AlignedWords&) = delete;
  AlignedWords& operator=(const AlignedWords&) = delete;

  kj::ArrayPtr<const capnp::word> words() const { return words_; }

 private:
  bool owns_scratch_ = false;
  kj::Array<capnp::word> own_;  // a copy when the thread's buffer is taken
  kj::ArrayPtr<const capnp::word> words_;
};

}  // namespace tessera::wire
