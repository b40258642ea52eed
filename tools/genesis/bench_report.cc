#include "tools/genesis/bench_report.h"

#include <algorithm>
#include <tuple>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/match.h"
#include "nlohmann/json.hpp"

namespace genesis::cli {
namespace {

std::string ThreeDigits(double v, const char* unit) {
  if (v >= 100) return absl::StrFormat("%.0f %s", v, unit);
  if (v >= 10) return absl::StrFormat("%.1f %s", v, unit);
  return absl::StrFormat("%.2f %s", v, unit);
}

std::string FormatRatio(double r) {
  if (r >= 100) return absl::StrFormat("%.0fx", r);
  if (r >= 10) return absl::StrFormat("%.1fx", r);
  return absl::StrFormat("%.2fx", r);
}

std::string Cell(const std::string& s) { return absl::StrReplaceAll(s, {{"|", "\\|"}}); }

const BenchResult* Find(const BenchFile& file, const std::string& run_name) {
  const auto it = file.results.find(run_name);
  return it == file.results.end() ? nullptr : &it->second;
}

std::string Text(const BenchResult* r, BenchMetric metric) {
  if (r == nullptr) return "not measured";
  if (!r->error.empty()) {
    // A baseline that this machine lacks says so itself ("unavailable: ...").
    return absl::StartsWith(r->error, "unavailable") ? r->error : "failed: " + r->error;
  }
  if (metric == BenchMetric::kBandwidth && r->bytes_per_second > 0) {
    return FormatRate(r->bytes_per_second);
  }
  if (metric == BenchMetric::kBusBandwidth && r->bus_bytes_per_second > 0) {
    return FormatRate(r->bus_bytes_per_second) + " busbw";
  }
  return FormatNs(r->time_ns);
}

double Ratio(const BenchResult* fig, const BenchResult* base, BenchMetric metric) {
  if (fig == nullptr || base == nullptr || !fig->error.empty() || !base->error.empty()) return 0;
  if (metric == BenchMetric::kBandwidth && fig->bytes_per_second > 0 &&
      base->bytes_per_second > 0) {
    return fig->bytes_per_second / base->bytes_per_second;
  }
  if (metric == BenchMetric::kBusBandwidth && fig->bus_bytes_per_second > 0 &&
      base->bus_bytes_per_second > 0) {
    return fig->bus_bytes_per_second / base->bus_bytes_per_second;
  }
  return fig->time_ns > 0 ? base->time_ns / fig->time_ns : 0;
}

// The number after `prefix` in a run name ("BM_Copy_D2D_CudaMemcpyAsync/4096/manual_time"
// with prefix "BM_Copy_D2D_CudaMemcpyAsync/" gives 4096), or -1.
int64_t ArgAfter(const std::string& run_name, const std::string& prefix) {
  if (!absl::StartsWith(run_name, prefix)) return -1;
  const std::string rest = run_name.substr(prefix.size());
  int64_t v = 0;
  if (!absl::SimpleAtoi(rest.substr(0, rest.find('/')), &v)) return -1;
  return v;
}

// A series: each benchmark named prefix + <number> + suffix, x the number.
nlohmann::json Series(const BenchFile& file, const std::string& label, const std::string& prefix,
                      const std::string& suffix, bool bandwidth) {
  std::vector<std::pair<int64_t, double>> points;
  for (const std::string& name : file.order) {
    const int64_t x = ArgAfter(name, prefix);
    if (x < 0 || !absl::EndsWith(name, suffix)) continue;
    const BenchResult& r = file.results.at(name);
    if (!r.error.empty()) continue;
    points.emplace_back(x, bandwidth ? r.bytes_per_second / 1e9 : r.time_ns);
  }
  std::sort(points.begin(), points.end());
  nlohmann::json xs = nlohmann::json::array(), ys = nlohmann::json::array();
  for (const auto& [x, y] : points) {
    xs.push_back(x);
    ys.push_back(y);
  }
  return {{"label", label}, {"x", xs}, {"y", ys}};
}

nlohmann::json LinePlot(std::string file, std::string title, std::string xlabel,
                        std::string ylabel, bool ylog) {
  return {{"file", std::move(file)}, {"title", std::move(title)}, {"kind", "lines"},
          {"xlabel", std::move(xlabel)}, {"ylabel", std::move(ylabel)}, {"xlog", true},
          {"ylog", ylog}, {"series", nlohmann::json::array()}};
}

void AddIfData(nlohmann::json& plots, nlohmann::json plot) {
  nlohmann::json kept = nlohmann::json::array();
  for (nlohmann::json& s : plot["series"]) {
    if (!s["x"].empty()) kept.push_back(std::move(s));
  }
  if (kept.empty()) return;
  plot["series"] = std::move(kept);
  plots.push_back(std::move(plot));
}

void AllocPlot(const BenchReportInput& input, nlohmann::json& plots, const std::string& run_id,
               const std::vector<std::pair<std::string, std::string>>& families) {
  const auto it = input.files.find(run_id);
  if (it == input.files.end()) return;
  nlohmann::json plot = LinePlot(run_id + ".png",
                                 run_id == "alloc_cpu" ? "Allocate + free, host (wall time per pair)"
                                                       : "Allocate + free, GPU (wall time per pair)",
                                 "block size (bytes)", "ns per pair", true);
  for (const auto& [bench, label] : families) {
    for (int threads : {1, 4, 16}) {
      const std::string suffix = absl::StrCat("/real_time/threads:", threads);
      plot["series"].push_back(Series(it->second,
                                      absl::StrCat(label, ", ", threads, threads == 1 ? " thread" : " threads"),
                                      bench + "/", suffix, false));
    }
  }
  if (run_id == "alloc_cuda") {
    plot["series"].push_back(Series(it->second, "cudaMalloc + cudaFree", "BM_CudaMalloc/",
                                    "/real_time", false));
  }
  AddIfData(plots, std::move(plot));
}

void CopyPlots(const BenchReportInput& input, nlohmann::json& plots) {
  struct Path {
    const char* run_id;
    const char* path;
    const char* title;
    const char* genesis;
    const char* genesis_label;
    const char* baseline;
    const char* baseline_label;
  };
  constexpr Path kPaths[] = {
      {"copy_cpu", "Transposed", "CPU: transposed square float32 matrix to contiguous",
       "CopyStridedToContiguous", "genesis CopyStridedToContiguous", "Memcpy", "memcpy"},
      {"copy_cpu", "Rows", "CPU: every other row of a float32 matrix to contiguous",
       "CopyStridedToContiguous", "genesis CopyStridedToContiguous", "Memcpy", "memcpy"},
      {"copy_cuda", "H2DPinned", "Pinned host to device", "CopyBytesAsync",
       "genesis CopyBytesAsync", "CudaMemcpyAsync", "cudaMemcpyAsync"},
      {"copy_cuda", "D2HPinned", "Device to pinned host", "CopyBytesAsync",
       "genesis CopyBytesAsync", "CudaMemcpyAsync", "cudaMemcpyAsync"},
      {"copy_cuda", "D2D", "Device to device", "CopyBytesAsync", "genesis CopyBytesAsync",
       "CudaMemcpyAsync", "cudaMemcpyAsync"},
      {"copy_cuda", "H2DPageable", "Pageable host to device", "CopyBytes", "genesis CopyBytes",
       "CudaMemcpy", "cudaMemcpy"},
      {"copy_cuda", "D2HPageable", "Device to pageable host", "CopyBytes", "genesis CopyBytes",
       "CudaMemcpy", "cudaMemcpy"},
  };
  for (const Path& p : kPaths) {
    const auto it = input.files.find(p.run_id);
    if (it == input.files.end()) continue;
    const std::string time = std::string(p.run_id) == "copy_cpu" ? "/real_time" : "/manual_time";
    nlohmann::json plot = LinePlot(absl::StrCat("copy_", p.path, ".png"), p.title,
                                   "bytes per copy", "GB/s (bytes copied)", false);
    plot["series"].push_back(Series(it->second, p.genesis_label,
                                    absl::StrCat("BM_Copy_", p.path, "_", p.genesis, "/"), time,
                                    true));
    if (std::string(p.run_id) == "copy_cpu") {
      plot["series"].push_back(Series(it->second, absl::StrCat(p.genesis_label, ", all cores"),
                                      absl::StrCat("BM_Copy_", p.path, "_", p.genesis, "AllCores/"),
                                      time, true));
    }
    plot["series"].push_back(Series(it->second, p.baseline_label,
                                    absl::StrCat("BM_Copy_", p.path, "_", p.baseline, "/"), time,
                                    true));
    AddIfData(plots, std::move(plot));
  }
}

void PeerPlots(const BenchReportInput& input, nlohmann::json& plots) {
  const auto it = input.files.find("peer_matrix_cuda");
  if (it == input.files.end()) return;
  for (const char* kind : {"Bandwidth", "Latency"}) {
    const std::string k = kind;
    int n = 0;
    std::map<std::pair<int, int>, double> values;
    for (const auto& [name, r] : it->second.results) {
      int from = 0, to = 0;
      const std::string prefix = "BM_PeerMatrix_" + k + "_CopyBytesAsync/from:";
      if (!absl::StartsWith(name, prefix) || !r.error.empty()) continue;
      if (std::sscanf(name.c_str() + prefix.size(), "%d/to:%d", &from, &to) != 2) continue;
      n = std::max({n, from + 1, to + 1});
      values[{from, to}] = k == "Bandwidth" ? r.bytes_per_second / 1e9 : r.time_ns / 1e3;
    }
    if (n == 0) continue;
    nlohmann::json labels = nlohmann::json::array(), matrix = nlohmann::json::array();
    for (int i = 0; i < n; ++i) {
      labels.push_back(absl::StrCat("cuda:", i));
      nlohmann::json row = nlohmann::json::array();
      for (int j = 0; j < n; ++j) {
        const auto v = values.find({i, j});
        row.push_back(v == values.end() ? nlohmann::json() : nlohmann::json(v->second));
      }
      matrix.push_back(std::move(row));
    }
    plots.push_back({{"file", k == "Bandwidth" ? "peer_bandwidth.png" : "peer_latency.png"},
                     {"title", k == "Bandwidth"
                                   ? "Peer copies, 256 MiB, genesis CopyBytesAsync (row: from)"
                                   : "Peer copy latency, 4 B, genesis CopyBytesAsync (row: from)"},
                     {"kind", "heatmap"},
                     {"labels", labels},
                     {"matrix", matrix},
                     {"unit", k == "Bandwidth" ? "GB/s" : "us"}});
  }
}

std::string SuiteStatus(const BenchReportInput& input, const std::string& suite,
                        std::string* devices) {
  int ran = 0, failed = 0, skipped = 0;
  std::vector<std::string> devs;
  for (const RunOutcome& r : input.runs) {
    const BenchRun* run = FindRun(r.run_id);
    if (run == nullptr || run->suite != suite) continue;
    if (r.status == "ran") {
      ++ran;
      if (std::find(devs.begin(), devs.end(), r.device) == devs.end()) devs.push_back(r.device);
    } else if (r.status == "failed") {
      ++failed;
    } else {
      ++skipped;
    }
  }
  *devices = devs.empty() ? "-" : absl::StrJoin(devs, ", ");
  if (ran + failed + skipped == 0) return "skipped";
  if (failed > 0) return ran > 0 ? "partly failed" : "failed";
  if (ran == 0) return "skipped";
  return skipped > 0 ? "partly run" : "ran";
}

}  // namespace

std::string FormatNs(double ns) {
  if (ns >= 1e9) return ThreeDigits(ns / 1e9, "s");
  if (ns >= 1e6) return ThreeDigits(ns / 1e6, "ms");
  if (ns >= 1e3) return ThreeDigits(ns / 1e3, "us");
  return ThreeDigits(ns, "ns");
}

std::string FormatRate(double bps) {
  if (bps >= 1e12) return ThreeDigits(bps / 1e12, "TB/s");
  if (bps >= 1e9) return ThreeDigits(bps / 1e9, "GB/s");
  return ThreeDigits(bps / 1e6, "MB/s");
}

namespace {

// "12.8", "1.6", "8": a target as the report prints it.
std::string FormatTarget(double target) { return absl::StrFormat("%.3g", target); }

// How many GPUs run `run_id` used ("cuda:0,cuda:1": 2); 0 for a CPU run.
int GpusOfRun(const BenchReportInput& input, const std::string& run_id) {
  for (const RunOutcome& r : input.runs) {
    if (r.run_id != run_id) continue;
    int gpus = 0;
    for (size_t at = r.device.find("cuda:"); at != std::string::npos;
         at = r.device.find("cuda:", at + 1)) {
      ++gpus;
    }
    return gpus;
  }
  return 0;
}

}  // namespace

std::vector<PairRow> ComputeRows(const BenchReportInput& input) {
  std::vector<PairRow> rows;
  for (const BenchPair& pair : BenchPairs()) {
    const auto file = input.files.find(pair.run_id);
    if (file == input.files.end()) continue;
    const BenchResult* fig = Find(file->second, pair.figure);
    const BenchResult* base = nullptr;
    if (pair.baseline_run.empty()) {
      base = Find(file->second, pair.baseline);
    } else if (const auto other = input.files.find(pair.baseline_run);
               other != input.files.end()) {
      base = Find(other->second, pair.baseline);
    }
    if (pair.optional && fig == nullptr && base == nullptr) continue;
    PairRow row;
    row.pair = &pair;
    row.suite = FindRun(pair.run_id)->suite;
    row.figure_text = Text(fig, pair.metric);
    row.baseline_text = Text(base, pair.metric);
    row.ratio = Ratio(fig, base, pair.metric);
    const int cpus = file->second.context.value("num_cpus", 0);
    row.target = TargetFor(pair, cpus);
    row.limit = LimitFor(pair, cpus, GpusOfRun(input, pair.run_id));
    if (row.target > 0) {
      row.target_text = absl::StrCat(">= ", FormatTarget(row.target), "x");
      if (row.ratio > 0) row.met = row.ratio >= row.target ? "yes" : "no";
      if (row.met == "no") {
        row.shortfall = absl::StrFormat("%.2g%%", 100 * (1 - row.ratio / row.target));
      }
    } else if (pair.max_extra_ns > 0) {
      row.target_text = absl::StrCat("<= +", FormatNs(pair.max_extra_ns));
      if (row.ratio > 0) {
        const double extra = fig->time_ns - base->time_ns;
        row.met = extra <= pair.max_extra_ns ? "yes" : "no";
        if (row.met == "no") row.shortfall = absl::StrCat("+", FormatNs(extra));
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string RenderReport(const BenchReportInput& input, const std::vector<PairRow>& rows) {
  std::string md = "# genesis bench\n\n";
  absl::StrAppend(&md, "`", input.command, "`, started ", input.date, ", took ",
                  absl::StrFormat("%.0f", input.seconds), " s",
                  input.quick ? " (quick run)" : "", ". Each figure is the median of ",
                  input.repetitions, " repetitions (minimum time ", input.min_time,
                  " s each), measured in the same run as its baseline. Speed-up above 1x: "
                  "genesis is faster (less time, or more bytes per second). Raw results: "
                  "Google Benchmark's JSON in `raw/`.\n\n");

  md += "## Summary\n\n| suite | status | devices | rows | targets met | time |\n"
        "| --- | --- | --- | --- | --- | --- |\n";
  for (const std::string& suite : input.suites) {
    std::string devices;
    const std::string status = SuiteStatus(input, suite, &devices);
    int n = 0, targets = 0, met = 0;
    double seconds = 0;
    for (const PairRow& r : rows) {
      if (r.suite != suite) continue;
      ++n;
      if (!r.met.empty()) ++targets;
      if (r.met == "yes") ++met;
    }
    for (const RunOutcome& r : input.runs) {
      const BenchRun* run = FindRun(r.run_id);
      if (run != nullptr && run->suite == suite) seconds += r.seconds;
    }
    absl::StrAppend(&md, "| ", suite, " | ", status, " | ", devices, " | ", n, " | ",
                    targets ? absl::StrCat(met, " of ", targets) : "-", " | ",
                    absl::StrFormat("%.1f s", seconds), " |\n");
  }

  absl::StrAppend(&md, "\n## Machine\n\n```\n", input.machine_text, "```\n");

  for (const BenchSuite& suite : BenchSuites()) {
    if (std::find(input.suites.begin(), input.suites.end(), suite.name) == input.suites.end()) {
      continue;
    }
    bool any = false;
    for (const PairRow& r : rows) any = any || r.suite == suite.name;
    if (!any) continue;
    absl::StrAppend(&md, "\n## ", suite.name, ": ", suite.summary, "\n\n",
                    "| figure | genesis | baseline | baseline figure | speed-up | target | met |\n"
                    "| --- | --- | --- | --- | --- | --- | --- |\n");
    for (const PairRow& r : rows) {
      if (r.suite != suite.name) continue;
      absl::StrAppend(&md, "| ", Cell(r.pair->label), " | ", Cell(r.figure_text), " | ",
                      Cell(r.pair->baseline_label), " | ", Cell(r.baseline_text), " | ",
                      r.ratio > 0 ? FormatRatio(r.ratio) : "-", " | ",
                      r.target_text, " | ",
                      r.met == "no" ? "**no**" : r.met, " |\n");
    }
  }

  std::string missed;
  for (const PairRow& r : rows) {
    if (r.met != "no") continue;
    absl::StrAppend(&missed, "| ", r.suite, " | ", Cell(r.pair->label), " | ",
                    Cell(r.pair->baseline_label), " | ", FormatRatio(r.ratio), " | ", r.target_text,
                    " | ", r.shortfall, " | ", r.limit.empty() ? "not known" : Cell(r.limit),
                    " |\n");
  }
  if (!missed.empty()) {
    absl::StrAppend(&md, "\n## Targets missed\n\n",
                    "By how much each missed target is missed (short of a ratio, or the time "
                    "beyond the baseline), and what is known to limit the row.\n\n",
                    "| suite | figure | baseline | speed-up | target | missed by | what limits "
                    "it |\n| --- | --- | --- | --- | --- | --- | --- |\n",
                    missed);
  }

  md += "\n## Plots\n\n";
  if (!input.plots_skipped.empty()) {
    absl::StrAppend(&md, "Plots skipped: ", input.plots_skipped, "\n");
  } else if (input.plots.empty()) {
    md += "No plots: none of the suites that have plots ran.\n";
  } else {
    for (const std::string& p : input.plots) absl::StrAppend(&md, "![", p, "](", p, ")\n\n");
  }

  std::string skipped;
  for (const RunOutcome& r : input.runs) {
    if (r.status == "ran") continue;
    const BenchRun* run = FindRun(r.run_id);
    absl::StrAppend(&skipped, "- ", r.run_id,
                    run ? absl::StrCat(" (", run->package, ":", run->target, ")") : "", ": ",
                    r.status, ": ", r.reason, "\n");
  }
  if (!skipped.empty()) absl::StrAppend(&md, "\n## Skipped or failed\n\n", skipped);

  md += "\n## Files\n\n";
  for (const RunOutcome& r : input.runs) {
    if (!r.raw_file.empty()) {
      absl::StrAppend(&md, "- [`", r.raw_file, "`](", r.raw_file, "): ", r.run_id, " on ",
                      r.device, absl::StrFormat(", %.1f s", r.seconds), "\n");
    }
  }
  md += "- `summary.json`: this report for machines; `machine.json`: `genesis info --json`; "
        "`logs/`: each binary's output\n";
  return md;
}

nlohmann::json ReportJson(const BenchReportInput& input, const std::vector<PairRow>& rows) {
  nlohmann::json suites = nlohmann::json::array();
  for (const std::string& suite : input.suites) {
    std::string devices;
    std::string status = SuiteStatus(input, suite, &devices);
    suites.push_back({{"name", suite}, {"status", status}, {"devices", devices}});
  }
  nlohmann::json runs = nlohmann::json::array();
  for (const RunOutcome& r : input.runs) {
    runs.push_back({{"id", r.run_id}, {"status", r.status}, {"reason", r.reason},
                    {"device", r.device}, {"raw_file", r.raw_file}, {"seconds", r.seconds}});
  }
  nlohmann::json out_rows = nlohmann::json::array();
  for (const PairRow& r : rows) {
    out_rows.push_back({{"suite", r.suite},
                        {"run", r.pair->run_id},
                        {"label", r.pair->label},
                        {"figure", r.pair->figure},
                        {"figure_text", r.figure_text},
                        {"baseline", r.pair->baseline},
                        {"baseline_label", r.pair->baseline_label},
                        {"baseline_text", r.baseline_text},
                        {"ratio", r.ratio},
                        {"target", r.target},
                        {"target_text", r.target_text},
                        {"met", r.met},
                        {"shortfall", r.shortfall},
                        {"limit", r.limit}});
  }
  return {{"command", input.command}, {"date", input.date}, {"seconds", input.seconds},
          {"quick", input.quick}, {"repetitions", input.repetitions},
          {"min_time", input.min_time}, {"suites", suites}, {"runs", runs},
          {"rows", out_rows}, {"plots", input.plots}, {"plots_skipped", input.plots_skipped}};
}

// Bandwidth against size for each collective: the group beside the library called
// directly (collectives_benchmark's "<op>/<impl>/<bytes>" rows).
void CollectivePlots(const BenchReportInput& input, nlohmann::json& plots) {
  for (const auto& [run_id, library, where] :
       {std::tuple<const char*, const char*, const char*>{"collectives_cpu", "gloo", "CPU processes"},
        {"collectives_cuda", "nccl", "GPUs"}}) {
    const auto it = input.files.find(run_id);
    if (it == input.files.end()) continue;
    for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
                           "all_to_all", "send_recv"}) {
      nlohmann::json plot = LinePlot(absl::StrCat(run_id, "_", op, ".png"),
                                     absl::StrCat(op, " across ", where),
                                     "bytes", "GB/s (algorithm bandwidth)", false);
      plot["series"].push_back(Series(it->second, absl::StrCat("genesis ", library, " group"),
                                      absl::StrCat(op, "/genesis/"), "", true));
      plot["series"].push_back(Series(it->second, absl::StrCat(library, " called directly"),
                                      absl::StrCat(op, "/", library, "/"), "", true));
      AddIfData(plots, std::move(plot));
    }
  }
}

nlohmann::json PlotSpec(const BenchReportInput& input) {
  nlohmann::json plots = nlohmann::json::array();
  AllocPlot(input, plots, "alloc_cpu", {{"BM_HostPool", "genesis host pool"},
                                        {"BM_Malloc", "malloc + free"}});
  AllocPlot(input, plots, "alloc_cuda", {{"BM_DevicePool", "genesis device pool"},
                                         {"BM_CudaMallocAsync", "cudaMallocAsync"}});
  CopyPlots(input, plots);
  PeerPlots(input, plots);
  CollectivePlots(input, plots);
  return {{"plots", plots}};
}

}  // namespace genesis::cli
