// wire/capnp_io.h: the allocation-saving helpers must produce exactly the bytes Cap'n Proto's
// own serializer (and canonicalize) does, leave nothing of one message in the next, and read
// aligned and unaligned input alike.
#include "tessera/wire/capnp_io.h"

#include <capnp/any.h>
#include <capnp/schema.capnp.h>
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

namespace {

// Cap'n Proto's own canonical form of `message`'s root struct, as CanonicalFlatString frames it.
std::string CapnpCanonical(capnp::MessageBuilder& message) {
  auto words = message.getRoot<capnp::AnyStruct>().asReader().canonicalize();
  std::string out(8, '\0');
  const auto size = static_cast<std::uint32_t>(words.size());
  std::memcpy(out.data() + 4, &size, 4);
  out.append(reinterpret_cast<const char*>(words.asBytes().begin()), words.asBytes().size());
  return out;
}

// A schema node with something of every kind the copy takes: texts and data (empty ones too), lists
// of structs whose elements differ in size (and empty ones), nested structs, an all-zero struct,
// fields with non-zero defaults and unset pointers between set ones. `seed` varies the shape.
void FillNode(capnp::schema::Node::Builder node, std::uint32_t seed) {
  auto next = [&seed] {
    seed = seed * 1103515245u + 12345u;
    return (seed >> 16) & 0x7fff;
  };
  node.setId(next() % 3 == 0 ? 0 : next());
  if (next() % 4 != 0) node.setDisplayName(std::string(next() % 20, 'n'));
  node.setDisplayNamePrefixLength(next() % 2);
  node.setScopeId(next() % 2 == 0 ? 0 : 77);
  const unsigned nested = next() % 4;
  if (next() % 5 != 0) {
    auto list = node.initNestedNodes(nested);
    for (unsigned i = 0; i < nested; ++i) {
      if (next() % 2 == 0) list[i].setName(std::string(next() % 10, 'a' + i));
      if (next() % 2 == 0) list[i].setId(i + 1);
    }
  }
  if (next() % 2 == 0) {
    auto annotations = node.initAnnotations(next() % 3);
    for (auto a : annotations) {
      if (next() % 2 == 0) a.setId(next());
      if (next() % 2 == 0) a.initValue().setText(std::string(next() % 9, 't'));
      if (next() % 3 == 0) a.initValue().initData(next() % 3);  // empty Data: no words at all
      if (next() % 3 == 0) a.initBrand();  // an all-zero struct: a pointer that is not null
    }
  }
  auto fields = node.initStruct().initFields(next() % 5);
  for (auto f : fields) {
    if (next() % 2 == 0) f.setName(std::string(next() % 12, 'f'));
    f.setCodeOrder(static_cast<std::uint16_t>(next() % 3));
    if (next() % 2 == 0) f.setDiscriminantValue(0);  // its default is 0xffff
    if (next() % 2 == 0) f.initSlot().setOffset(next());
  }
}

}  // namespace

TEST_CASE("CanonicalFlatString writes the bytes Cap'n Proto's canonicalize writes") {
  for (std::uint32_t seed = 0; seed < 300; ++seed) {
    CAPTURE(seed);
    ScratchBuilder builder(256);
    FillNode(builder.message().initRoot<capnp::schema::Node>(), seed);
    bool copied = false;
    const std::string canonical = CanonicalFlatString(builder.message(), &copied);
    CHECK(copied);  // the one-pass copy wrote it, not the fallback
    REQUIRE(canonical == CapnpCanonical(builder.message()));
    AlignedWords words(canonical);
    capnp::FlatArrayMessageReader reader(words.words());
    CHECK(reader.isCanonical());
  }
  // Empty data before other objects: its pointer's offset is where the next object starts.
  {
    capnp::MallocMessageBuilder message;
    auto root = message.initRoot<capnp::AnyPointer>().initAsAnyStruct(2, 5);
    root.getDataSection()[0] = 1;  // the second data word stays zero and is cut
    auto ptrs = root.getPointerSection();
    ptrs[0].initAs<capnp::Data>(0);
    ptrs[1].initAs<capnp::Data>(5)[4] = 'x';
    auto child = ptrs[3].initAsAnyStruct(1, 2);
    child.getPointerSection()[0].initAs<capnp::Data>(0);
    child.getPointerSection()[1].initAs<capnp::Text>(3);
    bool copied = false;
    const std::string canonical = CanonicalFlatString(message, &copied);
    CHECK(copied);
    CHECK(canonical == CapnpCanonical(message));
  }
  // An empty root struct: a pointer with offset -1 and no words after it.
  capnp::MallocMessageBuilder empty;
  empty.initRoot<capnp::schema::Node>();
  bool copied = false;
  CHECK(CanonicalFlatString(empty, &copied) == CapnpCanonical(empty));
  CHECK(copied);
  CHECK(CanonicalFlatString(empty).size() == 16);
}

TEST_CASE("CanonicalFlatString falls back to canonicalize for what its copy does not take") {
  // A list of numbers (not a pointer kind the copy takes).
  capnp::MallocMessageBuilder numbers;
  auto node = numbers.initRoot<capnp::schema::Node>();
  node.setDisplayName("n");
  node.initAnnotations(1)[0].initValue().initList().initAs<capnp::List<std::uint64_t>>(3).set(1, 9);
  bool copied = true;
  CHECK(CanonicalFlatString(numbers, &copied) == CapnpCanonical(numbers));
  CHECK_FALSE(copied);
  // Several segments: a first segment of one word.
  capnp::MallocMessageBuilder segments(1, capnp::AllocationStrategy::FIXED_SIZE);
  FillNode(segments.initRoot<capnp::schema::Node>(), 7);
  REQUIRE(segments.getSegmentsForOutput().size() > 1);
  copied = true;
  CHECK(CanonicalFlatString(segments, &copied) == CapnpCanonical(segments));
  CHECK_FALSE(copied);
}
