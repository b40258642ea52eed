// One CUDA kernel launch that copies many buffers: the batch copier's fused path.
//
// Launching a cudaMemcpyAsync per buffer costs a few microseconds each, which dominates
// when the buffers are small (1,024 copies of 16 KiB take about 4 ms that way, against
// about 7 us of device time). One launch instead cuts every copy into tiles of
// kFusedTileBytes, one thread block per tile, and moves each tile with 16-byte loads and
// stores where both sides allow it.
//
// The copies travel in the launch's parameters (no upload, so a launch can be captured
// in a CUDA graph as it is), encoded as compactly as the batch allows, because what a
// launch costs the host grows with its parameters (on an H200 machine: about 4 us with
// 64 bytes, 7 us with 28 KiB; batch_copy_cuda_benchmark's BM_Launch_EmptyKernel_*).
// Per launch, each of the sources, the destinations and the sizes is stored as
//
//  * kFusedSame: nothing per copy. Sizes: all equal. Addresses: base + i * stride (a
//    gather into, or a scatter from, consecutive buffers of one size);
//  * kFusedWords32: one 32-bit word per copy. Sizes below 4 GiB. Addresses: base +
//    (word << shift), where the shift is the addresses' common alignment (up to 2^31)
//    and the span is below 2^(32 + shift) bytes;
//  * kFusedWords64: two words per copy (low, high): any size or address;
//
// and, unless every copy has as many tiles, the first tile of each copy (so that a
// block finds its copy by a binary search instead of a division). A batch of 1,024 copies
// of one size from consecutive buffers takes about 100 bytes of parameters; from
// scattered sources into consecutive destinations, 4 KiB; the worst case, 28 KiB.
//
// The kernel reads and writes through ordinary pointers, so each side may be memory of
// the launching device, memory of a peer the device has access to, or pinned host
// memory (which a kernel reaches over PCIe or NVLink-C2C).
//
// Plain C++ header: the encoding (EncodeFusedCopy) and the decoding every thread block
// does (DecodeFusedTile) are tested on the CPU; the launch exists only in a build with
// CUDA (fused_copy_nocuda.cc fails otherwise).
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

// Copies per launch.
inline constexpr size_t kFusedCopiesPerLaunch = 1024;
// Bytes one thread block moves (a power of two).
inline constexpr size_t kFusedTileBytes = size_t{64} << 10;

// How a launch stores the sources, the destinations or the sizes (see the file comment).
enum FusedCopyMode : uint32_t {
  kFusedSame = 0,
  kFusedWords32 = 1,
  kFusedWords64 = 2,
};

// Words a launch may need: 64-bit sources, destinations and sizes, and the first tiles.
inline constexpr size_t kFusedMaxWords = 7 * kFusedCopiesPerLaunch + 1;

// What a launch's parameters hold besides its words.
struct FusedCopyHeader {
  // Sources: kFusedSame: base + i * stride; kFusedWords32: base + (word << shift);
  // kFusedWords64: the words. Likewise the destinations.
  uint64_t src_base = 0;
  uint64_t src_stride = 0;
  uint64_t dst_base = 0;
  uint64_t dst_stride = 0;
  uint64_t bytes = 0;  // Every copy's size, for size_mode kFusedSame.
  uint32_t num_items = 0;
  uint32_t num_tiles = 0;
  // k > 0: every copy has k tiles, and copy i covers tiles [i * k, (i + 1) * k).
  // 0: copy i covers tiles [word[tile_start_at + i], word[tile_start_at + i + 1]).
  uint32_t tiles_per_item = 0;
  uint32_t src_mode = kFusedSame;
  uint32_t dst_mode = kFusedSame;
  uint32_t size_mode = kFusedSame;
  uint32_t src_shift = 0;
  uint32_t dst_shift = 0;
  // Where each array begins in the words.
  uint32_t src_at = 0;
  uint32_t dst_at = 0;
  uint32_t size_at = 0;
  uint32_t tile_start_at = 0;
  uint32_t num_words = 0;  // Words used.
  uint32_t reserved = 0;
};
static_assert(sizeof(FusedCopyHeader) == 96);

