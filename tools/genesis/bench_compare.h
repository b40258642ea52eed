// `genesis bench --compare OLD NEW`: what got faster or slower between two report
// directories, beyond the noise each run measured itself.
//
// Benchmarks are matched by result file (raw/<run>.json) and run_name. Each side's
// figure is the median time over its repetitions; a change counts when it exceeds
// max(5%, 3 x the larger coefficient of variation of the two sides). Runs from
// different machines (host name, CPUs, GPU names) are compared all the same, with a
// warning and both machines shown.
#ifndef GENESIS_TOOLS_GENESIS_BENCH_COMPARE_H_
#define GENESIS_TOOLS_GENESIS_BENCH_COMPARE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace genesis::cli {

struct CompareRow {
  std::string file;       // "alloc_cpu".
  std::string run_name;
  double old_ns = 0;
  double new_ns = 0;
  double change = 0;      // new / old - 1 in time: -0.2 is 20% less time.
  double threshold = 0;   // Least |change| that counts.
  std::string verdict;    // "faster", "slower" or "same".
};

struct Comparison {
  std::string old_machine;  // One line each: host, CPUs, GPUs.
  std::string new_machine;
  bool same_machine = true;
  std::vector<CompareRow> rows;      // Benchmarks measured on both sides.
  std::vector<std::string> only_old;  // "file: run_name" measured on one side only.
  std::vector<std::string> only_new;
};

// Compares the report directories `old_dir` and `new_dir` (each with raw/*.json, and
// machine.json when genesis bench wrote it). NotFound naming the directory when one has
// no raw results; InvalidArgument naming a file that is not Google Benchmark JSON.
absl::StatusOr<Comparison> CompareReports(const std::string& old_dir, const std::string& new_dir);

// Readable: the machine warning if any, then the faster and the slower benchmarks
// (largest changes first) and how many stayed within noise.
std::string FormatComparison(const Comparison& c);

// The same as JSON: {"same_machine", "old_machine", "new_machine", "rows": [...],
// "only_old", "only_new"}.
nlohmann::json ComparisonToJson(const Comparison& c);

}  // namespace genesis::cli

#endif  // GENESIS_TOOLS_GENESIS_BENCH_COMPARE_H_
