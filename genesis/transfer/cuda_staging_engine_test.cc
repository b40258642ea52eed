#include "genesis/transfer/cuda_staging_engine.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "genesis/cuda/test_util.h"
#include "genesis/transfer/staging.h"

namespace genesis::transfer {
namespace {

using ::testing::HasSubstr;

TEST(CudaStagingEngineTest, RejectsBadArguments) {
  GENESIS_SKIP_WITHOUT_GPU();
  EXPECT_EQ(CudaStagingEngine::Create(0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(CudaStagingEngine::Create(1 << 20, 2).ok());
  auto engine = CudaStagingEngine::Create(0, 2);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_THAT((*engine)->Record(2).message(), HasSubstr("slot 2"));
  EXPECT_TRUE((*engine)->Wait(1).ok());  // Nothing recorded yet.
}

// Pageable memory to the GPU and back through the pipeline, byte for byte, at sizes
// around the chunk size and far beyond it.
TEST(CudaStagingEngineTest, PipelineRoundTrip) {
  GENESIS_SKIP_WITHOUT_GPU();
  StagingPipeline::Options options;
  options.chunk_bytes = 1 << 20;
  auto engine = CudaStagingEngine::Create(0, options.num_buffers);
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto pipeline = StagingPipeline::Create(*std::move(engine), options);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  constexpr size_t kMax = (37 << 20) + 3;
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, kMax), cudaSuccess);
  std::mt19937_64 rng(7);
  std::vector<uint8_t> src(kMax), dst(kMax);
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  for (size_t bytes : {size_t{0}, size_t{1}, (size_t{1} << 20) - 1, size_t{1} << 20,
                       (size_t{1} << 20) + 1, kMax}) {
    SCOPED_TRACE(bytes);
    std::fill(dst.begin(), dst.end(), 0);
    ASSERT_TRUE((*pipeline)->HostToDevice(device, src.data(), bytes).ok());
    ASSERT_TRUE((*pipeline)->DeviceToHost(dst.data(), device, bytes).ok());
    EXPECT_TRUE(std::equal(src.begin(), src.begin() + bytes, dst.begin()));
    EXPECT_TRUE(std::all_of(dst.begin() + bytes, dst.end(), [](uint8_t b) { return b == 0; }));
  }
  EXPECT_EQ(cudaFree(device), cudaSuccess);
}

}  // namespace
}  // namespace genesis::transfer
