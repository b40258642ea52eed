// CudaStatus and GENESIS_CUDA_RETURN_IF_ERROR. Built only with CUDA; needs no GPU except
// for the test of last-error clearing, which skips (saying why) without one.

#include "genesis/cuda/internal/check.h"

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/test_util.h"
#include "gtest/gtest.h"

namespace genesis::cuda {
namespace {

TEST(CudaStatusTest, SuccessIsOk) {
  EXPECT_TRUE(CudaStatus(cudaSuccess, "cudaFree(p)").ok());
}

TEST(CudaStatusTest, MessageNamesCallDeviceAndError) {
  const absl::Status status =
      CudaStatus(cudaErrorMemoryAllocation, "cudaMalloc(1048576 bytes)", 1);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(status.message(),
            "cudaMalloc(1048576 bytes) failed on cuda:1: cudaErrorMemoryAllocation "
            "(out of memory)");
}

TEST(CudaStatusTest, NoDeviceWhenNegative) {
  const absl::Status status = CudaStatus(cudaErrorInvalidValue, "cudaMemcpy(...)");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(status.message(), "cudaMemcpy(...) failed: cudaErrorInvalidValue ("))
      << status;
}

TEST(CudaStatusTest, Codes) {
  EXPECT_EQ(CudaErrorToStatusCode(cudaErrorMemoryAllocation),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CudaErrorToStatusCode(cudaErrorInvalidValue), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CudaErrorToStatusCode(cudaErrorInvalidResourceHandle),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CudaErrorToStatusCode(cudaErrorInvalidDevice), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(CudaErrorToStatusCode(cudaErrorNoDevice), absl::StatusCode::kUnavailable);
  EXPECT_EQ(CudaErrorToStatusCode(cudaErrorInsufficientDriver),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(CudaErrorToStatusCode(cudaErrorIllegalAddress), absl::StatusCode::kInternal);
  EXPECT_EQ(CudaErrorToStatusCode(cudaErrorUnknown), absl::StatusCode::kInternal);
}

TEST(CudaStatusTest, StickyErrorsSaySo) {
  EXPECT_TRUE(IsStickyCudaError(cudaErrorIllegalAddress));
  EXPECT_TRUE(IsStickyCudaError(cudaErrorAssert));
  EXPECT_FALSE(IsStickyCudaError(cudaErrorMemoryAllocation));
  const absl::Status status = CudaStatus(cudaErrorIllegalAddress, "cudaStreamSynchronize");
  EXPECT_TRUE(absl::StrContains(status.message(), "sticky")) << status;
}

int calls = 0;
cudaError_t Fails(cudaError_t err) {
  ++calls;
  return err;
}

absl::Status UsesMacro(cudaError_t err) {
  GENESIS_CUDA_RETURN_IF_ERROR(Fails(err));
  return absl::OkStatus();
}

absl::StatusOr<int> UsesMacroOnDevice(cudaError_t err) {
  GENESIS_CUDA_RETURN_IF_ERROR_ON(3, Fails(err));
  return 7;
}

TEST(CudaReturnIfErrorTest, StringizesTheCallAndEvaluatesOnce) {
  calls = 0;
  EXPECT_TRUE(UsesMacro(cudaSuccess).ok());
  EXPECT_EQ(calls, 1);
  const absl::Status status = UsesMacro(cudaErrorNotSupported);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StartsWith(status.message(), "Fails(err) failed: cudaErrorNotSupported"))
      << status;

  EXPECT_EQ(UsesMacroOnDevice(cudaSuccess).value(), 7);
  const absl::StatusOr<int> on_device = UsesMacroOnDevice(cudaErrorMemoryAllocation);
  EXPECT_EQ(on_device.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StartsWith(on_device.status().message(), "Fails(err) failed on cuda:3: "))
      << on_device.status();
}

TEST(CudaStatusTest, ClearsNonStickyLastError) {
  GENESIS_SKIP_WITHOUT_GPU();
  // An invalid device ordinal is a non-sticky error that the runtime records as the
  // thread's last error.
  const cudaError_t err = cudaSetDevice(DeviceCount() + 5);
  ASSERT_NE(err, cudaSuccess);
  const absl::Status status = CudaStatus(err, "cudaSetDevice(bad)");
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace genesis::cuda
