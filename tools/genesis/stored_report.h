// Reading a stored `genesis bench` report directory back (its summary.json, raw/ and the
// machine section of report.md), so that a newer build renders it again with its own
// targets and limits without running anything: `genesis bench --rerender DIR`.
#ifndef GENESIS_TOOLS_GENESIS_STORED_REPORT_H_
#define GENESIS_TOOLS_GENESIS_STORED_REPORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "tools/genesis/bench_report.h"

namespace genesis::cli {

// The input that rendered the report in `dir`: the run as summary.json records it (the
// command, date, settings, suites, each run's outcome, the plots), each run's raw
// results from raw/, and the machine as report.md shows it. NotFound or InvalidArgument,
// naming the file, where one is missing or not what a report writes.
absl::StatusOr<BenchReportInput> ReadStoredReport(const std::string& dir);

}  // namespace genesis::cli

#endif  // GENESIS_TOOLS_GENESIS_STORED_REPORT_H_
