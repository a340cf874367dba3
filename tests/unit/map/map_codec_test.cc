#include "tessera/map/map_codec.h"

#include <capnp/serialize.h>

#include <catch2/catch.hpp>
#include <initializer_list>
#include <random>

#include "tessera/wire/capnp_io.h"
#include "tessera/wire/message.h"

using namespace tessera::map;  // NOLINT
using tessera::base::ErrorCode;
using tessera::record::GenericRecord;

namespace {
MapRequest FullRequest() {
  MapRequest rq;
  rq.op = MapOp::kExecuteOnEntries;
  rq.map_name = "orders";
  rq.key = std::string("k\0ey", 4);
  rq.value = "value";
  rq.expected = "expected";
  rq.options.ttl_ms = 1500;
  rq.options.max_idle_ms = 0;
  rq.options.keep_ttl = true;
  rq.entries = {{"a", "1"}, {"b", std::string("\0\1", 2)}};
  rq.keys = {"x", "y", ""};
  rq.processor = "increment";
  rq.argument = GenericRecord::Build("Arg").String("field", "n").Int64("delta", 3).Done();
  rq.predicate = Predicate::And(
      {Predicate::GreaterEqual("age", std::int64_t{18}), Predicate::Like("name", "A%")});
  rq.projection = Projection::kValues;
  return rq;
}
}  // namespace

TEST_CASE("Every op code with a row in the op table crosses the wire and no other does",
          "[map][codec][op_table]") {
  int rows = 0;
  for (int code = 0; code < 256; ++code) {
    const auto op = static_cast<MapOp>(code);
    MapRequest rq;
    rq.op = op;
    rq.map_name = "m";
    rq.key = "k";
    auto decoded = DecodeRequest(EncodeRequest(rq));
    if (SpecOf(op).scope == OpScope::kUnknown) {
      CAPTURE(code);
      REQUIRE_FALSE(decoded);
      CHECK(decoded.error().code() == ErrorCode::kBadRequest);
      CHECK(decoded.error().message() == "unknown map operation code " + std::to_string(code));
      continue;
    }
    ++rows;
    CAPTURE(MapOpName(op));
    REQUIRE(decoded);
    CHECK(decoded->op == op);
  }
  // Codes 1..37 less the unused 29: a row lost (or one added without this count) fails here.
  CHECK(rows == 36);
  CHECK(MapOpName(MapOp::kPutIfAbsent) == "putIfAbsent");
  CHECK(SpecOf(MapOp::kGetAll).scope == OpScope::kListedKeys);
  CHECK_FALSE(SpecOf(MapOp::kMergeEntries).writes);  // a merge heals a split: no quorum needed
}

TEST_CASE("MapRequest survives a round trip", "[map][codec]") {
  const MapRequest rq = FullRequest();
  auto decoded = DecodeRequest(EncodeRequest(rq));
  REQUIRE(decoded);
  CHECK(decoded->op == rq.op);
  CHECK(decoded->map_name == rq.map_name);
  CHECK(decoded->key == rq.key);
  CHECK(decoded->value == rq.value);
  CHECK(decoded->expected == rq.expected);
  CHECK(decoded->options == rq.options);
  CHECK(decoded->entries == rq.entries);
  CHECK(decoded->keys == rq.keys);
  CHECK(decoded->processor == rq.processor);
  CHECK(decoded->argument == rq.argument);
  CHECK(decoded->predicate.ToString() == rq.predicate.ToString());
  CHECK(decoded->projection == rq.projection);
}

TEST_CASE("a minimal MapRequest round trips with unset options", "[map][codec]") {
  MapRequest rq;
  rq.op = MapOp::kGet;
  rq.map_name = "m";
  rq.key = "k";
  auto decoded = DecodeRequest(EncodeRequest(rq));
  REQUIRE(decoded);
  CHECK_FALSE(decoded->options.ttl_ms.has_value());
  CHECK_FALSE(decoded->options.max_idle_ms.has_value());
  CHECK(decoded->argument == GenericRecord{});
  CHECK(decoded->predicate.kind() == Predicate::Kind::kTrue);
}

TEST_CASE("MapResult survives a round trip", "[map][codec]") {
  MapResult r;
  r.value = "";  // present but empty differs from absent
  r.flag = true;
  r.count = 42;
  r.entries = {{"k", "v"}};
  r.processor_result = GenericRecord::Build().Int64("value", 7).Done();
  r.processor_results = {{"a", GenericRecord::Build().Bool("swapped", true).Done()}};
  r.view = EntryView{1, 2, 3, 4, 5, 6, 7, 8};
  r.stats.entries = 9;
  r.stats.remove_latency_ns = 123;
  r.stats.evictions = 2;
  auto decoded = DecodeResult(EncodeResult(r));
  REQUIRE(decoded);
  CHECK(decoded->value == std::optional<std::string>(""));
  CHECK(decoded->flag);
  CHECK(decoded->count == 42);
  CHECK(decoded->entries == r.entries);
  CHECK(decoded->processor_result == r.processor_result);
  CHECK(decoded->processor_results == r.processor_results);
  CHECK(decoded->view == r.view);
  CHECK(decoded->stats == r.stats);
  auto empty = DecodeResult(EncodeResult(MapResult{}));
  REQUIRE(empty);
  CHECK_FALSE(empty->value.has_value());
  CHECK_FALSE(empty->view.has_value());
  CHECK_FALSE(empty->processor_result.has_value());
}

