// Runs the backend-independent pool suite over the CUDA backends: device memory
// (cudaMalloc, with and without expandable segments) and pinned host memory in both modes (cudaHostAlloc, cudaHostRegister).
// Without a GPU there is nothing to instantiate, and the test below says so.
#include <memory>
#include <vector>

#include "genesis/cuda/device_query.h"
#include "genesis/cuda/test_util.h"
#include "genesis/memory/allocator_suite.h"
#include "genesis/memory/cuda_backend.h"
#include "genesis/memory/pinned_backend.h"
#include "gtest/gtest.h"

namespace genesis::memory {
namespace {

std::vector<BackendFactory> CudaBackends() {
  if (cuda::DeviceCount() == 0) return {};
  return {
      // Large blocks in expandable segments where the device has virtual memory.
      {"cuda_device", [] { return std::unique_ptr<Backend>(CudaDeviceBackend::Create(0).value()); }},
      {"cuda_device_classic",
       [] { return std::unique_ptr<Backend>(CudaDeviceBackend::Create(0, false).value()); }},
      {"pinned_alloc",
       [] { return std::unique_ptr<Backend>(PinnedHostBackend::Create(PinnedMode::kAlloc).value()); }},
      {"pinned_register",
       [] {
         return std::unique_ptr<Backend>(PinnedHostBackend::Create(PinnedMode::kRegister).value());
       }},
  };
}

INSTANTIATE_TEST_SUITE_P(Cuda, AllocatorSuite, ::testing::ValuesIn(CudaBackends()),
                         BackendFactoryName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AllocatorSuite);

TEST(CudaAllocatorSuiteTest, RunsWhereThereIsAGpu) {
  GENESIS_SKIP_WITHOUT_GPU() << " (the pool suite over CUDA backends did not run)";
  EXPECT_EQ(CudaBackends().size(), 4u);
}

}  // namespace
}  // namespace genesis::memory
