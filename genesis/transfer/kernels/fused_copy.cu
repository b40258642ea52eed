// CUDA implementation of fused_copy.h's launch.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "genesis/core/status.h"
#include "genesis/cuda/internal/check.h"
#include "genesis/transfer/kernels/fused_copy.h"

namespace genesis::transfer::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;

// A launch's parameters: the header and kWords words, a prefix of FusedCopyParams.
// What the driver copies per launch is sizeof(Params<kWords>), so each launch takes
// the smallest that holds its words (kWordClasses).
template <int kWords>
struct Params {
  FusedCopyHeader header;
  uint32_t words[kWords];
};
static_assert(sizeof(FusedCopyParams) <= 32764, "kernel parameters are limited to 32,764 bytes");
static_assert(offsetof(Params<1>, words) == offsetof(FusedCopyParams, words));

// The block copies `n` bytes: single bytes until `src` is aligned to Word, then Words
// (kUnroll loads in flight per thread), then the remaining bytes. The caller picks a
// Word to which `src` and `dst` are equally misaligned.
template <typename Word>
__device__ __forceinline__ void CopyRange(const char* __restrict__ src,
                                          char* __restrict__ dst, size_t n) {
  size_t head = (sizeof(Word) - reinterpret_cast<uintptr_t>(src) % sizeof(Word)) %
                sizeof(Word);
  if (head > n) head = n;
  for (size_t i = threadIdx.x; i < head; i += kThreads) dst[i] = src[i];
  const size_t words = (n - head) / sizeof(Word);
  const Word* __restrict__ s = reinterpret_cast<const Word*>(src + head);
  Word* __restrict__ d = reinterpret_cast<Word*>(dst + head);
  size_t i = threadIdx.x;
  for (; i + (kUnroll - 1) * kThreads < words; i += kUnroll * kThreads) {
    Word v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = s[i + u * kThreads];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) d[i + u * kThreads] = v[u];
  }
  for (; i < words; i += kThreads) d[i] = s[i];
  for (size_t j = head + words * sizeof(Word) + threadIdx.x; j < n; j += kThreads) {
    dst[j] = src[j];
  }
}

template <int kWords>
__global__ void __launch_bounds__(kThreads)
    FusedCopyKernel(const __grid_constant__ Params<kWords> p) {
  const FusedTile t = DecodeFusedTile(p.header, p.words, blockIdx.x);
  const char* src = reinterpret_cast<const char*>(t.src);
  char* dst = reinterpret_cast<char*>(t.dst);
  const uint64_t misalignment = t.src ^ t.dst;
  if (misalignment % 16 == 0) {
    CopyRange<uint4>(src, dst, t.bytes);
  } else if (misalignment % 4 == 0) {
    CopyRange<uint32_t>(src, dst, t.bytes);
  } else {
    CopyRange<uint8_t>(src, dst, t.bytes);
  }
}

// The sizes of words a launch may take, smallest first. On an H200 machine a launch
// costs the host about 0.11 us more per KiB of parameters.
constexpr int kWordClasses[] = {1,    64,   256,  1024, 2048,
                                3072, 4096, 5120, 6144, static_cast<int>(kFusedMaxWords)};

template <int kWords>
const void* KernelFor() {
  return reinterpret_cast<const void*>(&FusedCopyKernel<kWords>);
}

// The kernel of the smallest class that holds `words`.
const void* KernelWithRoomFor(uint32_t words) {
  static const void* const kernels[] = {
      KernelFor<kWordClasses[0]>(), KernelFor<kWordClasses[1]>(), KernelFor<kWordClasses[2]>(),
      KernelFor<kWordClasses[3]>(), KernelFor<kWordClasses[4]>(), KernelFor<kWordClasses[5]>(),
      KernelFor<kWordClasses[6]>(), KernelFor<kWordClasses[7]>(), KernelFor<kWordClasses[8]>(),
      KernelFor<kWordClasses[9]>()};
  int c = 0;
  while (kWordClasses[c] < static_cast<int>(words)) ++c;
  return kernels[c];
}

}  // namespace

absl::Status LaunchEncodedFusedCopy(const FusedCopyParams& params, CUstream_st* stream) {
  const uint32_t tiles = params.header.num_tiles;
  if (tiles == 0) return absl::OkStatus();
  // The kernel reads sizeof(Params<class>) bytes from here: the header and a prefix of
  // the words.
  void* args[] = {const_cast<FusedCopyParams*>(&params)};
  GENESIS_CUDA_RETURN_IF_ERROR(cudaLaunchKernel(KernelWithRoomFor(params.header.num_words),
                                                dim3(tiles), dim3(kThreads), args, 0,
                                                stream));
  return absl::OkStatus();
}

absl::Status LaunchFusedCopy(absl::Span<const FusedCopyItem> items, CUstream_st* stream) {
  return LaunchFusedCopy(
      items.size(), [&](size_t k) -> const FusedCopyItem& { return items[k]; }, stream);
}

}  // namespace genesis::transfer::kernels
