#include "tessera/map/entry_processor.h"

#include <catch2/catch.hpp>

#include "map_test_util.h"

using namespace tessera::map;  // NOLINT
using tessera::base::ErrorCode;
using tessera::map::testing::Rq;
using tessera::map::testing::StoreFixture;
using tessera::map::testing::WithTtl;
using tessera::record::GenericRecord;
using tessera::record::Value;

namespace {
MapRequest Exec(const std::string& key, const std::string& processor, GenericRecord argument) {
  auto rq = Rq(MapOp::kExecuteOnKey, key);
  rq.processor = processor;
  rq.argument = std::move(argument);
  return rq;
}

GenericRecord IncrementArg(const std::string& field, std::int64_t delta) {
  return GenericRecord::Build().String("field", field).Int64("delta", delta).Done();
}

GenericRecord Decoded(const std::optional<std::string>& bytes) {
  REQUIRE(bytes.has_value());
  auto r = GenericRecord::Decode(*bytes);
  REQUIRE(r);
  return *r;
}
}  // namespace

TEST_CASE("increment creates the record and adds to the field", "[map][processor]") {
  StoreFixture f;
  auto r1 = f.Run(Exec("c", "increment", IncrementArg("n", 5)));
  REQUIRE(r1.processor_result.has_value());
  CHECK(r1.processor_result->GetInt64("value") == 5);
  auto r2 = f.Run(Exec("c", "increment", GenericRecord::Build().String("field", "n").Done()));
  CHECK(r2.processor_result->GetInt64("value") == 6);  // delta defaults to 1
  CHECK(Decoded(f.Get("c")).GetInt64("n") == 6);
}

TEST_CASE("increment keeps the other fields of the record", "[map][processor]") {
  StoreFixture f;
  f.Put("c", GenericRecord::Build("Counter").String("owner", "ann").Int64("n", 10).Done().Encode());
  f.Run(Exec("c", "increment", IncrementArg("n", -3)));
  auto stored = Decoded(f.Get("c"));
  CHECK(stored.GetInt64("n") == 7);
  CHECK(stored.GetString("owner") == "ann");
  CHECK(stored.type_name() == "Counter");
}

TEST_CASE("increment on a field of another type fails and leaves the entry untouched",
          "[map][processor]") {
  StoreFixture f;
  const std::string original = GenericRecord::Build().String("n", "ten").Done().Encode();
  f.Put("c", original);
  const auto version_before = f.Run(Rq(MapOp::kGetEntryView, "c")).view->version;
  auto r = f.Try(Exec("c", "increment", IncrementArg("n", 1)));
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == ErrorCode::kWrongType);
  CHECK(r.error().message().find("'n'") != std::string::npos);
  CHECK(r.error().message().find("string") != std::string::npos);
  CHECK(r.error().message().find("int64") != std::string::npos);
  auto view = f.Run(Rq(MapOp::kGetEntryView, "c"));
  CHECK(view.value == original);
  CHECK(view.view->version == version_before);
}

TEST_CASE("increment on a value that is not a record is kWrongType", "[map][processor]") {
  StoreFixture f;
  f.Put("c", "plain text");
  auto r = f.Try(Exec("c", "increment", IncrementArg("n", 1)));
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == ErrorCode::kWrongType);
  CHECK(f.Get("c") == "plain text");
}

TEST_CASE("missing processor arguments are kBadRequest", "[map][processor]") {
  StoreFixture f;
  auto no_field = f.Try(Exec("c", "increment", GenericRecord{}));
  REQUIRE_FALSE(no_field);
  CHECK(no_field.error().code() == ErrorCode::kBadRequest);
  CHECK(no_field.error().message().find("'field'") != std::string::npos);
  auto no_delta = f.Try(Exec("c", "incrementRaw", GenericRecord{}));
  REQUIRE_FALSE(no_delta);
  CHECK(no_delta.error().code() == ErrorCode::kBadRequest);
  CHECK_FALSE(f.Get("c").has_value());
}

TEST_CASE("incrementRaw works on decimal text", "[map][processor]") {
  StoreFixture f;
  auto delta = [](std::int64_t d) { return GenericRecord::Build().Int64("delta", d).Done(); };
  CHECK(f.Run(Exec("n", "incrementRaw", delta(5))).processor_result->GetInt64("value") == 5);
  CHECK(f.Run(Exec("n", "incrementRaw", delta(-7))).processor_result->GetInt64("value") == -2);
  CHECK(f.Get("n") == "-2");
  f.Put("bad", "12abc");
  auto r = f.Try(Exec("bad", "incrementRaw", delta(1)));
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == ErrorCode::kWrongType);
  CHECK(f.Get("bad") == "12abc");
  f.Put("big", "9223372036854775807");
  auto overflow = f.Try(Exec("big", "incrementRaw", delta(1)));
  REQUIRE_FALSE(overflow);
  CHECK(overflow.error().code() == ErrorCode::kWrongType);
  CHECK(f.Get("big") == "9223372036854775807");
}

