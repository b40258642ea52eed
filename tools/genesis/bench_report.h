// The report of `genesis bench`: from the runs' Google Benchmark results, one row per
// figure beside its baseline (bench_suites.h), rendered as Markdown for people
// (report.md, read on GitHub), as JSON for machines (summary.json), and as a plot spec
// (plots.json) that tools/genesis/bench_plots.py draws with matplotlib. Rendering only:
// nothing here runs a benchmark or touches a device, so it is tested on stored results.
#ifndef GENESIS_TOOLS_GENESIS_BENCH_REPORT_H_
#define GENESIS_TOOLS_GENESIS_BENCH_REPORT_H_

#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/genesis/bench_results.h"
#include "tools/genesis/bench_suites.h"

namespace genesis::cli {

// What became of one run of the catalog.
struct RunOutcome {
  std::string run_id;
  std::string status;    // "ran", "failed" or "skipped".
  std::string reason;    // Why it failed or was skipped.
  std::string device;    // Where it ran: "cpu", "cuda:0".
  std::string raw_file;  // Relative to the report: "raw/alloc_cpu.json"; "" if none.
  double seconds = 0;
};

struct BenchReportInput {
  std::string command;     // The command line, for the report's head.
  std::string date;        // When the run started (UTC, ISO 8601).
  double seconds = 0;      // How long it took.
  bool quick = false;
  int repetitions = 0;
  double min_time = 0;
  std::string machine_text;   // FormatDeviceReport of where it ran.
  std::vector<std::string> suites;  // The suites asked for, in order.
  std::vector<RunOutcome> runs;     // Every run of those suites, in order.
  std::map<std::string, BenchFile> files;  // Results by run id (runs that ran).
  std::string plots_skipped;        // Why no plots were drawn; "" if they were.
  std::vector<std::string> plots;   // Drawn plots, relative to the report: "plots/x.png".
};

// One figure beside its baseline.
struct PairRow {
  const BenchPair* pair = nullptr;
  std::string suite;
  std::string figure_text;    // "31.2 ns", "51.4 GB/s", or why there is none.
  std::string baseline_text;
  double ratio = 0;           // Speed-up (bench_suites.h); 0 when either is missing.
  double target = 0;          // TargetFor the pair on the machine that ran it; 0: none.
  // The target as the report prints it: ">= 0.98x", "<= +1 us"; empty: none.
  std::string target_text;
  std::string met;            // "yes", "no", or "" without a target or ratio.
  // Where the target is missed, by how much: "32%" short of a ratio, "+1.20 us" beyond
  // a time above the baseline; empty otherwise.
  std::string shortfall;
  // What is known to limit the row where it ran (LimitFor its pair); empty: nothing.
  std::string limit;
};

// The rows of every pair whose run ran. Optional pairs with neither benchmark present
// are left out; a missing or failed benchmark gives a row that says so.
std::vector<PairRow> ComputeRows(const BenchReportInput& input);

// A time in ns as "31.2 ns", "1.41 us", "36.5 ms", "2.10 s" (three significant digits).
std::string FormatNs(double ns);

// Bytes per second as decimal units: "51.4 GB/s", "2.51 TB/s".
std::string FormatRate(double bytes_per_second);

// report.md: the run, a summary per suite, the machine, one table per suite (figure,
// baseline, ratio, target, met), every missed target with its shortfall and what is
// known to limit it (BenchPair::limits, or that nothing is), the plots, what was skipped
// and why, the files.
std::string RenderReport(const BenchReportInput& input, const std::vector<PairRow>& rows);

// summary.json: the same facts for machines (stable keys: "suites", "runs", "rows").
nlohmann::json ReportJson(const BenchReportInput& input, const std::vector<PairRow>& rows);

// plots.json for bench_plots.py: {"plots": [...]}, each {"file", "title", "kind":
// "lines" (with "xlabel", "ylabel", "xlog", "ylog", "series": [{"label", "x", "y"}]) or
// "heatmap" (with "labels", "matrix" (null on the diagonal), "unit")}. Only plots that
// have data: allocation time by size and threads, bandwidth by size for each copy path,
// the peer matrix.
nlohmann::json PlotSpec(const BenchReportInput& input);

}  // namespace genesis::cli

#endif  // GENESIS_TOOLS_GENESIS_BENCH_REPORT_H_
