// Long polls of stream consumers (kStreamRead with wait_ms) on a running MapService: parked on
// the owner, answered "ready" (or with the events, wait_read) by an append, "timeout" at the
// end of the wait, replaced by a newer wait of the same group, dropped at Stop.
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <memory>

#include "service_fixture.h"
#include "tessera/map/stream_format.h"
#include "tessera/record/generic_record.h"
#include "tessera/streams/redis_stream.h"

using namespace tessera::map;  // NOLINT
using tessera::base::ErrorCode;
using tessera::map::testing::ServiceFixture;
using tessera::record::GenericRecord;
using tessera::streams::EncodeStreamFields;

namespace {

using namespace std::chrono_literals;
using Answer = tessera::base::Result<MapResult>;

// The XADD below is the streams family's op (families/streams).
const bool kStreamsRegistered = (tessera::streams::Register(), true);

const std::string kMeta = "meta@orders#5";

MapRequest Append(const std::string& payload) {
  MapRequest rq = ServiceFixture::Rq(MapOp::kStreamAppend, kStreamMap, kMeta);
  rq.entries = {{"k", payload}};
  return rq;
}

MapRequest WaitRead(std::int64_t from, std::int64_t wait_ms, const std::string& group = "g",
                    const std::string& consumer = "c1", std::int64_t wait_read = 0) {
  MapRequest rq = ServiceFixture::Rq(MapOp::kStreamRead, kStreamMap, kMeta);
  auto b = GenericRecord::Build();
  b.Int64("from", from).Int64("wait_ms", wait_ms).String("wait_consumer", consumer);
  if (!group.empty()) b.String("wait_group", group);
  if (wait_read > 0) b.Int64("wait_read", wait_read);
  rq.argument = b.Done();
  return rq;
}

// Sends `rq` without waiting for its answer.
std::future<Answer> Send(ServiceFixture& f, MapRequest rq) {
  auto promise = std::make_shared<std::promise<Answer>>();
  auto future = promise->get_future();
  f.service.Execute(std::move(rq), [promise](Answer r) { promise->set_value(std::move(r)); });
  return future;
}

bool Pending(std::future<Answer>& f, std::chrono::milliseconds for_at_least = 100ms) {
  return f.wait_for(for_at_least) == std::future_status::timeout;
}

std::string ValueOf(std::future<Answer>& f) {
  REQUIRE(f.wait_for(5s) == std::future_status::ready);
  auto r = f.get();
  REQUIRE(r);
  CHECK(r->entries.empty());  // a wait never carries events: the consumer reads after it
  return r->value.value_or("");
}

}  // namespace

