#include "tools/genesis/distributed_report.h"

#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace genesis::cli {
namespace {

std::optional<std::string> Torchrun(std::string_view name) {
  if (name == "RANK") return "1";
  if (name == "WORLD_SIZE") return "2";
  if (name == "MASTER_ADDR") return "10.1.2.3";
  if (name == "MASTER_PORT") return "29500";
  if (name == "TORCHELASTIC_RUN_ID") return "job7";
  return std::nullopt;
}

TEST(DistributedReportTest, ShowsTheLaunchersRankAndMaster) {
  DistributedReport report = CollectDistributedReport(Torchrun, "2.28.9");
  const std::string text = FormatDistributedReport(report);
  EXPECT_TRUE(absl::StrContains(text, "torchrun: rank 1 of 2")) << text;
  EXPECT_TRUE(absl::StrContains(text, "master 10.1.2.3:29500")) << text;
  EXPECT_TRUE(absl::StrContains(text, "job key    job7.r0\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "NCCL 2.28.9")) << text;
  EXPECT_TRUE(absl::StrContains(text, "Gloo 0.")) << text;
  nlohmann::json j = DistributedReportToJson(report);
  EXPECT_EQ(j["rank"], 1);
  EXPECT_EQ(j["world_size"], 2);
  EXPECT_EQ(j["master_addr"], "10.1.2.3");
  EXPECT_EQ(j["nccl"], "2.28.9");
  EXPECT_EQ(j["job_key"], "job7.r0");
  EXPECT_EQ(j["job_key_unique"], true);
}

TEST(DistributedReportTest, WithoutALauncherSaysSo) {
  DistributedReport report = CollectDistributedReport(
      [](std::string_view) -> std::optional<std::string> { return std::nullopt; }, "none");
  EXPECT_TRUE(absl::StrContains(FormatDistributedReport(report), "none: a single process"));
  EXPECT_TRUE(DistributedReportToJson(report)["launcher"].is_null());
}

TEST(DistributedReportTest, AMalformedVariableIsShown) {
  DistributedReport report = CollectDistributedReport(
      [](std::string_view name) -> std::optional<std::string> {
        if (name == "RANK") return "x";
        return Torchrun(name);
      },
      "none");
  EXPECT_TRUE(absl::StrContains(FormatDistributedReport(report), "error: environment variable RANK='x'"))
      << FormatDistributedReport(report);
}

}  // namespace
}  // namespace genesis::cli
