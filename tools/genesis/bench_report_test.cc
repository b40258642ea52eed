#include "tools/genesis/bench_report.h"

#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/genesis/bench_results.h"

namespace genesis::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

BenchReportInput Input() {
  BenchReportInput in;
  in.command = "genesis bench --quick";
  in.date = "2026-11-24T17:00:00Z";
  in.repetitions = 3;
  in.min_time = 0.02;
  in.machine_text = "host: 2 CPUs\n";
  in.suites = {"alloc"};
  in.runs.push_back({"alloc_cpu", "ran", "", "cpu", "raw/alloc_cpu.json", 1.5});
  in.runs.push_back({"alloc_cuda", "skipped", "no GPU: none here", "", "", 0});
  in.files["alloc_cpu"] =
      ReadBenchFile("tools/genesis/testdata/bench/run_a/raw/alloc_cpu.json").value();
  return in;
}

const PairRow* RowFor(const std::vector<PairRow>& rows, const std::string& figure,
                      const std::string& baseline) {
  for (const PairRow& r : rows) {
    if (r.pair->figure == figure && r.pair->baseline == baseline) return &r;
  }
  return nullptr;
}

TEST(BenchReportTest, RatiosAndTargets) {
  const std::vector<PairRow> rows = ComputeRows(Input());
  const PairRow* vs_malloc = RowFor(rows, "BM_HostPool/512/real_time/threads:1",
                                    "BM_Malloc/512/real_time/threads:1");
  ASSERT_NE(vs_malloc, nullptr);
  EXPECT_DOUBLE_EQ(vs_malloc->ratio, 10.0 / 50.0);
  EXPECT_EQ(vs_malloc->figure_text, "50.0 ns");
  EXPECT_DOUBLE_EQ(vs_malloc->target, 1.0);  // One thread: at most malloc's time.
  EXPECT_EQ(vs_malloc->met, "no");
  const PairRow* threads = RowFor(rows, "BM_HostPool/512/real_time/threads:16",
                                  "BM_HostPool/512/real_time/threads:1");
  ASSERT_NE(threads, nullptr);
  EXPECT_DOUBLE_EQ(threads->ratio, 10.0);
  // 16 threads on the fixture's 2 CPUs: 0.8 x 2.
  EXPECT_DOUBLE_EQ(threads->target, 1.6);
  EXPECT_EQ(threads->met, "yes");
  const PairRow* big = RowFor(rows, "BM_HostPool/33554432/real_time/threads:1",
                              "BM_Malloc/33554432/real_time/threads:1");
  ASSERT_NE(big, nullptr);
  EXPECT_DOUBLE_EQ(big->ratio, 18200.0 / 40.0);
  EXPECT_EQ(big->baseline_text, "18.2 us");
}

TEST(BenchReportTest, FailedBaselineIsReportedNotFatal) {
  const std::vector<PairRow> rows = ComputeRows(Input());
  const PairRow* r = RowFor(rows, "BM_HostPool/512/real_time/threads:16",
                            "BM_Malloc/512/real_time/threads:16");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->baseline_text, "failed: malloc failed (test fixture)");
  EXPECT_EQ(r->ratio, 0);
  const PairRow* missing = RowFor(rows, "BM_HostPool/65536/real_time/threads:1",
                                  "BM_Malloc/65536/real_time/threads:1");
  ASSERT_NE(missing, nullptr);
  EXPECT_EQ(missing->figure_text, "not measured");
}

TEST(BenchReportTest, UnavailableBaselineSaysWhy) {
  const std::vector<PairRow> rows = ComputeRows(Input());
  const PairRow* r = RowFor(rows, "BM_HostPool/512/real_time/threads:1",
                            "BM_Jemalloc/512/real_time/threads:1");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->baseline_text, "unavailable: no libjemalloc.so.2 (Debian package libjemalloc2)");
  EXPECT_EQ(r->ratio, 0);
  EXPECT_EQ(r->met, "");
}

