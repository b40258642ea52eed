#include "tools/genesis/bench_compare.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "tools/genesis/bench_report.h"
#include "tools/genesis/bench_results.h"
#include "tools/genesis/text_table.h"

namespace genesis::cli {
namespace {

constexpr double kMinChange = 0.05;
constexpr double kNoiseFactor = 3;

struct Side {
  std::map<std::string, BenchFile> files;  // By file stem.
  std::string machine;
};

// One line: host name and CPUs from the benchmarks' context, GPUs from machine.json.
std::string MachineLine(const std::string& dir, const std::map<std::string, BenchFile>& files) {
  std::string host = "?";
  int cpus = 0;
  for (const auto& [stem, file] : files) {
    host = file.context.value("host_name", host);
    cpus = file.context.value("num_cpus", cpus);
    break;
  }
  std::vector<std::string> gpus;
  std::ifstream in(dir + "/machine.json");
  if (in) {
    const nlohmann::json m = nlohmann::json::parse(in, nullptr, false);
    if (m.is_object() && m.contains("devices") && m["devices"].is_array()) {
      for (const nlohmann::json& d : m["devices"]) gpus.push_back(d.value("name", "?"));
    }
  }
  return absl::StrCat("host ", host, ", ", cpus, " CPUs, ",
                      gpus.empty() ? "no GPU" : absl::StrJoin(gpus, ", "));
}

absl::StatusOr<Side> Load(const std::string& dir) {
  const std::string raw = dir + "/raw";
  const std::vector<std::string> paths = ListJsonFiles(raw);
  if (paths.empty()) {
    return absl::NotFoundError(
        absl::StrCat(dir, ": no benchmark results (", raw, "/*.json); is it a genesis bench --out directory?"));
  }
  Side side;
  for (const std::string& path : paths) {
    absl::StatusOr<BenchFile> file = ReadBenchFile(path);
    if (!file.ok()) return file.status();
    side.files[std::filesystem::path(path).stem().string()] = *std::move(file);
  }
  side.machine = MachineLine(dir, side.files);
  return side;
}

}  // namespace

absl::StatusOr<Comparison> CompareReports(const std::string& old_dir, const std::string& new_dir) {
  absl::StatusOr<Side> old_side = Load(old_dir);
  if (!old_side.ok()) return old_side.status();
  absl::StatusOr<Side> new_side = Load(new_dir);
  if (!new_side.ok()) return new_side.status();
  Comparison c;
  c.old_machine = old_side->machine;
  c.new_machine = new_side->machine;
  c.same_machine = c.old_machine == c.new_machine;
  for (const auto& [stem, old_file] : old_side->files) {
    const auto nf = new_side->files.find(stem);
    for (const std::string& name : old_file.order) {
      const BenchResult& o = old_file.results.at(name);
      const BenchResult* n = nullptr;
      if (nf != new_side->files.end()) {
        const auto it = nf->second.results.find(name);
        if (it != nf->second.results.end()) n = &it->second;
      }
      if (n == nullptr) {
        c.only_old.push_back(absl::StrCat(stem, ": ", name));
        continue;
      }
      if (!o.error.empty() || !n->error.empty() || o.time_ns <= 0 || n->time_ns <= 0) continue;
      CompareRow row;
      row.file = stem;
      row.run_name = name;
      row.old_ns = o.time_ns;
      row.new_ns = n->time_ns;
      row.change = n->time_ns / o.time_ns - 1;
      row.threshold = std::max(kMinChange, kNoiseFactor * std::max(o.cv, n->cv));
      row.verdict = row.change < -row.threshold  ? "faster"
                    : row.change > row.threshold ? "slower"
                                                 : "same";
      c.rows.push_back(row);
    }
  }
  for (const auto& [stem, new_file] : new_side->files) {
    const auto of = old_side->files.find(stem);
    for (const std::string& name : new_file.order) {
      if (of == old_side->files.end() || !of->second.results.count(name)) {
        c.only_new.push_back(absl::StrCat(stem, ": ", name));
      }
    }
  }
  return c;
}

std::string FormatComparison(const Comparison& c) {
  std::string out;
  if (!c.same_machine) {
    absl::StrAppend(&out, "warning: the runs are from different machines; changes may be the "
                          "machines', not the code's\n");
  }
  absl::StrAppend(&out, "old: ", c.old_machine, "\nnew: ", c.new_machine, "\n");
  int same = 0;
  for (const char* verdict : {"faster", "slower"}) {
    std::vector<const CompareRow*> rows;
    for (const CompareRow& r : c.rows) {
      if (r.verdict == verdict) rows.push_back(&r);
    }
    std::sort(rows.begin(), rows.end(), [](const CompareRow* a, const CompareRow* b) {
      return std::abs(a->change) > std::abs(b->change);
    });
    absl::StrAppend(&out, "\n", verdict, ": ", rows.size(), "\n");
    if (rows.empty()) continue;
    TextTable t({"file", "benchmark", "old", "new", "time change", "noise"});
    for (const CompareRow* r : rows) {
      t.AddRow({r->file, r->run_name, FormatNs(r->old_ns), FormatNs(r->new_ns),
                absl::StrFormat("%+.1f%%", 100 * r->change),
                absl::StrFormat("%.1f%%", 100 * r->threshold)});
    }
    out += t.Render(2);
  }
  for (const CompareRow& r : c.rows) same += r.verdict == "same";
  absl::StrAppend(&out, "\nwithin noise: ", same, " of ", c.rows.size(), " benchmarks\n");
  if (!c.only_old.empty()) {
    absl::StrAppend(&out, "only in old: ", c.only_old.size(), " (",
                    absl::StrJoin(c.only_old.begin(), c.only_old.begin() + std::min<size_t>(5, c.only_old.size()), "; "),
                    c.only_old.size() > 5 ? "; ..." : "", ")\n");
  }
  if (!c.only_new.empty()) {
    absl::StrAppend(&out, "only in new: ", c.only_new.size(), " (",
                    absl::StrJoin(c.only_new.begin(), c.only_new.begin() + std::min<size_t>(5, c.only_new.size()), "; "),
                    c.only_new.size() > 5 ? "; ..." : "", ")\n");
  }
  return out;
}

nlohmann::json ComparisonToJson(const Comparison& c) {
  nlohmann::json rows = nlohmann::json::array();
  for (const CompareRow& r : c.rows) {
    rows.push_back({{"file", r.file}, {"run_name", r.run_name}, {"old_ns", r.old_ns},
                    {"new_ns", r.new_ns}, {"change", r.change}, {"threshold", r.threshold},
                    {"verdict", r.verdict}});
  }
  return {{"same_machine", c.same_machine}, {"old_machine", c.old_machine},
          {"new_machine", c.new_machine}, {"rows", rows}, {"only_old", c.only_old},
          {"only_new", c.only_new}};
}

}  // namespace genesis::cli
