#include "genesis/storage/convert.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/dtype.h"
#include "genesis/core/status.h"
#include "genesis/core/half.h"
#include "genesis/storage/convert_rules.h"
#include "genesis/storage/internal/convert_simd.h"
#include "genesis/storage/layout.h"
#include "genesis/storage/strided_copy.h"

namespace genesis::storage {
namespace {

using strided_internal::ForEachOuter;
using strided_internal::ForEachPart;
using strided_internal::LoopDim;
using strided_internal::LoopPlan;
using strided_internal::PlanLoops;

// Reads one element of type T (unaligned-safe). A bool byte reads as
// `byte != 0`, so bytes other than 0 and 1 are still valid input.
template <typename T>
inline T Load(const char* p) {
  if constexpr (std::is_same_v<T, bool>) {
    uint8_t byte;
    std::memcpy(&byte, p, 1);
    return byte != 0;
  } else {
    T value;
    std::memcpy(&value, p, sizeof(T));
    return value;
  }
}

template <typename T>
inline void Store(char* p, T value) {
  std::memcpy(p, &value, sizeof(T));
}

// Elements per block of the contiguous loop. GCC at -O2 (Bazel's opt mode)
// vectorises only loops that need no scalar remainder, so the contiguous
// loop runs in blocks of a fixed count, then finishes the tail.
constexpr int64_t kBlock = 16;

// Converts n elements with the given byte strides. Contiguous buffers (the
// strides are the element sizes) get their own loop with constant strides
// and fixed-size blocks, so that the compiler can vectorise it.
template <typename From, typename To>
void ConvertRow(const char* __restrict src, int64_t src_stride,
                char* __restrict dst, int64_t dst_stride, int64_t n) {
  constexpr int64_t kFrom = sizeof(From);
  constexpr int64_t kTo = sizeof(To);
  const auto convert = [](const char* s, char* d) {
    Store(d, ConvertValue<To>(Load<From>(s)));
  };
  if (src_stride == kFrom && dst_stride == kTo) {
    // float32 <-> bfloat16 / float16: vectorised, dispatched to the CPU's best
    // instruction set (internal/convert_simd.h), with the same results.
    const auto count = static_cast<size_t>(n);
    if constexpr (std::is_same_v<From, float> && std::is_same_v<To, BFloat16>) {
      return simd::FloatToBFloat16(reinterpret_cast<const float*>(src),
                                   reinterpret_cast<uint16_t*>(dst), count);
    } else if constexpr (std::is_same_v<From, BFloat16> && std::is_same_v<To, float>) {
      return simd::BFloat16ToFloat(reinterpret_cast<const uint16_t*>(src),
                                   reinterpret_cast<float*>(dst), count);
    } else if constexpr (std::is_same_v<From, float> && std::is_same_v<To, Half>) {
      return simd::FloatToHalf(reinterpret_cast<const float*>(src),
                               reinterpret_cast<uint16_t*>(dst), count);
    } else if constexpr (std::is_same_v<From, Half> && std::is_same_v<To, float>) {
      return simd::HalfToFloat(reinterpret_cast<const uint16_t*>(src),
                               reinterpret_cast<float*>(dst), count);
    }
    int64_t i = 0;
    for (; i + kBlock <= n; i += kBlock) {
      const char* s = src + i * kFrom;
      char* d = dst + i * kTo;
      for (int64_t j = 0; j < kBlock; ++j) convert(s + j * kFrom, d + j * kTo);
    }
    for (; i < n; ++i) convert(src + i * kFrom, dst + i * kTo);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    convert(src + i * src_stride, dst + i * dst_stride);
  }
}

using RowFn = void (*)(const char*, int64_t, char*, int64_t, int64_t);
constexpr size_t kNumDTypes = kAllDTypes.size();

// Row kernels for every destination dtype, from kAllDTypes[from].
template <size_t kFrom, size_t... kTo>
constexpr std::array<RowFn, kNumDTypes> RowsFrom(std::index_sequence<kTo...>) {
  return {
      &ConvertRow<CppTypeOf<kAllDTypes[kFrom]>, CppTypeOf<kAllDTypes[kTo]>>...};
}

template <size_t... kFrom>
constexpr std::array<std::array<RowFn, kNumDTypes>, kNumDTypes> RowTable(
    std::index_sequence<kFrom...>) {
  return {RowsFrom<kFrom>(std::make_index_sequence<kNumDTypes>())...};
}

// kRows[from][to], indexed by the DType values: kAllDTypes is in enum order.
static_assert([] {
  for (size_t i = 0; i < kNumDTypes; ++i) {
    if (static_cast<size_t>(kAllDTypes[i]) != i) return false;
  }
  return true;
}());
constexpr std::array<std::array<RowFn, kNumDTypes>, kNumDTypes> kRows =
    RowTable(std::make_index_sequence<kNumDTypes>());

RowFn RowFor(DType from, DType to) {
  return kRows[static_cast<size_t>(from)][static_cast<size_t>(to)];
}

// OK if `dtype` is a DType enumerator; otherwise names the argument and its
// number.
absl::Status CheckDType(DType dtype, std::string_view function,
                        std::string_view argument) {
  if (ItemSize(dtype) != 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      ToAbsl(function), ": ", ToAbsl(argument), " = ", static_cast<int>(dtype),
      " is not a DType (expected 0 to ", kNumDTypes - 1, ")"));
}

// Runs the row kernel over a planned pass; `src` and `dst` point at the
// first element of each view.
void ConvertPlanned(const LoopPlan& plan, RowFn row, const char* src,
                    size_t src_item, char* dst, size_t dst_item) {
  // Rank 0 (a single element): one row of one element.
  const LoopDim inner =
      plan.rank > 0 ? plan.dims[plan.rank - 1] : LoopDim{1, 0, 0};
  const int64_t src_stride = inner.src_stride * static_cast<int64_t>(src_item);
  const int64_t dst_stride = inner.dst_stride * static_cast<int64_t>(dst_item);
  ForEachOuter(plan, std::max(plan.rank - 1, 0), src, src_item, dst, dst_item,
               [&](const char* s, char* d) {
                 row(s, src_stride, d, dst_stride, inner.size);
               });
}

}  // namespace

