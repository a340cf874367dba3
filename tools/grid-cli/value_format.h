#pragma once
// grid-cli uses the admin module's value formatting (tessera/admin/values.h) unqualified.

#include "tessera/admin/values.h"

namespace tessera::tools::cli {

using admin::Dump;
using admin::RecordFromJson;
using admin::ValueToJson;
using admin::ValueToText;

}  // namespace tessera::tools::cli
