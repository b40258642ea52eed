// `genesis bench`: runs the benchmark suite (bench_suites.h) on this machine's devices
// and writes a report directory (bench_report.h); `genesis bench --compare OLD NEW`
// tells what got faster or slower between two such directories (bench_compare.h).
//
//   genesis bench [--quick] [--suite=alloc,copy] [--devices=cpu,cuda:0] [--out=DIR] [--json]
//   genesis bench --compare OLD_DIR NEW_DIR [--json]
#ifndef GENESIS_TOOLS_GENESIS_BENCH_COMMAND_H_
#define GENESIS_TOOLS_GENESIS_BENCH_COMMAND_H_

#include <string>

#include "absl/types/span.h"

namespace genesis::cli {

// Runs the command. Returns 0 when the report was written and every benchmark binary
// ran (a baseline or figure that fails inside a binary is reported in its row, not an
// error); 1 when a binary failed (the report is written all the same) or, for
// --compare, when the results could not be read; 2 for bad usage: an unknown suite or
// device (named), a device this machine lacks, an output directory that cannot be
// written, or arguments where none belong.
int RunBench(absl::Span<const std::string> args);

}  // namespace genesis::cli

#endif  // GENESIS_TOOLS_GENESIS_BENCH_COMMAND_H_