TEST_CASE("EntryEvent and ListenerOptions survive a round trip", "[map][codec]") {
  EntryEvent e;
  e.map_name = "m";
  e.type = EntryEventType::kUpdated;
  e.key = "k";
  e.value = "new";
  e.old_value = "old";
  e.partition_id = 270;
  auto decoded = DecodeEvent(EncodeEvent(e));
  REQUIRE(decoded);
  CHECK(decoded->map_name == e.map_name);
  CHECK(decoded->type == e.type);
  CHECK(decoded->key == e.key);
  CHECK(decoded->value == e.value);
  CHECK(decoded->old_value == e.old_value);
  CHECK(decoded->partition_id == e.partition_id);
  ListenerOptions o;
  o.include_values = false;
  o.types = {EntryEventType::kExpired, EntryEventType::kEvicted};
  o.key = "only";
  auto options = DecodeListenerOptions(EncodeListenerOptions(o));
  REQUIRE(options);
  CHECK(options->include_values == false);
  CHECK(options->types == o.types);
  CHECK(options->key == "only");
}

TEST_CASE("decoding garbage fails with kBadRequest and never crashes", "[map][codec]") {
  CHECK(DecodeRequest("").error().code() == ErrorCode::kBadRequest);
  CHECK(DecodeRequest("abc").error().code() == ErrorCode::kBadRequest);
  CHECK(DecodeResult(std::string(16, '\xff')).error().code() == ErrorCode::kBadRequest);
  CHECK(DecodeEvent(std::string(8, '\0')).has_value() == false);  // type 0 is unknown
  const std::string valid = EncodeRequest(FullRequest());
  std::mt19937 rng(7);
  int rejected = 0;
  for (int round = 0; round < 2000; ++round) {
    std::string bytes = valid;
    const int flips = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < flips; ++i) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    auto r = DecodeRequest(bytes);  // must return, valid or not
    if (!r) {
      ++rejected;
      CHECK((r.error().code() == ErrorCode::kBadRequest ||
             r.error().code() == ErrorCode::kBadPredicate));
    }
  }
  CHECK(rejected > 0);
  for (int round = 0; round < 500; ++round) {
    std::string noise(8 * (1 + rng() % 32), '\0');
    for (auto& c : noise) c = static_cast<char>(rng());
    auto r = DecodeRequest(noise);
    if (!r) CHECK(r.error().code() == ErrorCode::kBadRequest);
    (void)DecodeResult(noise);
    (void)DecodeEvent(noise);
    (void)DecodeListenerOptions(noise);
  }
}

TEST_CASE("decoding rejects unknown codes", "[map][codec]") {
  MapRequest rq;
  rq.op = static_cast<MapOp>(200);
  rq.map_name = "m";
  auto r = DecodeRequest(EncodeRequest(rq));
  REQUIRE_FALSE(r);
  CHECK(r.error().message().find("unknown map operation code 200") != std::string::npos);
  ListenerOptions o;
  o.types = {static_cast<EntryEventType>(77)};
  CHECK_FALSE(DecodeListenerOptions(EncodeListenerOptions(o)));
}

TEST_CASE("Replica updates and acknowledgements survive a round trip", "[map][codec]") {
  std::vector<ReplicaUpdate> updates;
  for (int kind = 1; kind <= 9; ++kind) {
    updates.push_back({static_cast<ReplicaUpdate::Kind>(kind), "orders",
                       static_cast<std::uint32_t>(100 + kind), std::string("k\0", 2), "value",
                       kind * 1000, kind * 10, static_cast<std::uint64_t>(kind) << 40, kind * 77,
                       kind * 3});
  }
  updates[3].digest = 0x9e3779b97f4a7c15;  // kPartitionComplete's point
  auto decoded = DecodeReplicaUpdates(EncodeReplicaUpdates(updates));
  REQUIRE(decoded);
  CHECK(*decoded == updates);

  CHECK(EncodeReplicaAck({}).empty());  // the common ack: an empty payload
  CHECK(DecodeReplicaAck("").value() == ReplicaAck{});
  const ReplicaAck stale{{0, 17, 270}, {}};
  CHECK(DecodeReplicaAck(EncodeReplicaAck(stale)).value() == stale);
  const ReplicaAck points{{}, {{5, 1ull << 40, 0xfeedface12345678}, {270, 1, 1}}};
  CHECK(DecodeReplicaAck(EncodeReplicaAck(points)).value() == points);
  CHECK(DecodeReplicaAck("abc").error().code() == ErrorCode::kBadRequest);

  updates.front().kind = static_cast<ReplicaUpdate::Kind>(10);
  auto unknown = DecodeReplicaUpdates(EncodeReplicaUpdates(updates));
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().message().find("unknown replica update kind 10") != std::string::npos);
}

TEST_CASE("A cleared MapRequest is a default one, its buffers kept", "[map][codec]") {
  MapRequest rq = FullRequest();
  rq.local_only = true;
  rq.value.assign(200, 'v');
  const std::size_t value_capacity = rq.value.capacity();
  rq.Clear();
  // Every encoded field equals a fresh request's, and so does the one that is not encoded.
  CHECK(EncodeRequest(rq) == EncodeRequest(MapRequest{}));
  CHECK_FALSE(rq.local_only);
  CHECK(rq.argument == GenericRecord{});
  CHECK(rq.value.capacity() == value_capacity);  // what reuse is for
}

