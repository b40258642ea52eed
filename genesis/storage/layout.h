// The geometry of a tensor view over a base buffer: shape, strides and storage
// offset, all counted in elements (not bytes).
//
// A Layout says which elements of a flat base buffer a view reaches: the
// element at multi-index (i_0, ..., i_{r-1}) lives at base index
//   offset() + i_0 * strides()[0] + ... + i_{r-1} * strides()[r-1].
// View operations (Slice, Select, Transpose, Permute, Reshape, Squeeze,
// Unsqueeze, Expand) change only this geometry, never the data, so they are
// zero-copy: the result reaches a subset of the elements the input reaches.
//
//   GENESIS_ASSIGN_OR_RETURN(Layout x, Layout::Contiguous({4, 6}));
//   GENESIS_ASSIGN_OR_RETURN(Layout y, x.Slice(1, 1, 6, 2));  // x[:, 1:6:2]
//   GENESIS_ASSIGN_OR_RETURN(Layout t, y.Transpose(0, 1));
//   t.ToString();  // "shape [3, 4] strides [2, 6] offset 1"
//   GENESIS_RETURN_IF_ERROR(t.CheckFits(24));
//
// Conventions:
//   * Rank is at most kMaxDims (8); rank 0 is a scalar with one element.
//   * Sizes are >= 0: a size-0 dim makes an empty view (numel() == 0), which
//     reaches no element.
//   * Strides are >= 0. Stride 0 broadcasts (every index of that dim reaches
//     the same element). Negative strides are not supported and rejected.
//   * The offset is >= 0.
//   * numel() and the largest reachable index fit in int64_t; every factory
//     and view operation checks that and fails instead of overflowing.
//   * Dimension arguments may be negative and then count from the end, as in
//     PyTorch: dim -1 is the last dim.
// Errors are InvalidArgument (OutOfRange for an index or a view that does not
// fit its base) with a message that names the bad value and the layout.
//
// Layout is a small, trivially copyable value type (fixed arrays, no heap),
// so it can be passed by value to kernels.
#ifndef GENESIS_STORAGE_LAYOUT_H_
#define GENESIS_STORAGE_LAYOUT_H_

#include <array>
#include <cstdint>
#include <iosfwd>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace genesis::storage {

// The largest rank a Layout can have.
inline constexpr int kMaxDims = 8;

class Layout {
 public:
  // A scalar (rank 0, one element) at offset 0.
  Layout() = default;

  // A row-major (C order) view of `shape` starting at `offset`: the last dim
  // has stride 1 and each other dim's stride is the product of the sizes
  // after it (a size 0 counting as 1, as in PyTorch). Fails if the rank
  // exceeds kMaxDims, a size or the offset is negative, or numel, a stride
  // or the largest reachable index overflows int64_t.
  static absl::StatusOr<Layout> Contiguous(absl::Span<const int64_t> shape,
                                           int64_t offset = 0);

  // A view with the given geometry. `strides` must have one entry per dim.
  // Fails like Contiguous, and also if a stride is negative or the ranks of
  // `shape` and `strides` differ.
  static absl::StatusOr<Layout> Strided(absl::Span<const int64_t> shape,
                                        absl::Span<const int64_t> strides,
                                        int64_t offset = 0);

  int rank() const { return rank_; }
  absl::Span<const int64_t> shape() const { return {shape_.data(), Rank()}; }
  absl::Span<const int64_t> strides() const {
    return {strides_.data(), Rank()};
  }
  // Requires 0 <= dim < rank() (unchecked; no negative dims here).
  int64_t size(int dim) const { return shape_[dim]; }
  int64_t stride(int dim) const { return strides_[dim]; }
  int64_t offset() const { return offset_; }
  // The number of elements of the view (1 for a scalar, 0 if empty).
  int64_t numel() const { return numel_; }
  // The number of base elements from offset() to the furthest element the
  // view reaches, inclusive: 1 + sum over dims of (size - 1) * stride; 0 for
  // an empty view. The view reaches only base indices in
  // [offset(), offset() + extent()).
  int64_t extent() const { return extent_; }
  // True if the view is row-major contiguous: its elements are
  // base[offset(), offset() + numel()) in order. Strides of size-1 dims are
  // ignored, and empty views and scalars are contiguous.
  bool is_contiguous() const;

