// Kernels of fused_copy_baselines.h.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "benchmarks/transfer/fused_copy_baselines.h"

namespace genesis::transfer::bench {
namespace {

constexpr int kThreads = 256;

// The block copies `n` bytes (a multiple of 16, both sides 16-byte aligned) with
// kThreads threads, four 16-byte loads in flight per thread.
__device__ __forceinline__ void CopyBlock(const void* src_ptr, void* dst_ptr, size_t n) {
  const uint4* __restrict__ src = static_cast<const uint4*>(src_ptr);
  uint4* __restrict__ dst = static_cast<uint4*>(dst_ptr);
  const size_t words = n / 16;
  size_t i = threadIdx.x;
  for (; i + 3 * kThreads < words; i += 4 * kThreads) {
    const uint4 a = src[i];
    const uint4 b = src[i + kThreads];
    const uint4 c = src[i + 2 * kThreads];
    const uint4 d = src[i + 3 * kThreads];
    dst[i] = a;
    dst[i + kThreads] = b;
    dst[i + 2 * kThreads] = c;
    dst[i + 3 * kThreads] = d;
  }
  for (; i < words; i += kThreads) dst[i] = src[i];
}

__global__ void __launch_bounds__(kThreads) PlainKernel(const PlainCopy* copies) {
  const PlainCopy c = copies[blockIdx.x];
  CopyBlock(c.src, c.dst, c.bytes);
}

__global__ void HoldKernel(const volatile int* flag, long long max_ns) {
  uint64_t start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    if (*flag != 0) return;
    uint64_t now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (static_cast<long long>(now - start) > max_ns) return;
  }
}

template <int kBytes>
struct Padding {
  unsigned char bytes[kBytes];
};

template <int kBytes>
__global__ void EmptyKernel(const __grid_constant__ Padding<kBytes> p, int* sink) {
  // Reads one parameter byte so that the parameters are live.
  if (p.bytes[threadIdx.x % kBytes] == 0xAB && sink != nullptr) *sink = 1;
}

template <typename T>
T& Buffer() {
  thread_local const std::unique_ptr<T> buffer = std::make_unique<T>();
  return *buffer;
}

}  // namespace

cudaError_t LaunchPlainFusedCopy(const PlainCopy* device_copies, int count,
                                 cudaStream_t stream) {
  PlainKernel<<<count, kThreads, 0, stream>>>(device_copies);
  return cudaGetLastError();
}

cudaError_t LaunchHold(const volatile int* flag, int max_ms, cudaStream_t stream) {
  HoldKernel<<<1, 1, 0, stream>>>(flag, static_cast<long long>(max_ms) * 1000000);
  return cudaGetLastError();
}

cudaError_t LaunchEmptyWithParams(int param_bytes, cudaStream_t stream) {
  switch (param_bytes) {
    case 64:
      EmptyKernel<64><<<1, 32, 0, stream>>>(Buffer<Padding<64>>(), nullptr);
      break;
    case 4096:
      EmptyKernel<4096><<<1, 32, 0, stream>>>(Buffer<Padding<4096>>(), nullptr);
      break;
    case 8192:
      EmptyKernel<8192><<<1, 32, 0, stream>>>(Buffer<Padding<8192>>(), nullptr);
      break;
    case 16384:
      EmptyKernel<16384><<<1, 32, 0, stream>>>(Buffer<Padding<16384>>(), nullptr);
      break;
    case 28672:
      EmptyKernel<28672><<<1, 32, 0, stream>>>(Buffer<Padding<28672>>(), nullptr);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace genesis::transfer::bench
