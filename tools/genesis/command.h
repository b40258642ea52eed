// Subcommands of the `genesis` command.
//
// `genesis <command> [flags] [args]`: main.cc holds the table of commands; each command is
// a library of its own that exposes one `Run...` function with this signature. Flags are
// absl flags, parsed once by main before the command runs; a flag that several commands
// share (such as --json) is declared in cli_flags.h.
#ifndef GENESIS_TOOLS_GENESIS_COMMAND_H_
#define GENESIS_TOOLS_GENESIS_COMMAND_H_

#include <string>
#include <string_view>

#include "absl/types/span.h"

namespace genesis::cli {

// Runs a command with its positional arguments (after the command's name) and returns the
// process exit code: 0 on success, 1 when the work failed, 2 for bad usage.
using CommandFn = int (*)(absl::Span<const std::string> args);

struct Command {
  std::string_view name;
  std::string_view summary;
  CommandFn run;
};

}  // namespace genesis::cli

#endif  // GENESIS_TOOLS_GENESIS_COMMAND_H_
