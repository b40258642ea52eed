// CPU copies between strided views (see layout.h) of raw buffers: gathering
// a view into a contiguous buffer, scattering a contiguous buffer into a view,
// and copying one view into another of the same shape.
//
//   // t is a transposed view of a float matrix held by `base`:
//   std::vector<float> out(t.numel());
//   CopyStridedToContiguous(base, t, sizeof(float), out.data());
//
// The copies move items of any size as raw bytes (no conversion; see
// convert.h for that), element i of the source landing on element i of the
// destination in row-major order. They are fast for common views: dims that
// both views step through as one are merged, contiguous runs are copied with
// memcpy, and transposes (the destination's inner loop reads the source with
// a stride while another loop reads it contiguously: 2-D transposes, batched
// ones, N-d permutes) are copied in strips of small squares transposed in
// registers (SSE2; AVX2 where the CPU has it, chosen at run time), with
// non-temporal stores for copies of 8 MiB and more. Items of 1, 2, 4, 8 and 16
// bytes are copied with fixed-size moves, other sizes below 64 bytes with two
// overlapping word moves, larger ones with memcpy. Buffers need no particular
// alignment.
//
// Threads: each copy takes `threads`, the most threads it may use, the calling one
// among them (core/parallel_for.h). The default, 1, copies on the calling thread
// alone; kAllCores allows one per hardware thread. A copy uses one thread per MiB at
// most, each copying a band of the outermost loop (destination rows, for a
// transpose), and returns once all of them have finished.
//
// Preconditions the copies do not check (callers check them once, e.g. with
// Layout::CheckFits, when the views are made): each view fits its base
// buffer, the bytes read and the bytes written do not overlap, and a
// destination view reaches each base element at most once.
#ifndef GENESIS_STORAGE_STRIDED_COPY_H_
#define GENESIS_STORAGE_STRIDED_COPY_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "genesis/storage/layout.h"

namespace genesis::storage {

// `threads` for a copy that may use every hardware thread.
inline constexpr int kAllCores = 0;

// Copies the elements of the view `src` of the buffer at `base` (which points
// at base element 0, not at src.offset()) to `dst` in row-major order, so
// that `dst` holds src.numel() * item_size contiguous bytes. Broadcast
// (stride-0) dims are materialised. Requires item_size >= 1. Uses up to
// `threads` threads (kAllCores, or below 0: one per hardware thread).
void CopyStridedToContiguous(const void* base, const Layout& src,
                             size_t item_size, void* dst, int threads = 1);

// The reverse: writes the dst.numel() items at `src` (contiguous, row-major)
// to the elements of the view `dst` of the buffer at `dst_base`. Base
// elements the view does not reach are left unchanged. Requires
// item_size >= 1 and that `dst` reaches no base element twice (no stride-0
// dim of size > 1). Uses up to `threads` threads, as above.
void CopyContiguousToStrided(const void* src, const Layout& dst,
                             size_t item_size, void* dst_base, int threads = 1);

// Copies every element of the view `src` of `src_base` to the element with
// the same multi-index in the view `dst` of `dst_base`. InvalidArgument if
// the shapes differ (naming both), if item_size is 0, or if a non-empty `dst`
// has a stride-0 dim of size > 1 (two elements would be written to one
// place); otherwise OK, with the copy done. Uses up to `threads` threads, as
// above.
absl::Status CopyStrided(const void* src_base, const Layout& src,
                         void* dst_base, const Layout& dst, size_t item_size,
                         int threads = 1);

// Implementation details shared with convert.cc; not for direct use.
namespace strided_internal {

// One loop of an element-wise pass from a source to a destination view of
// the same shape. Strides are in elements.
struct LoopDim {
  int64_t size = 0;
  int64_t src_stride = 0;
  int64_t dst_stride = 0;
};

// The loops of an element-wise pass, reorganised for speed without changing
// which source element lands where: size-1 dims dropped, dims ordered by
// decreasing destination stride (the innermost loop writes with the smallest
// stride), and neighbouring dims that both views step through as one merged.
// dims[rank - 1] is the innermost loop; rank 0 means a single element.
struct LoopPlan {
  int rank = 0;
  std::array<LoopDim, kMaxDims> dims{};
};

// Plans the pass over `shape` (numel > 0) for source and destination views
// with the given strides.
LoopPlan PlanLoops(absl::Span<const int64_t> shape,
                   absl::Span<const int64_t> src_strides,
                   absl::Span<const int64_t> dst_strides);

// OK if the views have the same shape; otherwise InvalidArgument
// "<function>: source shape [..] differs from destination shape [..]".
absl::Status CheckSameShape(const Layout& src, const Layout& dst,
                            std::string_view function);

// OK unless the non-empty view `dst` has a stride-0 dim of size > 1, where
// writing would put several elements in one place (InvalidArgument naming
// the dim and `function`).
absl::Status CheckWritable(const Layout& dst, std::string_view function);

// Runs a pass of `plan` (rank >= 1 or a single element) over `bytes` bytes in parts
// along its outermost loop, shared among up to `threads` threads (kAllCores, or below
// 0: one per hardware thread) as strided copies are: one thread per MiB at most, parts
// starting at multiples of 64 items where each part has that many. part(mine, begin)
// runs the plan with dims[0] cut to the mine.dims[0].size items from `begin`; with one
// part, once with the whole plan and begin 0, on the calling thread.
void ForEachPart(const LoopPlan& plan, int64_t bytes, int threads,
                 absl::FunctionRef<void(const LoopPlan& mine, int64_t begin)> part);

// Calls body(src, dst) for every combination of indices of the plan's outer
// `outer` dims (once if outer is 0), with `src` and `dst` advanced by those
// indices times the dims' strides times src_item / dst_item bytes. The body
// handles the remaining inner dims.
template <typename Body>
void ForEachOuter(const LoopPlan& plan, int outer, const char* src,
                  size_t src_item, char* dst, size_t dst_item, Body&& body) {
  std::array<int64_t, kMaxDims> index{};
  std::array<int64_t, kMaxDims> src_step{};
  std::array<int64_t, kMaxDims> dst_step{};
  for (int d = 0; d < outer; ++d) {
    src_step[d] = plan.dims[d].src_stride * static_cast<int64_t>(src_item);
    dst_step[d] = plan.dims[d].dst_stride * static_cast<int64_t>(dst_item);
  }
  while (true) {
    body(src, dst);
    // Odometer: bump the innermost outer dim, carrying into the ones above.
    int d = outer - 1;
    for (; d >= 0; --d) {
      if (++index[d] < plan.dims[d].size) {
        src += src_step[d];
        dst += dst_step[d];
        break;
      }
      index[d] = 0;
      src -= (plan.dims[d].size - 1) * src_step[d];
      dst -= (plan.dims[d].size - 1) * dst_step[d];
    }
    if (d < 0) return;
  }
}

}  // namespace strided_internal
}  // namespace genesis::storage

#endif  // GENESIS_STORAGE_STRIDED_COPY_H_