#ifdef __CUDACC__
#define GENESIS_FUSED_COPY_HD __host__ __device__ __forceinline__
#else
#define GENESIS_FUSED_COPY_HD inline
#endif

GENESIS_FUSED_COPY_HD uint64_t FusedWord64(const uint32_t* words, uint32_t at) {
  return uint64_t{words[at]} | uint64_t{words[at + 1]} << 32;
}

// Copy i's source (or destination, or size) as stored with `mode`.
GENESIS_FUSED_COPY_HD uint64_t FusedValue(uint32_t mode, uint64_t base, uint64_t stride,
                                          uint32_t shift, const uint32_t* words,
                                          uint32_t at, uint32_t i) {
  if (mode == kFusedSame) return base + uint64_t{i} * stride;
  if (mode == kFusedWords32) return base + (uint64_t{words[at + i]} << shift);
  return FusedWord64(words, at + 2 * i);
}

// The copy that tile `tile` (< num_tiles) belongs to: a division when every copy has
// as many tiles, otherwise the last copy whose first tile is at most `tile` (which skips
// empty copies), by a binary search of the words.
GENESIS_FUSED_COPY_HD uint32_t FusedItemOfTile(const FusedCopyHeader& h,
                                               const uint32_t* words, uint32_t tile) {
  if (h.tiles_per_item != 0) return tile / h.tiles_per_item;
  const uint32_t* start = words + h.tile_start_at;
  uint32_t lo = 0;
  uint32_t hi = h.num_items;  // start[lo] <= tile < start[hi]
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    if (start[mid] <= tile) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// The part of its copy that one tile moves.
struct FusedTile {
  uint64_t src = 0;
  uint64_t dst = 0;
  uint64_t bytes = 0;
};

// What thread block `tile` copies.
GENESIS_FUSED_COPY_HD FusedTile DecodeFusedTile(const FusedCopyHeader& h,
                                               const uint32_t* words, uint32_t tile) {
  const uint32_t item = FusedItemOfTile(h, words, tile);
  const uint32_t first =
      h.tiles_per_item != 0 ? item * h.tiles_per_item : words[h.tile_start_at + item];
  const uint64_t begin = uint64_t{tile - first} * kFusedTileBytes;
  const uint64_t bytes = FusedValue(h.size_mode, h.bytes, 0, 0, words, h.size_at, item);
  const uint64_t rest = bytes - begin;
  FusedTile t;
  t.src = FusedValue(h.src_mode, h.src_base, h.src_stride, h.src_shift, words, h.src_at,
                     item) +
          begin;
  t.dst = FusedValue(h.dst_mode, h.dst_base, h.dst_stride, h.dst_shift, words, h.dst_at,
                     item) +
          begin;
  t.bytes = rest < kFusedTileBytes ? rest : kFusedTileBytes;
  return t;
}

// A launch's parameters: the header, then the words it uses. A kernel with room for
// fewer words reads a prefix of this (fused_copy.cu).
struct FusedCopyParams {
  FusedCopyHeader header;
  uint32_t words[kFusedMaxWords];
};

namespace internal {

uint32_t AlignmentShift(uint64_t address_bits);
absl::Status TooManyTiles(uint64_t tiles, uint32_t item);

// Stores one side of n copies, side(i) being copy i's source (or destination) address:
// at a stride (`strided`, found by the caller), else as 32-bit words of (address -
// lowest) >> alignment where the span allows, else whole.
template <typename Side>
void EncodeSide(uint32_t n, Side side, bool strided, uint64_t stride, uint64_t& base,
                uint64_t& stride_out, uint32_t& shift, uint32_t& mode, uint32_t& at,
                uint32_t* words, uint32_t& used) {
  at = used;
  if (strided) {
    mode = kFusedSame;
    base = side(0);
    stride_out = stride;
    return;
  }
  uint64_t lo = side(0), hi = lo, bits = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t a = side(i);
    lo = a < lo ? a : lo;
    hi = a > hi ? a : hi;
    bits |= a;
  }
  // Every address, and so every difference, is a multiple of 2^s.
  const uint32_t s = AlignmentShift(bits);
  uint32_t* out = words + used;
  if (((hi - lo) >> s) <= UINT32_MAX) {
    mode = kFusedWords32;
    base = lo;
    shift = s;
    for (uint32_t i = 0; i < n; ++i) out[i] = static_cast<uint32_t>((side(i) - lo) >> s);
    used += n;
    return;
  }
  mode = kFusedWords64;
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t a = side(i);
    out[2 * i] = static_cast<uint32_t>(a);
    out[2 * i + 1] = static_cast<uint32_t>(a >> 32);
  }
  used += 2 * n;
}

