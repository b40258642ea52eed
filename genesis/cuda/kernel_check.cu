#include "genesis/cuda/kernel_check.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "absl/strings/str_format.h"

namespace genesis::cuda {
namespace {

constexpr int kElements = 4096;

__global__ void WritePattern(uint32_t* out, int n, uint32_t seed) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = seed ^ (static_cast<uint32_t>(i) * 2654435761u);
}

absl::Status Failure(cudaError_t err, const char* what, int device) {
  // Clear a non-sticky error so that it does not surface in the caller's next call.
  cudaGetLastError();
  return absl::InternalError(absl::StrFormat(
      "kernel check on cuda:%d failed at %s: %s (%s)", device, what,
      cudaGetErrorName(err), cudaGetErrorString(err)));
}

}  // namespace

bool KernelsCompiledIn() { return true; }

absl::Status CheckKernelLaunch(int device) {
  int previous = 0;
  if (cudaError_t err = cudaGetDevice(&previous); err != cudaSuccess) {
    return Failure(err, "cudaGetDevice", device);
  }
  if (cudaError_t err = cudaSetDevice(device); err != cudaSuccess) {
    return Failure(err, "cudaSetDevice", device);
  }
  uint32_t* buffer = nullptr;
  const uint32_t seed = 0x9E3779B9u + static_cast<uint32_t>(device);
  std::vector<uint32_t> host(kElements, 0);
  absl::Status status;
  if (cudaError_t err = cudaMalloc(&buffer, kElements * sizeof(uint32_t)); err != cudaSuccess) {
    status.Update(Failure(err, "cudaMalloc", device));
  } else {
    WritePattern<<<(kElements + 255) / 256, 256>>>(buffer, kElements, seed);
    if (cudaError_t err = cudaGetLastError(); err != cudaSuccess) {
      status.Update(Failure(err, "kernel launch", device));
    } else if (cudaError_t err = cudaMemcpy(host.data(), buffer, kElements * sizeof(uint32_t),
                                            cudaMemcpyDeviceToHost);
               err != cudaSuccess) {
      status.Update(Failure(err, "cudaMemcpy", device));
    } else {
      for (int i = 0; i < kElements; ++i) {
        const uint32_t expected = seed ^ (static_cast<uint32_t>(i) * 2654435761u);
        if (host[i] != expected) {
          status.Update(absl::DataLossError(absl::StrFormat(
              "kernel check on cuda:%d: element %d is %#x, expected %#x", device, i,
              host[i], expected)));
          break;
        }
      }
    }
    cudaFree(buffer);
  }
  cudaSetDevice(previous);
  return status;
}

}  // namespace genesis::cuda
