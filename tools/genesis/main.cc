// The `genesis` command: `genesis info` reports devices; later commands add benchmarks
// and trace replay. `genesis help` lists the commands.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "tools/genesis/bench_command.h"
#include "tools/genesis/command.h"
#include "tools/genesis/info_command.h"
#include "tools/genesis/replay_command.h"

namespace genesis::cli {
namespace {

constexpr Command kCommands[] = {
    {"info", "devices, memory, peer access, versions, kernel self-test", RunInfo},
    {"bench", "benchmark suite: genesis beside its baselines, report with plots", RunBench},
    {"replay", "replay allocation traces through a pool: peak reserved / allocated", RunReplay},
};

std::string Usage() {
  std::string usage =
      "genesis <command> [flags]\n\nCommands:\n";
  for (const Command& c : kCommands) {
    // Debian's abseil has its own string_view, so std::string_view goes through std::string.
    absl::StrAppend(&usage, "  ", std::string(c.name), std::string(10 - c.name.size(), ' '),
                    std::string(c.summary), "\n");
  }
  absl::StrAppend(&usage, "  help      this list\n\nFlags: --json for machine-readable output;"
                          " --helpfull for every flag.");
  return usage;
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(Usage());
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() < 2 || std::string_view(positional[1]) == "help") {
    std::printf("%s\n", Usage().c_str());
    return positional.size() < 2 ? 2 : 0;
  }
  const std::string_view name = positional[1];
  std::vector<std::string> args(positional.begin() + 2, positional.end());
  for (const Command& c : kCommands) {
    if (c.name == name) return c.run(args);
  }
  std::fprintf(stderr, "genesis: unknown command '%s'\n\n%s\n", std::string(name).c_str(),
               Usage().c_str());
  return 2;
}

}  // namespace
}  // namespace genesis::cli

int main(int argc, char** argv) { return genesis::cli::Main(argc, argv); }
