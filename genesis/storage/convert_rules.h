// The scalar rules for converting a value of one genesis dtype to another,
// header-only and usable from both host C++ and CUDA device code (every
// function is GENESIS_HOST_DEVICE, and constexpr in host code).
//
//   using genesis::storage::ConvertValue;
//   float f = ConvertValue<float>(genesis::Half::FromBits(0x3C00));  // 1.0f
//   int8_t i = ConvertValue<int8_t>(300.7f);                         // 127
//   genesis::BFloat16 b = ConvertValue<genesis::BFloat16>(int32_t{257});
//                                                     // 256 (ties to even)
//
// ConvertValue<To>(From) takes and returns the C++ element types of the ten
// dtypes (genesis/core/dtype.h): bool, uint8_t, int8_t, int16_t, int32_t,
// int64_t, Half, BFloat16, float, double. The rules, for every pair:
//
//   * Same type: the value unchanged (bit for bit, NaN payloads included).
//   * To bool: nonzero is true. NaN is true; +0.0 and -0.0 are false.
//   * From bool: false is 0, true is 1 (in every type).
//   * Integer to integer (bool excluded): two's-complement wrap-around, i.e.
//     the value modulo 2^bits of the target, like static_cast and PyTorch
//     (300 -> uint8 44, -1 -> uint8 255, 128 -> int8 -128).
//   * Floating to integer: truncation toward zero; NaN gives 0; values
//     beyond the target's range, +/-Inf included, saturate to its min / max
//     (300.7 -> uint8 255, -1.0 -> uint8 0, Inf -> int32 2147483647). Unlike
//     static_cast, never undefined.
//   * Integer to float32 / float64: the nearest value, ties to even (what a
//     C++ conversion does in the default rounding mode).
//   * Integer to float16 / bfloat16: the nearest value, ties to even,
//     rounded once from the exact integer (an int32 via float32 would round
//     twice: 2^24 + 2^16 + 1 must give bfloat16 2^24 + 2^17, not 2^24);
//     magnitudes beyond the format's range give +/-Inf (int 65520 -> Inf).
//   * float64 -> float32: the C++ conversion (nearest, ties to even;
//     overflow to Inf; NaN stays NaN).
//   * float32 / float64 -> float16 / bfloat16: nearest, ties to even, into
//     and out of the subnormal range, rounded once from the source value (a
//     double is NOT first rounded to float: 1 + 2^-11 + 2^-40 gives float16
//     1 + 2^-10, where double -> float -> float16 would give 1). A magnitude
//     at or above the midpoint between the largest finite value and the next
//     power of two becomes Inf (float16: |x| >= 65520), as IEEE 754 says.
//     Inf stays Inf, signed zeros keep their sign, and NaN stays NaN with
//     the sign and top payload bits kept and the quiet bit set. For float32
//     sources this is bit for bit genesis::FloatToHalfBits /
//     FloatToBFloat16Bits (genesis/core/half.h).
//   * float16 / bfloat16 -> anything: first to float32, which is exact (NaN
//     quieted, as HalfBitsToFloat does), then by the rules above.
//   * float32 -> float64, and float16 <-> bfloat16 through float32: exact
//     where representable, otherwise rounded once as above.
//
// The 16-bit rules use integer operations (and float operations whose
// results are exact and normal), so they do not depend on the floating-point
// environment (rounding mode, flush-to-zero). Conversions that use a C++
// cast (integer or float64 to float32 / float64) follow the current rounding
// mode, and in GPU code compiled with flush-to-zero, float32 results in the
// subnormal range become 0.
//
// half.h's conversions use std::bit_cast and std::countl_zero, which device
// code cannot call, so this header has its own versions (for float and
// double sources) written with compiler builtins; the tests check that they
// agree with half.h bit for bit.
#ifndef GENESIS_STORAGE_CONVERT_RULES_H_
#define GENESIS_STORAGE_CONVERT_RULES_H_

#include <cstdint>
#include <type_traits>

#include "genesis/core/half.h"

// Marks functions callable from host and CUDA device code.
#ifndef GENESIS_HOST_DEVICE
#if defined(__CUDACC__)
#define GENESIS_HOST_DEVICE __host__ __device__
#else
#define GENESIS_HOST_DEVICE
#endif
#endif

// Host compilers (GCC >= 11, Clang) have __builtin_bit_cast; so does the
// device pass of recent nvcc. Where it does not, device code bit-casts
// through a union (which CUDA supports) and the rules are not constexpr.
#if defined(__CUDA_ARCH__)
#if defined(__has_builtin)
#if __has_builtin(__builtin_bit_cast) && __has_builtin(__builtin_clzll)
#define GENESIS_CONVERT_BUILTINS_ 1
#endif
#endif
#else
#define GENESIS_CONVERT_BUILTINS_ 1
#endif