TEST_CASE("A waiting stream read is answered ready by an append, at once when events are there",
          "[map][stream][wait]") {
  ServiceFixture f;
  auto first = Send(f, WaitRead(1, 10'000));
  CHECK(Pending(first));
  f.Run(Append("e1"));
  CHECK(ValueOf(first) == "ready");

  auto there = Send(f, WaitRead(1, 10'000));  // event 1 is stored
  CHECK(ValueOf(there) == "ready");
  auto next = Send(f, WaitRead(2, 10'000));
  CHECK(Pending(next));
  f.Run(Append("e2"));
  CHECK(ValueOf(next) == "ready");
  // A normal read is not held up by any of this.
  MapRequest read = ServiceFixture::Rq(MapOp::kStreamRead, kStreamMap, kMeta);
  read.argument = GenericRecord::Build().Int64("from", 1).Done();
  CHECK(f.Run(read).entries.size() == 2);
}

TEST_CASE(
    "With wait_read a wait is answered with the events themselves: the plain read of up to "
    "wait_read events from its offset",
    "[map][stream][wait]") {
  ServiceFixture f;
  auto plain = [&](std::int64_t from, std::int64_t max) {
    MapRequest read = ServiceFixture::Rq(MapOp::kStreamRead, kStreamMap, kMeta);
    read.argument = GenericRecord::Build().Int64("from", from).Int64("max", max).Done();
    return f.Run(read);
  };
  auto parked = Send(f, WaitRead(1, 10'000, "g", "c1", /*wait_read=*/2));
  CHECK(Pending(parked));
  MapRequest three = Append("e1");
  three.entries = {{"k", "e1"}, {"k", "e2"}, {"k", "e3"}};
  f.Run(three);
  REQUIRE(parked.wait_for(5s) == std::future_status::ready);
  auto woken = parked.get();
  REQUIRE(woken);
  const MapResult first_two = plain(1, 2);
  REQUIRE(first_two.entries.size() == 2);
  CHECK(woken->entries == first_two.entries);
  CHECK(woken->value == first_two.value);  // "HEAD TAIL": "1 3"
  CHECK(woken->value == "1 3");
  CHECK(woken->flag == first_two.flag);

  // Events there already: answered at once, with what is there from its offset.
  auto there = Send(f, WaitRead(3, 10'000, "g", "c1", 5));
  REQUIRE(there.wait_for(5s) == std::future_status::ready);
  auto now = there.get();
  REQUIRE(now);
  CHECK(now->entries == plain(3, 5).entries);
  REQUIRE(now->entries.size() == 1);
  CHECK(now->entries[0].first == "3");

  // Nothing comes: still "timeout", without events.
  auto quiet = Send(f, WaitRead(4, 50, "g", "c1", 5));
  CHECK(ValueOf(quiet) == "timeout");
}

TEST_CASE("A waiting stream read times out empty, within its wait or kMaxStreamWaitMs",
          "[map][stream][wait]") {
  ServiceFixture f;
  auto shortly = Send(f, WaitRead(1, 50));
  CHECK(ValueOf(shortly) == "timeout");
  const auto start = std::chrono::steady_clock::now();
  auto long_wait = Send(f, WaitRead(1, 3'600'000));  // cut to kMaxStreamWaitMs
  CHECK(ValueOf(long_wait) == "timeout");
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= std::chrono::milliseconds(kMaxStreamWaitMs));
  CHECK(waited < std::chrono::milliseconds(kMaxStreamWaitMs) + 3s);
}

TEST_CASE(
    "A newer wait of the same consumer replaces the older one, other groups and consumers wait "
    "on",
    "[map][stream][wait]") {
  ServiceFixture f;
  auto older = Send(f, WaitRead(1, 10'000, "billing", "c1"));
  auto other_group = Send(f, WaitRead(1, 10'000, "shipping", "c1"));
  auto other_consumer = Send(f, WaitRead(1, 10'000, "billing", "c2"));
  CHECK(Pending(older));
  auto newer = Send(f, WaitRead(1, 10'000, "billing", "c1"));
  CHECK(ValueOf(older) == "timeout");
  CHECK(Pending(other_group));
  CHECK(Pending(other_consumer));
  CHECK(Pending(newer));
  f.Run(Append("e1"));
  CHECK(ValueOf(other_group) == "ready");
  CHECK(ValueOf(other_consumer) == "ready");
  CHECK(ValueOf(newer) == "ready");
}

TEST_CASE("An XADD wakes the waits on its stream's sub-stream", "[map][stream][wait]") {
  ServiceFixture f;
  MapRequest wait = ServiceFixture::Rq(MapOp::kStreamRead, kStreamMap, "meta@events#0");
  wait.argument = GenericRecord::Build()
                      .Int64("from", 1)
                      .Int64("wait_ms", 10'000)
                      .String("wait_group", "g")
                      .Done();
  auto parked = Send(f, wait);
  CHECK(Pending(parked));
  MapRequest xadd = ServiceFixture::Rq(MapOp::kRedisStream, kStreamMap, "meta@events#0");
  xadd.value = EncodeStreamFields({"field", "value"});
  xadd.argument = GenericRecord::Build().String("cmd", "add").String("id", "*").Done();
  f.Run(xadd);
  CHECK(ValueOf(parked) == "ready");
}

TEST_CASE("A wait needs its group, and Stop answers the parked ones", "[map][stream][wait]") {
  ServiceFixture f;
  auto no_group = f.service.ExecuteSync(WaitRead(1, 1'000, ""));
  REQUIRE_FALSE(no_group);
  CHECK(no_group.error().code() == ErrorCode::kBadRequest);
  CHECK_THAT(no_group.error().message(), Catch::Contains("needs wait_group"));

  auto parked = Send(f, WaitRead(1, 60'000));
  CHECK(Pending(parked));
  f.service.Stop();
  REQUIRE(parked.wait_for(5s) == std::future_status::ready);
  auto answer = parked.get();
  REQUIRE_FALSE(answer);
  CHECK(answer.error().code() == ErrorCode::kShuttingDown);
}
