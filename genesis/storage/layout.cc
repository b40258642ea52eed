#include "genesis/storage/layout.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/status.h"

namespace genesis::storage {
namespace {

using Dims = std::array<int64_t, kMaxDims>;

std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t result;
  if (__builtin_mul_overflow(a, b, &result)) return std::nullopt;
  return result;
}

std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t result;
  if (__builtin_add_overflow(a, b, &result)) return std::nullopt;
  return result;
}

// "[2, 3]".
std::string FormatDims(absl::Span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

// The suffix every view-operation error carries, so the message says which
// layout the bad argument was applied to.
std::string OnLayout(const Layout& layout) {
  return absl::StrCat(" (layout ", layout.ToString(), ")");
}

// Maps a possibly negative dim onto [0, rank) (PyTorch's convention), or
// fails naming it. `rank` is the number of valid positions: rank() for most
// operations, rank() + 1 for Unsqueeze.
absl::StatusOr<int> NormalizeDim(int dim, int rank, std::string_view op,
                                 const Layout& layout) {
  if (dim < -rank || dim >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbsl(op), ": dim ", dim, " is out of range [", -rank,
                     ", ", rank, ")", OnLayout(layout)));
  }
  return dim < 0 ? dim + rank : dim;
}

// Checks that a Layout can have `shape`'s rank.
absl::Status CheckRank(absl::Span<const int64_t> shape) {
  if (shape.size() > static_cast<size_t>(kMaxDims)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", shape.size(), " of shape ", FormatDims(shape),
                     " exceeds the maximum of ", kMaxDims, " dims"));
  }
  return absl::OkStatus();
}

// The product of `shape`, or an error if it overflows. A size-0 dim makes the
// product 0 however large the other sizes are.
absl::StatusOr<int64_t> Numel(absl::Span<const int64_t> shape) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  int64_t numel = 1;
  for (int64_t size : shape) {
    const std::optional<int64_t> product = CheckedMul(numel, size);
    if (!product) {
      return absl::InvalidArgumentError(
          absl::StrCat("the number of elements of shape ", FormatDims(shape),
                       " overflows int64"));
    }
    numel = *product;
  }
  return numel;
}

// Row-major strides of `shape`: each the product of the sizes after it, a
// size 0 counting as 1 (as in PyTorch, so the strides stay meaningful).
// These can overflow only in an empty view, e.g. [0, 2^40, 2^40, 1]; that
// is an error rather than a silently wrapped stride.
absl::StatusOr<Dims> RowMajorStrides(absl::Span<const int64_t> shape) {
  Dims strides{};
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    if (i > 0 && __builtin_mul_overflow(stride, std::max<int64_t>(shape[i], 1),
                                        &stride)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the row-major strides of shape ", FormatDims(shape),
                       " overflow int64"));
    }
  }
  return strides;
}

// Checks that `strides` has one entry per dim of `shape`.
absl::Status CheckSameRank(absl::Span<const int64_t> shape,
                           absl::Span<const int64_t> strides) {
  if (shape.size() != strides.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shape ", FormatDims(shape), " has ", shape.size(),
        " dims but strides ", FormatDims(strides), " has ", strides.size()));
  }
  return absl::OkStatus();
}

// Fails naming the first negative entry of `values`, called `what`.
absl::Status CheckNonNegative(absl::Span<const int64_t> values,
                              std::string_view what, std::string_view hint) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          ToAbsl(what), "[", i, "] = ", values[i], " is negative", ToAbsl(hint),
          " (", ToAbsl(what), " ", FormatDims(values), ")"));
    }
  }
  return absl::OkStatus();
}

// 1 + sum of (size - 1) * stride, and that added to `offset`, must fit in
// int64 (the sizes are all >= 1 here). Returns the extent.
absl::StatusOr<int64_t> Extent(absl::Span<const int64_t> shape,
                               absl::Span<const int64_t> strides,
                               int64_t offset) {
  std::optional<int64_t> end = offset;
  for (size_t i = 0; i < shape.size() && end; ++i) {
    const std::optional<int64_t> reach = CheckedMul(shape[i] - 1, strides[i]);
    end = reach ? CheckedAdd(*end, *reach) : std::nullopt;
  }
  if (end) end = CheckedAdd(*end, 1);
  if (!end) {
    return absl::InvalidArgumentError(
        absl::StrCat("the elements reached by shape ", FormatDims(shape),
                     " strides ", FormatDims(strides), " offset ", offset,
                     " lie beyond the largest int64 index"));
  }
  return *end - offset;
}

}  // namespace

