#include "genesis/storage/kernels/kernel_plan.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>

#include "genesis/storage/layout.h"
#include "genesis/storage/strided_copy.h"

namespace genesis::storage::kernels::internal {
namespace {

using strided_internal::LoopDim;
using strided_internal::LoopPlan;
using strided_internal::PlanLoops;

static_assert(std::endian::native == std::endian::little,
              "FillPlan keeps patterns as little-endian words");

// A source stride (in bytes) from which each read of an inner loop lands in
// its own 32-byte sector, so that reading along the next loop out pays.
constexpr int64_t kSectorBytes = 32;
constexpr int64_t kLimit32 = int64_t{1} << 31;

using Dims = std::array<LoopDim, kMaxPassDims>;

// Dims as a plan has them: PlanLoops's, outermost first.
int CopyLoops(const LoopPlan& plan, int64_t scale, Dims& dims) {
  for (int k = 0; k < plan.rank; ++k) {
    dims[k] = {plan.dims[k].size, plan.dims[k].src_stride * scale,
               plan.dims[k].dst_stride * scale};
  }
  return plan.rank;
}

// The largest offset the dims reach on one side, or kLimit32 if it
// overflows (only compared with kLimit32).
int64_t MaxOffset(const Dims& dims, int rank, bool source) {
  int64_t total = 0;
  for (int k = 0; k < rank; ++k) {
    int64_t reach;
    const int64_t stride = source ? dims[k].src_stride : dims[k].dst_stride;
    if (__builtin_mul_overflow(dims[k].size - 1, stride, &reach) ||
        __builtin_add_overflow(total, reach, &total)) {
      return kLimit32;
    }
  }
  return total;
}

// The pass over `dims` (no size-1 dims; rank 0 is one unit) with source
// units of `unit` bytes: picks the kernel and the index width.
Pass Finish(const Dims& dims, int rank, size_t unit) {
  Pass pass;
  pass.unit = unit;
  pass.numel = 1;
  for (int k = 0; k < rank; ++k) {
    pass.dims.size[k] = dims[k].size;
    pass.dims.src_stride[k] = dims[k].src_stride;
    pass.dims.dst_stride[k] = dims[k].dst_stride;
    pass.numel *= dims[k].size;
  }
  pass.dims.rank = rank;
  if (rank == 0) {
    pass.dims.rank = 1;
    pass.dims.size[0] = pass.dims.src_stride[0] = pass.dims.dst_stride[0] = 1;
  }
  const LoopDim& inner = dims[std::max(rank - 1, 0)];
  if (rank == 0 ||
      (rank == 1 && inner.src_stride == 1 && inner.dst_stride == 1)) {
    pass.kind = PassKind::kContiguous;
  } else if (rank >= 2 &&
             inner.src_stride * static_cast<int64_t>(unit) >= kSectorBytes &&
             dims[rank - 2].src_stride < inner.src_stride) {
    pass.kind = PassKind::kTiled;
  } else {
    pass.kind = PassKind::kGeneric;
  }
  pass.fits_32bit = pass.numel < kLimit32 &&
                    MaxOffset(dims, rank, /*source=*/true) < kLimit32 &&
                    MaxOffset(dims, rank, /*source=*/false) < kLimit32;
  return pass;
}

// Drops size-1 dims, keeping the order of the others.
int DropUnitDims(Dims& dims, int rank) {
  int kept = 0;
  for (int k = 0; k < rank; ++k) {
    if (dims[k].size != 1) dims[kept++] = dims[k];
  }
  return kept;
}

}  // namespace

Pass PlanCopy(const Layout& src, const Layout& dst, size_t item_size,
              uintptr_t src_addr, uintptr_t dst_addr) {
  const int64_t item = static_cast<int64_t>(item_size);
  Dims dims{};
  // The element loops with strides in bytes, then the bytes of an element
  // as the innermost loop, merged into the loop above where both views step
  // through elements contiguously.
  int rank = CopyLoops(PlanLoops(src.shape(), src.strides(), dst.strides()),
                       item, dims);
  LoopDim* inner = rank > 0 ? &dims[rank - 1] : nullptr;
  if (inner != nullptr && inner->src_stride == item &&
      inner->dst_stride == item) {
    *inner = {inner->size * item, 1, 1};
  } else {
    dims[rank++] = {item, 1, 1};
  }
  // The word: a power of two up to kVectorBytes dividing both addresses,
  // the innermost (contiguous) run, and every other stride.
  uint64_t bits = src_addr | dst_addr |
                  static_cast<uint64_t>(dims[rank - 1].size) | kVectorBytes;
  for (int k = 0; k < rank - 1; ++k) {
    bits |= static_cast<uint64_t>(dims[k].src_stride) |
            static_cast<uint64_t>(dims[k].dst_stride);
  }
  const int64_t word = static_cast<int64_t>(bits & (~bits + 1));
  for (int k = 0; k < rank - 1; ++k) {
    dims[k].src_stride /= word;
    dims[k].dst_stride /= word;
  }
  dims[rank - 1].size /= word;
  rank = DropUnitDims(dims, rank);
  return Finish(dims, rank, static_cast<size_t>(word));
}

Pass PlanConvert(const Layout& src, const Layout& dst, size_t src_item) {
  Dims dims{};
  const int rank =
      CopyLoops(PlanLoops(src.shape(), src.strides(), dst.strides()), 1, dims);
  return Finish(dims, rank, src_item);
}

TilePlan PlanTiles(const PassDims<int64_t>& dims) {
  const int rows = dims.rank - 2;  // The index of the rows' dim.
  TilePlan plan{};
  PassDims<int64_t> batch{};
  batch.rank = rows;
  uint64_t matrices = 1;
  for (int k = 0; k < rows; ++k) {
    batch.size[k] = dims.size[k];
    batch.src_stride[k] = dims.src_stride[k];
    batch.dst_stride[k] = dims.dst_stride[k];
    matrices *= static_cast<uint64_t>(dims.size[k]);
  }
  plan.batch = DimsAs<uint64_t>(batch);
  plan.rows = dims.size[rows];
  plan.cols = dims.size[rows + 1];
  plan.src_row_stride = dims.src_stride[rows];
  plan.src_col_stride = dims.src_stride[rows + 1];
  plan.dst_row_stride = dims.dst_stride[rows];
  plan.dst_col_stride = dims.dst_stride[rows + 1];
  plan.row_tiles = static_cast<uint64_t>((plan.rows + kTile - 1) / kTile);
  plan.col_tiles = static_cast<uint64_t>((plan.cols + kTile - 1) / kTile);
  plan.count = plan.row_tiles * plan.col_tiles * matrices;
  return plan;
}

std::optional<VectorSplit> SplitForVectors(uintptr_t src, size_t src_item,
                                           uintptr_t dst, size_t dst_item,
                                           int64_t numel,
                                           int64_t vector_elems) {
  for (int64_t head = 0; head < vector_elems; ++head) {
    const uint64_t h = static_cast<uint64_t>(head);
    if ((src + h * src_item) % kVectorBytes == 0 &&
        (dst + h * dst_item) % kVectorBytes == 0) {
      const int64_t clamped = std::min(head, numel);
      return VectorSplit{clamped, (numel - clamped) / vector_elems};
    }
  }
  return std::nullopt;
}

FillPlan PlanFill(uintptr_t dst, int64_t numel, const void* pattern,
                  size_t elem_size) {
  FillPlan plan;
  plan.bytes = numel * static_cast<int64_t>(elem_size);
  plan.period = static_cast<uint32_t>(elem_size);
  std::memcpy(&plan.pattern, pattern, elem_size);
  const int64_t to_aligned =
      static_cast<int64_t>((kVectorBytes - dst % kVectorBytes) % kVectorBytes);
  plan.head = std::min(plan.bytes, to_aligned);
  plan.vectors = (plan.bytes - plan.head) / static_cast<int64_t>(kVectorBytes);
  uint8_t line[kVectorBytes];
  for (size_t k = 0; k < kVectorBytes; ++k) {
    line[k] = FillByte(plan, plan.head + static_cast<int64_t>(k));
  }
  std::memcpy(plan.line, line, kVectorBytes);
  return plan;
}

}  // namespace genesis::storage::kernels::internal
