// The shared instance: a Client talking to a Member over real loopback sockets.
#include "tessera/grid/client.h"

#include <spdlog/spdlog.h>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "tessera/grid/member.h"
#include "tessera/map/map_codec.h"
#include "tessera/net/client_connection.h"
#include "tessera/wire/frame_codec.h"

using namespace tessera;
using grid::Client;
using grid::ClientOptions;
using grid::Member;
using grid::MemberOptions;
using record::GenericRecord;

namespace {

MemberOptions Served(std::uint16_t port = 0) {
  MemberOptions o;
  o.port = port;
  o.threads = 2;
  o.cluster_name = "test";
  o.secret = "s3cret";
  return o;
}

ClientOptions To(const Member& member) {
  ClientOptions o;
  o.addresses = {"127.0.0.1:" + std::to_string(member.native_port())};
  o.cluster_name = "test";
  o.secret = "s3cret";
  o.call_timeout = std::chrono::milliseconds(3000);
  o.connect_timeout = std::chrono::milliseconds(2000);
  return o;
}

}  // namespace

TEST_CASE("A client sees the same map semantics as the embedded member", "[grid][client]") {
  Member member(Served());
  REQUIRE(member.Start());
  auto client = Client::Connect(To(member));
  REQUIRE(client);
  auto m = (*client)->GetMap("orders");

  CHECK(m->Put("a", "1").value() == std::nullopt);
  CHECK(m->Put("a", "2").value() == std::optional<std::string>("1"));
  CHECK(m->PutIfAbsent("a", "3").value() == std::optional<std::string>("2"));
  CHECK(m->PutIfAbsent("b", "x", grid::WithTtl(60000)).value() == std::nullopt);
  auto view = m->GetEntryView("b").value();
  REQUIRE(view);
  CHECK(view->second.ttl_ms == 60000);
  REQUIRE(m->PutAll({{"c", "3"}, {"d", "4"}}));
  CHECK(m->GetAll({"a", "c", "zz"}).value() ==
        std::map<std::string, std::string>{{"a", "2"}, {"c", "3"}});
  CHECK(m->Size().value() == 4);
  CHECK(member.GetMap("orders")->Get("c").value() == std::optional<std::string>("3"));
  CHECK(m->Delete("c").value());
  CHECK(m->Clear().value() == 3);
  CHECK(m->Size().value() == 0);

  auto bad = m->ExecuteOnKey("a", "noSuchProcessor");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code() == base::ErrorCode::kUnknownProcessor);
}

TEST_CASE("A client is refused with a clear error for a wrong cluster or secret",
          "[grid][client]") {
  Member member(Served());
  REQUIRE(member.Start());
  auto wrong_cluster = To(member);
  wrong_cluster.cluster_name = "prod";
  auto r1 = Client::Connect(wrong_cluster);
  REQUIRE_FALSE(r1);
  CHECK(r1.error().code() == base::ErrorCode::kAuthFailed);
  CHECK_THAT(r1.error().message(), Catch::Contains("prod"));

  auto wrong_secret = To(member);
  wrong_secret.secret = "guess";
  auto r2 = Client::Connect(wrong_secret);
  REQUIRE_FALSE(r2);
  CHECK(r2.error().code() == base::ErrorCode::kAuthFailed);

  // The member keeps serving well-behaved clients.
  auto ok = Client::Connect(To(member));
  REQUIRE(ok);
  CHECK((*ok)->GetMap("m")->Set("k", "v"));
}

TEST_CASE("Connecting to a closed port fails fast with a one-line reason", "[grid][client]") {
  std::uint16_t port;
  {
    Member member(Served());
    REQUIRE(member.Start());
    port = member.native_port();
  }
  ClientOptions o;
  o.addresses = {"127.0.0.1:" + std::to_string(port)};
  o.connect_timeout = std::chrono::milliseconds(1000);
  auto r = Client::Connect(o);
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == base::ErrorCode::kConnectionFailed);

  o.addresses = {"not-an-address"};
  auto bad = Client::Connect(o);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code() == base::ErrorCode::kBadRequest);
}