TEST_CASE("A transaction and its result survive a round trip, bad ones are rejected",
          "[map][codec][tx]") {
  MapRequest rq;
  rq.op = MapOp::kTransact;
  rq.key = "cust-9";
  rq.transaction_id = "batch-7";
  rq.transaction.reserve(2);
  TxOp& first = rq.transaction.emplace_back();
  first.request = FullRequest();
  first.request.op = MapOp::kExecuteOnKey;
  first.condition = TxCondition::kVersionEquals;
  first.condition_version = 42;
  TxOp& second = rq.transaction.emplace_back();
  second.request.op = MapOp::kSet;
  second.request.map_name = "outbox";
  second.request.key = "e@cust-9";
  second.condition = TxCondition::kValueEquals;
  second.condition_value = std::string("\0x", 2);
  auto decoded = DecodeRequest(EncodeRequest(rq));
  REQUIRE(decoded);
  CHECK(decoded->key == "cust-9");
  CHECK(decoded->transaction_id == "batch-7");
  REQUIRE(decoded->transaction.size() == 2);
  CHECK(decoded->transaction[0].request.argument == first.request.argument);
  CHECK(decoded->transaction[0].request.predicate.ToString() == first.request.predicate.ToString());
  CHECK(decoded->transaction[0].condition == TxCondition::kVersionEquals);
  CHECK(decoded->transaction[0].condition_version == 42);
  CHECK(decoded->transaction[1].request.key == "e@cust-9");
  CHECK(decoded->transaction[1].condition_value == second.condition_value);

  MapResult result;
  result.flag = true;
  result.results.resize(2);
  result.results[0].value = "old";
  result.results[1].processor_result = GenericRecord::Build().Int64("value", 3).Done();
  auto back = DecodeResult(EncodeResult(result));
  REQUIRE(back);
  CHECK(back->flag);
  REQUIRE(back->results.size() == 2);
  CHECK(back->results[0].value == "old");
  CHECK(back->results[1].processor_result == result.results[1].processor_result);
  CHECK_FALSE(back->conflict.has_value());
  MapResult conflict;
  conflict.conflict = TxConflict{3, "orders", "k@p", "absent"};
  CHECK(DecodeResult(EncodeResult(conflict))->conflict == conflict.conflict);

  MapRequest bad = rq;
  bad.transaction[1].condition = static_cast<TxCondition>(9);
  auto refused = DecodeRequest(EncodeRequest(bad));
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message(), Catch::Contains("unknown transaction condition code 9"));
  MapRequest nested = rq;
  nested.transaction[1].request = rq;
  CHECK_FALSE(DecodeRequest(EncodeRequest(nested)));
}

TEST_CASE("A result kept as a marker reads back as a reply's encoding does in fewer bytes",
          "[map][codec][tx]") {
  MapResult full;
  full.value = "";
  full.flag = true;
  full.count = -5;
  full.entries = {{"k", "v"}, {"", std::string("\0", 1)}};
  full.processor_result = GenericRecord::Build().Int64("value", 7).Done();
  full.processor_results = {{"a", GenericRecord::Build().Bool("swapped", true).Done()}};
  full.view = EntryView{1, 2, 3, 4, 5, 6, 7, 8};
  full.stats.entries = 9;
  full.results.resize(2);
  full.results[0].value = "old";
  full.results[1].count = 3;
  full.conflict = TxConflict{1, "orders", "k@p", "absent"};
  MapResult three_sets;  // what a 3-set transaction's id marker holds: sets answer nothing
  three_sets.flag = true;
  three_sets.results.resize(3);
  // A batch of the most operations a member takes, each answering nothing: a reader charges
  // a list of empty structs a word per element against its limit (the message's size), so
  // the stored form must not shrink them to nothing.
  MapResult many_sets;
  many_sets.flag = true;
  many_sets.results.resize(1000);
  MapResult mixed;  // a list whose elements have different sizes
  mixed.flag = true;
  mixed.results.resize(4);
  mixed.results[2].value = "x";
  mixed.results[3].count = 1;
  MapResult conflict;
  conflict.conflict = TxConflict{0, "m", "", ""};
  const MapResult empty;
  for (const MapResult* r : std::initializer_list<const MapResult*>{&full, &three_sets, &many_sets,
                                                                    &mixed, &conflict, &empty}) {
    const std::string stored = EncodeStoredResult(*r);
    auto back = DecodeResult(stored);
    REQUIRE(back);
    // Decoded and encoded for a reply again, it is the reply the original makes.
    CHECK(EncodeResult(*back) == EncodeResult(*r));
    CHECK(stored.size() <= EncodeResult(*r).size());
    REQUIRE(stored.size() % 8 == 0);
    // Canonical Cap'n Proto: the one form of this content (what capnp::canonicalize gives).
    tessera::wire::AlignedWords words(stored);
    capnp::FlatArrayMessageReader reader(words.words());
    CHECK(reader.isCanonical());
  }
  CHECK(EncodeStoredResult(three_sets).size() == 112);
  CHECK(EncodeResult(three_sets).size() >= 300);
  // Damaged: a truncated stored result is refused, not misread.
  const std::string stored = EncodeStoredResult(three_sets);
  CHECK_FALSE(DecodeResult(stored.substr(0, stored.size() - 8)));
}

