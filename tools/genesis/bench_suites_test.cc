#include "tools/genesis/bench_suites.h"

#include <set>
#include <string>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace genesis::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(BenchSuitesTest, ParsesSuiteLists) {
  EXPECT_THAT(ParseSuiteList("copy,alloc").value(), ElementsAre("alloc", "copy"));
  EXPECT_THAT(ParseSuiteList(" alloc , alloc ").value(), ElementsAre("alloc"));
  EXPECT_EQ(ParseSuiteList("all").value().size(), BenchSuites().size());
  EXPECT_EQ(ParseSuiteList("").value().size(), BenchSuites().size());
}

TEST(BenchSuitesTest, UnknownSuiteIsNamed) {
  const auto r = ParseSuiteList("alloc,bogus");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("unknown suite 'bogus'"));
  EXPECT_THAT(r.status().message(), HasSubstr("alloc, copy"));
}

TEST(BenchSuitesTest, CollectivesRunOnCpuProcessesAndOnEveryChosenGpu) {
  const std::vector<const BenchRun*> runs = RunsOfSuite("collectives");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0]->device, BenchDevice::kCpu);
  EXPECT_EQ(runs[0]->target, "collectives_benchmark");
  EXPECT_FALSE(runs[0]->quick_args.empty());
  EXPECT_EQ(runs[1]->device, BenchDevice::kCuda);
  EXPECT_TRUE(runs[1]->all_gpus);
  // NCCL: below 1 MiB within 1 us of its time; from 1 MiB 98% of its bus bandwidth;
  // bucketed 95% (views) and 90% (packed) of one flat all_reduce.
  int small = 0, large = 0, bucketed = 0;
  for (const BenchPair& p : BenchPairs()) {
    if (p.run_id != "collectives_cuda") continue;
    if (absl::StartsWith(p.label, "bucketed")) {
      EXPECT_EQ(p.target, absl::StrContains(p.label, "packed") ? 0.9 : 0.95) << p.label;
      ++bucketed;
    } else if (absl::StrContains(p.label, "KiB")) {
      EXPECT_EQ(p.metric, BenchMetric::kTime) << p.label;
      EXPECT_EQ(p.target, 0) << p.label;
      EXPECT_EQ(p.max_extra_ns, 1000) << p.label;
      ++small;
    } else {
      EXPECT_EQ(p.metric, BenchMetric::kBusBandwidth) << p.label;
      EXPECT_EQ(p.target, 0.98) << p.label;
      EXPECT_EQ(p.max_extra_ns, 0) << p.label;
      ++large;
    }
  }
  EXPECT_EQ(small, 7);  // Every operation at 8 KiB.
  EXPECT_EQ(large, 21);
  EXPECT_EQ(bucketed, 2);
}

TEST(BenchSuitesTest, CatalogIsConsistent) {
  std::set<std::string> ids, suites;
  for (const BenchSuite& s : BenchSuites()) suites.insert(s.name);
  for (const BenchRun& r : BenchRuns()) {
    EXPECT_TRUE(ids.insert(r.id).second) << "duplicate run id " << r.id;
    EXPECT_TRUE(suites.count(r.suite)) << r.id;
  }
  for (const BenchSuite& s : BenchSuites()) {
    EXPECT_FALSE(RunsOfSuite(s.name).empty()) << s.name;
  }
  for (const BenchPair& p : BenchPairs()) {
    EXPECT_NE(FindRun(p.run_id), nullptr) << p.label;
    EXPECT_NE(p.figure, p.baseline) << p.label;
    if (!p.baseline_run.empty()) {
      // A baseline from another run comes from a run of the same suite, on the same device.
      const BenchRun* other = FindRun(p.baseline_run);
      ASSERT_NE(other, nullptr) << p.label;
      EXPECT_EQ(other->suite, FindRun(p.run_id)->suite) << p.label;
      EXPECT_EQ(other->device, FindRun(p.run_id)->device) << p.label;
    }
    EXPECT_FALSE(p.label.empty());
  }
}

