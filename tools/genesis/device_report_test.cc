#include "tools/genesis/device_report.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "genesis/cuda/device_query.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace genesis::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

GpuReport MadeUpGpu(int index, absl::Status kernel_check) {
  GpuReport gpu;
  gpu.index = index;
  gpu.properties.index = index;
  gpu.properties.name = "NVIDIA H200";
  gpu.properties.cc_major = 9;
  gpu.properties.cc_minor = 0;
  gpu.properties.total_memory = 150'754'820'096ull;
  gpu.properties.multiprocessors = 132;
  gpu.properties.async_copy_engines = 3;
  gpu.properties.pci_bus_id = index == 0 ? "0000:19:00.0" : "0000:3b:00.0";
  gpu.memory = cuda::MemoryInfo{.free_bytes = 150'000'000'000ull,
                                .total_bytes = 150'754'820'096ull};
  gpu.kernel_check = std::move(kernel_check);
  return gpu;
}

DeviceReport MadeUpTwoGpuMachine() {
  DeviceReport report;
  report.built_with_cuda = true;
  report.kernels_compiled_in = true;
  report.host_cpus = 32;
  report.host_memory_bytes = 256ull << 30;
  report.versions = {.runtime = 13000, .driver = 13000, .nccl = 22803, .nccl_error = "",
                     .nccl_library = "/usr/lib/x86_64-linux-gnu/libnccl.so.2"};
  report.gpus.push_back(MadeUpGpu(0, absl::OkStatus()));
  report.gpus.push_back(MadeUpGpu(1, absl::InternalError("cudaErrorNoKernelImageForDevice")));
  report.peer_access = {{true, true}, {false, true}};
  return report;
}

TEST(FormatDeviceReportTest, ShowsEveryGpuAndThePeerMatrix) {
  const std::string text = FormatDeviceReport(MadeUpTwoGpuMachine());
  EXPECT_THAT(text, HasSubstr("CUDA runtime 13.0, driver 13.0, NCCL 2.28.3"));
  EXPECT_THAT(text, HasSubstr("host: 32 CPUs, 256.0 GiB memory"));
  EXPECT_THAT(text, HasSubstr("GPUs: 2"));
  EXPECT_THAT(text, HasSubstr(
                        "  cuda:0  NVIDIA H200  9.0  139.7 GiB / 140.4 GiB  132  3             "
                        "0000:19:00.0  ok\n"));
  EXPECT_THAT(text, HasSubstr("cuda:1  NVIDIA H200"));
  EXPECT_THAT(text, HasSubstr("cudaErrorNoKernelImageForDevice"));
  EXPECT_THAT(text, HasSubstr("  cuda:0     -       yes\n"));
  EXPECT_THAT(text, HasSubstr("  cuda:1     no      -\n"));
}

const CopyPath* FindPath(const std::vector<CopyPath>& paths, const std::string& from,
                         const std::string& to) {
  for (const CopyPath& p : paths) {
    if (p.from == from && p.to == to) return &p;
  }
  return nullptr;
}

TEST(CopyPathsTest, EveryPairWithTheMechanismThePlannerPicks) {
  DeviceReport report = MadeUpTwoGpuMachine();  // cuda:0 reaches cuda:1, not back.
  const std::vector<CopyPath> paths = CopyPaths(report);
  EXPECT_EQ(paths.size(), 2u + 2u + 4u);
  const CopyPath* up = FindPath(paths, "cpu", "cuda:1");
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->many_small, "fused_kernel");
  EXPECT_EQ(up->large, "copy_engine");
  EXPECT_EQ(up->large_pageable, "pageable_staging");
  const CopyPath* local = FindPath(paths, "cuda:0", "cuda:0");
  ASSERT_NE(local, nullptr);
  EXPECT_EQ(local->many_small, "fused_kernel");
  EXPECT_EQ(local->large_pageable, "");
  // Peer access in one direction serves both (a kernel on the device that reaches).
  for (const auto& [from, to] : {std::pair{"cuda:0", "cuda:1"}, std::pair{"cuda:1", "cuda:0"}}) {
    const CopyPath* peer = FindPath(paths, from, to);
    ASSERT_NE(peer, nullptr) << from << " -> " << to;
    EXPECT_EQ(peer->many_small, "peer_fused_kernel");
    EXPECT_EQ(peer->large, "peer_copy");
  }
  report.peer_access = {{true, false}, {false, true}};
  const std::vector<CopyPath> without_peers = CopyPaths(report);
  const CopyPath* staged = FindPath(without_peers, "cuda:0", "cuda:1");
  ASSERT_NE(staged, nullptr);
  EXPECT_EQ(staged->many_small, "staged_peer");
  EXPECT_EQ(staged->large, "staged_peer");
  EXPECT_THAT(FormatDeviceReport(report),
              HasSubstr("copy paths (the batch copier's mechanism"));
  EXPECT_EQ(DeviceReportToJson(report)["copy_paths"].size(), 8u);
}