TEST_CASE("Lean map requests and results round-trip the hot keyed operations",
          "[map][codec][lean]") {
  using tessera::map::MapOp;
  std::string scratch;
  for (MapOp op : {MapOp::kGet, MapOp::kSet, MapOp::kPut, MapOp::kPutIfAbsent, MapOp::kRemove,
                   MapOp::kDelete, MapOp::kContainsKey, MapOp::kReplace}) {
    MapRequest rq;
    rq.op = op;
    rq.map_name = "orders";
    rq.key = std::string("k\0ey", 4);
    rq.value = std::string(300, 'v');
    if (op == MapOp::kPutIfAbsent) rq.options.ttl_ms = 30'000;
    if (op == MapOp::kSet) rq.options.max_idle_ms = 0;
    if (op == MapOp::kPut) rq.options.keep_ttl = true;
    REQUIRE(tessera::map::LeanEncodable(rq, 2));
    CHECK_FALSE(tessera::map::LeanEncodable(rq, 1));
    const std::string bytes = tessera::map::EncodeLeanRequest(rq);
    // With room for a frame's header: zero bytes, then the same encoding.
    CHECK(tessera::map::EncodeLeanRequest(rq, 21) == std::string(21, '\0') + bytes);
    auto back = tessera::map::DecodeLeanRequest(bytes);
    REQUIRE(back);
    CHECK(back->op == rq.op);
    CHECK(back->map_name == rq.map_name);
    CHECK(back->key == rq.key);
    CHECK(back->value == rq.value);
    CHECK(back->options == rq.options);
    // The client's async calls encode the same bytes from the fields themselves.
    CHECK(tessera::map::EncodeLeanKeyed(op, rq.map_name, rq.key, rq.value, rq.options, 21) ==
          std::string(21, '\0') + bytes);
    // And so into a scratch buffer that held a longer frame before (its bytes replaced).
    scratch.assign(1000, 'x');
    tessera::map::EncodeLeanKeyedInto(scratch, op, rq.map_name, rq.key, rq.value, rq.options, 21);
    CHECK(scratch == std::string(21, '\0') + bytes);
    // The prefetch hint reads the same map name and key, without decoding the rest.
    auto peeked = tessera::map::PeekLeanKey(bytes);
    REQUIRE(peeked);
    CHECK(peeked->map_name == rq.map_name);
    CHECK(peeked->key == rq.key);
  }
  MapResult result;
  result.value = std::string("old\0value", 9);
  result.flag = true;
  result.count = -3;
  auto lean = tessera::map::EncodeLeanResult(result);
  REQUIRE(lean);
  auto back = tessera::map::DecodeLeanResult(*lean);
  REQUIRE(back);
  CHECK(back->value == result.value);
  CHECK(back->flag);
  CHECK(back->count == -3);
  // Decoded from bytes given up (a frame's payload), the same result.
  auto taken = tessera::map::DecodeLeanResult(std::string(*lean));
  REQUIRE(taken);
  CHECK(taken->value == result.value);
  CHECK(taken->flag);
  CHECK(taken->count == -3);
  auto absent = tessera::map::DecodeLeanResult(*tessera::map::EncodeLeanResult(MapResult{}));
  REQUIRE(absent);
  CHECK_FALSE(absent->value.has_value());
  // After room for a frame's header: zero bytes, then the same encoding.
  auto with_room = tessera::map::EncodeLeanResult(result, 21);
  REQUIRE(with_room);
  CHECK(*with_room == std::string(21, '\0') + *lean);
  // A member's responses are encoded into a scratch buffer: the same bytes over what it held,
  // and a result lean frames cannot carry leaves it as it was.
  std::string out(500, 'x');
  REQUIRE(tessera::map::EncodeLeanResultInto(out, result, 21));
  CHECK(out == *with_room);
  MapResult with_view;
  with_view.view = tessera::map::EntryView{};
  CHECK_FALSE(tessera::map::EncodeLeanResultInto(out, with_view, 21));
  CHECK(out == *with_room);
}

TEST_CASE("What the lean encoding cannot carry stays with Cap'n Proto", "[map][codec][lean]") {
  MapRequest query;
  query.op = tessera::map::MapOp::kQuery;
  query.map_name = "m";
  CHECK_FALSE(tessera::map::LeanEncodable(query, tessera::wire::kMaxProtocolVersion));
  MapRequest processor;
  processor.op = tessera::map::MapOp::kGet;
  processor.map_name = "m";
  processor.processor = "x";
  CHECK_FALSE(tessera::map::LeanEncodable(processor, tessera::wire::kMaxProtocolVersion));
  auto refused = [](auto change) {
    MapRequest r;
    r.op = tessera::map::MapOp::kSet;
    r.map_name = "m";
    r.key = "k";
    change(r);
    return !tessera::map::LeanEncodable(r, tessera::wire::kMaxProtocolVersion);
  };
  CHECK(refused([](MapRequest& r) { r.expected = "e"; }));
  CHECK(refused([](MapRequest& r) { r.transaction_id = "t"; }));
  CHECK(refused([](MapRequest& r) { r.entries.emplace_back("a", "b"); }));
  CHECK(refused([](MapRequest& r) { r.keys.push_back("a"); }));
  CHECK(refused([](MapRequest& r) { r.argument = GenericRecord::Build().Int64("x", 1).Done(); }));
  CHECK(refused([](MapRequest& r) { r.projection = tessera::map::Projection::kKeys; }));
  CHECK(refused([](MapRequest& r) { r.op = tessera::map::MapOp::kReplaceIfSame; }));
  CHECK(refused([](MapRequest& r) { r.op = tessera::map::MapOp::kTransact; }));
  CHECK_FALSE(refused([](MapRequest& r) { r.options.ttl_ms = 0; }));
  MapResult with_view;
  with_view.view = tessera::map::EntryView{};
  CHECK_FALSE(tessera::map::EncodeLeanResult(with_view).has_value());
  CHECK_FALSE(tessera::map::EncodeLeanResult(with_view, 21).has_value());
  MapResult with_stats;
  with_stats.stats.entries = 1;
  CHECK_FALSE(tessera::map::EncodeLeanResult(with_stats).has_value());
  // A stream append fits from version 3 on, with integer arguments only.
  MapRequest append;
  append.op = tessera::map::MapOp::kStreamAppend;
  append.map_name = "__streams";
  append.entries.emplace_back("k", "v");
  CHECK_FALSE(tessera::map::LeanEncodable(append, 2));
  CHECK(tessera::map::LeanEncodable(append, 3));
  append.argument = GenericRecord::Build().Int64("max_events", 1).String("x", "y").Done();
  CHECK_FALSE(tessera::map::LeanEncodable(append, 3));
  append.argument = GenericRecord::Build("Limits").Int64("max_events", 1).Done();
  CHECK_FALSE(tessera::map::LeanEncodable(append, 3));
}