  // OK if every element the view reaches lies in a base buffer of
  // `base_numel` elements, i.e. offset() + extent() <= base_numel; empty
  // views fit any base. InvalidArgument if base_numel is negative; otherwise
  // OutOfRange naming the furthest element reached and the base size.
  absl::Status CheckFits(int64_t base_numel) const;

  // "shape [2, 3] strides [3, 1] offset 0"; a scalar is
  // "shape [] strides [] offset 0".
  std::string ToString() const;

  // ---- View operations. Each returns a new Layout (this one is unchanged)
  // reaching a subset of the elements this one reaches.

  // Python's x[start:stop:step] along `dim`. step >= 1. Negative start and
  // stop count from the end of the dim; both are then clamped to
  // [0, size(dim)], so out-of-range bounds give a shorter or empty slice, not
  // an error. The result has ceil((stop - start) / step) elements along dim
  // (0 if stop <= start) and stride stride(dim) * step. An empty result keeps
  // this layout's offset. Fails for a bad dim or step < 1.
  absl::StatusOr<Layout> Slice(int dim, int64_t start, int64_t stop,
                               int64_t step = 1) const;

  // x[..., index, ...] along `dim`: drops the dim. A negative index counts
  // from the end. An empty result keeps this layout's offset. Fails with
  // OutOfRange if index is outside [-size(dim), size(dim)), InvalidArgument
  // for a bad dim.
  absl::StatusOr<Layout> Select(int dim, int64_t index) const;

  // Swaps two dims (sizes and strides).
  absl::StatusOr<Layout> Transpose(int dim0, int dim1) const;

  // Result dim i is this layout's dim dims[i]. `dims` must be a permutation
  // of the dims (negative entries allowed); fails naming a repeated or
  // out-of-range entry, or a wrong count.
  absl::StatusOr<Layout> Permute(absl::Span<const int> dims) const;

  // The same elements, in the same row-major order, viewed with
  // `new_shape`, without copying. One entry may be -1: it is inferred from
  // numel() (ambiguous, hence an error, if the other entries multiply to 0).
  // The product of new_shape must equal numel(). Whether a view is possible
  // follows PyTorch's view(): each run of old dims that are contiguous with
  // each other can be split or merged freely; otherwise the error says
  // "cannot reshape ... without a copy".
  absl::StatusOr<Layout> Reshape(absl::Span<const int64_t> new_shape) const;

  // Removes every size-1 dim.
  Layout Squeeze() const;
  // Removes `dim`, which must have size 1 (unlike PyTorch, which silently
  // does nothing for another size, this is an error).
  absl::StatusOr<Layout> Squeeze(int dim) const;
  // Inserts a size-1 dim so that it becomes dim `dim` of the result; dim is
  // in [-rank() - 1, rank()]. Fails if the result would exceed kMaxDims.
  absl::StatusOr<Layout> Unsqueeze(int dim) const;

  // Broadcasts to `new_shape` (PyTorch's expand) with stride-0 dims: shapes
  // are aligned at the last dim; new leading dims get stride 0; a size-1 dim
  // may become any size (stride 0); other dims must keep their size; -1
  // keeps a (non-leading) dim's size. Fails naming the incompatible dim.
  absl::StatusOr<Layout> Expand(absl::Span<const int64_t> new_shape) const;

  friend bool operator==(const Layout& a, const Layout& b);
  friend bool operator!=(const Layout& a, const Layout& b) { return !(a == b); }

  template <typename Sink>
  friend void AbslStringify(Sink& sink, const Layout& layout) {
    sink.Append(layout.ToString());
  }

 private:
  size_t Rank() const { return static_cast<size_t>(rank_); }

  int rank_ = 0;
  // Entries at and beyond rank_ are 0, so operator== and copies never see
  // stale values.
  std::array<int64_t, kMaxDims> shape_{};
  std::array<int64_t, kMaxDims> strides_{};
  int64_t offset_ = 0;
  int64_t numel_ = 1;
  int64_t extent_ = 1;
};

// Writes layout.ToString().
std::ostream& operator<<(std::ostream& os, const Layout& layout);

}  // namespace genesis::storage

#endif  // GENESIS_STORAGE_LAYOUT_H_
