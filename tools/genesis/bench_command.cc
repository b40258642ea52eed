#include "tools/genesis/bench_command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "genesis/core/device.h"
#include "genesis/cuda/device_query.h"
#include "nlohmann/json.hpp"
#include "tools/genesis/bench_compare.h"
#include "tools/genesis/bench_report.h"
#include "tools/genesis/bench_results.h"
#include "tools/genesis/bench_runner.h"
#include "tools/genesis/bench_suites.h"
#include "tools/genesis/cli_flags.h"
#include "tools/genesis/device_report.h"
#include "tools/genesis/stored_report.h"
#include "tools/genesis/text_table.h"

ABSL_FLAG(bool, quick, false,
          "bench: a short run (about a minute): fewer repetitions, less time each");
ABSL_FLAG(std::string, suite, "all",
          "bench: suites to run, separated by commas (alloc, copy, batch, peer, convert, "
          "contiguous, replay, collectives), or all");
ABSL_FLAG(std::string, devices, "",
          "bench: devices to run on, e.g. cpu,cuda:0 (default: cpu and every GPU)");
ABSL_FLAG(std::string, out, "",
          "bench: report directory (default: bench_report/ in the directory bench was "
          "started from)");
ABSL_FLAG(bool, compare, false,
          "bench: compare two report directories: genesis bench --compare OLD NEW");
ABSL_FLAG(bool, rerender, false,
          "bench: render a stored report again with this build's targets and limits, "
          "running nothing: genesis bench --rerender DIR");
ABSL_FLAG(int, bench_repetitions, 0,
          "bench: repetitions of each benchmark (default 5, or 3 with --quick)");
ABSL_FLAG(double, bench_min_time, 0,
          "bench: minimum seconds per repetition (default 0.2, or 0.02 with --quick)");

namespace genesis::cli {
namespace {

namespace fs = std::filesystem;

struct DeviceChoice {
  bool cpu = false;
  std::vector<int> gpus;  // Indices as this process sees them, in the order given.
};

absl::StatusOr<DeviceChoice> ParseDevices(const std::string& text, int gpu_count) {
  DeviceChoice choice;
  const std::string trimmed(absl::StripAsciiWhitespace(text));
  if (trimmed.empty()) {
    choice.cpu = true;
    for (int i = 0; i < gpu_count; ++i) choice.gpus.push_back(i);
    return choice;
  }
  for (absl::string_view part : absl::StrSplit(trimmed, ',', absl::SkipWhitespace())) {
    const std::string name(absl::StripAsciiWhitespace(part));
    absl::StatusOr<Device> d = Device::Parse(name);
    if (!d.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--devices: unknown device '", name,
                                                     "' (expected cpu or cuda:N)"));
    }
    if (d->is_cpu()) {
      choice.cpu = true;
      continue;
    }
    if (d->index() >= gpu_count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--devices: ", name, " is not on this machine (",
          gpu_count == 0 ? absl::StrCat("no GPU: ", cuda::NoDeviceReason())
                         : absl::StrCat(gpu_count, gpu_count == 1 ? " GPU" : " GPUs"),
          ")"));
    }
    if (std::find(choice.gpus.begin(), choice.gpus.end(), d->index()) == choice.gpus.end()) {
      choice.gpus.push_back(d->index());
    }
  }
  return choice;
}

// CUDA_VISIBLE_DEVICES for a child that should see `gpus` (this process's indices) in
// that order, through this process's own CUDA_VISIBLE_DEVICES if it has one.
std::string VisibleDevices(const std::vector<int>& gpus) {
  std::vector<std::string> parent;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"); v != nullptr && *v) {
    parent = absl::StrSplit(v, ',', absl::SkipWhitespace());
  }
  std::vector<std::string> out;
  for (int g : gpus) {
    out.push_back(g < static_cast<int>(parent.size()) ? parent[g] : absl::StrCat(g));
  }
  return absl::StrJoin(out, ",");
}

