// Finding and running what `genesis bench` needs outside its own binary: the benchmark
// binaries, the traces and the plot script, in either of two layouts, and running a
// program with its output sent to a log file.
//
// Layouts: under `bazel run` / `bazel test` the files are runfiles of //tools/genesis
// (<runfiles>/genesis/<package>/<name>); in the GPU bundle (tools/gpu_bundle.sh) they lie
// beside the `genesis` binary: benchmarks/<package with / as _>_<name>, traces/,
// bench_plots.py.
#ifndef GENESIS_TOOLS_GENESIS_BENCH_RUNNER_H_
#define GENESIS_TOOLS_GENESIS_BENCH_RUNNER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace genesis::cli {

// The path of the benchmark binary //<package>:<target>, or "" when none is found; then
// `*looked_in` (if given) lists the places tried.
std::string FindBenchBinary(const std::string& package, const std::string& target,
                            std::string* looked_in = nullptr);

// A file of this repository by its path ("tools/genesis/bench_plots.py"), in the
// runfiles or beside the binary under its base name; "" when none is found.
std::string FindDataFile(const std::string& repo_path);

// The recorded traces (*.trace.gz of traces/), sorted; empty when none are found.
std::vector<std::string> FindTraces();

// Runs `argv` (argv[0] a path) with the environment of this process plus `env`
// (overriding), stdout and stderr appended to `log_path`, and waits for it. Returns its
// exit status (128 + signal when killed by one); an error when it could not start.
absl::StatusOr<int> RunLogged(const std::vector<std::string>& argv,
                              const std::map<std::string, std::string>& env,
                              const std::string& log_path);

// The last non-empty line of the file at `path` (for error messages), "" if none.
std::string LastLine(const std::string& path);

}  // namespace genesis::cli

#endif  // GENESIS_TOOLS_GENESIS_BENCH_RUNNER_H_