absl::Status ConvertContiguous(const void* src, DType src_type, void* dst,
                               DType dst_type, int64_t count, int threads) {
  GENESIS_RETURN_IF_ERROR(
      CheckDType(src_type, "ConvertContiguous", "src_type"));
  GENESIS_RETURN_IF_ERROR(
      CheckDType(dst_type, "ConvertContiguous", "dst_type"));
  if (count < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ConvertContiguous: count = ", count, " is negative"));
  }
  if (count == 0) return absl::OkStatus();
  if (src == nullptr || dst == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("ConvertContiguous: ", src == nullptr ? "src" : "dst",
                     " is null but count = ", count));
  }
  const size_t src_item = ItemSize(src_type);
  const size_t dst_item = ItemSize(dst_type);
  if (src_type == dst_type) {
    std::memcpy(dst, src, static_cast<size_t>(count) * src_item);
    return absl::OkStatus();
  }
  const RowFn row = RowFor(src_type, dst_type);
  LoopPlan flat;
  flat.rank = 1;
  flat.dims[0] = LoopDim{count, 1, 1};
  ForEachPart(flat, count * static_cast<int64_t>(std::max(src_item, dst_item)), threads,
              [&](const LoopPlan& mine, int64_t begin) {
                row(static_cast<const char*>(src) + begin * static_cast<int64_t>(src_item),
                    static_cast<int64_t>(src_item),
                    static_cast<char*>(dst) + begin * static_cast<int64_t>(dst_item),
                    static_cast<int64_t>(dst_item), mine.dims[0].size);
              });
  return absl::OkStatus();
}

absl::Status ConvertStrided(const void* src_base, const Layout& src_layout,
                            DType src_type, void* dst_base,
                            const Layout& dst_layout, DType dst_type,
                            int threads) {
  GENESIS_RETURN_IF_ERROR(CheckDType(src_type, "ConvertStrided", "src_type"));
  GENESIS_RETURN_IF_ERROR(CheckDType(dst_type, "ConvertStrided", "dst_type"));
  GENESIS_RETURN_IF_ERROR(strided_internal::CheckSameShape(
      src_layout, dst_layout, "ConvertStrided"));
  GENESIS_RETURN_IF_ERROR(
      strided_internal::CheckWritable(dst_layout, "ConvertStrided"));
  const size_t src_item = ItemSize(src_type);
  const size_t dst_item = ItemSize(dst_type);
  if (src_type == dst_type) {
    return CopyStrided(src_base, src_layout, dst_base, dst_layout, src_item, threads);
  }
  if (dst_layout.numel() == 0) return absl::OkStatus();
  const char* src = static_cast<const char*>(src_base) +
                    src_layout.offset() * static_cast<int64_t>(src_item);
  char* dst = static_cast<char*>(dst_base) +
              dst_layout.offset() * static_cast<int64_t>(dst_item);
  if (src_layout.is_contiguous() && dst_layout.is_contiguous()) {
    return ConvertContiguous(src, src_type, dst, dst_type, src_layout.numel(), threads);
  }
  const LoopPlan plan =
      PlanLoops(src_layout.shape(), src_layout.strides(), dst_layout.strides());
  const RowFn row = RowFor(src_type, dst_type);
  const int64_t bytes =
      dst_layout.numel() * static_cast<int64_t>(std::max(src_item, dst_item));
  ForEachPart(plan, bytes, threads, [&](const LoopPlan& mine, int64_t begin) {
    const LoopDim& split = plan.dims[0];
    ConvertPlanned(mine, row, src + begin * split.src_stride * static_cast<int64_t>(src_item),
                   src_item, dst + begin * split.dst_stride * static_cast<int64_t>(dst_item),
                   dst_item);
  });
  return absl::OkStatus();
}

}  // namespace genesis::storage