TEST(BenchSuitesTest, ReadmeTargetsAreThere) {
  bool pool_vs_async = false, threads = false;
  for (const BenchPair& p : BenchPairs()) {
    if (p.figure == "BM_DevicePool/512/real_time/threads:1" &&
        p.baseline == "BM_CudaMallocAsync/512/real_time/threads:1") {
      pool_vs_async = p.target == 12;
    }
    if (p.figure == "BM_HostPool/512/real_time/threads:16" &&
        p.baseline == "BM_HostPool/512/real_time/threads:1") {
      // 0.8 of one thread's throughput per thread that has a core.
      threads = p.target == 0.8 && p.scaling_threads == 16;
      EXPECT_DOUBLE_EQ(TargetFor(p, 2), 1.6);
      EXPECT_DOUBLE_EQ(TargetFor(p, 16), 12.8);
      EXPECT_DOUBLE_EQ(TargetFor(p, 128), 12.8);
      EXPECT_DOUBLE_EQ(TargetFor(p, 0), 0.8);  // CPUs unknown: as on one core.
    }
  }
  EXPECT_TRUE(pool_vs_async);
  EXPECT_TRUE(threads);
}

TEST(BenchSuitesTest, EveryCpuRowWithAStatedAimHasItsTarget) {
  std::set<std::string> seen;
  for (const BenchPair& p : BenchPairs()) {
    const std::string key = p.run_id + " | " + p.label + " | " + p.baseline_label;
    if (p.run_id == "alloc_cpu" && p.baseline_label == "malloc + free") {
      EXPECT_EQ(p.target, 1.0) << key;  // On one thread and on 16.
      seen.insert("alloc");
    }
    if (p.run_id == "replay_cpu" || p.baseline_label == "GCC _Float16") {
      EXPECT_EQ(p.target, 1.0) << key;
      seen.insert(p.run_id);
    }
    if (!p.baseline_run.empty()) {
      // PyTorch's rows: contiguous() and conversions at least PyTorch's on as many
      // threads (one, or all cores against PyTorch's own); torch.empty from Python, no
      // target.
      if (p.baseline_run == "torch_contiguous" || p.baseline_run == "torch_convert") {
        EXPECT_EQ(p.target, 1.0) << key;
        EXPECT_EQ(absl::EndsWith(p.baseline, "threads:1"),
                  !absl::StrContains(p.figure, "AllCores"))
            << key;
        seen.insert(p.baseline_run);
      } else {
        EXPECT_EQ(p.target, 0.0) << key;
      }
      continue;
    }
    if (p.run_id == "copy_cpu" || p.run_id == "contiguous_cpu") {
      EXPECT_EQ(p.target, 0.5) << key;
      seen.insert(p.run_id);
    }
    if (p.run_id == "convert_cpu" ||
        (p.run_id == "convert_cpu_half" && p.baseline_label == "memcpy of the same bytes")) {
      EXPECT_EQ(p.target, 0.8) << key;
      seen.insert("convert");
    }
    if (p.run_id == "collectives_cpu" && (absl::StartsWith(p.label, "all_reduce,") ||
                                          absl::StartsWith(p.label, "broadcast,"))) {
      EXPECT_EQ(p.target, 0.95) << key;
      seen.insert("gloo");
    }
  }
  EXPECT_EQ(seen.size(), 9u);
}

TEST(BenchSuitesTest, EveryThreadScalingTargetDependsOnTheCores) {
  for (const BenchPair& p : BenchPairs()) {
    if (absl::StrContains(p.label, "threads (throughput)")) {
      EXPECT_EQ(p.scaling_threads, 16) << p.label;
    } else {
      EXPECT_EQ(p.scaling_threads, 0) << p.label;
      EXPECT_DOUBLE_EQ(TargetFor(p, 2), p.target) << p.label;
    }
  }
}

TEST(BenchSuitesTest, PeerMatrixCoversEightGpus) {
  int pairs = 0;
  for (const BenchPair& p : BenchPairs()) {
    if (p.run_id == "peer_matrix_cuda" && p.metric == BenchMetric::kBandwidth) ++pairs;
  }
  EXPECT_EQ(pairs, 8 * 7);
}

}  // namespace
}  // namespace genesis::cli
