#include "tools/genesis/stored_report.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/genesis/bench_report.h"
#include "tools/genesis/bench_results.h"

namespace genesis::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A report directory as `genesis bench` writes it, from a made-up run.
BenchReportInput WriteReport(const std::string& dir) {
  BenchReportInput in;
  in.command = "genesis bench --quick";
  in.date = "2026-11-24T17:00:00Z";
  in.seconds = 12.5;
  in.quick = true;
  in.repetitions = 3;
  in.min_time = 0.02;
  in.machine_text = "host: 2 CPUs\nno GPU\n";
  in.suites = {"alloc"};
  in.runs.push_back({"alloc_cpu", "ran", "", "cpu", "raw/alloc_cpu.json", 1.5});
  in.runs.push_back({"alloc_cuda", "skipped", "no GPU: none here", "", "", 0});
  in.plots = {"plots/alloc_cpu.png"};
  in.files["alloc_cpu"] =
      ReadBenchFile("tools/genesis/testdata/bench/run_a/raw/alloc_cpu.json").value();
  fs::create_directories(dir + "/raw");
  fs::copy_file("tools/genesis/testdata/bench/run_a/raw/alloc_cpu.json",
                dir + "/raw/alloc_cpu.json", fs::copy_options::overwrite_existing);
  const std::vector<PairRow> rows = ComputeRows(in);
  Write(dir + "/report.md", RenderReport(in, rows));
  Write(dir + "/summary.json", ReportJson(in, rows).dump(2));
  return in;
}

std::string TempDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(StoredReportTest, RendersAgainAsItWasWritten) {
  const std::string dir = TempDir("report");
  const BenchReportInput written = WriteReport(dir);
  absl::StatusOr<BenchReportInput> read = ReadStoredReport(dir);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->command, written.command);
  EXPECT_EQ(read->date, written.date);
  EXPECT_DOUBLE_EQ(read->seconds, written.seconds);
  EXPECT_TRUE(read->quick);
  EXPECT_EQ(read->repetitions, 3);
  EXPECT_DOUBLE_EQ(read->min_time, 0.02);
  EXPECT_EQ(read->machine_text, written.machine_text);
  EXPECT_EQ(read->suites, written.suites);
  EXPECT_EQ(read->plots, written.plots);
  ASSERT_EQ(read->runs.size(), 2u);
  EXPECT_EQ(read->runs[1].reason, "no GPU: none here");
  EXPECT_EQ(read->files.count("alloc_cpu"), 1u);
  EXPECT_EQ(read->files.count("alloc_cuda"), 0u);
  EXPECT_EQ(RenderReport(*read, ComputeRows(*read)), RenderReport(written, ComputeRows(written)));
}

TEST(StoredReportTest, MissingOrForeignFilesAreNamed) {
  const std::string dir = TempDir("broken");
  absl::StatusOr<BenchReportInput> none = ReadStoredReport(dir);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(none.status().message(), HasSubstr("summary.json"));

  Write(dir + "/summary.json", "{\"benchmarks\": []}");
  absl::StatusOr<BenchReportInput> foreign = ReadStoredReport(dir);
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(foreign.status().message(), HasSubstr("not the summary.json"));

  WriteReport(dir);
  Write(dir + "/report.md", "# genesis bench\n");
  absl::StatusOr<BenchReportInput> no_machine = ReadStoredReport(dir);
  EXPECT_EQ(no_machine.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_machine.status().message(), HasSubstr("no machine section"));

  WriteReport(dir);
  fs::remove(dir + "/raw/alloc_cpu.json");
  EXPECT_FALSE(ReadStoredReport(dir).ok());
}

}  // namespace
}  // namespace genesis::cli
