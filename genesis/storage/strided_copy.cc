#include "genesis/storage/strided_copy.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/status.h"
#include "genesis/storage/layout.h"

namespace genesis::storage {
namespace strided_internal {
namespace {

// Whether stepping `outer` once moves both views exactly as far as stepping
// through all of `inner`: then the two loops are one loop.
bool Continues(const LoopDim& outer, const LoopDim& inner) {
  int64_t src_span;
  int64_t dst_span;
  // An overflowing span cannot equal a stride.
  return !__builtin_mul_overflow(inner.size, inner.src_stride, &src_span) &&
         !__builtin_mul_overflow(inner.size, inner.dst_stride, &dst_span) &&
         outer.src_stride == src_span && outer.dst_stride == dst_span;
}

}  // namespace

LoopPlan PlanLoops(absl::Span<const int64_t> shape,
                   absl::Span<const int64_t> src_strides,
                   absl::Span<const int64_t> dst_strides) {
  LoopPlan plan;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    plan.dims[plan.rank++] = {shape[i], src_strides[i], dst_strides[i]};
  }
  // Order by decreasing destination stride, then decreasing source stride;
  // stable, so that equal dims keep their order.
  const auto outer_first = [](const LoopDim& a, const LoopDim& b) {
    return a.dst_stride != b.dst_stride ? a.dst_stride > b.dst_stride
                                        : a.src_stride > b.src_stride;
  };
  std::stable_sort(plan.dims.begin(), plan.dims.begin() + plan.rank,
                   outer_first);
  // Merge runs of dims that continue each other into one loop.
  int merged = 0;
  for (int k = 0; k < plan.rank; ++k) {
    LoopDim dim = plan.dims[k];
    while (k + 1 < plan.rank && Continues(dim, plan.dims[k + 1])) {
      const LoopDim& inner = plan.dims[++k];
      // The product is at most numel: no overflow.
      dim = {dim.size * inner.size, inner.src_stride, inner.dst_stride};
    }
    plan.dims[merged++] = dim;
  }
  plan.rank = merged;
  return plan;
}

absl::Status CheckSameShape(const Layout& src, const Layout& dst,
                            std::string_view function) {
  if (src.shape() == dst.shape()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      ToAbsl(function), ": source shape [", absl::StrJoin(src.shape(), ", "),
      "] differs from destination shape [", absl::StrJoin(dst.shape(), ", "),
      "]"));
}

