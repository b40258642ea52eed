// How the CUDA kernels of cuda_kernels.cu walk their buffers: the plans the
// host makes for a strided copy, a conversion or a fill, and the index
// arithmetic the kernels run on them. Plain C++ (the index helpers are
// GENESIS_HOST_DEVICE, for the kernels), so that kernel_plan_test can check
// on the CPU that every plan puts every element in the right place.
// Internal to //genesis/storage/kernels.
//
//   Pass pass = PlanCopy(src, dst, sizeof(float), src_addr, dst_addr);
//   // pass.kind: kContiguous (a memcpy), kTiled (a transpose through shared
//   // memory) or kGeneric (offsets from each unit's linear index).
//   Index s, d;
//   OffsetsOf(dims, dims.rank, i, &s, &d);  // Unit i: src[s] -> dst[d].
#ifndef GENESIS_STORAGE_KERNELS_KERNEL_PLAN_H_
#define GENESIS_STORAGE_KERNELS_KERNEL_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "genesis/storage/convert_rules.h"  // GENESIS_HOST_DEVICE.
#include "genesis/storage/layout.h"

namespace genesis::storage::kernels::internal {

// The dims of a pass: a copy adds a dim for the words of an element, which
// can give one more than a view's kMaxDims.
inline constexpr int kMaxPassDims = kMaxDims + 1;

// The edge of the square tiles of the transposing kernel, and the rows of
// threads of its blocks (kTile x kTileRows threads; each moves
// kTile / kTileRows units per tile). Two rows (sixteen loads in flight per
// thread) moved a transposed 4096 x 4096 float32 at 0.92 of a copy's
// bandwidth on an H100 and 0.79 on an H200; four rows gave 0.88 and 0.74,
// eight 0.75 on the H100.
inline constexpr int kTile = 32;
inline constexpr int kTileRows = 2;

// The alignment and size of the widest loads and stores the kernels use.
inline constexpr size_t kVectorBytes = 16;

// The loops of an element-wise pass from a source to a destination view, in
// units (elements, or words of a copy): dims[rank - 1] is the innermost loop,
// and the linear index of a unit runs over the dims in row-major order.
// Index is int64_t on the host; kernels get uint32_t or uint64_t copies
// (DimsAs). A plain aggregate, so that kernels can keep a copy in shared
// memory (indexing kernel parameters at run time would copy them to local
// memory): value-initialize it ({}) on the host.
template <typename Index>
struct PassDims {
  int rank;
  Index size[kMaxPassDims];
  Index src_stride[kMaxPassDims];
  Index dst_stride[kMaxPassDims];
};

enum class PassKind {
  // Both sides contiguous: unit i goes to unit i (dims: one dim, strides 1).
  kContiguous,
  // The two innermost dims are a transpose: the source is read along the
  // outer one, so kTile x kTile tiles go through shared memory.
  kTiled,
  // Anything else: one thread per unit, offsets from its linear index.
  kGeneric,
};

struct Pass {
  PassKind kind = PassKind::kContiguous;
  // Bytes of a source unit: the word size of a copy, the source element
  // size of a conversion.
  size_t unit = 0;
  // Units moved: the product of dims' sizes.
  int64_t numel = 0;
  // At least one dim (a single unit is a dim of size 1).
  PassDims<int64_t> dims{};
  // numel and every offset reached on either side are below 2^31, so the
  // kernels can index with 32 bits (DimsAs<uint32_t>).
  bool fits_32bit = false;
};

// Plans a copy of item_size-byte elements between the views `src` and `dst`
// of the same nonempty shape (the caller checks both), whose first elements
// are at the byte addresses src_addr and dst_addr (offsets applied). Elements
// move as words, the widest of 16, 8, 4, 2 and 1 bytes dividing both
// addresses, every byte stride, and the length of the innermost run that
// both views step through contiguously; `unit` is that word size and strides
// count words.
Pass PlanCopy(const Layout& src, const Layout& dst, size_t item_size,
              uintptr_t src_addr, uintptr_t dst_addr);

// Plans a conversion between the views `src` and `dst` of the same nonempty
// shape; units are elements, and src_item is the source element size.
Pass PlanConvert(const Layout& src, const Layout& dst, size_t src_item);

// `dims` as Index: uint32_t (requires the pass's fits_32bit) or uint64_t.
template <typename Index>
PassDims<Index> DimsAs(const PassDims<int64_t>& dims) {
  PassDims<Index> as{};
  as.rank = dims.rank;
  for (int k = 0; k < dims.rank; ++k) {
    as.size[k] = static_cast<Index>(dims.size[k]);
    as.src_stride[k] = static_cast<Index>(dims.src_stride[k]);
    as.dst_stride[k] = static_cast<Index>(dims.dst_stride[k]);
  }
  return as;
}

// The offsets, in units, of the unit with linear index `index` over the
// first `ndims` dims of `dims` (all of them for a generic pass; the batch
// dims before the tile's two for a tiled one). Requires index < the product
// of those dims' sizes.
template <typename Index>
GENESIS_HOST_DEVICE inline void OffsetsOf(const PassDims<Index>& dims,
                                          int ndims, Index index, Index* src,
                                          Index* dst) {
  Index s = 0;
  Index d = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll 1  // Small code matters more: the kernels have many copies.
#endif
  for (int k = ndims - 1; k > 0; --k) {
    const Index quotient = index / dims.size[k];
    const Index i = index - quotient * dims.size[k];
    s += i * dims.src_stride[k];
    d += i * dims.dst_stride[k];
    index = quotient;
  }
  if (ndims > 0) {  // The outermost dim needs no division.
    s += index * dims.src_stride[0];
    d += index * dims.dst_stride[0];
  }
  *src = s;
  *dst = d;
}

// A tiled pass as its kernel runs it: a batch of rows x cols matrices, one
// per combination of indices of the dims before the last two (`batch`; rank
// 0 for a single matrix), cut into kTile x kTile tiles. Tile t covers rows
// [row0, row0 + kTile) and columns [col0, col0 + kTile) of one matrix
// (TileAt); columns vary fastest, then rows, then matrices. A plain
// aggregate, like PassDims, for shared memory.
struct TilePlan {
  PassDims<uint64_t> batch;
  int64_t rows;
  int64_t cols;
  int64_t src_row_stride;
  int64_t src_col_stride;
  int64_t dst_row_stride;
  int64_t dst_col_stride;
  uint64_t row_tiles;
  uint64_t col_tiles;
  uint64_t count;  // Tiles in all.
};

// The tiles of a pass with dims.rank >= 2.
TilePlan PlanTiles(const PassDims<int64_t>& dims);

// Where tile `tile` starts: the offsets of its matrix's element (0, 0) on
// both sides, and its first row and column.
GENESIS_HOST_DEVICE inline void TileAt(const TilePlan& plan, uint64_t tile,
                                       int64_t* src_origin, int64_t* dst_origin,
                                       int64_t* row0, int64_t* col0) {
  uint64_t matrix;
  if (plan.count <= UINT32_MAX) {
    // 32-bit division, several times cheaper on a GPU, whenever the tiles allow it.
    uint32_t t = static_cast<uint32_t>(tile);
    const auto col_tiles = static_cast<uint32_t>(plan.col_tiles);
    const auto row_tiles = static_cast<uint32_t>(plan.row_tiles);
    *col0 = static_cast<int64_t>(t % col_tiles) * kTile;
    t /= col_tiles;
    *row0 = static_cast<int64_t>(t % row_tiles) * kTile;
    matrix = t / row_tiles;
  } else {
    *col0 = static_cast<int64_t>(tile % plan.col_tiles) * kTile;
    tile /= plan.col_tiles;
    *row0 = static_cast<int64_t>(tile % plan.row_tiles) * kTile;
    matrix = tile / plan.row_tiles;
  }
  uint64_t src;
  uint64_t dst;
  OffsetsOf(plan.batch, plan.batch.rank, matrix, &src, &dst);
  *src_origin = static_cast<int64_t>(src);
  *dst_origin = static_cast<int64_t>(dst);
}

// A contiguous conversion in kVectorBytes loads and stores: elements
// [0, head) one by one, then `vectors` runs of vector_elems elements whose
// source and destination are kVectorBytes-aligned, then the rest one by one.
struct VectorSplit {
  int64_t head = 0;
  int64_t vectors = 0;
};

// The split of numel elements at src (src_item bytes each) and dst (dst_item
// bytes each), where vector_elems elements of either type are a multiple of
// kVectorBytes; nullopt if no head shorter than vector_elems aligns both.
std::optional<VectorSplit> SplitForVectors(uintptr_t src, size_t src_item,
                                           uintptr_t dst, size_t dst_item,
                                           int64_t numel, int64_t vector_elems);

// A fill of `bytes` bytes from dst on with a repeated element pattern:
// `head` single bytes up to the first kVectorBytes-aligned address (all of
// them if fewer), `vectors` aligned stores of `line`, then single bytes.
struct FillPlan {
  int64_t bytes = 0;
  int64_t head = 0;
  int64_t vectors = 0;
  // The kVectorBytes every aligned store writes, as little-endian words.
  uint32_t line[kVectorBytes / 4] = {};
  // The element's bytes (byte k in bits [8k, 8k + 8)), and its size.
  uint64_t pattern = 0;
  uint32_t period = 1;
};

// Plans writing the elem_size (1, 2, 4 or 8) bytes at `pattern` numel times
// from the address dst on.
FillPlan PlanFill(uintptr_t dst, int64_t numel, const void* pattern,
                  size_t elem_size);

// The byte at dst + j of a planned fill.
GENESIS_HOST_DEVICE inline uint8_t FillByte(const FillPlan& plan, int64_t j) {
  return static_cast<uint8_t>(plan.pattern >>
                              (8 * (j % static_cast<int64_t>(plan.period))));
}

}  // namespace genesis::storage::kernels::internal

#endif  // GENESIS_STORAGE_KERNELS_KERNEL_PLAN_H_