absl::StatusOr<Layout> Layout::Contiguous(absl::Span<const int64_t> shape,
                                          int64_t offset) {
  GENESIS_RETURN_IF_ERROR(CheckRank(shape));
  GENESIS_RETURN_IF_ERROR(CheckNonNegative(shape, "shape", ""));
  GENESIS_RETURN_IF_ERROR(Numel(shape).status());
  GENESIS_ASSIGN_OR_RETURN(const Dims strides, RowMajorStrides(shape));
  return Strided(shape, absl::MakeConstSpan(strides.data(), shape.size()),
                 offset);
}

absl::StatusOr<Layout> Layout::Strided(absl::Span<const int64_t> shape,
                                       absl::Span<const int64_t> strides,
                                       int64_t offset) {
  GENESIS_RETURN_IF_ERROR(CheckRank(shape));
  GENESIS_RETURN_IF_ERROR(CheckSameRank(shape, strides));
  GENESIS_RETURN_IF_ERROR(CheckNonNegative(shape, "shape", ""));
  GENESIS_RETURN_IF_ERROR(CheckNonNegative(
      strides, "strides", " (negative strides are not supported)"));
  if (offset < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("offset = ", offset, " is negative"));
  }
  Layout layout;
  GENESIS_ASSIGN_OR_RETURN(layout.numel_, Numel(shape));
  if (layout.numel_ == 0) {
    layout.extent_ = 0;
  } else {
    GENESIS_ASSIGN_OR_RETURN(layout.extent_, Extent(shape, strides, offset));
  }
  layout.rank_ = static_cast<int>(shape.size());
  std::copy(shape.begin(), shape.end(), layout.shape_.begin());
  std::copy(strides.begin(), strides.end(), layout.strides_.begin());
  layout.offset_ = offset;
  return layout;
}

bool Layout::is_contiguous() const {
  if (numel_ == 0) return true;
  int64_t expected = 1;
  for (int i = rank_ - 1; i >= 0; --i) {
    if (shape_[i] == 1) continue;
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

absl::Status Layout::CheckFits(int64_t base_numel) const {
  if (base_numel < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("base_numel = ", base_numel, " is negative"));
  }
  if (numel_ == 0) return absl::OkStatus();
  // offset_ + extent_ cannot overflow: the factories checked it.
  if (offset_ + extent_ > base_numel) {
    return absl::OutOfRangeError(absl::StrCat(
        "view ", ToString(), " reaches element index ", offset_ + extent_ - 1,
        " but the base holds only ", base_numel, " elements"));
  }
  return absl::OkStatus();
}

std::string Layout::ToString() const {
  return absl::StrCat("shape ", FormatDims(shape()), " strides ",
                      FormatDims(strides()), " offset ", offset_);
}

absl::StatusOr<Layout> Layout::Slice(int dim, int64_t start, int64_t stop,
                                     int64_t step) const {
  GENESIS_ASSIGN_OR_RETURN(const int d,
                           NormalizeDim(dim, rank_, "Slice", *this));
  if (step < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Slice: step = ", step, " must be at least 1", OnLayout(*this)));
  }
  const int64_t size = shape_[d];
  // Python's rules: negative bounds count from the end, then clamp.
  const auto clamp = [size](int64_t i) {
    return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size);
  };
  const int64_t first = clamp(start);
  const int64_t last = clamp(stop);
  const int64_t count = last > first ? (last - first - 1) / step + 1 : 0;

  Layout result = *this;
  result.shape_[d] = count;
  // Cannot overflow: in a non-empty layout, first * stride is within reach.
  if (count > 0 && numel_ > 0) result.offset_ = offset_ + first * strides_[d];
  // stride * step can only overflow when count <= 1, where the stride does
  // not matter; keep the old one then.
  result.strides_[d] = CheckedMul(strides_[d], step).value_or(strides_[d]);
  return Strided(result.shape(), result.strides(), result.offset_);
}

absl::StatusOr<Layout> Layout::Select(int dim, int64_t index) const {
  GENESIS_ASSIGN_OR_RETURN(const int d,
                           NormalizeDim(dim, rank_, "Select", *this));
  const int64_t size = shape_[d];
  if (index < -size || index >= size) {
    return absl::OutOfRangeError(
        absl::StrCat("Select: index ", index, " is out of range for dim ", d,
                     " of size ", size, OnLayout(*this)));
  }
  if (index < 0) index += size;
  Dims shape{};
  Dims strides{};
  int r = 0;
  for (int i = 0; i < rank_; ++i) {
    if (i == d) continue;
    shape[r] = shape_[i];
    strides[r] = strides_[i];
    ++r;
  }
  // As in Slice, an empty result keeps the offset (and cannot overflow).
  return Strided(absl::MakeConstSpan(shape.data(), r),
                 absl::MakeConstSpan(strides.data(), r),
                 numel_ > 0 ? offset_ + index * strides_[d] : offset_);
}