std::string DefaultOut() {
  if (const char* wd = std::getenv("BUILD_WORKING_DIRECTORY"); wd != nullptr && *wd) {
    return absl::StrCat(wd, "/bench_report");
  }
  return "bench_report";
}

// Makes `dir` and its subfolders and proves it writable; the error says why not.
absl::Status PrepareOut(const std::string& dir) {
  std::error_code ec;
  for (const char* sub : {"", "/raw", "/logs", "/plots"}) {
    fs::create_directories(dir + sub, ec);
    if (ec) {
      return absl::InvalidArgumentError(absl::StrCat("cannot write the report to '", dir,
                                                     "': ", ec.message()));
    }
  }
  const std::string probe = dir + "/.write_test";
  std::ofstream f(probe);
  if (!f || !(f << "x") || (f.close(), !f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write the report to '", dir, "': not writable"));
  }
  fs::remove(probe, ec);
  // Results of an earlier run would mix with this one's.
  for (const char* sub : {"/raw", "/plots", "/logs"}) {
    for (const auto& entry : fs::directory_iterator(dir + sub, ec)) fs::remove(entry.path(), ec);
  }
  return absl::OkStatus();
}

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  f.close();
  return static_cast<bool>(f);
}

std::string NowUtc() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string FindInPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir :
       absl::StrSplit(path ? path : "/usr/bin:/bin", ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(dir, "/", program);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

int Compare(absl::Span<const std::string> args) {
  if (args.size() != 2) {
    std::fprintf(stderr, "genesis bench --compare: name two report directories: "
                         "genesis bench --compare OLD_DIR NEW_DIR\n");
    return 2;
  }
  const absl::StatusOr<Comparison> c = CompareReports(args[0], args[1]);
  if (!c.ok()) {
    std::fprintf(stderr, "genesis bench --compare: %s\n", std::string(c.status().message()).c_str());
    return 2;
  }
  if (absl::GetFlag(FLAGS_json)) {
    std::printf("%s\n", ComparisonToJson(*c).dump(2).c_str());
  } else {
    std::printf("%s", FormatComparison(*c).c_str());
  }
  return 0;
}

// Writes `dir`'s report.md and summary.json for `input` and its `rows`; the summary, or
// nullopt (after saying so) if a file cannot be written.
std::optional<nlohmann::json> WriteReport(const std::string& dir, const BenchReportInput& input,
                                          const std::vector<PairRow>& rows) {
  nlohmann::json summary = ReportJson(input, rows);
  summary["report"] = dir + "/report.md";
  if (!WriteFile(dir + "/report.md", RenderReport(input, rows)) ||
      !WriteFile(dir + "/summary.json", summary.dump(2) + "\n")) {
    std::fprintf(stderr, "genesis bench: cannot write the report to '%s'\n", dir.c_str());
    return std::nullopt;
  }
  return summary;
}

// Writes the report.md and summary.json of the stored report in args[0] again, from its
// raw results, with this build's targets and limits.
int Rerender(absl::Span<const std::string> args) {
  if (args.size() != 1) {
    std::fprintf(stderr,
                 "genesis bench --rerender: name one report directory: "
                 "genesis bench --rerender DIR\n");
    return 2;
  }
  std::error_code ec;
  std::string dir = fs::absolute(args[0], ec).lexically_normal().string();
  if (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const absl::StatusOr<BenchReportInput> input = ReadStoredReport(dir);
  if (!input.ok()) {
    std::fprintf(stderr, "genesis bench --rerender: %s\n",
                 std::string(input.status().message()).c_str());
    return 2;
  }
  const std::vector<PairRow> rows = ComputeRows(*input);
  if (!WriteReport(dir, *input, rows)) return 1;
  int targets = 0, met = 0;
  for (const PairRow& r : rows) {
    targets += !r.met.empty();
    met += r.met == "yes";
  }
  std::printf("%s/report.md rendered again: %d of %d targets met\n", dir.c_str(), met, targets);
  return 0;
}

struct Settings {
  bool quick = false;
  int repetitions = 5;
  double min_time = 0.2;
  DeviceChoice devices;
  int gpu_count = 0;
  std::string out;
};

// Runs (or skips, saying why) one run of the catalog.
RunOutcome RunOne(const BenchRun& run, const Settings& s, const std::vector<std::string>& traces,
                  BenchFile* file) {
  RunOutcome o;
  o.run_id = run.id;
  o.status = "skipped";
  if (run.device == BenchDevice::kCpu) {
    if (!s.devices.cpu) {
      o.reason = "cpu is not in --devices";
      return o;
    }
    o.device = "cpu";
  } else {
    if (s.gpu_count == 0) {
      o.reason = absl::StrCat("no GPU: ", cuda::NoDeviceReason());
      return o;
    }
    if (s.devices.gpus.empty()) {
      o.reason = "no GPU in --devices";
      return o;
    }
    if (static_cast<int>(s.devices.gpus.size()) < run.min_gpus) {
      o.reason = absl::StrCat("needs ", run.min_gpus, " GPUs; ", s.devices.gpus.size(),
                              " chosen (of ", s.gpu_count, " on this machine)");
      return o;
    }
    std::vector<std::string> names;
    const size_t n = run.min_gpus > 1 || run.all_gpus ? s.devices.gpus.size() : 1;
    for (size_t i = 0; i < n; ++i) names.push_back(absl::StrCat("cuda:", s.devices.gpus[i]));
    o.device = absl::StrJoin(names, ",");
  }
  std::string looked_in;
  const std::string binary = FindBenchBinary(run.package, run.target, &looked_in);
  if (binary.empty()) {
    o.reason = absl::StrCat("//", run.package, ":", run.target, " not found (looked in ",
                            looked_in, ")");
    return o;
  }
  if (run.wants_traces && traces.empty()) {
    o.reason = "no traces found (traces/*.trace.gz)";
    return o;
  }
  const std::string raw = absl::StrCat("raw/", run.id, ".json");
  const std::string log = absl::StrCat(s.out, "/logs/", run.id, ".log");
  std::vector<std::string> argv = {
      binary,
      absl::StrCat("--benchmark_out=", s.out, "/", raw),
      "--benchmark_out_format=json",
      absl::StrCat("--benchmark_repetitions=", s.repetitions),
      "--benchmark_display_aggregates_only=true",
      absl::StrCat("--benchmark_min_time=", s.min_time)};
  const std::string& filter = s.quick && !run.quick_filter.empty() ? run.quick_filter : run.filter;
  if (!filter.empty()) argv.push_back("--benchmark_filter=" + filter);
  if (run.wants_traces) argv.insert(argv.end(), traces.begin(), traces.end());
  const std::vector<std::string>& args = s.quick && !run.quick_args.empty() ? run.quick_args : run.args;
  argv.insert(argv.end(), args.begin(), args.end());
  std::map<std::string, std::string> env;
  if (run.device == BenchDevice::kCuda) {
    std::vector<int> order = s.devices.gpus;
    env["CUDA_VISIBLE_DEVICES"] = VisibleDevices(order);
  }
  std::fprintf(stderr, "genesis bench: %s (//%s:%s) on %s ...", run.id.c_str(),
               run.package.c_str(), run.target.c_str(), o.device.c_str());
  const auto start = std::chrono::steady_clock::now();
  const absl::StatusOr<int> rc = RunLogged(argv, env, log);
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, " %.1f s\n", o.seconds);
  absl::StatusOr<BenchFile> parsed = ReadBenchFile(s.out + "/" + raw);
  if (parsed.ok()) {
    *file = *std::move(parsed);
    o.raw_file = raw;
  }
  if (!rc.ok()) {
    o.status = "failed";
    o.reason = std::string(rc.status().message());
  } else if (*rc != 0) {
    o.status = "failed";
    o.reason = absl::StrCat("exit status ", *rc, ": ", LastLine(log), " (logs/", run.id, ".log)");
  } else if (!parsed.ok()) {
    o.status = "failed";
    o.reason = absl::StrCat(parsed.status().message(), " (logs/", run.id, ".log)");
  } else {
    o.status = "ran";
  }
  return o;
}

// Draws the plots of `spec` into <out>/plots; returns why not, or "" when drawn.
std::string DrawPlots(const nlohmann::json& spec, const std::string& out,
                      std::vector<std::string>* drawn) {
  if (spec["plots"].empty()) return "";
  // The python3 of PATH first; where it lacks matplotlib (a virtual environment, say),
  // the system's, which tools/setup.sh gives matplotlib.
  std::vector<std::string> pythons;
  for (const std::string& p : {FindInPath("python3"), std::string("/usr/bin/python3")}) {
    if (!p.empty() && access(p.c_str(), X_OK) == 0 &&
        std::find(pythons.begin(), pythons.end(), p) == pythons.end()) {
      pythons.push_back(p);
    }
  }
  if (pythons.empty()) return "python3 is not installed (tools/setup.sh installs it)";
  const std::string script = FindDataFile("tools/genesis/bench_plots.py");
  if (script.empty()) return "bench_plots.py not found beside genesis or in its runfiles";
  const std::string log = out + "/logs/plots.log";
  absl::StatusOr<int> rc = 3;
  for (const std::string& python : pythons) {
    rc = RunLogged({python, script, out + "/plots.json", out + "/plots"}, {}, log);
    if (!rc.ok() || *rc != 3) break;  // 3: no matplotlib there.
  }
  if (!rc.ok()) return std::string(rc.status().message());
  if (*rc != 0) return LastLine(log);
  for (const nlohmann::json& p : spec["plots"]) {
    const std::string rel = "plots/" + p["file"].get<std::string>();
    std::error_code ec;
    if (fs::is_regular_file(out + "/" + rel, ec)) drawn->push_back(rel);
  }
  return "";
}

}  // namespace

