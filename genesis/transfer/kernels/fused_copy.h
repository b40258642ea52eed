// One CUDA kernel launch that copies many buffers: the batch copier's fused path.
//
// Launching a cudaMemcpyAsync per buffer costs a few microseconds each, which dominates
// when the buffers are small (1,024 copies of 16 KiB take about 4 ms that way, against
// about 13 us of bandwidth). LaunchFusedCopy instead cuts every copy into tiles, puts
// the whole list in the launch's parameters (no upload, so a launch can be captured in
// a CUDA graph as it is) and lets one thread block move each tile with 16-byte loads
// and stores where both sides allow it.
//
// The kernel reads and writes through ordinary pointers, so each side may be memory of
// the launching device, memory of a peer the device has access to, or pinned host
// memory (which a kernel reaches over PCIe or NVLink-C2C).
//
// Plain C++ header: FusedCopyLayout is the host-side tiling, tested on the CPU; the
// launch exists only in a build with CUDA (fused_copy_nocuda.cc fails otherwise).
#ifndef GENESIS_TRANSFER_KERNELS_FUSED_COPY_H_
#define GENESIS_TRANSFER_KERNELS_FUSED_COPY_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

struct CUstream_st;

namespace genesis::transfer::kernels {

// One copy of `bytes` from `src` to `dst`, both reachable from the launching device.
struct FusedCopyItem {
  const void* src = nullptr;
  void* dst = nullptr;
  size_t bytes = 0;
};

// Copies per launch: what fits in a launch's 32 KiB of parameters.
inline constexpr size_t kFusedCopiesPerLaunch = 1024;
// Bytes one thread block moves (a power of two).
inline constexpr size_t kFusedTileBytes = size_t{64} << 10;

// The tiling of one launch: item i covers the tiles [tile_start[i], tile_start[i+1]).
// Items of zero bytes get no tile. Exposed so that the CPU tests check it.
struct FusedCopyTiling {
  uint32_t tile_start[kFusedCopiesPerLaunch + 1];
  uint32_t num_items = 0;
  uint32_t num_tiles = 0;
  // k when every item has exactly k > 0 tiles (a batch of equal sizes): item i then
  // covers [i * k, (i + 1) * k), and ItemOfTile divides instead of searching. 0
  // otherwise.
  uint32_t tiles_per_item = 0;
};

// Tiles `items` (at most kFusedCopiesPerLaunch) into `tiling`. InvalidArgument if there
// are too many items or the tiles would not fit a 32-bit grid.
absl::Status TileFusedCopy(absl::Span<const FusedCopyItem> items, FusedCopyTiling& tiling);

#ifdef __CUDACC__
#define GENESIS_FUSED_COPY_HD __host__ __device__
#else
#define GENESIS_FUSED_COPY_HD
#endif

// The item that tile `tile` belongs to (tile < tiling.num_tiles): the last item whose
// first tile is at most `tile`, which skips empty items. What each thread block
// computes: a division when every item has as many tiles, otherwise a binary search
// (about ten dependent reads of the launch's parameters).
GENESIS_FUSED_COPY_HD inline uint32_t ItemOfTile(const FusedCopyTiling& tiling,
                                                 uint32_t tile) {
  if (tiling.tiles_per_item != 0) return tile / tiling.tiles_per_item;
  uint32_t lo = 0;
  uint32_t hi = tiling.num_items;  // tile_start[lo] <= tile < tile_start[hi]
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    if (tiling.tile_start[mid] <= tile) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Queues on `stream` (of the current device) kernels that copy every item: one launch
// per kFusedCopiesPerLaunch items. Items must not overlap each other's destinations,
// and no destination may overlap a source (the batch planner checks both). Returns the
// launch error, if any; errors of the copies themselves (an illegal address) surface
// at the stream's next synchronisation. FailedPrecondition in the CPU-only build.
absl::Status LaunchFusedCopy(absl::Span<const FusedCopyItem> items, CUstream_st* stream);

}  // namespace genesis::transfer::kernels

#endif  // GENESIS_TRANSFER_KERNELS_FUSED_COPY_H_