TEST_CASE("Remote entry listeners receive events in order per key", "[grid][client]") {
  Member member(Served());
  REQUIRE(member.Start());
  auto client = Client::Connect(To(member));
  REQUIRE(client);
  auto m = (*client)->GetMap("events");

  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<map::EntryEventType, std::string>> seen;
  auto id = m->AddEntryListener([&](const map::EntryEvent& e) {
    std::lock_guard lock(mu);
    seen.emplace_back(e.type, e.value.value_or(""));
    cv.notify_all();
  });
  REQUIRE(id);
  for (int i = 0; i < 50; ++i) REQUIRE(m->Set("k", std::to_string(i)));
  REQUIRE(m->Remove("k"));
  std::unique_lock lock(mu);
  REQUIRE(cv.wait_for(lock, std::chrono::seconds(5), [&] { return seen.size() >= 51; }));
  CHECK(seen[0] == std::make_pair(map::EntryEventType::kAdded, std::string("0")));
  for (int i = 1; i < 50; ++i) {
    CHECK(seen[i] == std::make_pair(map::EntryEventType::kUpdated, std::to_string(i)));
  }
  CHECK(seen[50].first == map::EntryEventType::kRemoved);
}

TEST_CASE("Pipelined async calls all complete", "[grid][client]") {
  Member member(Served());
  REQUIRE(member.Start());
  auto client = Client::Connect(To(member));
  REQUIRE(client);
  auto m = (*client)->GetMap("pipelined");
  constexpr int kCalls = 2000;
  std::atomic<int> ok{0}, failed{0};
  std::promise<void> all_done;
  std::atomic<int> remaining{kCalls};
  for (int i = 0; i < kCalls; ++i) {
    m->SetAsync("k" + std::to_string(i), "v", {}, [&](base::Result<map::MapResult> r) {
      (r ? ok : failed).fetch_add(1);
      if (remaining.fetch_sub(1) == 1) all_done.set_value();
    });
  }
  REQUIRE(all_done.get_future().wait_for(std::chrono::seconds(20)) == std::future_status::ready);
  CHECK(ok.load() == kCalls);
  CHECK(failed.load() == 0);
  CHECK(m->Size().value() == kCalls);
}

TEST_CASE("A client reconnects when the member restarts and keeps its listeners",
          "[grid][client]") {
  auto member = std::make_unique<Member>(Served());
  REQUIRE(member->Start());
  std::uint16_t port = member->native_port();
  auto client = Client::Connect(To(*member));
  REQUIRE(client);
  auto m = (*client)->GetMap("survivor");
  REQUIRE(m->Set("before", "1"));

  std::atomic<int> events{0};
  REQUIRE(m->AddEntryListener([&](const map::EntryEvent&) { events.fetch_add(1); }));

  member.reset();  // the member goes away (its data with it: a single member has no backup)
  member = std::make_unique<Member>(Served(port));
  REQUIRE(member->Start());

  // Within the call timeout the client reconnects and the call succeeds.
  REQUIRE(m->Set("after", "2"));
  CHECK(m->Get("after").value() == std::optional<std::string>("2"));
  // The listener was re-registered on the new member.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (events.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    REQUIRE(m->Set("ping", "x"));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(events.load() > 0);
}

