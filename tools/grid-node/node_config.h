#pragma once
// NodeConfig: everything grid-node needs to start a member, read from command-line flags and
// an optional YAML file (--config). The file is applied first; flags given on the command
// line override it. Both use the same keys ("port", "cluster-name", ...; in YAML an
// underscore may replace a dash), so a setting means the same thing wherever it is written.
//
// Thread-safety: plain functions over values; thread-compatible.

#include <string>

#include "tessera/base/error.h"
#include "tessera/grid/member.h"

namespace tessera::tools::node {

struct NodeConfig {
  grid::MemberOptions member;
  std::string log_level = "info";  // trace|debug|info|warn|error
  bool help = false;               // --help was given: print HelpText() and exit 0
};

// Parses the command line (argv[0] is the program name). Reads and applies --config FILE
// first, then the other flags. Errors: kBadRequest with one line naming the bad flag, value,
// file or YAML key and what to do.
base::Result<NodeConfig> ParseNodeConfig(int argc, const char* const argv[]);

// Applies a YAML document to `config`. `source` names the document in errors (a file name).
// Keys: the flag names (see HelpText) plus `maps: {NAME: {default_ttl_ms, max_idle_ms,
// max_entries}}`. Errors: kBadRequest for invalid YAML, unknown keys or bad values.
base::Result<void> ApplyYaml(const std::string& text, const std::string& source,
                             NodeConfig& config);

// The --help text.
std::string HelpText();

}  // namespace tessera::tools::node