int RunBench(absl::Span<const std::string> args) {
  if (absl::GetFlag(FLAGS_compare)) return Compare(args);
  if (absl::GetFlag(FLAGS_rerender)) return Rerender(args);
  if (!args.empty()) {
    std::fprintf(stderr, "genesis bench: unexpected argument '%s'\n", args[0].c_str());
    return 2;
  }
  const absl::StatusOr<std::vector<std::string>> suites = ParseSuiteList(absl::GetFlag(FLAGS_suite));
  if (!suites.ok()) {
    std::fprintf(stderr, "genesis bench: %s\n", std::string(suites.status().message()).c_str());
    return 2;
  }
  Settings s;
  s.gpu_count = cuda::DeviceCount();
  absl::StatusOr<DeviceChoice> devices = ParseDevices(absl::GetFlag(FLAGS_devices), s.gpu_count);
  if (!devices.ok()) {
    std::fprintf(stderr, "genesis bench: %s\n", std::string(devices.status().message()).c_str());
    return 2;
  }
  s.devices = *devices;
  s.quick = absl::GetFlag(FLAGS_quick);
  s.repetitions = absl::GetFlag(FLAGS_bench_repetitions) > 0 ? absl::GetFlag(FLAGS_bench_repetitions)
                                                            : (s.quick ? 3 : 5);
  s.min_time = absl::GetFlag(FLAGS_bench_min_time) > 0 ? absl::GetFlag(FLAGS_bench_min_time)
                                                      : (s.quick ? 0.02 : 0.2);
  std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) {
    out = DefaultOut();
  } else if (const char* wd = std::getenv("BUILD_WORKING_DIRECTORY");
             wd != nullptr && *wd && !fs::path(out).is_absolute()) {
    out = absl::StrCat(wd, "/", out);
  }
  std::error_code ec;
  s.out = fs::absolute(out, ec).lexically_normal().string();
  if (!s.out.empty() && s.out.back() == '/') s.out.pop_back();
  if (const absl::Status st = PrepareOut(s.out); !st.ok()) {
    std::fprintf(stderr, "genesis bench: %s\n", std::string(st.message()).c_str());
    return 2;
  }

  const auto start = std::chrono::steady_clock::now();
  BenchReportInput input;
  input.date = NowUtc();
  input.quick = s.quick;
  input.repetitions = s.repetitions;
  input.min_time = s.min_time;
  input.suites = *suites;
  input.command = "genesis bench";
  if (s.quick) input.command += " --quick";
  if (absl::GetFlag(FLAGS_suite) != "all") input.command += " --suite=" + absl::GetFlag(FLAGS_suite);
  if (!absl::GetFlag(FLAGS_devices).empty()) {
    input.command += " --devices=" + absl::GetFlag(FLAGS_devices);
  }
  const DeviceReport machine = CollectDeviceReport(/*run_kernel_check=*/false);
  input.machine_text = FormatDeviceReport(machine);
  WriteFile(s.out + "/machine.json", DeviceReportToJson(machine).dump(2) + "\n");

  const std::vector<std::string> traces = FindTraces();
  bool failed = false;
  for (const std::string& suite : input.suites) {
    for (const BenchRun* run : RunsOfSuite(suite)) {
      BenchFile file;
      RunOutcome o = RunOne(*run, s, traces, &file);
      if (!o.raw_file.empty()) input.files[run->id] = std::move(file);
      failed = failed || o.status == "failed";
      input.runs.push_back(std::move(o));
    }
  }

  const nlohmann::json spec = PlotSpec(input);
  WriteFile(s.out + "/plots.json", spec.dump(1) + "\n");
  input.plots_skipped = DrawPlots(spec, s.out, &input.plots);
  input.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::vector<PairRow> rows = ComputeRows(input);
  const std::optional<nlohmann::json> written = WriteReport(s.out, input, rows);
  if (!written) return 1;
  const nlohmann::json& summary = *written;
  if (absl::GetFlag(FLAGS_json)) {
    std::printf("%s\n", summary.dump(2).c_str());
  } else {
    TextTable t({"suite", "status", "rows", "targets met"});
    for (const nlohmann::json& suite : summary["suites"]) {
      int n = 0, targets = 0, met = 0;
      for (const PairRow& r : rows) {
        if (r.suite != suite["name"]) continue;
        ++n;
        targets += !r.met.empty();
        met += r.met == "yes";
      }
      const std::string status = suite["status"];
      t.AddRow({suite["name"], status, absl::StrCat(n),
                targets ? absl::StrCat(met, " of ", targets) : "-"});
    }
    std::printf("%s", t.Render().c_str());
    // Runs that did not run, grouped by what became of them and why.
    std::vector<std::pair<std::string, std::vector<std::string>>> groups;
    for (const RunOutcome& o : input.runs) {
      if (o.status == "ran") continue;
      const std::string why = o.status + ": " + o.reason;
      auto it = std::find_if(groups.begin(), groups.end(),
                             [&](const auto& g) { return g.first == why; });
      if (it == groups.end()) it = groups.insert(groups.end(), {why, {}});
      it->second.push_back(o.run_id);
    }
    for (const auto& [why, ids] : groups) {
      std::printf("%s %s\n", absl::StrJoin(ids, ", ").c_str(), why.c_str());
    }
    if (!input.plots_skipped.empty()) std::printf("plots skipped: %s\n", input.plots_skipped.c_str());
    std::printf("took %.0f s\nreport: %s/report.md\n", input.seconds, s.out.c_str());
  }
  return failed ? 1 : 0;
}

}  // namespace genesis::cli