TEST_CASE("incrementRaw keeps the entry's TTL", "[map][processor][ttl]") {
  StoreFixture f;
  f.Run(WithTtl(Rq(MapOp::kSet, "n", "1"), 100));
  f.clock.Advance(60);
  f.Run(Exec("n", "incrementRaw", GenericRecord::Build().Int64("delta", 1).Done()));
  f.clock.Advance(40);
  CHECK_FALSE(f.Get("n").has_value());
}

TEST_CASE("compareAndSetField swaps only on a match", "[map][processor]") {
  StoreFixture f;
  f.Put("o", GenericRecord::Build("Outbox").String("state", "PENDING").Done().Encode());
  auto cas = [](Value expected, Value value) {
    return GenericRecord::Build()
        .String("field", "state")
        .Set("expected", std::move(expected))
        .Set("value", std::move(value))
        .Done();
  };
  auto miss = f.Run(Exec("o", "compareAndSetField", cas("NEW", "CLAIMED")));
  CHECK(miss.processor_result->GetBool("swapped") == false);
  CHECK(miss.processor_result->GetString("current") == "PENDING");
  auto hit = f.Run(Exec("o", "compareAndSetField", cas("PENDING", "CLAIMED")));
  CHECK(hit.processor_result->GetBool("swapped") == true);
  CHECK(hit.processor_result->GetString("current") == "CLAIMED");
  CHECK(Decoded(f.Get("o")).GetString("state") == "CLAIMED");
  // Null expected matches a missing field.
  auto by_null = GenericRecord::Build()
                     .String("field", "claimer")
                     .Null("expected")
                     .String("value", "m1")
                     .Done();
  CHECK(f.Run(Exec("o", "compareAndSetField", by_null)).processor_result->GetBool("swapped") ==
        true);
  CHECK(Decoded(f.Get("o")).GetString("claimer") == "m1");
  CHECK(f.Run(Exec("o", "compareAndSetField", by_null)).processor_result->GetBool("swapped") ==
        false);
}

TEST_CASE("get processor returns the value bytes or an empty record", "[map][processor]") {
  StoreFixture f;
  f.Put("k", "bytes");
  auto r = f.Run(Exec("k", "get", GenericRecord{}));
  REQUIRE(r.processor_result->Find("value") != nullptr);
  CHECK(r.processor_result->Find("value")->AsBytes().data == "bytes");
  CHECK(f.Run(Exec("none", "get", GenericRecord{})).processor_result->fields().empty());
}

TEST_CASE("an unknown processor is kUnknownProcessor with a hint", "[map][processor]") {
  StoreFixture f;
  auto r = f.Try(Exec("k", "nope", GenericRecord{}));
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == ErrorCode::kUnknownProcessor);
  CHECK(r.error().message() ==
        "no entry processor named 'nope' is registered on this member; register it with "
        "EntryProcessorRegistry::Register before starting the member");
}

TEST_CASE("custom processors can delete, set TTL, and fail atomically", "[map][processor]") {
  StoreFixture f;
  f.processors.Register("deleter", [](MutableEntry& e, const GenericRecord&) {
    e.Delete();
    return tessera::base::Result<GenericRecord>(GenericRecord{});
  });
  f.processors.Register("ttl", [](MutableEntry& e, const GenericRecord&) {
    e.SetTtl(50);
    return tessera::base::Result<GenericRecord>(GenericRecord{});
  });
  f.processors.Register(
      "failing", [](MutableEntry& e, const GenericRecord&) -> tessera::base::Result<GenericRecord> {
        e.SetValue("changed");
        e.SetTtl(1);
        return tessera::base::Fail(ErrorCode::kWrongType, "boom");
      });
  f.Put("k", "v");
  auto failed = f.Try(Exec("k", "failing", GenericRecord{}));
  REQUIRE_FALSE(failed);
  CHECK(failed.error().message() == "boom");
  f.clock.Advance(10);
  CHECK(f.Get("k") == "v");
  f.Run(Exec("k", "ttl", GenericRecord{}));  // value unchanged, TTL applies
  f.clock.Advance(49);
  CHECK(f.Get("k") == "v");
  f.clock.Advance(1);
  CHECK_FALSE(f.Get("k").has_value());
  f.Put("d", "v");
  f.events.clear();
  f.Run(Exec("d", "deleter", GenericRecord{}));
  CHECK_FALSE(f.Get("d").has_value());
  REQUIRE(f.events.size() == 1);
  CHECK(f.events[0].type == EntryEventType::kRemoved);
}

TEST_CASE("executeOnKeys and executeOnEntries run on every selected entry", "[map][processor]") {
  StoreFixture f;
  auto keys = Rq(MapOp::kExecuteOnKeys);
  keys.processor = "increment";
  keys.argument = IncrementArg("n", 2);
  keys.keys = {"a", "b"};
  CHECK(f.Run(keys).processor_results.size() == 2);
  f.Put("other", "text");
  auto entries = Rq(MapOp::kExecuteOnEntries);
  entries.processor = "increment";
  entries.argument = IncrementArg("n", 1);
  entries.predicate = Predicate::GreaterEqual("n", std::int64_t{0});
  auto result = f.Run(entries);
  CHECK(result.processor_results.size() == 2);
  for (auto& [key, rec] : result.processor_results) CHECK(rec.GetInt64("value") == 3);
  CHECK(f.Get("other") == "text");
}