TEST_CASE("Lean frames and Cap'n Proto frames give a client the same answers", "[grid][client]") {
  Member member(Served());
  REQUIRE(member.Start());
  struct Seen {
    std::optional<std::string> put1, put2, pia, get, removed, replaced, absent;
    bool contains = false, deleted = false, deleted_again = true;
    std::optional<base::Millis> ttl;
    base::ErrorCode error{};
    std::vector<grid::AppendResult> appends;  // stream appends (lean from version 3)
    base::ErrorCode too_big{};
    std::uint64_t append_lean_frames = 0;  // lean frames while appending (requests + answers)
    // Transactions (lean from version 4): committed, sent again, a conflict, a processor.
    std::optional<grid::TransactionResult> tx, tx_again, tx_conflict, tx_processor;
    std::uint64_t tx_lean_frames = 0;
    std::pair<base::Millis, base::Millis> tx_ttls{};  // the batch's set TTL and setTtl
  };
  auto run = [&](std::uint32_t version, const std::string& name) {
    auto options = To(member);
    options.max_protocol_version = version;
    auto client = Client::Connect(options);
    REQUIRE(client);
    CHECK((*client)->protocol_version() == version);
    auto m = (*client)->GetMap(name);
    Seen s;
    s.put1 = m->Put("a", "1").value();
    s.put2 = m->Put("a", std::string("2\0two", 5)).value();
    s.pia = m->PutIfAbsent("a", "3").value();
    REQUIRE(m->PutIfAbsent("t", "x", grid::WithTtl(60000)).value() == std::nullopt);
    s.ttl = m->GetEntryView("t").value()->second.ttl_ms;
    s.get = m->Get("a").value();
    s.contains = m->ContainsKey("a").value();
    s.replaced = m->Replace("a", "4").value();
    s.removed = m->Remove("a").value();
    s.absent = m->Get("a").value();
    REQUIRE(m->Set("d", "v"));
    s.deleted = m->Delete("d").value();
    s.deleted_again = m->Delete("d").value();
    s.error = m->Put("", "v").error().code();
    grid::StreamConfig config;
    config.sub_streams = 2;
    config.max_events = 3;
    auto stream = (*client)->GetStream(name + "-events", config);
    s.appends.push_back(stream->Append("k", "p", "e1").value());  // creates the stream
    const auto lean_before = wire::LeanFramesEncoded();
    for (const char* id : {"e2", "", "e1"})
      s.appends.push_back(stream->Append("k", "p", id).value());
    s.append_lean_frames = wire::LeanFramesEncoded() - lean_before;
    auto batch =
        stream->AppendAll({{"k", "1", ""}, {"k", "2", ""}, {"k", "3", ""}, {"k", "4", ""}});
    s.too_big = batch ? base::ErrorCode{} : batch.error().code();
    REQUIRE(m->Set("v@p", "old"));
    grid::Transaction tx("p");
    tx.Set(name, "k@p", "v", grid::WithTtl(60000))
        .IfAbsent()
        .ReplaceIfSame(name, "v@p", "old", "new")
        .Get(name, "k@p")
        .SetTtl(name, "v@p", 30000)
        .Delete(name, "none@p");
    const auto tx_before = wire::LeanFramesEncoded();
    s.tx = (*client)->Transact(tx).value();
    s.tx_lean_frames = wire::LeanFramesEncoded() - tx_before;
    s.tx_ttls = {m->GetEntryView("k@p").value()->second.ttl_ms,
                 m->GetEntryView("v@p").value()->second.ttl_ms};
    s.tx_again = (*client)->Transact(tx).value();  // the same id: the first result
    grid::Transaction conflict("p");
    conflict.Set(name, "w@p", "x").Set(name, "k@p", "y").IfValue("other");
    s.tx_conflict = (*client)->Transact(conflict).value();
    grid::Transaction processor("p");
    processor.Set(name, "n@p", record::GenericRecord::Build().Int64("n", 1).Done().Encode())
        .ExecuteOnKey(name, "n@p", "increment",
                      record::GenericRecord::Build().String("field", "n").Int64("delta", 2).Done());
    s.tx_processor = (*client)->Transact(processor).value();
    return s;
  };
  const Seen plain = run(1, "plain");
  const Seen two = run(2, "two");
  const Seen lean = run(wire::kMaxProtocolVersion, "lean");
  // Appends travel lean from version 3 only: a request and its answer each.
  CHECK(plain.append_lean_frames == 0);
  CHECK(two.append_lean_frames == 0);
  CHECK(lean.append_lean_frames == 6);
  CHECK(two.appends == plain.appends);
  CHECK(lean.put1 == plain.put1);
  CHECK(lean.put2 == plain.put2);
  CHECK(plain.put2 == std::optional<std::string>("1"));
  CHECK(lean.pia == std::optional<std::string>(std::string("2\0two", 5)));
  CHECK(lean.pia == plain.pia);
  CHECK(lean.ttl == plain.ttl);
  CHECK(lean.ttl == std::optional<base::Millis>(60000));
  CHECK(lean.get == plain.get);
  CHECK(lean.contains == plain.contains);
  CHECK(lean.replaced == plain.replaced);
  CHECK(lean.removed == plain.removed);
  CHECK(lean.absent == plain.absent);
  CHECK_FALSE(lean.absent.has_value());
  CHECK(lean.deleted == plain.deleted);
  CHECK(lean.deleted);
  CHECK(lean.deleted_again == plain.deleted_again);
  CHECK_FALSE(lean.deleted_again);
  CHECK(lean.error == plain.error);
  CHECK(lean.error == base::ErrorCode::kBadRequest);
  CHECK(lean.appends == plain.appends);
  REQUIRE(lean.appends.size() == 4);
  CHECK(lean.appends[1].offset == 2);
  CHECK(lean.appends[3].duplicate);
  CHECK(lean.appends[3].offset == 1);
  CHECK(lean.too_big == plain.too_big);
  CHECK(lean.too_big == base::ErrorCode::kBadRequest);
  // Transactions travel lean from version 4 only: the request and its answer.
  const Seen three = run(3, "three");
  CHECK(plain.tx_lean_frames == 0);
  CHECK(three.tx_lean_frames == 0);
  CHECK(lean.tx_lean_frames == 2);
  for (const Seen* s : {&plain, &three, &lean}) {
    REQUIRE(s->tx);
    CHECK(s->tx->committed);
    REQUIRE(s->tx->results.size() == 5);
    CHECK(s->tx->results[1].flag);                                      // replaced
    CHECK(s->tx->results[2].value == std::optional<std::string>("v"));  // read its own write
    CHECK(s->tx->results[3].flag);                                      // TTL set
    CHECK_FALSE(s->tx->results[4].flag);                                // nothing to delete
    CHECK(s->tx_ttls == std::pair<base::Millis, base::Millis>{60000, 30000});
    REQUIRE(s->tx_again);
    CHECK(s->tx_again->committed);
    CHECK(s->tx_again->results.size() == 5);
    CHECK(s->tx_again->results[2].value == std::optional<std::string>("v"));
    REQUIRE(s->tx_conflict);
    CHECK_FALSE(s->tx_conflict->committed);
    CHECK(s->tx_conflict->conflict == map::TxConflict{1,
                                                      s == &plain   ? "plain"
                                                      : s == &three ? "three"
                                                                    : "lean",
                                                      "k@p", "value of 1 bytes, version 1"});
    REQUIRE(s->tx_processor);
    CHECK(s->tx_processor->committed);
    REQUIRE(s->tx_processor->results.size() == 2);
    CHECK(s->tx_processor->results[1].processor_result->GetInt64("value") == 3);
  }
}