TEST(BenchReportTest, BaselineFromAnotherRun) {
  BenchReportInput in = Input();
  // No PyTorch run: its rows are there, not measured.
  std::vector<PairRow> rows = ComputeRows(in);
  const PairRow* r = RowFor(rows, "BM_HostPool/512/real_time/threads:1",
                            "BM_TorchEmpty/512/real_time/threads:default");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->baseline_text, "not measured");
  // With it, the baseline comes from its file.
  in.files["torch_alloc"] = ParseBenchFile(R"({"context": {}, "benchmarks": [
      {"name": "BM_TorchEmpty/512/real_time/threads:default_median",
       "run_name": "BM_TorchEmpty/512/real_time/threads:default", "run_type": "aggregate",
       "aggregate_name": "median", "real_time": 500, "time_unit": "ns"}]})",
                                            "torch_alloc.json")
                                .value();
  rows = ComputeRows(in);
  r = RowFor(rows, "BM_HostPool/512/real_time/threads:1",
             "BM_TorchEmpty/512/real_time/threads:default");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->baseline_text, "500 ns");
  EXPECT_DOUBLE_EQ(r->ratio, 10.0);  // The fixture's pool pair: 50 ns.
  EXPECT_EQ(r->suite, "alloc");
}

// Every table row has as many cells as its header: the tables render on GitHub.
// NCCL's rows: from 1 MiB genesis's bus bandwidth against 98% of NCCL's, below 1 MiB at
// most 1 us above NCCL's time; the report prints each target as it is.
TEST(BenchReportTest, CollectiveTargetsAreBusBandwidthAndMicrosecondsAbove) {
  BenchReportInput in = Input();
  in.suites = {"collectives"};
  in.runs = {{"collectives_cuda", "ran", "", "cuda:0", "raw/collectives_cuda.json", 1.0}};
  in.files.clear();
  in.files["collectives_cuda"] = ParseBenchFile(R"({"context": {}, "benchmarks": [
      {"name": "all_reduce/genesis/8192", "real_time": 9.6, "time_unit": "us"},
      {"name": "all_reduce/nccl/8192", "real_time": 8.5, "time_unit": "us"},
      {"name": "broadcast/genesis/8192", "real_time": 9.2, "time_unit": "us"},
      {"name": "broadcast/nccl/8192", "real_time": 8.5, "time_unit": "us"},
      {"name": "all_reduce/genesis/1048576", "real_time": 12, "time_unit": "us",
       "bytes_per_second": 8.7e10, "busbw_GBps": 130.4},
      {"name": "all_reduce/nccl/1048576", "real_time": 11.5, "time_unit": "us",
       "bytes_per_second": 9.1e10, "busbw_GBps": 136.6}]})",
                                                "collectives_cuda.json")
                                     .value();
  const std::vector<PairRow> rows = ComputeRows(in);
  const PairRow* above = RowFor(rows, "all_reduce/genesis/8192", "all_reduce/nccl/8192");
  ASSERT_NE(above, nullptr);
  EXPECT_EQ(above->target_text, "<= +1.00 us");
  EXPECT_EQ(above->met, "no");  // 1.1 us above.
  const PairRow* within = RowFor(rows, "broadcast/genesis/8192", "broadcast/nccl/8192");
  ASSERT_NE(within, nullptr);
  EXPECT_EQ(within->met, "yes");  // 0.7 us above.
  const PairRow* big = RowFor(rows, "all_reduce/genesis/1048576", "all_reduce/nccl/1048576");
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(big->figure_text, "130 GB/s busbw");
  EXPECT_DOUBLE_EQ(big->ratio, 130.4 / 136.6);
  EXPECT_EQ(big->target_text, ">= 0.98x");
  EXPECT_EQ(big->met, "no");
  const std::string md = RenderReport(in, rows);
  EXPECT_THAT(md, HasSubstr("| 9.60 us | nccl called directly | 8.50 us | 0.89x | <= +1.00 us | **no** |"));
  EXPECT_THAT(ReportJson(in, rows).dump(), HasSubstr("\"target_text\":\"<= +1.00 us\""));
}

