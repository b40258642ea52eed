#include "tools/genesis/bench_compare.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace genesis::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kDir[] = "tools/genesis/testdata/bench/";

const CompareRow* Row(const Comparison& c, const std::string& name) {
  for (const CompareRow& r : c.rows) {
    if (r.run_name == name) return &r;
  }
  return nullptr;
}

TEST(BenchCompareTest, FasterSlowerAndNoise) {
  const Comparison c =
      CompareReports(std::string(kDir) + "run_a", std::string(kDir) + "run_b").value();
  EXPECT_TRUE(c.same_machine);
  ASSERT_NE(Row(c, "BM_HostPool/512/real_time/threads:1"), nullptr);
  EXPECT_EQ(Row(c, "BM_HostPool/512/real_time/threads:1")->verdict, "faster");
  EXPECT_DOUBLE_EQ(Row(c, "BM_HostPool/512/real_time/threads:1")->change, 30.0 / 50.0 - 1);
  EXPECT_EQ(Row(c, "BM_Malloc/512/real_time/threads:1")->verdict, "slower");
  EXPECT_EQ(Row(c, "BM_HostPool/512/real_time/threads:16")->verdict, "same");
  // The failed benchmark has no figure to compare.
  EXPECT_EQ(Row(c, "BM_Malloc/512/real_time/threads:16"), nullptr);
  const std::string text = FormatComparison(c);
  EXPECT_THAT(text, HasSubstr("faster: 1"));
  EXPECT_THAT(text, HasSubstr("slower: 1"));
  EXPECT_THAT(text, HasSubstr("-40.0%"));
  EXPECT_THAT(text, Not(HasSubstr("different machines")));
}

TEST(BenchCompareTest, DifferentMachinesWarnAndShowBoth) {
  const Comparison c =
      CompareReports(std::string(kDir) + "run_a", std::string(kDir) + "run_other").value();
  EXPECT_FALSE(c.same_machine);
  const std::string text = FormatComparison(c);
  EXPECT_THAT(text, HasSubstr("warning: the runs are from different machines"));
  EXPECT_THAT(text, HasSubstr("old: host buildhost, 2 CPUs, no GPU"));
  EXPECT_THAT(text, HasSubstr("new: host otherhost, 2 CPUs, no GPU"));
  EXPECT_THAT(text, HasSubstr("within noise: 5 of 5"));
  EXPECT_EQ(ComparisonToJson(c)["same_machine"], false);
}

TEST(BenchCompareTest, MissingDirectoryIsNamed) {
  const auto r = CompareReports("no/such/dir", std::string(kDir) + "run_a");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("no/such/dir"));
}

}  // namespace
}  // namespace genesis::cli