absl::StatusOr<Layout> Layout::Transpose(int dim0, int dim1) const {
  GENESIS_ASSIGN_OR_RETURN(const int d0,
                           NormalizeDim(dim0, rank_, "Transpose", *this));
  GENESIS_ASSIGN_OR_RETURN(const int d1,
                           NormalizeDim(dim1, rank_, "Transpose", *this));
  Layout result = *this;
  std::swap(result.shape_[d0], result.shape_[d1]);
  std::swap(result.strides_[d0], result.strides_[d1]);
  return result;
}

absl::StatusOr<Layout> Layout::Permute(absl::Span<const int> dims) const {
  if (dims.size() != Rank()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Permute: dims [", absl::StrJoin(dims, ", "), "] has ", dims.size(),
        " entries but the layout has rank ", rank_, OnLayout(*this)));
  }
  Layout result = *this;
  std::array<bool, kMaxDims> seen{};
  for (int i = 0; i < rank_; ++i) {
    GENESIS_ASSIGN_OR_RETURN(const int d,
                             NormalizeDim(dims[i], rank_, "Permute", *this));
    if (seen[d]) {
      return absl::InvalidArgumentError(
          absl::StrCat("Permute: dims [", absl::StrJoin(dims, ", "),
                       "] names dim ", d, " twice", OnLayout(*this)));
    }
    seen[d] = true;
    result.shape_[i] = shape_[d];
    result.strides_[i] = strides_[d];
  }
  return result;
}

namespace {

// Replaces a -1 entry of `shape` by the size that makes its product `numel`,
// and checks that the product is `numel`.
absl::StatusOr<Dims> ResolveShape(absl::Span<const int64_t> shape,
                                  int64_t numel, const Layout& layout) {
  GENESIS_RETURN_IF_ERROR(CheckRank(shape));
  Dims resolved{};
  std::copy(shape.begin(), shape.end(), resolved.begin());
  const absl::Span<const int64_t> result =
      absl::MakeConstSpan(resolved.data(), shape.size());
  int inferred = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && inferred < 0) {
      inferred = static_cast<int>(i);
      resolved[i] = 1;  // For the product of the others, below.
    } else if (shape[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Reshape: new_shape[", i, "] = ", shape[i],
          shape[i] == -1 ? " is a second -1 (only one size can be inferred)"
                         : " is negative",
          " in ", FormatDims(shape), OnLayout(layout)));
    }
  }
  const absl::Status mismatch = absl::InvalidArgumentError(
      absl::StrCat("Reshape: shape ", FormatDims(shape), " is invalid for ",
                   numel, " elements", OnLayout(layout)));
  absl::StatusOr<int64_t> product = Numel(result);
  if (!product.ok()) return mismatch;
  if (inferred >= 0) {
    if (*product == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Reshape: the -1 in ", FormatDims(shape),
          " is ambiguous: the other sizes multiply to 0", OnLayout(layout)));
    }
    if (numel % *product != 0) return mismatch;
    resolved[inferred] = numel / *product;
    *product = numel;
  }
  if (*product != numel) return mismatch;
  return resolved;
}

