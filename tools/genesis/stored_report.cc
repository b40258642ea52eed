#include "tools/genesis/stored_report.h"

#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tools/genesis/bench_results.h"

namespace genesis::cli {
namespace {

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The machine section of report.md: the text between "## Machine" and its closing fence.
absl::StatusOr<std::string> MachineText(const std::string& report, const std::string& path) {
  const std::string open = "## Machine\n\n```\n";
  const size_t start = report.find(open);
  const size_t end = start == std::string::npos ? start : report.find("```", start + open.size());
  if (end == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(path, " has no machine section"));
  }
  return report.substr(start + open.size(), end - start - open.size());
}

}  // namespace

absl::StatusOr<BenchReportInput> ReadStoredReport(const std::string& dir) {
  const std::string summary_path = dir + "/summary.json";
  absl::StatusOr<std::string> summary_text = ReadText(summary_path);
  if (!summary_text.ok()) return summary_text.status();
  const nlohmann::json summary = nlohmann::json::parse(*summary_text, nullptr,
                                                       /*allow_exceptions=*/false);
  if (!summary.is_object() || !summary.contains("runs") || !summary.contains("suites")) {
    return absl::InvalidArgumentError(
        absl::StrCat(summary_path, " is not the summary.json of a genesis bench report"));
  }
  const std::string report_path = dir + "/report.md";
  absl::StatusOr<std::string> report = ReadText(report_path);
  if (!report.ok()) return report.status();

  BenchReportInput input;
  try {
    input.command = summary.value("command", "");
    input.date = summary.value("date", "");
    input.seconds = summary.value("seconds", 0.0);
    input.quick = summary.value("quick", false);
    input.repetitions = summary.value("repetitions", 0);
    input.min_time = summary.value("min_time", 0.0);
    input.plots_skipped = summary.value("plots_skipped", "");
    for (const nlohmann::json& p : summary.value("plots", nlohmann::json::array())) {
      input.plots.push_back(p.get<std::string>());
    }
    for (const nlohmann::json& s : summary["suites"]) {
      input.suites.push_back(s.at("name").get<std::string>());
    }
    for (const nlohmann::json& r : summary["runs"]) {
      RunOutcome o;
      o.run_id = r.at("id").get<std::string>();
      o.status = r.value("status", "");
      o.reason = r.value("reason", "");
      o.device = r.value("device", "");
      o.raw_file = r.value("raw_file", "");
      o.seconds = r.value("seconds", 0.0);
      input.runs.push_back(std::move(o));
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(summary_path, ": ", e.what()));
  }
  for (const RunOutcome& o : input.runs) {
    if (o.raw_file.empty()) continue;
    absl::StatusOr<BenchFile> file = ReadBenchFile(dir + "/" + o.raw_file);
    if (!file.ok()) return file.status();
    input.files[o.run_id] = *std::move(file);
  }
  absl::StatusOr<std::string> machine = MachineText(*report, report_path);
  if (!machine.ok()) return machine.status();
  input.machine_text = *std::move(machine);
  return input;
}

}  // namespace genesis::cli
