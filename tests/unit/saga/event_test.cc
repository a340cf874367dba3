#include "tessera/saga/event.h"

#include <catch2/catch.hpp>

using tessera::base::ErrorCode;
using tessera::record::GenericRecord;
using tessera::saga::DecodeEvent;
using tessera::saga::EncodeEvent;
using tessera::saga::Event;
using tessera::saga::EventFromRecord;
using tessera::saga::EventToRecord;
using tessera::saga::ValidateEvent;

namespace {

Event OrderCreated() {
  Event e;
  e.id = 1'234'567'890'123;
  e.type = "OrderCreated";
  e.key = "order-17@customer-3";
  e.source = "orders";
  e.correlation_id = "saga-9";
  e.causation_id = "1234567890000";
  e.time_ms = 1'795'600'000'000;
  e.attempt = 2;
  e.headers = {{"trace-id", "abc"}, {"tenant", "eu.1"}, {"trace-id", "second"}};
  e.payload = GenericRecord::Build("Order").Int64("id", 17).String("state", "NEW").Done();
  return e;
}

std::string ErrorOf(const Event& e) {
  auto r = DecodeEvent(EncodeEvent(e));
  REQUIRE(!r);
  CHECK(r.error().code() == ErrorCode::kBadRequest);
  return r.error().message();
}

}  // namespace

TEST_CASE("An event survives its encoding, headers in order and the payload whole",
          "[saga][event]") {
  const Event e = OrderCreated();
  REQUIRE(ValidateEvent(e));
  auto decoded = DecodeEvent(EncodeEvent(e));
  REQUIRE(decoded);
  CHECK(*decoded == e);
  CHECK(decoded->Header("trace-id") == "abc");  // the first of a repeated header
  CHECK(decoded->Header("missing").empty());
  // The grid reads it server-side as a record: predicates see its fields.
  const GenericRecord record = EventToRecord(e);
  CHECK(record.type_name() == "tessera.Event");
  CHECK(record.GetString("type").value() == "OrderCreated");
  CHECK(record.GetInt64("payload.id").value() == 17);
  // Fields a later version adds are ignored.
  auto extended = EventFromRecord(record.ToBuilder().String("priority", "high").Done());
  REQUIRE(extended);
  CHECK(*extended == e);
}

TEST_CASE("Bad events are refused naming the field and what to do", "[saga][event]") {
  Event e = OrderCreated();
  e.id = 0;
  CHECK(ErrorOf(e).find("id 0 is not positive; give it a cluster-unique id") != std::string::npos);
  e = OrderCreated();
  e.type.clear();
  CHECK(ErrorOf(e).find("type is empty") != std::string::npos);
  e = OrderCreated();
  e.key.clear();
  CHECK(ErrorOf(e).find("key is empty") != std::string::npos);
  e = OrderCreated();
  e.attempt = 0;
  CHECK(ErrorOf(e).find("attempt 0 is below 1") != std::string::npos);
  e = OrderCreated();
  e.headers.emplace_back("", "x");
  CHECK(ErrorOf(e).find("a header has an empty name") != std::string::npos);

  auto not_record = DecodeEvent("not bytes of a record");
  REQUIRE(!not_record);
  CHECK(not_record.error().message().find("not a valid event") != std::string::npos);
  auto other_type = DecodeEvent(GenericRecord::Build("Order").Int64("id", 1).Done().Encode());
  REQUIRE(!other_type);
  CHECK(other_type.error().message() ==
        "not a valid event: a record of type 'Order', expected 'tessera.Event'");
  auto missing = EventFromRecord(
      EventToRecord(OrderCreated()).ToBuilder().Set("key", tessera::record::Value()).Done());
  REQUIRE(!missing);
  CHECK(missing.error().message() == "not a valid event: field 'key' is null, expected string");
}
