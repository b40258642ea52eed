#include "tools/genesis/bench_results.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace genesis::cli {
namespace {

using ::testing::DoubleNear;
using ::testing::HasSubstr;

constexpr char kRunA[] = "tools/genesis/testdata/bench/run_a/raw/alloc_cpu.json";

TEST(BenchResultsTest, MediansFromRepetitions) {
  const BenchFile f = ReadBenchFile(kRunA).value();
  EXPECT_EQ(f.context["host_name"], "buildhost");
  const BenchResult& pool = f.results.at("BM_HostPool/512/real_time/threads:1");
  EXPECT_DOUBLE_EQ(pool.time_ns, 50);
  EXPECT_EQ(pool.repetitions, 3);
  EXPECT_THAT(pool.cv, DoubleNear(0.02, 0.001));
  EXPECT_TRUE(pool.error.empty());
}

TEST(BenchResultsTest, BusBandwidthCounterIsKept) {
  const BenchFile f = ParseBenchFile(R"({"benchmarks": [
      {"name": "all_reduce/nccl/1048576", "real_time": 11.5, "time_unit": "us",
       "bytes_per_second": 9.1e10, "busbw_GBps": 136.6},
      {"name": "x", "real_time": 1, "time_unit": "ns"}]})", "f.json").value();
  EXPECT_DOUBLE_EQ(f.results.at("all_reduce/nccl/1048576").bus_bytes_per_second, 136.6e9);
  EXPECT_DOUBLE_EQ(f.results.at("all_reduce/nccl/1048576").bytes_per_second, 9.1e10);
  EXPECT_EQ(f.results.at("x").bus_bytes_per_second, 0);
}

TEST(BenchResultsTest, TimeUnitsBecomeNanoseconds) {
  const BenchFile f = ReadBenchFile(kRunA).value();
  EXPECT_DOUBLE_EQ(f.results.at("BM_Malloc/33554432/real_time/threads:1").time_ns, 18200);
}

TEST(BenchResultsTest, FailedBenchmarkKeepsItsMessage) {
  const BenchFile f = ReadBenchFile(kRunA).value();
  EXPECT_EQ(f.results.at("BM_Malloc/512/real_time/threads:16").error,
            "malloc failed (test fixture)");
}

TEST(BenchResultsTest, AggregatesAloneAreEnough) {
  const std::string text = R"({"context": {}, "benchmarks": [
    {"name": "BM_X_median", "run_name": "BM_X", "run_type": "aggregate",
     "aggregate_name": "median", "real_time": 2.5, "time_unit": "us", "bytes_per_second": 7},
    {"name": "BM_X_cv", "run_name": "BM_X", "run_type": "aggregate",
     "aggregate_name": "cv", "aggregate_unit": "percentage", "real_time": 0.1}]})";
  const BenchFile f = ParseBenchFile(text, "x.json").value();
  EXPECT_DOUBLE_EQ(f.results.at("BM_X").time_ns, 2500);
  EXPECT_DOUBLE_EQ(f.results.at("BM_X").bytes_per_second, 7);
  EXPECT_DOUBLE_EQ(f.results.at("BM_X").cv, 0.1);
}

// Google Benchmark writes counters that are not numbers as bare NaN / Infinity.
TEST(BenchResultsTest, ToleratesNonNumbers) {
  const std::string text = R"({"context": {"note": "NaN in a string"}, "benchmarks": [
    {"name": "BM_X", "run_name": "BM_X", "run_type": "iteration", "real_time": 3,
     "time_unit": "ns", "dropped": -nan, "other": Infinity, "bytes_per_second": NaN}]})";
  const BenchFile f = ParseBenchFile(text, "x.json").value();
  EXPECT_DOUBLE_EQ(f.results.at("BM_X").time_ns, 3);
  EXPECT_DOUBLE_EQ(f.results.at("BM_X").bytes_per_second, 0);
  EXPECT_EQ(f.context["note"], "NaN in a string");
}

TEST(BenchResultsTest, RejectsOtherText) {
  const auto r = ParseBenchFile("{\"rows\": []}", "summary.json");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("summary.json"));
  EXPECT_FALSE(ParseBenchFile("not json", "x").ok());
  EXPECT_EQ(ReadBenchFile("no/such/file.json").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace genesis::cli