// PyTorch's computeStride (aten/src/ATen/TensorUtils.cpp): strides for
// viewing old (shape, strides) as new_shape without a copy, or nullopt.
// The old dims are split into chunks whose dims are contiguous with each
// other; each chunk must map onto a run of new dims with the same product.
// new_shape's product equals the old numel, which is > 0.
std::optional<Dims> ViewStrides(absl::Span<const int64_t> shape,
                                absl::Span<const int64_t> strides,
                                absl::Span<const int64_t> new_shape) {
  Dims new_strides{};
  if (shape.empty()) {  // A scalar: every new dim has size 1.
    std::fill_n(new_strides.begin(), new_shape.size(), 1);
    return new_strides;
  }
  int view_d = static_cast<int>(new_shape.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int tensor_d = static_cast<int>(shape.size()) - 1; tensor_d >= 0;
       --tensor_d) {
    tensor_numel *= shape[tensor_d];  // <= numel: cannot overflow.
    // Does the chunk end here (dim tensor_d - 1 is not contiguous with it)?
    // An overflowing product cannot equal a valid stride.
    if (tensor_d == 0 || (shape[tensor_d - 1] != 1 &&
                          CheckedMul(tensor_numel, chunk_base_stride) !=
                              strides[tensor_d - 1])) {
      while (view_d >= 0 &&
             (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        // Only a size-1 dim can overflow here, and its stride is irrelevant.
        new_strides[view_d] =
            CheckedMul(view_numel, chunk_base_stride).value_or(1);
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

}  // namespace

absl::StatusOr<Layout> Layout::Reshape(
    absl::Span<const int64_t> new_shape) const {
  GENESIS_ASSIGN_OR_RETURN(const Dims resolved,
                           ResolveShape(new_shape, numel_, *this));
  const absl::Span<const int64_t> shape =
      absl::MakeConstSpan(resolved.data(), new_shape.size());
  if (numel_ == 0) {
    // No element is reached: any strides do; use row-major ones.
    return Contiguous(shape, offset_);
  }
  const std::optional<Dims> strides =
      ViewStrides(this->shape(), this->strides(), shape);
  if (!strides) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot reshape ", ToString(), " to ", FormatDims(shape),
        " without a copy: the dims to merge or split are not contiguous "
        "with each other"));
  }
  return Strided(shape, absl::MakeConstSpan(strides->data(), shape.size()),
                 offset_);
}

Layout Layout::Squeeze() const {
  Layout result;
  result.offset_ = offset_;
  result.numel_ = numel_;
  result.extent_ = extent_;
  for (int i = 0; i < rank_; ++i) {
    if (shape_[i] == 1) continue;
    result.shape_[result.rank_] = shape_[i];
    result.strides_[result.rank_] = strides_[i];
    ++result.rank_;
  }
  return result;
}

absl::StatusOr<Layout> Layout::Squeeze(int dim) const {
  GENESIS_ASSIGN_OR_RETURN(const int d,
                           NormalizeDim(dim, rank_, "Squeeze", *this));
  if (shape_[d] != 1) {
    return absl::InvalidArgumentError(absl::StrCat("Squeeze: dim ", d,
                                                   " has size ", shape_[d],
                                                   ", not 1", OnLayout(*this)));
  }
  // Selecting index 0 of a size-1 dim drops it without moving the offset.
  return Select(d, 0);
}

absl::StatusOr<Layout> Layout::Unsqueeze(int dim) const {
  GENESIS_ASSIGN_OR_RETURN(const int d,
                           NormalizeDim(dim, rank_ + 1, "Unsqueeze", *this));
  if (rank_ == kMaxDims) {
    return absl::InvalidArgumentError(
        absl::StrCat("Unsqueeze: the layout already has the maximum of ",
                     kMaxDims, " dims", OnLayout(*this)));
  }
  Dims shape{};
  Dims strides{};
  for (int i = 0, j = 0; i <= rank_; ++i) {
    if (i == d) {
      shape[i] = 1;
      // PyTorch's choice, which keeps contiguous layouts contiguous; the
      // stride of a size-1 dim is never used, so an overflow falls back to 1.
      strides[i] =
          d < rank_ ? CheckedMul(shape_[d], strides_[d]).value_or(1) : 1;
    } else {
      shape[i] = shape_[j];
      strides[i] = strides_[j];
      ++j;
    }
  }
  return Strided(absl::MakeConstSpan(shape.data(), rank_ + 1),
                 absl::MakeConstSpan(strides.data(), rank_ + 1), offset_);
}

absl::StatusOr<Layout> Layout::Expand(
    absl::Span<const int64_t> new_shape) const {
  GENESIS_RETURN_IF_ERROR(CheckRank(new_shape));
  const int new_rank = static_cast<int>(new_shape.size());
  if (new_rank < rank_) {
    return absl::InvalidArgumentError(
        absl::StrCat("Expand: new_shape ", FormatDims(new_shape),
                     " has fewer dims than ", "the layout", OnLayout(*this)));
  }
  const int lead = new_rank - rank_;  // New leading dims.
  Dims shape{};
  Dims strides{};
  for (int i = 0; i < new_rank; ++i) {
    const int64_t target = new_shape[i];
    const int j = i - lead;  // This layout's dim, if any.
    if (target < -1 || (target == -1 && j < 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Expand: new_shape[", i, "] = ", target, " is negative",
                       j < 0 ? " (-1 cannot name a new leading dim)" : "",
                       " in ", FormatDims(new_shape), OnLayout(*this)));
    }
    if (j < 0) {
      shape[i] = target;
      strides[i] = 0;
    } else if (target == -1 || target == shape_[j]) {
      shape[i] = shape_[j];
      strides[i] = strides_[j];
    } else if (shape_[j] == 1) {
      shape[i] = target;
      strides[i] = 0;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "Expand: dim ", j, " has size ", shape_[j], " and cannot become ",
          target, " (new_shape ", FormatDims(new_shape),
          "): only size-1 dims can be expanded", OnLayout(*this)));
    }
  }
  return Strided(absl::MakeConstSpan(shape.data(), new_rank),
                 absl::MakeConstSpan(strides.data(), new_rank), offset_);
}

bool operator==(const Layout& a, const Layout& b) {
  return a.rank_ == b.rank_ && a.shape_ == b.shape_ &&
         a.strides_ == b.strides_ && a.offset_ == b.offset_;
}

std::ostream& operator<<(std::ostream& os, const Layout& layout) {
  return os << layout.ToString();
}

}  // namespace genesis::storage