TEST(FormatDeviceReportTest, SaysWhyThereIsNoGpu) {
  DeviceReport report;
  report.no_device_reason = "CUDA driver version is insufficient for CUDA runtime version";
  const std::string text = FormatDeviceReport(report);
  EXPECT_THAT(text, HasSubstr("CPU-only build"));
  EXPECT_THAT(text, HasSubstr(
                        "GPUs: none (CUDA driver version is insufficient for CUDA runtime "
                        "version)"));
  EXPECT_THAT(text, Not(HasSubstr("peer access")));
}

TEST(FormatDeviceReportTest, ReportsFailedQueriesInsteadOfValues) {
  DeviceReport report = MadeUpTwoGpuMachine();
  report.gpus[1].properties_error = absl::InternalError("cudaErrorDevicesUnavailable");
  report.gpus[0].memory = absl::InternalError("cudaErrorIllegalState");
  report.peer_access_error = absl::InternalError("peer query failed");
  const std::string text = FormatDeviceReport(report);
  EXPECT_THAT(text, HasSubstr("cuda:1  cudaErrorDevicesUnavailable"));
  EXPECT_THAT(text, HasSubstr("? / 140.4 GiB"));
  EXPECT_THAT(text, HasSubstr("peer access: peer query failed"));
}

TEST(DeviceReportToJsonTest, HasStableKeys) {
  const nlohmann::json json = DeviceReportToJson(MadeUpTwoGpuMachine());
  EXPECT_EQ(json["device_count"], 2);
  EXPECT_EQ(json["versions"]["nccl"], "2.28.3");
  EXPECT_EQ(json["versions"]["cuda_runtime_code"], 13000);
  EXPECT_EQ(json["host"]["cpus"], 32);
  EXPECT_EQ(json["devices"][0]["name"], "NVIDIA H200");
  EXPECT_EQ(json["devices"][0]["compute_capability"], "9.0");
  EXPECT_EQ(json["devices"][0]["copy_engines"], 3);
  EXPECT_EQ(json["devices"][0]["free_memory_bytes"], 150'000'000'000ull);
  EXPECT_EQ(json["devices"][0]["kernel_check"], "ok");
  EXPECT_EQ(json["devices"][1]["kernel_check"], "cudaErrorNoKernelImageForDevice");
  EXPECT_EQ(json["peer_access"][1][0], false);
  EXPECT_EQ(json["peer_access"][0][1], true);
}

// On this machine: whatever it has, collecting never fails, and on a GPU machine every
// GPU answers its queries and runs our kernels.
TEST(CollectDeviceReportTest, DescribesThisMachine) {
  const DeviceReport report = CollectDeviceReport(/*run_kernel_check=*/true);
  EXPECT_GT(report.host_cpus, 0);
  EXPECT_GT(report.host_memory_bytes, 0u);
  EXPECT_EQ(report.built_with_cuda, cuda::BuiltWithCuda());
  ASSERT_EQ(static_cast<int>(report.gpus.size()), cuda::DeviceCount());
  if (report.gpus.empty()) {
    EXPECT_FALSE(report.no_device_reason.empty());
    GTEST_SKIP() << "no CUDA device: " << report.no_device_reason;
  }
  for (const GpuReport& gpu : report.gpus) {
    EXPECT_TRUE(gpu.properties_error.ok()) << gpu.properties_error;
    EXPECT_TRUE(gpu.memory.ok()) << gpu.memory.status();
    EXPECT_TRUE(gpu.kernel_check.ok()) << gpu.kernel_check;
    EXPECT_FALSE(gpu.properties.name.empty());
  }
  ASSERT_TRUE(report.peer_access_error.ok()) << report.peer_access_error;
  EXPECT_EQ(report.peer_access.size(), report.gpus.size());
}

}  // namespace
}  // namespace genesis::cli
