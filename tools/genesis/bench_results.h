// Reading Google Benchmark's JSON output (--benchmark_out_format=json) for `genesis
// bench`: one figure per benchmark, the median over its repetitions, with the spread
// that tells a change from noise.
#ifndef GENESIS_TOOLS_GENESIS_BENCH_RESULTS_H_
#define GENESIS_TOOLS_GENESIS_BENCH_RESULTS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace genesis::cli {

// One benchmark (a `run_name`), over its repetitions.
struct BenchResult {
  std::string run_name;
  double time_ns = 0;           // Median real (or manual) time per iteration, in ns.
  double bytes_per_second = 0;  // Median; 0 when the benchmark sets none.
  // Median of a "busbw_GBps" counter (collectives: nccl-tests' bus bandwidth), in bytes
  // per second; 0 when the benchmark sets none.
  double bus_bytes_per_second = 0;
  double cv = 0;                // Coefficient of variation of the time; 0 if unknown.
  int repetitions = 0;          // Measurements behind the median.
  std::string error;            // Non-empty when the benchmark failed (SkipWithError).
};

struct BenchFile {
  nlohmann::json context;                     // Google Benchmark's "context" object.
  std::map<std::string, BenchResult> results;  // By run_name.
  std::vector<std::string> order;              // run_names in file order.
};

// Parses the JSON text of one benchmark binary's output. From the repetitions when the
// file holds them, else from the "median" (and "cv") aggregates. InvalidArgument naming
// `name` when the text is not such a file.
absl::StatusOr<BenchFile> ParseBenchFile(const std::string& text, const std::string& name);

// Reads and parses the file at `path`; NotFound when it cannot be read.
absl::StatusOr<BenchFile> ReadBenchFile(const std::string& path);

// The `.json` files in `dir` (not recursive), sorted by name.
std::vector<std::string> ListJsonFiles(const std::string& dir);

}  // namespace genesis::cli

#endif  // GENESIS_TOOLS_GENESIS_BENCH_RESULTS_H_