TEST_CASE("Lean stream appends and results with entries round-trip (protocol version 3)",
          "[map][codec][lean]") {
  MapRequest rq;
  rq.op = tessera::map::MapOp::kStreamAppend;
  rq.map_name = "__streams";
  rq.key = "meta@orders#3";
  rq.entries = {{"order-1", std::string("pay\0load", 8)}, {"order-2", ""}};
  rq.keys = {"evt-1", ""};
  rq.argument = GenericRecord::Build()
                    .Int64("max_events", 100'000)
                    .Int64("max_bytes", 1LL << 40)
                    .Int64("max_age_ms", -1)
                    .Done();
  REQUIRE(tessera::map::LeanEncodable(rq, 3));
  const std::string bytes = tessera::map::EncodeLeanRequest(rq);
  auto back = tessera::map::DecodeLeanRequest(bytes);
  REQUIRE(back);
  CHECK(back->op == rq.op);
  CHECK(back->map_name == rq.map_name);
  CHECK(back->key == rq.key);
  CHECK(back->entries == rq.entries);
  CHECK(back->keys == rq.keys);
  CHECK(back->argument == rq.argument);
  CHECK(back->argument.GetInt64("max_bytes").value() == (1LL << 40));
  // Without ids and arguments: only the entries travel.
  MapRequest bare = rq;
  bare.keys.clear();
  bare.argument = GenericRecord();
  auto bare_back = tessera::map::DecodeLeanRequest(tessera::map::EncodeLeanRequest(bare));
  REQUIRE(bare_back);
  CHECK(bare_back->entries == rq.entries);
  CHECK(bare_back->keys.empty());
  CHECK(bare_back->argument.fields().empty());
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    CHECK_FALSE(tessera::map::DecodeLeanRequest(bytes.substr(0, cut)));
  }
  std::string unknown_flag = bytes;
  unknown_flag[1] = static_cast<char>(unknown_flag[1] | 0x40);
  CHECK_FALSE(tessera::map::DecodeLeanRequest(unknown_flag));
  // Decoded one after another into one request (a member reuses one): each comes out as a
  // fresh decode does, nothing left from the one before, after a failed decode too.
  MapRequest get;
  get.op = tessera::map::MapOp::kGet;
  get.map_name = "m";
  get.key = "a-key-longer-than-fifteen-bytes";
  MapRequest set = get;
  set.op = tessera::map::MapOp::kSet;
  set.value = std::string(200, 'v');
  set.options.ttl_ms = 5'000;
  // Appends that keep, or do not keep, the one before's argument names, entries and ids.
  auto int_args = [](std::initializer_list<std::pair<const char*, std::int64_t>> fields) {
    auto builder = GenericRecord::Build();
    for (const auto& [name, value] : fields) builder.Int64(name, value);
    return builder.Done();
  };
  MapRequest next = rq;
  next.entries = {{"o", std::string(300, 'p')}};
  next.keys = {"an-event-id-longer-than-fifteen-bytes"};
  next.argument = int_args({{"max_events", 7}, {"max_bytes", 9}, {"max_age_ms", 0}});
  MapRequest reordered = next;
  reordered.argument = int_args({{"max_bytes", 1}, {"max_events", 2}, {"max_age_ms", 3}});
  MapRequest fewer = next;
  fewer.argument = int_args({{"max_events", 5}, {"max_bytes", 6}});
  MapRequest renamed = next;
  renamed.argument = int_args({{"max_events", 1}, {"max_bytez", 2}, {"max_age_ms", 3}});
  const std::string next_bytes = tessera::map::EncodeLeanRequest(next);
  const std::string next_cut = next_bytes.substr(0, next_bytes.size() - 3);  // in an argument
  MapRequest reused;
  for (const std::string& encoded :
       {bytes, tessera::map::EncodeLeanRequest(get), unknown_flag,
        tessera::map::EncodeLeanRequest(set), tessera::map::EncodeLeanRequest(get),
        tessera::map::EncodeLeanRequest(bare), bytes, next_bytes, bytes, next_cut, next_bytes,
        tessera::map::EncodeLeanRequest(reordered), tessera::map::EncodeLeanRequest(fewer),
        tessera::map::EncodeLeanRequest(next), tessera::map::EncodeLeanRequest(renamed),
        tessera::map::EncodeLeanRequest(bare), next_bytes}) {
    auto fresh = tessera::map::DecodeLeanRequest(encoded);
    auto into = tessera::map::DecodeLeanRequestInto(encoded, reused);
    REQUIRE(into.has_value() == fresh.has_value());
    if (!fresh) continue;
    CHECK(reused.op == fresh->op);
    CHECK(reused.map_name == fresh->map_name);
    CHECK(reused.key == fresh->key);
    CHECK(reused.value == fresh->value);
    CHECK(reused.options == fresh->options);
    CHECK(reused.entries == fresh->entries);
    CHECK(reused.keys == fresh->keys);
    CHECK(reused.argument == fresh->argument);
  }
  // A keyed operation with entries is not something an encoder produces.
  std::string keyed = bytes;
  keyed[0] = static_cast<char>(tessera::map::MapOp::kSet);
  auto refused = tessera::map::DecodeLeanRequest(keyed);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message(), Catch::Contains("cannot carry"));

  MapResult result;
  result.entries = {{"17", ""}, {"9", "dup"}};
  result.count = 2;
  result.value = "v";
  auto lean = tessera::map::EncodeLeanResult(result);
  REQUIRE(lean);
  auto result_back = tessera::map::DecodeLeanResult(*lean);
  REQUIRE(result_back);
  CHECK(result_back->entries == result.entries);
  CHECK(result_back->count == 2);
  CHECK(result_back->value == result.value);
  auto taken = tessera::map::DecodeLeanResult(std::string(*lean));
  REQUIRE(taken);
  CHECK(taken->entries == result.entries);
  CHECK(taken->count == 2);
  CHECK(taken->value == result.value);
  // The value is the rest of the payload (the frame's length bounds it): every cut before it
  // is refused.
  for (std::size_t cut = 0; cut < lean->size() - result.value->size(); ++cut) {
    CHECK_FALSE(tessera::map::DecodeLeanResult(lean->substr(0, cut)));
  }
}

