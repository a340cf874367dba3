// Transaction: builds one MapRequest (op kTransact) that MapService runs on the partition's
// owner (map_service_tx.cc); RunTransaction sends it through an Invoker, so the embedded
// member and the client share one implementation.
#include "tessera/grid/transaction.h"

#include <pthread.h>

#include <atomic>
#include <mutex>
#include <random>

#include "transaction_runner.h"

namespace tessera::grid {

namespace {
// 128 random bits: ids of different processes and threads must not collide (a collision
// within the id TTL would answer a batch with another's result). Each thread's generator is
// seeded once with 256 bits from the OS's random source; reading std::random_device per id
// cost more CPU than the transaction (RDSEED retries).
// A fork() copies the generators' state, so the child reseeds: a counter its atfork handler
// bumps (a getpid() per id was a system call each).
std::atomic<std::uint64_t> forks{0};

std::string RandomTransactionId() {
  static std::once_flag watch_forks;
  std::call_once(watch_forks, [] {
    pthread_atfork(nullptr, nullptr, [] { forks.fetch_add(1, std::memory_order_relaxed); });
  });
  auto seeded = [] {
    std::random_device os;
    std::seed_seq seed{os(), os(), os(), os(), os(), os(), os(), os()};
    return std::mt19937_64(seed);
  };
  thread_local std::mt19937_64 random = seeded();
  thread_local std::uint64_t seeded_at = forks.load(std::memory_order_relaxed);
  if (const auto now = forks.load(std::memory_order_relaxed); now != seeded_at) {
    random = seeded();
    seeded_at = now;
  }
  std::string id(32, '0');  // 32 hex digits
  constexpr char kDigits[] = "0123456789abcdef";
  for (int half = 0; half < 2; ++half) {
    std::uint64_t bits = random();
    for (int i = 15; i >= 0; --i, bits >>= 4) id[half * 16 + i] = kDigits[bits & 15];
  }
  return id;
}
}  // namespace

Transaction::Transaction(std::string partition_key) {
  request_.op = map::MapOp::kTransact;
  request_.key = std::move(partition_key);
  request_.transaction_id = RandomTransactionId();
  request_.transaction.reserve(4);  // most batches are short: no reallocation moving requests
}

Transaction& Transaction::Add(map::MapOp op, std::string map, std::string key) {
  map::TxOp& added = request_.transaction.emplace_back();
  added.request.op = op;
  added.request.map_name = std::move(map);
  added.request.key = std::move(key);
  return *this;
}

Transaction& Transaction::Append(map::TxOp op) {
  request_.transaction.push_back(std::move(op));
  return *this;
}

Transaction& Transaction::Put(std::string map, std::string key, std::string value,
                              map::WriteOptions options) {
  Add(map::MapOp::kPut, std::move(map), std::move(key));
  request_.transaction.back().request.value = std::move(value);
  request_.transaction.back().request.options = options;
  return *this;
}

Transaction& Transaction::Set(std::string map, std::string key, std::string value,
                              map::WriteOptions options) {
  Put(std::move(map), std::move(key), std::move(value), options);
  request_.transaction.back().request.op = map::MapOp::kSet;
  return *this;
}

Transaction& Transaction::Get(std::string map, std::string key) {
  return Add(map::MapOp::kGet, std::move(map), std::move(key));
}

Transaction& Transaction::Remove(std::string map, std::string key) {
  return Add(map::MapOp::kRemove, std::move(map), std::move(key));
}

Transaction& Transaction::Delete(std::string map, std::string key) {
  return Add(map::MapOp::kDelete, std::move(map), std::move(key));
}

Transaction& Transaction::ContainsKey(std::string map, std::string key) {
  return Add(map::MapOp::kContainsKey, std::move(map), std::move(key));
}

Transaction& Transaction::PutIfAbsent(std::string map, std::string key, std::string value,
                                      map::WriteOptions options) {
  Put(std::move(map), std::move(key), std::move(value), options);
  request_.transaction.back().request.op = map::MapOp::kPutIfAbsent;
  return *this;
}

Transaction& Transaction::Replace(std::string map, std::string key, std::string value,
                                  map::WriteOptions options) {
  Put(std::move(map), std::move(key), std::move(value), options);
  request_.transaction.back().request.op = map::MapOp::kReplace;
  return *this;
}

Transaction& Transaction::ReplaceIfSame(std::string map, std::string key, std::string expected,
                                        std::string value, map::WriteOptions options) {
  Put(std::move(map), std::move(key), std::move(value), options);
  request_.transaction.back().request.op = map::MapOp::kReplaceIfSame;
  request_.transaction.back().request.expected = std::move(expected);
  return *this;
}

Transaction& Transaction::RemoveIfSame(std::string map, std::string key, std::string expected) {
  Add(map::MapOp::kRemoveIfSame, std::move(map), std::move(key));
  request_.transaction.back().request.expected = std::move(expected);
  return *this;
}

Transaction& Transaction::SetTtl(std::string map, std::string key, base::Millis ttl_ms) {
  Add(map::MapOp::kSetTtl, std::move(map), std::move(key));
  request_.transaction.back().request.options.ttl_ms = ttl_ms;
  return *this;
}

Transaction& Transaction::GetEntryView(std::string map, std::string key) {
  return Add(map::MapOp::kGetEntryView, std::move(map), std::move(key));
}

Transaction& Transaction::ExecuteOnKey(std::string map, std::string key, std::string processor,
                                       record::GenericRecord argument) {
  Add(map::MapOp::kExecuteOnKey, std::move(map), std::move(key));
  request_.transaction.back().request.processor = std::move(processor);
  request_.transaction.back().request.argument = std::move(argument);
  return *this;
}

Transaction& Transaction::Condition(map::TxCondition condition, std::string value,
                                    std::int64_t version) {
  if (request_.transaction.empty()) {
    if (!error_) {
      error_ = base::Error(base::ErrorCode::kBadRequest,
                           "a precondition (IfAbsent, IfPresent, IfValue, IfVersion) was set "
                           "before any operation; add the operation first");
    }
    return *this;
  }
  map::TxOp& op = request_.transaction.back();
  op.condition = condition;
  op.condition_value = std::move(value);
  op.condition_version = version;
  return *this;
}

Transaction& Transaction::IfAbsent() { return Condition(map::TxCondition::kAbsent, {}, 0); }

Transaction& Transaction::IfPresent() { return Condition(map::TxCondition::kPresent, {}, 0); }

Transaction& Transaction::IfValue(std::string value) {
  return Condition(map::TxCondition::kValueEquals, std::move(value), 0);
}

Transaction& Transaction::IfVersion(std::int64_t version) {
  return Condition(map::TxCondition::kVersionEquals, {}, version);
}

Transaction& Transaction::WithId(std::string id) {
  request_.transaction_id = std::move(id);
  return *this;
}

base::Result<TransactionResult> RunTransaction(Invoker& invoker, const Transaction& transaction) {
  if (transaction.error()) return std::unexpected(*transaction.error());
  auto result = invoker.InvokeSyncKept(transaction.request());
  if (!result) return std::unexpected(result.error());
  TransactionResult out;
  out.committed = result->flag;
  out.results = std::move(result->results);
  out.conflict = std::move(result->conflict);
  return out;
}

}  // namespace tessera::grid