inline uint64_t TilesOf(uint64_t bytes) {
  return (bytes + kFusedTileBytes - 1) / kFusedTileBytes;
}

}  // namespace internal

// Encodes `count` copies (at most kFusedCopiesPerLaunch), copy k from copy_at(k), an
// object with src, dst and bytes (a FusedCopyItem, a CopyRequest), into `params`: each
// of the sources, destinations and sizes as compactly as it allows. One pass over the
// copies finds what advances by a constant step; each side that does not takes two more
// (its span, then its words). InvalidArgument if the tiles would not fit a 32-bit grid.
template <typename CopyAt>
absl::Status EncodeFusedCopy(size_t count, CopyAt copy_at, FusedCopyParams& params) {
  FusedCopyHeader& h = params.header;
  uint32_t* words = params.words;
  h = FusedCopyHeader{};
  const auto n = static_cast<uint32_t>(count);
  h.num_items = n;
  if (n == 0) return absl::OkStatus();
  const auto src_of = [&](uint32_t i) {
    return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(copy_at(i).src));
  };
  const auto dst_of = [&](uint32_t i) {
    return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(copy_at(i).dst));
  };
  const auto bytes_of = [&](uint32_t i) { return static_cast<uint64_t>(copy_at(i).bytes); };

  // Do the sources and the destinations each advance by a constant step (mod 2^64: a
  // step may be "negative"), and are the sizes all equal?
  const uint64_t src0 = src_of(0), dst0 = dst_of(0), bytes0 = bytes_of(0);
  const uint64_t src_stride = n > 1 ? src_of(1) - src0 : 0;
  const uint64_t dst_stride = n > 1 ? dst_of(1) - dst0 : 0;
  uint64_t src_off = 0, dst_off = 0, size_off = 0;
  uint64_t src_prev = src0, dst_prev = dst0;
  for (uint32_t i = 1; i < n; ++i) {
    const auto& c = copy_at(i);
    const auto s = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(c.src));
    const auto d = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(c.dst));
    src_off |= (s - src_prev) ^ src_stride;
    dst_off |= (d - dst_prev) ^ dst_stride;
    size_off |= static_cast<uint64_t>(c.bytes) ^ bytes0;
    src_prev = s;
    dst_prev = d;
  }

  uint32_t used = 0;
  internal::EncodeSide(n, src_of, src_off == 0, src_stride, h.src_base, h.src_stride,
                       h.src_shift, h.src_mode, h.src_at, words, used);
  internal::EncodeSide(n, dst_of, dst_off == 0, dst_stride, h.dst_base, h.dst_stride,
                       h.dst_shift, h.dst_mode, h.dst_at, words, used);

  uint64_t tiles = 0;
  h.size_at = used;
  if (size_off == 0) {
    h.size_mode = kFusedSame;
    h.bytes = bytes0;
    const uint64_t per_item = internal::TilesOf(bytes0);
    tiles = per_item * n;
    if (tiles > INT32_MAX) return internal::TooManyTiles(tiles, n - 1);
    h.tiles_per_item = static_cast<uint32_t>(per_item);
  } else {
    uint64_t max_bytes = 0;
    for (uint32_t i = 0; i < n; ++i) max_bytes = bytes_of(i) > max_bytes ? bytes_of(i) : max_bytes;
    uint32_t* out = words + used;
    const bool wide = max_bytes > UINT32_MAX;
    h.size_mode = wide ? kFusedWords64 : kFusedWords32;
    used += wide ? 2 * n : n;
    // The first tile of every copy, and whether they all have as many (then a block
    // divides instead of searching, and the first tiles are not kept).
    h.tile_start_at = used;
    uint32_t* start = words + used;
    const uint64_t per_item = internal::TilesOf(bytes0);
    bool uniform = per_item > 0;
    for (uint32_t i = 0; i < n; ++i) {
      const uint64_t b = bytes_of(i);
      if (wide) {
        out[2 * i] = static_cast<uint32_t>(b);
        out[2 * i + 1] = static_cast<uint32_t>(b >> 32);
      } else {
        out[i] = static_cast<uint32_t>(b);
      }
      start[i] = static_cast<uint32_t>(tiles);
      const uint64_t item_tiles = internal::TilesOf(b);
      uniform &= item_tiles == per_item;
      tiles += item_tiles;
      if (tiles > INT32_MAX) return internal::TooManyTiles(tiles, i);
    }
    start[n] = static_cast<uint32_t>(tiles);
    if (uniform) {
      h.tiles_per_item = static_cast<uint32_t>(per_item);
    } else {
      used += n + 1;
    }
  }
  h.num_tiles = static_cast<uint32_t>(tiles);
  h.num_words = used;
  return absl::OkStatus();
}