// Each missed target is listed once more with its shortfall and its known limit, or
// that none is known; met targets are not.
TEST(BenchReportTest, MissedTargetsSayByHowMuchAndWhy) {
  BenchReportInput in = Input();
  in.suites = {"collectives"};
  in.runs = {{"collectives_cpu", "ran", "", "cpu", "raw/collectives_cpu.json", 1.0}};
  in.files.clear();
  in.files["collectives_cpu"] = ParseBenchFile(R"({"context": {}, "benchmarks": [
      {"name": "all_reduce/genesis/8192", "real_time": 125, "time_unit": "us"},
      {"name": "all_reduce/gloo/8192", "real_time": 100, "time_unit": "us"},
      {"name": "broadcast/genesis/8192", "real_time": 80, "time_unit": "us"},
      {"name": "broadcast/gloo/8192", "real_time": 80, "time_unit": "us"}]})",
                                               "collectives_cpu.json")
                                    .value();
  const std::vector<PairRow> rows = ComputeRows(in);
  const PairRow* slow = RowFor(rows, "all_reduce/genesis/8192", "all_reduce/gloo/8192");
  ASSERT_NE(slow, nullptr);
  EXPECT_EQ(slow->met, "no");
  EXPECT_EQ(slow->shortfall, "16%");  // 0.8x of a 0.95x target.
  EXPECT_THAT(slow->limit, HasSubstr("Gloo's event loop"));
  const std::string md = RenderReport(in, rows);
  EXPECT_THAT(md, HasSubstr("## Targets missed"));
  EXPECT_THAT(md, HasSubstr("| collectives | all_reduce, 8 KiB | gloo called directly | 0.80x | "
                            ">= 0.95x | 16% | Gloo's event loop"));
  EXPECT_THAT(md, Not(HasSubstr("| collectives | broadcast, 8 KiB |")));
  EXPECT_THAT(ReportJson(in, rows).dump(), HasSubstr("\"shortfall\":\"16%\""));

  // On a machine with cores enough for every rank's threads that limit does not hold.
  in.files["collectives_cpu"].context["num_cpus"] = 32;
  const std::vector<PairRow> many_cores = ComputeRows(in);
  const PairRow* slow_there = RowFor(many_cores, "all_reduce/genesis/8192", "all_reduce/gloo/8192");
  ASSERT_NE(slow_there, nullptr);
  EXPECT_EQ(slow_there->limit, "");
  EXPECT_THAT(RenderReport(in, many_cores), HasSubstr("| 0.80x | >= 0.95x | 16% | not known |"));
  in.files["collectives_cpu"].context["num_cpus"] = 2;
  const std::vector<PairRow> two_cores = ComputeRows(in);
  const PairRow* slow_here = RowFor(two_cores, "all_reduce/genesis/8192", "all_reduce/gloo/8192");
  ASSERT_NE(slow_here, nullptr);
  EXPECT_THAT(slow_here->limit, HasSubstr("Gloo's event loop"));

  // A NCCL row above its time target: the time beyond the baseline; no limit known for
  // bucketed views.
  in.runs = {{"collectives_cuda", "ran", "", "cuda:0", "raw/collectives_cuda.json", 1.0}};
  in.files.clear();
  in.files["collectives_cuda"] = ParseBenchFile(R"({"context": {}, "benchmarks": [
      {"name": "all_gather/genesis/8192", "real_time": 9.6, "time_unit": "us"},
      {"name": "all_gather/nccl/8192", "real_time": 8.5, "time_unit": "us"},
      {"name": "bucketed_all_reduce/views", "real_time": 500, "time_unit": "us"},
      {"name": "bucketed_all_reduce/flat", "real_time": 400, "time_unit": "us"}]})",
                                                "collectives_cuda.json")
                                     .value();
  const std::vector<PairRow> cuda_rows = ComputeRows(in);
  const PairRow* above = RowFor(cuda_rows, "all_gather/genesis/8192", "all_gather/nccl/8192");
  ASSERT_NE(above, nullptr);
  EXPECT_EQ(above->shortfall, "+1.10 us");
  const std::string cuda_md = RenderReport(in, cuda_rows);
  EXPECT_THAT(cuda_md, HasSubstr("| <= +1.00 us | +1.10 us | not known |"));
  EXPECT_THAT(cuda_md, HasSubstr("| 0.80x | >= 0.95x | 16% | not known |"));

  // Across two GPUs the host path limits the same all_gather row.
  in.runs = {{"collectives_cuda", "ran", "", "cuda:0,cuda:1", "raw/collectives_cuda.json", 1.0}};
  const std::vector<PairRow> two_gpus = ComputeRows(in);
  const PairRow* across = RowFor(two_gpus, "all_gather/genesis/8192", "all_gather/nccl/8192");
  ASSERT_NE(across, nullptr);
  EXPECT_THAT(across->limit, HasSubstr("host path"));
}

