// CUDA implementation of fused_copy.h's launch.
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "genesis/core/status.h"
#include "genesis/cuda/internal/check.h"
#include "genesis/transfer/kernels/fused_copy.h"

namespace genesis::transfer::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;

// Everything a launch needs, passed by value (grid constant): about 28 KiB.
struct Params {
  FusedCopyItem items[kFusedCopiesPerLaunch];
  FusedCopyTiling tiling;
};
static_assert(sizeof(Params) <= 32764, "kernel parameters are limited to 32,764 bytes");

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

__global__ void __launch_bounds__(kThreads) FusedCopyKernel(const __grid_constant__ Params p) {
  const uint32_t tile = blockIdx.x;
  const uint32_t item = ItemOfTile(p.tiling, tile);
  const FusedCopyItem& copy = p.items[item];
  const size_t begin = static_cast<size_t>(tile - p.tiling.tile_start[item]) * kFusedTileBytes;
  const size_t rest = copy.bytes - begin;
  const size_t n = rest < kFusedTileBytes ? rest : kFusedTileBytes;
  const char* src = static_cast<const char*>(copy.src) + begin;
  char* dst = static_cast<char*>(copy.dst) + begin;
  const uintptr_t misalignment =
      reinterpret_cast<uintptr_t>(src) ^ reinterpret_cast<uintptr_t>(dst);
  if (misalignment % 16 == 0) {
    CopyRange<uint4>(src, dst, n);
  } else if (misalignment % 4 == 0) {
    CopyRange<uint32_t>(src, dst, n);
  } else {
    CopyRange<uint8_t>(src, dst, n);
  }
}

}  // namespace

absl::Status LaunchFusedCopy(absl::Span<const FusedCopyItem> items, CUstream_st* stream) {
  // The parameters are copied when a kernel is launched, so one buffer per thread
  // serves every launch (no allocation per call).
  thread_local const std::unique_ptr<Params> params = std::make_unique<Params>();
  for (size_t first = 0; first < items.size(); first += kFusedCopiesPerLaunch) {
    const absl::Span<const FusedCopyItem> part = items.subspan(first, kFusedCopiesPerLaunch);
    GENESIS_RETURN_IF_ERROR(TileFusedCopy(part, params->tiling));
    if (params->tiling.num_tiles == 0) continue;
    for (size_t i = 0; i < part.size(); ++i) params->items[i] = part[i];
    FusedCopyKernel<<<params->tiling.num_tiles, kThreads, 0, stream>>>(*params);
    GENESIS_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  }
  return absl::OkStatus();
}

}  // namespace genesis::transfer::kernels