absl::Status CheckWritable(const Layout& dst, std::string_view function) {
  // An empty destination is written nowhere, however it broadcasts.
  for (int d = 0; d < dst.rank() && dst.numel() > 0; ++d) {
    if (dst.stride(d) == 0 && dst.size(d) > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(ToAbsl(function), ": destination dim ", d,
                       " has stride 0 and size ", dst.size(d),
                       ", so several elements would be written to one "
                       "place (destination ",
                       dst.ToString(), ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace strided_internal

namespace {

using strided_internal::ForEachOuter;
using strided_internal::LoopDim;
using strided_internal::LoopPlan;
using strided_internal::PlanLoops;

// Edge of the square tiles of the transposed path: a 32 x 32 tile of 8-byte
// items is 8 KiB per side, well inside L1 together.
constexpr int64_t kTile = 32;
// A source stride (in bytes) from which every inner-loop read touches a new
// cache line, so tiling pays.
constexpr int64_t kCacheLine = 64;

// Moves one item. kSize > 0 is the item size known at compile time (a
// single load and store); kSize == 0 uses the runtime `size`.
template <size_t kSize>
inline void CopyItem(char* dst, const char* src, size_t size) {
  std::memcpy(dst, src, kSize > 0 ? kSize : size);
}

// Copies n items with the given byte strides.
template <size_t kSize>
void CopyRow(const char* src, int64_t src_stride, char* dst, int64_t dst_stride,
             int64_t n, size_t size) {
  const int64_t item = static_cast<int64_t>(size);
  if (src_stride == item && dst_stride == item) {
    std::memcpy(dst, src, static_cast<size_t>(n) * size);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    CopyItem<kSize>(dst + i * dst_stride, src + i * src_stride, size);
  }
}

// Copies the outer.size x inner.size block of the two innermost loops in
// kTile x kTile tiles, so that the source lines a tile touches stay in cache
// while the tile is written.
template <size_t kSize>
void CopyTiled(const char* src, const LoopDim& outer, const LoopDim& inner,
               char* dst, size_t size) {
  const int64_t item = static_cast<int64_t>(size);
  const int64_t so = outer.src_stride * item;
  const int64_t do_ = outer.dst_stride * item;
  const int64_t si = inner.src_stride * item;
  const int64_t di = inner.dst_stride * item;
  for (int64_t ob = 0; ob < outer.size; ob += kTile) {
    const int64_t oe = std::min(ob + kTile, outer.size);
    for (int64_t ib = 0; ib < inner.size; ib += kTile) {
      const int64_t ie = std::min(ib + kTile, inner.size);
      for (int64_t o = ob; o < oe; ++o) {
        const char* s = src + o * so;
        char* d = dst + o * do_;
        for (int64_t i = ib; i < ie; ++i) {
          CopyItem<kSize>(d + i * di, s + i * si, size);
        }
      }
    }
  }
}

// Whether the innermost two loops should go through CopyTiled: the inner
// loop reads a new cache line per item, and the next loop out reads closer
// together, so a tile reuses the lines it loads.
bool UseTiles(const LoopPlan& plan, size_t size) {
  if (plan.rank < 2) return false;
  const LoopDim& outer = plan.dims[plan.rank - 2];
  const LoopDim& inner = plan.dims[plan.rank - 1];
  return inner.src_stride * static_cast<int64_t>(size) >= kCacheLine &&
         outer.src_stride < inner.src_stride;
}

template <size_t kSize>
void RunPlan(const LoopPlan& plan, const char* src, char* dst, size_t size) {
  if (plan.rank == 0) {
    CopyItem<kSize>(dst, src, size);
    return;
  }
  const int64_t item = static_cast<int64_t>(size);
  if (UseTiles(plan, size)) {
    const LoopDim& outer = plan.dims[plan.rank - 2];
    const LoopDim& inner = plan.dims[plan.rank - 1];
    ForEachOuter(plan, plan.rank - 2, src, size, dst, size,
                 [&](const char* s, char* d) {
                   CopyTiled<kSize>(s, outer, inner, d, size);
                 });
    return;
  }
  const LoopDim& inner = plan.dims[plan.rank - 1];
  ForEachOuter(plan, plan.rank - 1, src, size, dst, size,
               [&](const char* s, char* d) {
                 CopyRow<kSize>(s, inner.src_stride * item, d,
                                inner.dst_stride * item, inner.size, size);
               });
}

// The copy behind every public function, for a non-empty shape: `src` and
// `dst` point at the first element of each view (offsets applied).
void CopyElements(const char* src, absl::Span<const int64_t> src_strides,
                  char* dst, absl::Span<const int64_t> dst_strides,
                  absl::Span<const int64_t> shape, size_t size) {
  const LoopPlan plan = PlanLoops(shape, src_strides, dst_strides);
  switch (size) {
    case 1:
      return RunPlan<1>(plan, src, dst, size);
    case 2:
      return RunPlan<2>(plan, src, dst, size);
    case 4:
      return RunPlan<4>(plan, src, dst, size);
    case 8:
      return RunPlan<8>(plan, src, dst, size);
    default:
      return RunPlan<0>(plan, src, dst, size);
  }
}

// Row-major strides for the shape of the non-empty `layout` (the contiguous
// side of a copy). Each is at most numel, so none overflows.
std::array<int64_t, kMaxDims> RowMajor(const Layout& layout) {
  std::array<int64_t, kMaxDims> strides{};
  int64_t stride = 1;
  for (int i = layout.rank() - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= layout.size(i);
  }
  return strides;
}

const char* At(const void* base, const Layout& layout, size_t size) {
  return static_cast<const char*>(base) +
         layout.offset() * static_cast<int64_t>(size);
}

char* At(void* base, const Layout& layout, size_t size) {
  return static_cast<char*>(base) +
         layout.offset() * static_cast<int64_t>(size);
}

}  // namespace

void CopyStridedToContiguous(const void* base, const Layout& src,
                             size_t item_size, void* dst) {
  if (src.numel() == 0) return;
  const std::array<int64_t, kMaxDims> dst_strides = RowMajor(src);
  CopyElements(At(base, src, item_size), src.strides(), static_cast<char*>(dst),
               absl::MakeConstSpan(dst_strides.data(), src.strides().size()),
               src.shape(), item_size);
}

void CopyContiguousToStrided(const void* src, const Layout& dst,
                             size_t item_size, void* dst_base) {
  if (dst.numel() == 0) return;
  const std::array<int64_t, kMaxDims> src_strides = RowMajor(dst);
  CopyElements(static_cast<const char*>(src),
               absl::MakeConstSpan(src_strides.data(), dst.strides().size()),
               At(dst_base, dst, item_size), dst.strides(), dst.shape(),
               item_size);
}

absl::Status CopyStrided(const void* src_base, const Layout& src,
                         void* dst_base, const Layout& dst, size_t item_size) {
  GENESIS_RETURN_IF_ERROR(
      strided_internal::CheckSameShape(src, dst, "CopyStrided"));
  if (item_size == 0) {
    return absl::InvalidArgumentError("CopyStrided: item_size = 0");
  }
  GENESIS_RETURN_IF_ERROR(strided_internal::CheckWritable(dst, "CopyStrided"));
  if (src.numel() == 0) return absl::OkStatus();  // Buffers may be null.
  CopyElements(At(src_base, src, item_size), src.strides(),
               At(dst_base, dst, item_size), dst.strides(), src.shape(),
               item_size);
  return absl::OkStatus();
}

}  // namespace genesis::storage
