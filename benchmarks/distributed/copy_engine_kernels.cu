#include <cuda_runtime.h>

#include <cstddef>

#include "benchmarks/distributed/copy_engine_kernels.h"

namespace genesis::benchmarks {
namespace {

constexpr int kThreads = 512;
constexpr int kUnroll = 4;

__global__ void SmCopy(const int4* __restrict__ src, int4* __restrict__ dst, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x * kUnroll;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x * kUnroll + threadIdx.x; i < n;
       i += stride) {
    int4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (i + u * blockDim.x < n) v[u] = src[i + u * blockDim.x];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (i + u * blockDim.x < n) dst[i + u * blockDim.x] = v[u];
    }
  }
}

__global__ void AddShards(const float4* in, float4* out, size_t n, int shards) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    float4 a = in[i];
    for (int s = 1; s < shards; ++s) {
      const float4 b = in[s * n + i];
      a.x += b.x;
      a.y += b.y;
      a.z += b.z;
      a.w += b.w;
    }
    out[i] = a;
  }
}

}  // namespace

cudaError_t LaunchSmCopy(const void* src, void* dst, size_t bytes, int blocks,
                         cudaStream_t stream) {
  SmCopy<<<blocks, kThreads, 0, stream>>>(static_cast<const int4*>(src), static_cast<int4*>(dst),
                                          bytes / 16);
  return cudaGetLastError();
}

cudaError_t LaunchAddShards(const float* in, float* out, size_t count, int shards, int blocks,
                            cudaStream_t stream) {
  AddShards<<<blocks, kThreads, 0, stream>>>(reinterpret_cast<const float4*>(in),
                                             reinterpret_cast<float4*>(out), count / 4, shards);
  return cudaGetLastError();
}

}  // namespace genesis::benchmarks
