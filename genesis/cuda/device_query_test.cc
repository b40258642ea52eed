// Device queries on real GPUs. Every test skips (saying why) where there is no CUDA
// device, so the binary passes everywhere; it is tagged "gpu" to be run on GPU machines.

#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "genesis/core/device.h"
#include "genesis/cuda/device_guard.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/test_util.h"
#include "gtest/gtest.h"

namespace genesis::cuda {
namespace {

TEST(DeviceQueryTest, PropertiesAreSane) {
  GENESIS_SKIP_WITHOUT_GPU();
  std::set<std::string> uuids;
  for (int i = 0; i < DeviceCount(); ++i) {
    const absl::StatusOr<DeviceProperties> props = GetDeviceProperties(i);
    ASSERT_TRUE(props.ok()) << props.status();
    std::cout << "cuda:" << i << ": " << props->name << ", sm_" << props->cc_major
              << props->cc_minor << ", " << props->total_memory << " bytes, "
              << props->multiprocessors << " SMs, " << props->async_copy_engines
              << " copy engines, PCI " << props->pci_bus_id << ", " << props->uuid
              << ", clock " << props->clock_khz << " kHz, memory clock "
              << props->memory_clock_khz << " kHz\n";
    EXPECT_EQ(props->index, i);
    EXPECT_FALSE(props->name.empty());
    EXPECT_GE(props->cc_major, 7);
    EXPECT_GE(props->cc_minor, 0);
    EXPECT_GT(props->total_memory, 0u);
    EXPECT_GT(props->multiprocessors, 0);
    EXPECT_GE(props->async_copy_engines, 0);
    EXPECT_EQ(props->warp_size, 32);
    EXPECT_GT(props->max_threads_per_block, 0);
    EXPECT_GT(props->l2_cache_bytes, 0);
    EXPECT_GT(props->max_shared_memory_per_block_optin, 0u);
    EXPECT_TRUE(props->unified_addressing);  // Every 64-bit Linux device.
    EXPECT_EQ(props->pci_bus_id.size(), 12u) << props->pci_bus_id;
    EXPECT_TRUE(absl::StartsWith(props->uuid, "GPU-")) << props->uuid;
    EXPECT_EQ(props->uuid.size(), 40u) << props->uuid;
    uuids.insert(props->uuid);
  }
  EXPECT_EQ(uuids.size(), static_cast<size_t>(DeviceCount()));
}

TEST(DeviceQueryTest, PropertiesOfMissingDeviceIsOutOfRange) {
  GENESIS_SKIP_WITHOUT_GPU();
  const absl::StatusOr<DeviceProperties> props = GetDeviceProperties(DeviceCount());
  EXPECT_EQ(props.status().code(), absl::StatusCode::kOutOfRange) << props.status();
}

TEST(DeviceQueryTest, PropertiesLeaveCurrentDeviceAlone) {
  GENESIS_SKIP_WITHOUT_GPU();
  const absl::StatusOr<int> before = CurrentDevice();
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_TRUE(GetDeviceProperties(DeviceCount() - 1).ok());
  EXPECT_EQ(CurrentDevice().value(), *before);
}

TEST(DeviceQueryTest, MemoryInfo) {
  GENESIS_SKIP_WITHOUT_GPU();
  const int last = DeviceCount() - 1;
  const absl::StatusOr<int> before = CurrentDevice();
  ASSERT_TRUE(before.ok()) << before.status();
  for (int i = 0; i <= last; ++i) {
    const absl::StatusOr<MemoryInfo> info = GetMemoryInfo(i);
    ASSERT_TRUE(info.ok()) << info.status();
    std::cout << "cuda:" << i << ": " << info->free_bytes << " of " << info->total_bytes
              << " bytes free\n";
    EXPECT_GT(info->total_bytes, 0u);
    EXPECT_LE(info->free_bytes, info->total_bytes);
  }
  // The guard inside GetMemoryInfo restored the caller's device.
  EXPECT_EQ(CurrentDevice().value(), *before);
}

TEST(DeviceQueryTest, PeerAccessMatrix) {
  GENESIS_SKIP_WITHOUT_GPU();
  const absl::StatusOr<std::vector<std::vector<bool>>> matrix = PeerAccessMatrix();
  ASSERT_TRUE(matrix.ok()) << matrix.status();
  ASSERT_EQ(matrix->size(), static_cast<size_t>(DeviceCount()));
  for (size_t i = 0; i < matrix->size(); ++i) {
    ASSERT_EQ((*matrix)[i].size(), matrix->size());
    EXPECT_TRUE((*matrix)[i][i]);
    for (size_t j = 0; j < matrix->size(); ++j) std::cout << ((*matrix)[i][j] ? 'Y' : '.');
    std::cout << "\n";
  }
}

TEST(DeviceQueryTest, VersionsWithGpu) {
  GENESIS_SKIP_WITHOUT_GPU();
  const Versions versions = GetVersions();
  std::cout << FormatVersions(versions) << "\n";
  EXPECT_GT(versions.runtime, 0);
  EXPECT_GT(versions.driver, 0);
  // A driver older than the runtime would have given zero devices.
  EXPECT_GE(versions.driver, versions.runtime);
}

TEST(DeviceQueryTest, ResolveEveryDevice) {
  GENESIS_SKIP_WITHOUT_GPU();
  for (int i = 0; i < DeviceCount(); ++i) {
    const absl::StatusOr<Device> device = ResolveDevice("cuda:" + std::to_string(i));
    ASSERT_TRUE(device.ok()) << device.status();
    EXPECT_EQ(*device, Device::Cuda(i));
  }
  const std::string missing = "cuda:" + std::to_string(DeviceCount());
  const absl::StatusOr<Device> device = ResolveDevice(missing);
  EXPECT_EQ(device.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(absl::StrContains(device.status().message(), missing)) << device.status();
  EXPECT_TRUE(absl::StrContains(device.status().message(), "CUDA device"))
      << device.status();
}

}  // namespace
}  // namespace genesis::cuda