TEST_CASE("Forged lean counts are refused before anything is reserved", "[map][codec][lean]") {
  MapRequest rq;
  rq.op = tessera::map::MapOp::kStreamAppend;
  rq.map_name = "s";
  rq.entries = {{"k", "v"}};
  const std::string good = tessera::map::EncodeLeanRequest(rq);
  // The entry count follows op, flags and three empty-or-short strings.
  const std::size_t at = 2 + (4 + 1) + 4 + 4;
  REQUIRE(good.size() == at + 4 + (4 + 1) + (4 + 1));
  std::string huge = good;
  huge[at + 3] = '\x7f';  // ~2 billion entries in 10 bytes
  CHECK_FALSE(tessera::map::DecodeLeanRequest(huge));
  std::string zero = good.substr(0, at) + std::string(4, '\0');
  CHECK_FALSE(tessera::map::DecodeLeanRequest(zero));  // an empty list is sent without its flag
  // The same argument name twice is refused.
  MapRequest twice = rq;
  twice.argument = GenericRecord::Build().Int64("a", 1).Int64("b", 2).Done();
  std::string bytes = tessera::map::EncodeLeanRequest(twice);
  const auto b = bytes.rfind('b');
  bytes[b] = 'a';
  auto refused = tessera::map::DecodeLeanRequest(bytes);
  CHECK_FALSE(refused);
}

TEST_CASE("Damaged lean payloads are refused without crashing", "[map][codec][lean]") {
  MapRequest rq;
  rq.op = tessera::map::MapOp::kSet;
  rq.map_name = "m";
  rq.key = "k";
  rq.value = "v";
  const std::string good = tessera::map::EncodeLeanRequest(rq);
  for (std::size_t cut = 0; cut < good.size(); ++cut) {
    CHECK_FALSE(tessera::map::DecodeLeanRequest(good.substr(0, cut)));
    // The prefetch hint needs op, flags, map name and key only: it reads them once they are
    // all there and nothing before.
    const bool has_key = cut >= 2 + 4 + rq.map_name.size() + 4 + rq.key.size();
    CHECK(tessera::map::PeekLeanKey(good.substr(0, cut)).has_value() == has_key);
  }
  CHECK_FALSE(tessera::map::DecodeLeanRequest(good + "x"));
  std::string bad_op = good;
  bad_op[0] = static_cast<char>(tessera::map::MapOp::kQuery);
  auto refused = tessera::map::DecodeLeanRequest(bad_op);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message().find("cannot carry") != std::string::npos);
  CHECK_FALSE(tessera::map::PeekLeanKey(bad_op));  // not a keyed operation: no hint
  // Noise: whatever decodes re-encodes to the same bytes (nothing is read loosely).
  std::mt19937 rng(7);
  int decoded = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string noise(rng() % 40, '\0');
    for (auto& c : noise) c = static_cast<char>(rng());
    if (auto r = tessera::map::DecodeLeanRequest(noise)) {
      ++decoded;
      CHECK(tessera::map::EncodeLeanRequest(*r) == noise);
    }
    if (auto r = tessera::map::DecodeLeanResult(noise)) {
      CHECK(*tessera::map::EncodeLeanResult(*r) == noise);
    }
  }
  CHECK(decoded < 50);
  CHECK_FALSE(tessera::map::DecodeLeanResult(std::string("\x08", 1) + std::string(8, '\0')));
}

namespace {
// A batch with every operation and precondition a lean transaction carries.
MapRequest LeanableTransaction() {
  MapRequest rq;
  rq.op = MapOp::kTransact;
  rq.key = "cust-9";
  rq.transaction_id = "0123456789abcdef0123456789abcdef";
  auto add = [&rq](MapOp op, std::string key, std::string value = {}) -> TxOp& {
    TxOp& op_ = rq.transaction.emplace_back();
    op_.request.op = op;
    op_.request.map_name = "orders";
    op_.request.key = std::move(key);
    op_.request.value = std::move(value);
    return op_;
  };
  TxOp& set = add(MapOp::kSet, "o-1@cust-9", std::string("pending\0", 8));
  set.request.options.ttl_ms = 60'000;
  set.condition = TxCondition::kAbsent;
  add(MapOp::kPutIfAbsent, "o-2@cust-9", "x").request.options.max_idle_ms = 0;
  TxOp& replace = add(MapOp::kReplaceIfSame, "o-3@cust-9", "new");
  replace.request.expected = "old";
  replace.condition = TxCondition::kValueEquals;
  replace.condition_value = "old";
  add(MapOp::kRemoveIfSame, "o-4@cust-9").request.expected = "gone";
  add(MapOp::kSetTtl, "o-5@cust-9").request.options.ttl_ms = 5;
  TxOp& get = add(MapOp::kGet, "o-6@cust-9");
  get.condition = TxCondition::kVersionEquals;
  get.condition_version = 7;
  add(MapOp::kGetEntryView, "o-7@cust-9").condition = TxCondition::kPresent;
  add(MapOp::kDelete, "cust-9").request.options.keep_ttl = true;
  return rq;
}
}  // namespace

