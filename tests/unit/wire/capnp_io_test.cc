// wire/capnp_io.h: the allocation-saving helpers must produce exactly the bytes Cap'n Proto's
// own serializer does, leave nothing of one message in the next, and read aligned and unaligned
// input alike.
#include "tessera/wire/capnp_io.h"

#include <capnp/any.h>
#include <capnp/serialize.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

using namespace tessera::wire;

namespace {

// Fills `message` with a root list of `count` blobs of `size` bytes each (byte `fill` + index).
void FillBlobs(capnp::MessageBuilder& message, int count, std::size_t size, char fill) {
  auto list = message.initRoot<capnp::AnyPointer>().initAs<capnp::List<capnp::Data>>(count);
  for (int i = 0; i < count; ++i) {
    auto blob = list.init(static_cast<unsigned>(i), static_cast<unsigned>(size));
    std::memset(blob.begin(), fill + i, size);
  }
}

std::string Reference(int count, std::size_t size, char fill) {
  capnp::MallocMessageBuilder message;
  FillBlobs(message, count, size, fill);
  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

// Reads the blobs back from flat bytes.
std::vector<std::string> ReadBlobs(std::string_view bytes) {
  AlignedWords aligned(bytes);
  capnp::FlatArrayMessageReader reader(aligned.words());
  std::vector<std::string> out;
  for (auto blob : reader.getRoot<capnp::AnyPointer>().getAs<capnp::List<capnp::Data>>()) {
    out.emplace_back(reinterpret_cast<const char*>(blob.begin()), blob.size());
  }
  return out;
}

}  // namespace

TEST_CASE("AppendFlat writes the bytes messageToFlatArray writes for one segment or several") {
  for (auto [count, size] : {std::pair{1, std::size_t{10}}, std::pair{3, std::size_t{8000}}}) {
    CAPTURE(count, size);
    ScratchBuilder builder(64);  // a small hint: the larger message outgrows the first segment
    FillBlobs(builder.message(), count, size, 'a');
    if (count == 3) CHECK(builder.message().getSegmentsForOutput().size() > 1);
    auto words = capnp::messageToFlatArray(builder.message());
    const std::string expected(reinterpret_cast<const char*>(words.asBytes().begin()),
                               words.asBytes().size());
    std::string out = "prefix";
    AppendFlat(builder.message(), out);
    CHECK(out.substr(0, 6) == "prefix");
    CHECK(out.substr(6) == expected);
    const std::string flat = FlatString(builder.message());
    CHECK(flat == expected);
    std::vector<std::string> blobs;
    for (int i = 0; i < count; ++i) blobs.emplace_back(size, static_cast<char>('a' + i));
    CHECK(ReadBlobs(flat) == blobs);
  }
}

TEST_CASE("A ScratchBuilder leaves nothing of its message in the next one on the thread") {
  {
    ScratchBuilder first(4000);
    FillBlobs(first.message(), 2, 1500, 'x');
  }
  ScratchBuilder second(16);
  FillBlobs(second.message(), 1, 3, 'q');  // padding bytes must be zero, as in a fresh builder
  CHECK(FlatString(second.message()) == Reference(1, 3, 'q'));
}

TEST_CASE("ScratchBuilders alive at once on one thread do not share a segment") {
  ScratchBuilder outer(100);
  FillBlobs(outer.message(), 2, 50, 'o');
  {
    ScratchBuilder inner(100);
    FillBlobs(inner.message(), 2, 70, 'i');
    CHECK(FlatString(inner.message()) == Reference(2, 70, 'i'));
  }
  CHECK(FlatString(outer.message()) == Reference(2, 50, 'o'));
}

TEST_CASE("AlignedWords reads aligned bytes in place and unaligned bytes from a copy") {
  const std::string flat = Reference(2, 33, 'k');
  {
    AlignedWords aligned(flat);  // a string's heap buffer is aligned
    CHECK(reinterpret_cast<const char*>(aligned.words().begin()) == flat.data());
    CHECK(aligned.words().size() * 8 == flat.size());
  }
  std::string shifted = "abcd" + flat;  // as a frame body sits after its 4-byte length
  std::string_view unaligned(shifted.data() + 4, flat.size());
  REQUIRE(reinterpret_cast<std::uintptr_t>(unaligned.data()) % 8 != 0);
  {
    AlignedWords outer(unaligned);
    CHECK(reinterpret_cast<const char*>(outer.words().begin()) != unaligned.data());
    AlignedWords inner(unaligned);  // nested: a copy of its own
    CHECK(inner.words().begin() != outer.words().begin());
    CHECK(std::memcmp(inner.words().begin(), flat.data(), flat.size()) == 0);
    CHECK(std::memcmp(outer.words().begin(), flat.data(), flat.size()) == 0);
  }
  CHECK(ReadBlobs(unaligned) ==
        std::vector<std::string>{std::string(33, 'k'), std::string(33, 'l')});
  CHECK(ReadBlobs(flat) == ReadBlobs(unaligned));
}
