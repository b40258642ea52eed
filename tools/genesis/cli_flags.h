// Flags shared by several `genesis` subcommands.
#ifndef GENESIS_TOOLS_GENESIS_CLI_FLAGS_H_
#define GENESIS_TOOLS_GENESIS_CLI_FLAGS_H_

#include "absl/flags/declare.h"

// Print machine-readable JSON instead of readable tables.
ABSL_DECLARE_FLAG(bool, json);

#endif  // GENESIS_TOOLS_GENESIS_CLI_FLAGS_H_