TEST_CASE("Lean transactions and their results round-trip like Cap'n Proto ones (version 4)",
          "[map][codec][lean][tx]") {
  const MapRequest rq = LeanableTransaction();
  CHECK(LeanEncodable(rq, tessera::wire::kLeanTxProtocolVersion));
  CHECK_FALSE(LeanEncodable(rq, tessera::wire::kLeanEntriesProtocolVersion));
  // The lean path decodes to what the plain one does: the same request, field by field (its
  // Cap'n Proto encoding is compared, which covers every field).
  const std::string lean = EncodeLeanRequest(rq);
  auto back = DecodeLeanRequest(lean);
  REQUIRE(back);
  CHECK(EncodeRequest(*back) == EncodeRequest(rq));
  REQUIRE(back->transaction.size() == rq.transaction.size());
  CHECK(back->transaction[0].request.value == std::string("pending\0", 8));
  CHECK(back->transaction[0].request.options.ttl_ms == 60'000);
  CHECK(back->transaction[1].request.options.max_idle_ms == 0);
  CHECK(back->transaction[2].request.expected == "old");
  CHECK(back->transaction[2].condition_value == "old");
  CHECK(back->transaction[5].condition_version == 7);
  CHECK(back->transaction[7].request.options.keep_ttl);
  // Into a request that held another batch before (more operations, other preconditions,
  // values, options and fields): the same, nothing of the other left.
  MapRequest reused = rq;
  for (TxOp& op : reused.transaction) {
    op.condition = TxCondition::kVersionEquals;
    op.condition_version = 99;
    op.condition_value = "stale";
    op.request.expected = "stale";
    op.request.options.ttl_ms = 1;
    op.request.options.keep_ttl = true;
    op.request.value = "stale";
  }
  const TxOp first_op = reused.transaction[0];  // (not an element of the vector it grows)
  reused.transaction.resize(12, first_op);
  reused.transaction_id = "stale";
  reused.options.ttl_ms = 3;
  REQUIRE(DecodeLeanRequestInto(lean, reused));
  CHECK(EncodeRequest(reused) == EncodeRequest(rq));
  CHECK(reused.transaction[1].condition_value.empty());
  CHECK_FALSE(reused.transaction[1].request.options.keep_ttl);
  // At most 4,096 operations travel lean: a larger batch goes as Cap'n Proto, and a lean
  // count above that is refused before the operations are built.
  MapRequest big = rq;
  big.transaction.resize(4'096, rq.transaction[1]);
  CHECK(LeanEncodable(big, tessera::wire::kLeanTxProtocolVersion));
  big.transaction.push_back(rq.transaction[1]);
  CHECK_FALSE(LeanEncodable(big, tessera::wire::kLeanTxProtocolVersion));
  std::string too_many = EncodeLeanRequest(big);  // the encoder itself has no limit
  auto refused_count = DecodeLeanRequest(too_many);
  REQUIRE_FALSE(refused_count);
  CHECK(refused_count.error().code() == ErrorCode::kBadRequest);
  // Without an id, and after room for a frame's header.
  MapRequest no_id = rq;
  no_id.transaction_id.clear();
  const std::string with_room = EncodeLeanRequest(no_id, 21);
  REQUIRE(with_room.substr(0, 21) == std::string(21, '\0'));
  auto no_id_back = DecodeLeanRequest(std::string_view(with_room).substr(21));
  REQUIRE(no_id_back);
  CHECK(EncodeRequest(*no_id_back) == EncodeRequest(no_id));

  // What it does not carry stays with Cap'n Proto: entry processors, an empty batch, a batch
  // in a batch, fields a keyed operation does not have.
  auto refused = [&rq](auto change) {
    MapRequest r = rq;
    change(r);
    return !LeanEncodable(r, tessera::wire::kMaxProtocolVersion);
  };
  CHECK(refused([](MapRequest& r) { r.transaction[3].request.op = MapOp::kExecuteOnKey; }));
  CHECK(refused([](MapRequest& r) { r.transaction[3].request.processor = "increment"; }));
  CHECK(refused([](MapRequest& r) { r.transaction.clear(); }));
  CHECK(refused([](MapRequest& r) { r.transaction[0].request.transaction_id = "x"; }));
  CHECK(refused([](MapRequest& r) { r.transaction[1].request.keys.push_back("k"); }));
  CHECK(refused([](MapRequest& r) { r.expected = "x"; }));

  // Results: a committed batch's, with values, flags and counts, and a conflict's.
  MapResult result;
  result.flag = true;
  result.results.resize(4);
  result.results[0].value = "old";
  result.results[1].flag = true;
  result.results[2].count = -4;
  result.results[3].value = std::string("\0\1", 2);
  result.results[3].entries = {{"a", "b"}};
  for (const MapResult& r : {result, [] {
                               MapResult c;
                               c.conflict = TxConflict{3, "orders", "o-4@cust-9", "absent"};
                               return c;
                             }()}) {
    auto encoded = EncodeLeanResult(r);
    REQUIRE(encoded);
    auto decoded = DecodeLeanResult(*encoded);
    REQUIRE(decoded);
    CHECK(EncodeResult(*decoded) == EncodeResult(r));
    auto taken = DecodeLeanResult(std::string(*encoded));
    REQUIRE(taken);
    CHECK(EncodeResult(*taken) == EncodeResult(r));
  }
  // A result a lean frame cannot carry: then the Cap'n Proto frame (EncodeResult).
  MapResult with_processor = result;
  with_processor.results[1].processor_result = GenericRecord::Build().Int64("v", 1).Done();
  CHECK_FALSE(EncodeLeanResult(with_processor));
  MapResult with_view = result;
  with_view.results[2].view = EntryView{};
  CHECK_FALSE(EncodeLeanResult(with_view));
}

TEST_CASE("Damaged lean transactions are refused, naming the problem", "[map][codec][lean][tx]") {
  const MapRequest rq = LeanableTransaction();
  const std::string good = EncodeLeanRequest(rq);
  for (std::size_t cut = 0; cut < good.size(); ++cut) {
    auto r = DecodeLeanRequest(good.substr(0, cut));
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == ErrorCode::kBadRequest);
  }
  CHECK_FALSE(DecodeLeanRequest(good + "x"));
  // The first operation starts after the head (op, flags, three strings), the id and the
  // count: its op, then its flags.
  const std::size_t first = 2 + (4 + 0) + (4 + rq.key.size()) + 4 + (4 + 32) + 4;
  std::string bad_op = good;
  bad_op[first] = static_cast<char>(MapOp::kQuery);
  CHECK_FALSE(DecodeLeanRequest(bad_op));
  std::string bad_flags = good;
  bad_flags[first + 1] = static_cast<char>(bad_flags[first + 1] | 8);  // entries: not here
  CHECK_FALSE(DecodeLeanRequest(bad_flags));
  // A transaction's bit on another operation.
  std::string not_tx = good;
  not_tx[0] = static_cast<char>(MapOp::kSet);
  auto refused = DecodeLeanRequest(not_tx);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message(), Catch::Contains("cannot carry"));
  // A forged count is refused before anything is reserved.
  std::string huge = good;
  huge[first - 1] = '\x7f';
  CHECK_FALSE(DecodeLeanRequest(huge));
  // An unknown precondition code (after the first operation's head: its strings and TTL).
  MapRequest one;
  one.op = MapOp::kTransact;
  one.key = "p";
  TxOp& op = one.transaction.emplace_back();
  op.request.op = MapOp::kSet;
  op.request.key = "k@p";
  std::string bytes = EncodeLeanRequest(one);
  bytes.back() = '\x09';  // the last byte is the precondition
  CHECK_FALSE(DecodeLeanRequest(bytes));
  // Nested results go one level deep only: a well-formed result of a result of a result is
  // refused.
  const std::string leaf = *EncodeLeanResult(MapResult{});  // flags and count: 9 bytes
  auto wrap = [](const std::string& inner) {
    std::string out(1, '\x08');  // flags: results
    out.append(8, '\0');         // count
    out.append("\x01\0\0\0", 4);
    const auto length = static_cast<std::uint32_t>(inner.size());
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(length >> (8 * i)));
    return out + inner;
  };
  REQUIRE(DecodeLeanResult(wrap(leaf)));  // one level: fine
  CHECK_FALSE(DecodeLeanResult(wrap(wrap(leaf))));
  // A forged chain of 200,000 results nested in each other (3.4 MB, within a frame) is
  // refused at the second level, not followed down (that recursion would overflow the stack).
  const std::string innermost = *EncodeLeanResult(MapResult{});  // flags and count: 9 bytes
  constexpr int kLevels = 200'000;
  constexpr std::size_t kHeader = 1 + 8 + 4 + 4;  // flags, count, one result, its length
  std::string chain;
  chain.reserve(kLevels * kHeader + innermost.size());
  for (int level = kLevels; level >= 1; --level) {  // outermost first
    chain.push_back(8);                             // flags: results
    chain.append(8, '\0');                          // count
    chain.append("\x01\0\0\0", 4);                  // one result
    const auto length =  // what follows this header: the levels inside, then the innermost
        static_cast<std::uint32_t>((level - 1) * kHeader + innermost.size());
    for (int i = 0; i < 4; ++i) chain.push_back(static_cast<char>(length >> (8 * i)));
  }
  chain += innermost;
  auto deep = DecodeLeanResult(chain);
  REQUIRE_FALSE(deep);
  CHECK(deep.error().code() == ErrorCode::kBadRequest);
}

