#include "tools/genesis/cli_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(bool, json, false, "print JSON for machines instead of readable tables");