#if defined(GENESIS_CONVERT_BUILTINS_)
#define GENESIS_CONVERT_CONSTEXPR constexpr
#else
#define GENESIS_CONVERT_CONSTEXPR
#endif

namespace genesis::storage {
namespace convert_rules {

// ---- Bit-level helpers.

// The object representation of `from` as a To of the same size.
template <typename To, typename From>
GENESIS_HOST_DEVICE GENESIS_CONVERT_CONSTEXPR inline To BitCast(From from) {
  static_assert(sizeof(To) == sizeof(From));
#if defined(GENESIS_CONVERT_BUILTINS_)
  return __builtin_bit_cast(To, from);
#else
  union {
    From from;
    To to;
  } pun = {from};
  return pun.to;
#endif
}

// The number of significant bits of x (0 for 0): 1 + the top set bit's index.
GENESIS_HOST_DEVICE GENESIS_CONVERT_CONSTEXPR inline int BitWidth(uint64_t x) {
  if (x == 0) return 0;
#if defined(GENESIS_CONVERT_BUILTINS_)
  return 64 - __builtin_clzll(x);
#else
  return 64 - __clzll(static_cast<long long>(x));
#endif
}

// The IEEE binary interchange formats involved, by their field widths.
template <int kMantissa, int kExponent>
struct FloatFormat {
  static constexpr int kMantissaBits = kMantissa;
  static constexpr int kExponentBits = kExponent;
  static constexpr int kBias = (1 << (kExponent - 1)) - 1;
};
using HalfFormat = FloatFormat<10, 5>;
using BFloat16Format = FloatFormat<7, 8>;

// The format and same-size unsigned integer of a source floating type.
template <typename F>
struct SourceFormat;
template <>
struct SourceFormat<float> : FloatFormat<23, 8> {
  using Bits = uint32_t;
};
template <>
struct SourceFormat<double> : FloatFormat<52, 11> {
  using Bits = uint64_t;
};

// The 16-bit encoding (format Narrow: HalfFormat or BFloat16Format) nearest
// to `value` (float or double): ties to even, overflow to Inf, NaN quieted
// keeping the sign and top payload bits. See the file comment.
template <typename Narrow, typename Wide>
GENESIS_HOST_DEVICE GENESIS_CONVERT_CONSTEXPR inline uint16_t RoundToNarrow(
    Wide value) {
  using Src = SourceFormat<Wide>;
  using Bits = typename Src::Bits;
  constexpr int kWideMant = Src::kMantissaBits;
  constexpr int kMant = Narrow::kMantissaBits;
  constexpr int kDrop = kWideMant - kMant;  // Bits rounded off normals.
  constexpr Bits kOne = 1;
  constexpr Bits kWideMantMask = (kOne << kWideMant) - 1;
  constexpr Bits kWideInf = ((kOne << Src::kExponentBits) - 1) << kWideMant;
  constexpr uint32_t kInf = ((1u << Narrow::kExponentBits) - 1) << kMant;
  constexpr uint32_t kMantMask = (1u << kMant) - 1;
  constexpr uint32_t kQuiet = 1u << (kMant - 1);
  // The narrow format's largest finite value is (2 - 2^-kMant) * 2^kBias;
  // from the midpoint between it and 2^(kBias + 1) on, values round to Inf.
  constexpr Bits kOverflow =
      (static_cast<Bits>(Narrow::kBias + Src::kBias) << kWideMant) |
      (((kOne << (kMant + 1)) - 1) << (kDrop - 1));
  // The smallest normal narrow value, 2^(1 - kBias), in the wide encoding.
  constexpr int kMinExp = 1 - Narrow::kBias;
  constexpr Bits kMinNormal = static_cast<Bits>(kMinExp + Src::kBias)
                              << kWideMant;

  const Bits x = BitCast<Bits>(value);
  const uint32_t sign =
      static_cast<uint32_t>(x >> (8 * sizeof(Bits) - 16)) & 0x8000u;
  const Bits abs = x & (~Bits{0} >> 1);
  // The top payload bits that fit, and the quiet bit.
  const uint16_t nan = static_cast<uint16_t>(
      sign | kInf | kQuiet | (static_cast<uint32_t>(abs >> kDrop) & kMantMask));
  if constexpr (Narrow::kExponentBits == Src::kExponentBits) {
    // Same exponent field (float -> bfloat16): the encodings line up, and
    // rounding the low bits off (see the carry trick below) is right for
    // normals, subnormals and overflow alike. No carry reaches the sign bit:
    // that needs |x| >= 0x7FFF8000, a NaN. Branch-free, so it vectorises.
    const Bits round = (kOne << (kDrop - 1)) - 1 + ((x >> kDrop) & 1);
    const uint16_t rounded = static_cast<uint16_t>((x + round) >> kDrop);
    return abs > kWideInf ? nan : rounded;
  }
  if (abs > kWideInf) return nan;
  if (abs >= kOverflow) return static_cast<uint16_t>(sign | kInf);
  if (abs >= kMinNormal) {
    // Rebias the exponent in place; then adding just under half an output
    // ulp, plus the output lsb, carries exactly when round-to-nearest-even
    // rounds up (a carry out of the mantissa correctly bumps the exponent).
    const Bits rebiased =
        abs - (static_cast<Bits>(Src::kBias - Narrow::kBias) << kWideMant);
    const Bits round = (kOne << (kDrop - 1)) - 1 + ((rebiased >> kDrop) & 1);
    return static_cast<uint16_t>(
        sign | static_cast<uint32_t>((rebiased + round) >> kDrop));
  }
  // Subnormal (or zero) result: |value| / 2^(kMinExp - kMant), rounded to an
  // integer. |value| = significand * 2^(exponent - kBias - kWideMant).
  const int exponent = static_cast<int>(abs >> kWideMant);
  const Bits significand =
      (abs & kWideMantMask) | (exponent != 0 ? kOne << kWideMant : 0);
  const int shift =
      Src::kBias + kWideMant + kMinExp - kMant - (exponent != 0 ? exponent : 1);
  // Below half the smallest subnormal (or exactly half: a tie, to even 0).
  if (shift > kWideMant + 1) return static_cast<uint16_t>(sign);
  const Bits round = (kOne << (shift - 1)) - 1 + ((significand >> shift) & 1);
  // A carry into the exponent field yields the smallest normal, as it should.
  return static_cast<uint16_t>(
      sign | static_cast<uint32_t>((significand + round) >> shift));
}

// The float equal to the binary16 value `bits` (exact; NaN quieted, keeping
// sign and payload). Written with selects rather than branches, so that
// loops over it vectorise.
GENESIS_HOST_DEVICE GENESIS_CONVERT_CONSTEXPR inline float HalfToFloat(
    uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1Fu;
  const uint32_t mantissa = bits & 0x3FFu;
  // Normal: rebias the exponent (15 -> 127). Inf and NaN: all ones, with
  // the quiet bit set for NaN.
  const uint32_t high = exponent == 0x1Fu
                            ? 0x7F800000u | (mantissa != 0 ? 0x400000u : 0u)
                            : (exponent + 112u) << 23;
  const uint32_t normal = high | (mantissa << 13);
  // Zero and subnormal: mantissa * 2^-24, exact in float. The product is 0
  // or a normal float, so neither the rounding mode nor flush-to-zero
  // affects it. (Signed int to float and a mask, not a ?:, so that GCC
  // vectorises it: it will not if-convert a floating-point multiply.)
  const uint32_t small = BitCast<uint32_t>(
      static_cast<float>(static_cast<int32_t>(mantissa)) * 0x1p-24f);
  const uint32_t is_small = 0u - static_cast<uint32_t>(exponent == 0);
  return BitCast<float>(sign | (small & is_small) | (normal & ~is_small));
}

// The float equal to the bfloat16 value `bits` (exact; NaN quieted).
GENESIS_HOST_DEVICE GENESIS_CONVERT_CONSTEXPR inline float BFloat16ToFloat(
    uint16_t bits) {
  const uint32_t quiet = (bits & 0x7FFFu) > 0x7F80u ? 0x0040u : 0u;
  return BitCast<float>(static_cast<uint32_t>(bits | quiet) << 16);
}

// The range of an integer type, without std::numeric_limits (not callable
// from device code without relaxed constexpr).
template <typename Int>
struct IntRange {
  static constexpr bool kSigned = static_cast<Int>(-1) < static_cast<Int>(0);
  static constexpr Int kMax =
      kSigned ? static_cast<Int>(~uint64_t{0} >> (65 - 8 * sizeof(Int)))
              : static_cast<Int>(~static_cast<Int>(0));
  static constexpr Int kMin = kSigned ? static_cast<Int>(-kMax - 1) : Int{0};
};

// Truncates `value` (float or double) toward zero into Int, NaN giving 0 and
// out-of-range values (+/-Inf included) saturating.
template <typename Int, typename F>
GENESIS_HOST_DEVICE GENESIS_CONVERT_CONSTEXPR inline Int FloatToInteger(
    F value) {
  using Range = IntRange<Int>;
  // 2^(value bits) and the minimum are powers of two (or 0): exact in F.
  constexpr F kUpper = static_cast<F>(static_cast<uint64_t>(Range::kMax) + 1);
  constexpr F kLower = static_cast<F>(Range::kMin);
  if (value != value) return 0;  // NaN.
  if (value >= kUpper) return Range::kMax;
  if (value <= kLower) return Range::kMin;
  return static_cast<Int>(value);  // In range after truncation.
}

// The 16-bit encoding (format Narrow) nearest to the integer `value`, ties to
// even, overflow to Inf. Int is a signed type or a narrower unsigned one.
template <typename Narrow, typename Int>
GENESIS_HOST_DEVICE GENESIS_CONVERT_CONSTEXPR inline uint16_t IntegerToNarrow(
    Int value) {
  static_assert(sizeof(Int) < 8 || IntRange<Int>::kSigned,
                "a 64-bit unsigned magnitude could round up to 2^64");
  if constexpr (sizeof(Int) <= 2) {
    return RoundToNarrow<Narrow>(static_cast<float>(value));  // Exact.
  } else {
    const bool negative = value < 0;
    uint64_t magnitude = negative ? uint64_t{0} - static_cast<uint64_t>(value)
                                  : static_cast<uint64_t>(value);
    if (magnitude > (uint64_t{1} << 24)) {
      // Not exact in float, whose rounding would make this round twice.
      // Round |value| to kMantissaBits + 1 significant bits (ties to even)
      // here instead; the result is exact in float, whose conversion below
      // then only decides overflow.
      const int shift = BitWidth(magnitude) - (Narrow::kMantissaBits + 1);
      const uint64_t round =
          (uint64_t{1} << (shift - 1)) - 1 + ((magnitude >> shift) & 1);
      magnitude = ((magnitude + round) >> shift) << shift;
    }
    const float rounded = static_cast<float>(magnitude);  // Exact.
    return RoundToNarrow<Narrow>(negative ? -rounded : rounded);
  }
}

template <typename T>
inline constexpr bool kIsSixteenBitFloat =
    std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// The C++ element types of the genesis dtypes.
template <typename T>
inline constexpr bool kIsElement =
    std::is_same_v<T, bool> || std::is_same_v<T, uint8_t> ||
    std::is_same_v<T, int8_t> || std::is_same_v<T, int16_t> ||
    std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t> ||
    kIsSixteenBitFloat<T> || std::is_same_v<T, float> ||
    std::is_same_v<T, double>;

// A Half or BFloat16 holding `bits` (their FromBits is host-only).
template <typename T>
GENESIS_HOST_DEVICE GENESIS_CONVERT_CONSTEXPR inline T FromBits(uint16_t bits) {
  T value{};
  value.bits = bits;
  return value;
}

// The 16-bit float type T nearest to `value` (an arithmetic type).
template <typename T, typename From>
GENESIS_HOST_DEVICE GENESIS_CONVERT_CONSTEXPR inline T ToSixteenBit(
    From value) {
  using Narrow =
      std::conditional_t<std::is_same_v<T, Half>, HalfFormat, BFloat16Format>;
  if constexpr (std::is_floating_point_v<From>) {
    return FromBits<T>(RoundToNarrow<Narrow>(value));
  } else if constexpr (std::is_same_v<From, bool>) {
    return FromBits<T>(RoundToNarrow<Narrow>(value ? 1.0f : 0.0f));
  } else {
    return FromBits<T>(IntegerToNarrow<Narrow>(value));
  }
}

}  // namespace convert_rules

// Converts `value` to the element type To by the rules in the file comment.
// To and From are element types of genesis dtypes (see DTypeOf in
// genesis/core/dtype.h).
template <typename To, typename From>
GENESIS_HOST_DEVICE GENESIS_CONVERT_CONSTEXPR inline To ConvertValue(
    From value) {
  static_assert(
      convert_rules::kIsElement<To> && convert_rules::kIsElement<From>,
      "ConvertValue converts between genesis element types only");
  if constexpr (std::is_same_v<To, From>) {
    return value;
  } else if constexpr (std::is_same_v<From, Half>) {
    return ConvertValue<To>(convert_rules::HalfToFloat(value.bits));
  } else if constexpr (std::is_same_v<From, BFloat16>) {
    return ConvertValue<To>(convert_rules::BFloat16ToFloat(value.bits));
  } else if constexpr (std::is_same_v<To, bool>) {
    return value != From{0};  // NaN != 0; -0.0 == 0.
  } else if constexpr (convert_rules::kIsSixteenBitFloat<To>) {
    return convert_rules::ToSixteenBit<To>(value);
  } else if constexpr (std::is_floating_point_v<To>) {
    return static_cast<To>(value);
  } else if constexpr (std::is_floating_point_v<From>) {
    return convert_rules::FloatToInteger<To>(value);
  } else {
    return static_cast<To>(value);  // Modular since C++20.
  }
}

}  // namespace genesis::storage

#endif  // GENESIS_STORAGE_CONVERT_RULES_H_
