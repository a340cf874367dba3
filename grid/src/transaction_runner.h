#pragma once
// How the Instance implementations run a Transaction (transaction.cc). Private to grid/.

#include "tessera/grid/invoker.h"
#include "tessera/grid/transaction.h"

namespace tessera::grid {

// Sends the transaction's request through `invoker` (blocking) and unpacks the result.
// Errors: the builder's first error, then those of InvokeSync.
base::Result<TransactionResult> RunTransaction(Invoker& invoker, const Transaction& transaction);

}  // namespace tessera::grid