TEST_CASE("A request's entries are refused before they are copied when one has no key",
          "[map][codec]") {
  MapRequest put_all;
  put_all.op = MapOp::kPutAll;
  put_all.map_name = "m";
  for (int i = 0; i < 100; ++i) put_all.entries.emplace_back("k" + std::to_string(i), "v");
  REQUIRE(DecodeRequest(EncodeRequest(put_all)));
  put_all.entries[57].first.clear();
  auto refused = DecodeRequest(EncodeRequest(put_all));
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == ErrorCode::kBadRequest);
  CHECK(refused.error().message() ==
        "putAll needs a key for every entry; entry 57 of 100 has "
        "an empty key");
}

TEST_CASE("A lean result holds at most as many results as a lean transaction has operations",
          "[map][codec][lean]") {
  MapResult most;
  most.flag = true;
  most.results.resize(4096);
  auto bytes = tessera::map::EncodeLeanResult(most);
  REQUIRE(bytes);
  auto back = tessera::map::DecodeLeanResult(*bytes);
  REQUIRE(back);
  CHECK(back->results.size() == 4096);
  most.results.resize(4097);  // only a forged reply has more: refused before any is decoded
  bytes = tessera::map::EncodeLeanResult(most);
  REQUIRE(bytes);
  auto refused = tessera::map::DecodeLeanResult(*bytes);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == ErrorCode::kBadRequest);
}