// The calling thread's parameter buffer (about 28 KiB, made at its first call): the
// launch copies the parameters, so one buffer serves every launch of the thread.
FusedCopyParams& ThreadFusedCopyParams();

// Queues on `stream` (of the current device) one kernel for the copies encoded in
// `params` (nothing when they have no tile), with parameters of the size they need.
// FailedPrecondition in the CPU-only build.
absl::Status LaunchEncodedFusedCopy(const FusedCopyParams& params, CUstream_st* stream);

// Queues on `stream` (of the current device) kernels that copy `count` copies, copy k
// from copy_at(k) (as for EncodeFusedCopy): one launch per kFusedCopiesPerLaunch, each
// encoded in its parameters. Copies must not overlap each other's destinations, and no
// destination may overlap a source (the batch planner checks both). Returns the
// encoding's or the launch's error; errors of the copies themselves (an illegal
// address) surface at the stream's next synchronisation. FailedPrecondition in the
// CPU-only build (unless no copy has bytes).
template <typename CopyAt>
absl::Status LaunchFusedCopy(size_t count, CopyAt copy_at, CUstream_st* stream) {
  FusedCopyParams& params = ThreadFusedCopyParams();
  for (size_t first = 0; first < count; first += kFusedCopiesPerLaunch) {
    const size_t n = count - first < kFusedCopiesPerLaunch ? count - first
                                                          : kFusedCopiesPerLaunch;
    if (absl::Status status = EncodeFusedCopy(
            n, [&](size_t k) -> decltype(auto) { return copy_at(first + k); }, params);
        !status.ok()) {
      return status;
    }
    if (absl::Status status = LaunchEncodedFusedCopy(params, stream); !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

// The same for a list of items.
absl::Status LaunchFusedCopy(absl::Span<const FusedCopyItem> items, CUstream_st* stream);

}  // namespace genesis::transfer::kernels

#endif  // GENESIS_TRANSFER_KERNELS_FUSED_COPY_H_
