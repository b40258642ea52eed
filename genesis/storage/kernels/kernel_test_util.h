// Test helpers for the storage kernels: element data of every dtype that
// covers what the conversion rules single out, random views, and a byte
// comparison that names the first differing element. Testonly.
//
//   std::vector<uint8_t> src = SampleElements(DType::kFloat32, 1000, seed);
//   ViewCase view = RandomView(rng, {4, 5, 6});
//   ExpectSameBytes(got, want, /*item=*/4, "float32 -> int8");
#ifndef GENESIS_STORAGE_KERNELS_KERNEL_TEST_UTIL_H_
#define GENESIS_STORAGE_KERNELS_KERNEL_TEST_UTIL_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "genesis/core/dtype.h"
#include "genesis/core/half.h"
#include "genesis/storage/convert_rules.h"
#include "genesis/storage/kernels/dtype_dispatch.h"
#include "genesis/storage/layout.h"
#include "gtest/gtest.h"

namespace genesis::storage::kernels {

using Bytes = std::vector<uint8_t>;

// ---- Element data.

// The values every dtype's samples include (converted to it by the rules:
// out-of-range values saturate in integers, round in floats).
inline const std::vector<double>& SpecialValues() {
  static const std::vector<double> values = {
      0.0,
      -0.0,
      1.0,
      -1.0,
      0.5,
      -0.5,
      1.5,
      2.5,
      -2.5,
      127.5,
      -128.5,
      255.5,
      256.0,
      300.7,
      -300.7,
      65504.0,
      65519.99,
      65520.0,
      -65520.0,
      1e10,
      -1e10,
      2147483647.5,
      -2147483648.5,
      4294967296.0,
      9.3e18,
      -9.3e18,
      1.8e19,
      1e300,
      -1e300,
      3.4028235677973366e38,
      1e-40,
      -1e-45,
      1e-310,
      1.0 + 0x1p-11 + 0x1p-40,  // Rounds differently through float.
      0x1p-25,
      0x1p-24 * 1.5,
      6.0975e-5,
      std::numeric_limits<double>::infinity(),
      -std::numeric_limits<double>::infinity(),
      std::numeric_limits<double>::quiet_NaN(),
      -std::numeric_limits<double>::quiet_NaN()};
  return values;
}

// Integers whose wrap-around or rounding matters.
inline const std::vector<int64_t>& SpecialIntegers() {
  static const std::vector<int64_t> values = {
      0,
      1,
      -1,
      127,
      128,
      -128,
      -129,
      255,
      256,
      300,
      -300,
      32767,
      32768,
      -32769,
      65504,
      65519,
      65520,
      65536,
      (int64_t{1} << 24) + 1,
      (int64_t{1} << 24) + (int64_t{1} << 16) + 1,
      2147483647,
      -2147483648LL,
      (int64_t{1} << 53) + 1,
      std::numeric_limits<int64_t>::max(),
      std::numeric_limits<int64_t>::min()};
  return values;
}

// Encodings of NaN (quiet, signalling, with payloads, negative), Inf,
// signed zeros, subnormals and extremes, per floating-point width.
inline const std::vector<uint64_t>& SpecialBits(size_t size, bool bfloat16) {
  static const std::vector<uint64_t> kHalf = {
      0x7C00, 0xFC00, 0x7C01, 0x7E00, 0xFE00, 0x7DFF, 0x7FFF, 0x8000,
      0x0000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF};
  static const std::vector<uint64_t> kBFloat16 = {
      0x7F80, 0xFF80, 0x7F81, 0x7FC0, 0xFFC0, 0x7FBF, 0x7FFF, 0x8000, 0x0000,
      0x0001, 0x807F, 0x0080, 0x7F7F, 0xFF7F, 0x4F00, 0xCF00, 0x5F00};
  static const std::vector<uint64_t> kFloat = {
      0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBFFFFF, 0xFFC12345,
      0x7FC01234, 0x7F800000, 0xFF800000, 0x80000000, 0x00000001,
      0x80000001, 0x007FFFFF, 0x00800000, 0x33000000, 0x33000001,
      0x387FE000, 0x7F7FFFFF, 0x477FEFFF, 0x477FF000};
  static const std::vector<uint64_t> kDouble = {
      0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001,
      0x7FF4000000000123, 0xFFFFFFFFFFFFFFFF, 0x7FF00000E0000000,
      0x7FF0000000000000, 0xFFF0000000000000, 0x8000000000000000,
      0x0000000000000001, 0x000FFFFFFFFFFFFF, 0x0010000000000000,
      0x36A0000000000000, 0x7FEFFFFFFFFFFFFF};
  if (size == 2) return bfloat16 ? kBFloat16 : kHalf;
  return size == 4 ? kFloat : kDouble;
}

// The special elements of `dtype`, as stored bytes.
inline Bytes SpecialElements(DType dtype) {
  if (dtype == DType::kBool) return {0, 1, 2, 0x80, 0xFF, 1, 0};
  Bytes out;
  const absl::Status status = VisitDType(
      dtype, "SpecialElements", "dtype", [&]<typename T>(TypeTag<T>) {
        const auto put = [&](T element) {
          const auto* p = reinterpret_cast<const uint8_t*>(&element);
          out.insert(out.end(), p, p + sizeof(T));
        };
        for (double v : SpecialValues()) put(ConvertValue<T>(v));
        for (int64_t v : SpecialIntegers()) put(ConvertValue<T>(v));
        if constexpr (std::is_floating_point_v<T> ||
                      convert_rules::kIsSixteenBitFloat<T>) {
          for (uint64_t bits :
               SpecialBits(sizeof(T), std::is_same_v<T, BFloat16>)) {
            T element;
            std::memcpy(&element, &bits, sizeof(T));  // Little-endian.
            put(element);
          }
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

// numel elements of `dtype`: every third one a special element (cycling
// through SpecialElements), the others random bit patterns from `seed`
// (bool: random bytes, all of which are valid).
inline Bytes SampleElements(DType dtype, int64_t numel, uint32_t seed) {
  const size_t item = ItemSize(dtype);
  Bytes out(static_cast<size_t>(numel) * item);
  std::mt19937_64 rng(seed);
  for (size_t at = 0; at < out.size(); at += sizeof(uint64_t)) {
    const uint64_t bits = rng();
    std::memcpy(out.data() + at, &bits,
                std::min(sizeof(bits), out.size() - at));
  }
  const Bytes specials = SpecialElements(dtype);
  const size_t count = specials.size() / item;
  for (size_t i = 0; i < static_cast<size_t>(numel); i += 3) {
    std::memcpy(out.data() + i * item, specials.data() + (i / 3) % count * item,
                item);
  }
  return out;
}

// ---- Views.

// A view and the number of base elements it needs.
struct ViewCase {
  Layout layout;
  int64_t base_numel = 0;
};

inline int64_t Uniform(std::mt19937& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

inline ViewCase WithBase(Layout layout, int64_t slack) {
  return {layout, layout.offset() + layout.extent() + slack};
}

// A view of `shape` that reaches each base element at most once, as a
// destination must: a permutation of strided slices of a contiguous buffer
// at a random offset.
inline ViewCase RandomWritableView(std::mt19937& rng,
                                   absl::Span<const int64_t> shape) {
  const int rank = static_cast<int>(shape.size());
  std::vector<int> order(rank);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  // Parent dim k holds view dim order[k], sliced with step[k] from start[k].
  std::vector<int64_t> parent(rank), start(rank), step(rank);
  for (int k = 0; k < rank; ++k) {
    const int64_t size = shape[order[k]];
    step[k] = Uniform(rng, 1, 3);
    start[k] = Uniform(rng, 0, 2);
    parent[k] = start[k] + std::max<int64_t>(size - 1, 0) * step[k] + 1 +
                Uniform(rng, 0, 2);
  }
  Layout layout = Layout::Contiguous(parent, Uniform(rng, 0, 5)).value();
  for (int k = 0; k < rank; ++k) {
    const int64_t size = shape[order[k]];
    layout =
        layout.Slice(k, start[k], start[k] + size * step[k], step[k]).value();
  }
  // View dim d is parent dim inverse[d].
  std::vector<int> inverse(rank);
  for (int k = 0; k < rank; ++k) inverse[order[k]] = k;
  layout = layout.Permute(inverse).value();
  return WithBase(layout, Uniform(rng, 0, 3));
}

// Any view of `shape`: half the time a writable one (permuted slices, which
// the kernels often tile), otherwise random strides from 0 (broadcast) to 7
// and a random offset.
inline ViewCase RandomView(std::mt19937& rng, absl::Span<const int64_t> shape) {
  if (Uniform(rng, 0, 1) == 0) return RandomWritableView(rng, shape);
  std::vector<int64_t> strides(shape.size());
  for (int64_t& stride : strides) {
    stride = Uniform(rng, 0, 3) == 0 ? 0 : Uniform(rng, 1, 7);
  }
  return WithBase(Layout::Strided(shape, strides, Uniform(rng, 0, 9)).value(),
                  Uniform(rng, 0, 3));
}

// A random shape of rank 0 to kMaxDims with at most about 20000 elements;
// now and then one with a size-0 dim.
inline std::vector<int64_t> RandomShape(std::mt19937& rng) {
  static constexpr int64_t kMaxSize[kMaxDims + 1] = {1, 5000, 150, 28, 12,
                                                     7, 5,    4,   3};
  const int rank = static_cast<int>(Uniform(rng, 0, kMaxDims));
  std::vector<int64_t> shape(rank);
  for (int64_t& size : shape) size = Uniform(rng, 1, kMaxSize[rank]);
  if (rank > 0 && Uniform(rng, 0, 30) == 0)
    shape[Uniform(rng, 0, rank - 1)] = 0;
  return shape;
}

// ---- Comparing.

// Expects got == want byte for byte; otherwise reports how many `item`-byte
// elements differ and the first one, in hex, prefixed with `what`.
// Transposes of awkward sizes (not multiples of a tile, one-element, thin), rows x cols.
inline const std::vector<std::pair<int64_t, int64_t>>& OddTransposeShapes() {
  static const auto* shapes = new std::vector<std::pair<int64_t, int64_t>>{
      {1000, 37}, {37, 1000}, {4097, 3}, {3, 4097}, {33, 33}, {1, 1}, {31, 65}};
  return *shapes;
}

inline void ExpectSameBytes(const Bytes& got, const Bytes& want, size_t item,
                            std::string_view what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  if (got == want) return;
  int64_t first = -1;
  int64_t count = 0;
  for (size_t e = 0; e * item < got.size(); ++e) {
    if (std::memcmp(got.data() + e * item, want.data() + e * item, item) != 0) {
      if (first < 0) first = static_cast<int64_t>(e);
      ++count;
    }
  }
  const auto hex = [&](const Bytes& bytes) {
    std::string out = "0x";
    for (size_t b = item; b-- > 0;) {  // Little-endian: most significant last.
      absl::StrAppendFormat(&out, "%02x", bytes[first * item + b]);
    }
    return out;
  };
  ADD_FAILURE() << what << ": " << count << " of " << got.size() / item
                << " elements differ; the first is element " << first
                << " (of the base): got " << hex(got) << ", want " << hex(want);
}

}  // namespace genesis::storage::kernels

#endif  // GENESIS_STORAGE_KERNELS_KERNEL_TEST_UTIL_H_
