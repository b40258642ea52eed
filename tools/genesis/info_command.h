// `genesis info`: the devices of this machine, as a readable report or (--json) JSON.
#ifndef GENESIS_TOOLS_GENESIS_INFO_COMMAND_H_
#define GENESIS_TOOLS_GENESIS_INFO_COMMAND_H_

#include <string>

#include "absl/types/span.h"

namespace genesis::cli {

// Prints the device report to stdout; --no_kernel_check skips the kernel self-test.
// Returns 0, or 1 if a GPU is present but unusable (its kernel check or queries failed),
// or 2 for unexpected arguments.
int RunInfo(absl::Span<const std::string> args);

}  // namespace genesis::cli

#endif  // GENESIS_TOOLS_GENESIS_INFO_COMMAND_H_
