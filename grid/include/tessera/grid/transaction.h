#pragma once
// Transaction: a batch of operations on any maps whose keys share one partition key, applied
// all-or-nothing by Instance::Transact on the partition's owner (embedded or over the native
// protocol, the same semantics). Keys follow the `key@partition-key` rule: with partition key
// "cust-9", the keys "order-17@cust-9" and "outbox-3@cust-9" (and "cust-9" itself) are in its
// partition; any other key is refused (kBadRequest naming it) and nothing is applied.
//
//   Transaction tx("cust-9");
//   tx.Set("orders", "order-17@cust-9", order).IfAbsent();     // precondition of this op
//   tx.Set("outbox", "evt-81@cust-9", event);
//   auto r = instance->Transact(tx);   // r->committed, r->results, or r->conflict
//
// Semantics (map_service.h, docs/architecture.md "Partition transactions"):
//   - The operations run in order on the owner's shard; each precondition is checked just
//     before its operation, against the entry as the batch's earlier operations left it (an
//     expired entry, or a key of a map that does not exist, is absent).
//   - The first precondition that fails undoes the batch: nothing is applied, `committed` is
//     false and `conflict` names the operation (index), its map and key, and what was found.
//     An operation that fails (an entry processor's error, say) undoes it too and is the
//     call's error. An operation that merely does nothing (putIfAbsent finding a value,
//     replaceIfSame with another value) is not a failure: its result says so.
//   - Committed: every backup got the batch as one message before the call returns; listeners
//     see its events after it committed; no reader sees half of it.
//   - Every Transaction has an id (random, or WithId): the owner remembers the ids of
//     committed batches for 60 s (MapServiceOptions::transaction_id_ttl_ms), so the same
//     Transaction sent again (a retry after kMemberLeft, by the client or by you) is applied
//     once and answered with the first result. Build a new Transaction for a new batch.
//   - Limits: at most MapServiceOptions::max_transaction_ops operations (default 1,000) and
//     the frame limit.
//
// Value type; thread-compatible.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/map/map_request.h"
#include "tessera/record/generic_record.h"

namespace tessera::grid {

class Transaction {
 public:
  // A batch in the partition of `partition_key`, with a fresh random id.
  explicit Transaction(std::string partition_key);

  // Operations, in order; each returns *this. Results (TransactionResult::results[i]) are
  // those of the same Map call: value = old value (put, remove, replace), existing value
  // (putIfAbsent that found one), current value (get); flag = done (delete, containsKey,
  // replaceIfSame, removeIfSame, setTtl, and putIfAbsent that stored); processor_result.
  Transaction& Put(std::string map, std::string key, std::string value,
                   map::WriteOptions options = {});
  Transaction& Set(std::string map, std::string key, std::string value,
                   map::WriteOptions options = {});
  Transaction& Get(std::string map, std::string key);
  Transaction& Remove(std::string map, std::string key);
  Transaction& Delete(std::string map, std::string key);
  Transaction& ContainsKey(std::string map, std::string key);
  Transaction& PutIfAbsent(std::string map, std::string key, std::string value,
                           map::WriteOptions options = {});
  Transaction& Replace(std::string map, std::string key, std::string value,
                       map::WriteOptions options = {});
  Transaction& ReplaceIfSame(std::string map, std::string key, std::string expected,
                             std::string value, map::WriteOptions options = {});
  Transaction& RemoveIfSame(std::string map, std::string key, std::string expected);
  Transaction& SetTtl(std::string map, std::string key, base::Millis ttl_ms);
  Transaction& GetEntryView(std::string map, std::string key);
  Transaction& ExecuteOnKey(std::string map, std::string key, std::string processor,
                            record::GenericRecord argument = {});

  // An operation built elsewhere (e.g. another Transaction's, from request().transaction),
  // with its precondition: the saga inbox puts its marker before a handler's operations.
  Transaction& Append(map::TxOp op);
  // Preconditions of the operation added last (one each; a later call replaces it). Called
  // before any operation, Transact fails with kBadRequest.
  Transaction& IfAbsent();
  Transaction& IfPresent();
  Transaction& IfValue(std::string value);
  // The entry's version (EntryView::version, bumped by every write); 0 means absent.
  Transaction& IfVersion(std::int64_t version);

  // Replaces the batch's id (e.g. one derived from the command being handled, so a second
  // process sending the same batch is deduplicated too). Empty: no id, no deduplication.
  Transaction& WithId(std::string id);

  const std::string& id() const { return request_.transaction_id; }
  std::size_t size() const { return request_.transaction.size(); }
  // The request Instance::Transact sends (moved out of a Transaction about to go: for an
  // asynchronous call through Map::ExecuteAsync); its first builder error, if any.
  const map::MapRequest& request() const& { return request_; }
  map::MapRequest request() && { return std::move(request_); }
  const std::optional<base::Error>& error() const { return error_; }

 private:
  Transaction& Add(map::MapOp op, std::string map, std::string key);
  Transaction& Condition(map::TxCondition condition, std::string value, std::int64_t version);

  map::MapRequest request_;
  std::optional<base::Error> error_;
};

struct TransactionResult {
  bool committed = false;
  std::vector<map::MapResult> results;      // committed: one per operation, in order
  std::optional<map::TxConflict> conflict;  // not committed: the first failed precondition
};

}  // namespace tessera::grid
