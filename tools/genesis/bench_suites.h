// The catalog of `genesis bench`: which benchmark binaries make up each suite, and which
// figure of each binary is compared with which baseline (and against what target).
//
// A suite ("alloc", "copy", ...) has a part per kind of device: its CPU part runs when
// `cpu` is among the devices, its CUDA part on a GPU. A part is one run of one Google
// Benchmark binary (named by its Bazel package and target, which also gives its place
// in the runfiles and in the GPU bundle), optionally with a filter. A pair names two
// benchmarks of the same run by their `run_name` in Google Benchmark's JSON: the
// figure (genesis) and its baseline (a system or CUDA call), and how to compare them.
// Nothing here runs or reads anything: the catalog is plain data, tested on its own.
#ifndef GENESIS_TOOLS_GENESIS_BENCH_SUITES_H_
#define GENESIS_TOOLS_GENESIS_BENCH_SUITES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace genesis::cli {

enum class BenchDevice { kCpu, kCuda };

// "cpu" or "cuda".
const char* BenchDeviceName(BenchDevice device);

// One run of one benchmark binary.
struct BenchRun {
  std::string suite;       // "alloc".
  BenchDevice device;
  std::string id;          // Unique over the catalog; names the result file <id>.json.
  std::string package;     // "benchmarks/memory".
  std::string target;      // "allocator_benchmark".
  std::string filter;      // --benchmark_filter; empty: every benchmark.
  std::string quick_filter;  // Used with --quick instead of `filter` when not empty.
  bool wants_traces = false;  // Takes the trace files as arguments (replay suite).
  int min_gpus = 1;        // CUDA parts: GPUs it needs (the peer matrix: 2).
  // CUDA parts: runs on every chosen GPU (the peer matrix, collectives: one rank each),
  // not only the first.
  bool all_gpus = false;
  // More arguments for the binary, and the ones used with --quick instead when given.
  std::vector<std::string> args = {};
  std::vector<std::string> quick_args = {};
};

// How a figure and its baseline compare. Every ratio is a speed-up: above 1 means the
// figure is faster (less time, or more bytes per second).
enum class BenchMetric {
  kTime,       // Real (or manual) time per iteration; ratio = baseline / figure.
  kBandwidth,  // bytes_per_second; ratio = figure / baseline.
  // Collectives: the "busbw_GBps" counter, nccl-tests' bus bandwidth (the algorithm's
  // bandwidth times what each rank must move, 2(n-1)/n for all_reduce); ratio = figure /
  // baseline.
  kBusBandwidth,
};

// What limits a row, and where that holds: machines of at most `max_cpus` CPUs, runs on
// `min_gpus` to `max_gpus` GPUs (0: no bound).
struct BenchLimit {
  std::string text;
  int max_cpus = 0;
  int min_gpus = 0;
  int max_gpus = 0;
};

struct BenchPair {
  std::string run_id;          // BenchRun::id of the run holding both.
  std::string label;           // "host pool, 512 B, 1 thread".
  std::string figure;          // run_name of the genesis benchmark.
  std::string baseline_label;  // "malloc + free".
  std::string baseline;        // run_name of the baseline benchmark.
  // BenchRun::id of the run holding the baseline when it is another (PyTorch's script
  // beside a genesis binary, in the same `genesis bench`); empty: run_id.
  std::string baseline_run;
  BenchMetric metric = BenchMetric::kTime;
  double target = 0;           // Least acceptable ratio; 0: no target.
  // kTime rows whose target is a time above the baseline instead ("within +1 us"): the
  // most nanoseconds the figure may take beyond it; 0: none. A row has one or the other.
  double max_extra_ns = 0;
  // Thread scaling: the target is target x min(scaling_threads, the CPUs of the machine
  // that ran it) (0: `target` as it is). A 16-thread row on 2 cores cannot show 16x.
  int scaling_threads = 0;
  std::string target_source;   // Where the target is stated ("README"), for the report.
  // What is known to hold this row below its target where it misses, as measured (the
  // docs give the measurements): the first of these that holds where the row ran; none:
  // nothing is known, and the report says so.
  std::vector<BenchLimit> limits;
  // Left out of the report when neither benchmark ran (rows for GPUs or traces this
  // machine lacks); otherwise a missing benchmark is reported as such.
  bool optional = false;
};

// A suite by name.
struct BenchSuite {
  std::string name;
  std::string summary;
};

// Every suite, in report order.
const std::vector<BenchSuite>& BenchSuites();

// Every run of every suite, in the order they run.
const std::vector<BenchRun>& BenchRuns();

// The target of `pair` on a machine of `cpus` CPUs (BenchPair::scaling_threads).
double TargetFor(const BenchPair& pair, int cpus);

// The text of the first of `pair`'s limits that holds for a run on `gpus` GPUs on a
// machine of `cpus` CPUs (0: not known, which no bound excludes); "" if none holds.
std::string LimitFor(const BenchPair& pair, int cpus, int gpus);

// Every pair of every run, in report order.
const std::vector<BenchPair>& BenchPairs();

// The runs of one suite.
std::vector<const BenchRun*> RunsOfSuite(const std::string& suite);

// The run with this id, or nullptr.
const BenchRun* FindRun(const std::string& id);

// Parses --suite: names separated by commas ("alloc,copy"); empty or "all" means every
// suite. Duplicates are dropped; order follows BenchSuites(). InvalidArgument naming the
// unknown suite and listing the known ones.
absl::StatusOr<std::vector<std::string>> ParseSuiteList(const std::string& text);

}  // namespace genesis::cli

#endif  // GENESIS_TOOLS_GENESIS_BENCH_SUITES_H_