TEST_CASE("A member refuses lean payloads beyond the version its connection agreed on",
          "[grid][client]") {
  // A client that agreed on version 3 (or 2) and sends a lean transaction (or stream append)
  // anyway gets a clear error, and nothing is applied: --max-protocol holds as a switch.
  Member member(Served());
  REQUIRE(member.Start());
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  std::thread loop([&io] { io.run(); });
  struct StopLoop {  // also when a REQUIRE ends the test early
    boost::asio::io_context& io;
    std::thread& loop;
    ~StopLoop() {
      io.stop();
      loop.join();
    }
  } stop_loop{io, loop};
  auto connect = [&](std::uint32_t version) {
    net::ClientOptions o;
    o.port = member.native_port();
    o.hello.cluster_name = "test";
    o.hello.secret = "s3cret";
    o.hello.max_protocol_version = version;
    auto c = net::ClientConnection::Connect(io, o, spdlog::default_logger());
    INFO((c ? std::string() : c.error().ToString()));
    REQUIRE(c);
    REQUIRE((*c)->protocol_version() == version);
    return *c;
  };
  auto call = [](net::ClientConnection& c, const map::MapRequest& rq) {
    std::promise<base::Result<wire::Message>> answer;
    auto header = wire::Message::MakeRequest(0, 0, wire::Service::kMap,
                                             static_cast<std::uint16_t>(rq.op), {});
    c.CallLean(std::move(header), map::EncodeLeanRequest(rq, wire::kLeanFramePrefixBytes),
               std::chrono::steady_clock::now() + std::chrono::seconds(5), std::chrono::seconds(5),
               [&answer](base::Result<wire::Message> r) { answer.set_value(std::move(r)); });
    return answer.get_future().get();
  };
  map::MapRequest tx;
  tx.op = map::MapOp::kTransact;
  tx.key = "p";
  auto& op = tx.transaction.emplace_back();
  op.request.op = map::MapOp::kSet;
  op.request.map_name = "orders";
  op.request.key = "k@p";
  op.request.value = "v";
  map::MapRequest append;
  append.op = map::MapOp::kStreamAppend;
  append.map_name = "events";
  append.key = "k";
  append.entries = {{"k", "e"}};
  auto client = Client::Connect(To(member));
  REQUIRE(client);
  auto orders = (*client)->GetMap("orders");
  auto three = connect(3);
  auto refused = call(*three, tx);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == base::ErrorCode::kBadRequest);
  CHECK_THAT(refused.error().message(), Catch::Contains("needs protocol version 4"));
  CHECK_THAT(refused.error().message(), Catch::Contains("agreed on version 3"));
  CHECK_FALSE(orders->Get("k@p").value().has_value());  // nothing applied
  auto two = connect(2);
  auto refused_append = call(*two, append);
  REQUIRE_FALSE(refused_append);
  CHECK_THAT(refused_append.error().message(), Catch::Contains("needs protocol version 3"));
  auto four = connect(4);
  auto applied = call(*four, tx);
  REQUIRE(applied);  // the same payload where version 4 was agreed
  CHECK(orders->Get("k@p").value() == std::optional<std::string>("v"));
  (*client)->Shutdown();
  three->Close();
  two->Close();
  four->Close();
  member.Shutdown();
}