// A limit holds where its bounds say: the first that holds is given.
TEST(BenchReportTest, LimitsHoldWhereTheyWereMeasured) {
  BenchPair pair;
  pair.limits = {{"few cores", /*max_cpus=*/3}, {"one GPU", 0, 1, 1}, {"GPUs", 0, 2}};
  EXPECT_EQ(LimitFor(pair, 2, 0), "few cores");
  EXPECT_EQ(LimitFor(pair, 0, 0), "few cores");  // CPUs not known.
  EXPECT_EQ(LimitFor(pair, 32, 0), "");
  EXPECT_EQ(LimitFor(pair, 32, 1), "one GPU");
  EXPECT_EQ(LimitFor(pair, 32, 4), "GPUs");
  EXPECT_EQ(LimitFor(BenchPair(), 2, 1), "");
}

TEST(BenchReportTest, MarkdownTablesParse) {
  const BenchReportInput in = Input();
  const std::string md = RenderReport(in, ComputeRows(in));
  int tables = 0;
  size_t header_cells = 0;
  bool in_table = false;
  for (absl::string_view line : absl::StrSplit(md, '\n')) {
    if (line.empty() || line[0] != '|') {
      in_table = false;
      continue;
    }
    size_t cells = 0;
    for (size_t i = 0; i < line.size(); ++i) cells += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
    if (!in_table) {
      in_table = true;
      header_cells = cells;
      ++tables;
    }
    EXPECT_EQ(cells, header_cells) << line;
  }
  EXPECT_EQ(tables, 3);  // Summary, alloc, and the targets missed (512 B against malloc).
  EXPECT_THAT(md, HasSubstr("| alloc | partly run | cpu |"));
  EXPECT_THAT(md, HasSubstr("| host pool, 512 B, 16 threads (throughput) | 5.00 ns | the same, "
                            "1 thread | 50.0 ns | 10.0x | >= 1.6x | yes |"));
  EXPECT_THAT(md, HasSubstr("- alloc_cuda (benchmarks/memory:allocator_cuda_benchmark): "
                            "skipped: no GPU: none here"));
  EXPECT_THAT(md, HasSubstr("## Machine\n\n```\nhost: 2 CPUs\n```"));
  EXPECT_THAT(md, HasSubstr("[`raw/alloc_cpu.json`](raw/alloc_cpu.json)"));
}

TEST(BenchReportTest, PlotsSkippedSaysWhy) {
  BenchReportInput in = Input();
  in.plots_skipped = "matplotlib is not installed";
  EXPECT_THAT(RenderReport(in, ComputeRows(in)),
              HasSubstr("Plots skipped: matplotlib is not installed"));
  in.plots_skipped = "";
  in.plots = {"plots/alloc_cpu.png"};
  const std::string md = RenderReport(in, ComputeRows(in));
  EXPECT_THAT(md, HasSubstr("![plots/alloc_cpu.png](plots/alloc_cpu.png)"));
  EXPECT_THAT(md, Not(HasSubstr("Plots skipped")));
}

TEST(BenchReportTest, PlotSpecHasAllocationBySizeAndThreads) {
  const nlohmann::json spec = PlotSpec(Input());
  ASSERT_EQ(spec["plots"].size(), 1u);
  const nlohmann::json& p = spec["plots"][0];
  EXPECT_EQ(p["file"], "alloc_cpu.png");
  EXPECT_EQ(p["kind"], "lines");
  // Pool and malloc at 1 and 16 threads (malloc's 16-thread row failed: no points).
  ASSERT_EQ(p["series"].size(), 3u);
  EXPECT_EQ(p["series"][0]["label"], "genesis host pool, 1 thread");
  EXPECT_EQ(p["series"][0]["x"], nlohmann::json({512, 33554432}));
  EXPECT_EQ(p["series"][0]["y"], nlohmann::json({50.0, 40.0}));
}

TEST(BenchReportTest, JsonSummary) {
  const BenchReportInput in = Input();
  const nlohmann::json j = ReportJson(in, ComputeRows(in));
  EXPECT_EQ(j["suites"][0]["name"], "alloc");
  EXPECT_EQ(j["suites"][0]["status"], "partly run");
  EXPECT_EQ(j["runs"][1]["status"], "skipped");
  EXPECT_GT(j["rows"].size(), 4u);
}

TEST(BenchReportTest, Units) {
  EXPECT_EQ(FormatNs(31.24), "31.2 ns");
  EXPECT_EQ(FormatNs(1410), "1.41 us");
  EXPECT_EQ(FormatNs(36.5e6), "36.5 ms");
  EXPECT_EQ(FormatRate(51.44e9), "51.4 GB/s");
  EXPECT_EQ(FormatRate(2.51e12), "2.51 TB/s");
}

}  // namespace
}  // namespace genesis::cli
