// IEEE binary16 ("half", float16) and bfloat16 storage types and their
// conversions to and from float, for host code.
//
// Half and BFloat16 are 2-byte, trivially copyable storage types: tensors of
// those dtypes hold them, and arithmetic is done after converting to float.
//
//   genesis::Half h(0.1f);                    // rounds to nearest, ties even
//   float f = static_cast<float>(h);          // exact
//   uint16_t raw = h.bits;                    // the IEEE encoding
//   genesis::Half g = genesis::Half::FromBits(0x3C00);  // 1.0
//
// Conversion rules, identical for both formats:
//   * float -> 16 bit rounds to nearest, ties to even, including into and
//     out of the subnormal range. Values whose magnitude rounds above the
//     largest finite value become +/-Inf, as IEEE 754 requires (for half:
//     |x| >= 65520 -> Inf, 65519.99... -> 65504).
//   * 16 bit -> float is exact.
//   * NaN stays NaN in both directions: the sign and the leading payload bits
//     that fit are kept, and the quiet bit is set. Setting the quiet bit is
//     what stops a signalling NaN whose payload lives only in the low bits
//     from turning into Inf when truncated. This matches x86 F16C and GCC's
//     _Float16.
//   * Signed zeros keep their sign.
//
// Only float is accepted. Converting a double by first rounding it to float
// and then to 16 bits rounds twice and can give a different (wrong) answer
// for values near a midpoint, so the double constructors are deleted; round
// to float yourself if that error is acceptable.
//
// The conversions use integer operations only, so they are constexpr and do
// not depend on the floating-point environment (rounding mode, flush-to-zero)
// or on -ffast-math.

#ifndef GENESIS_CORE_HALF_H_
#define GENESIS_CORE_HALF_H_

#include <bit>
#include <cstdint>
#include <iosfwd>
#include <type_traits>

namespace genesis {

// Returns the binary16 encoding nearest to `value` (see the file comment for
// ties, overflow and NaN).
constexpr uint16_t FloatToHalfBits(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) {  // NaN: top 10 payload bits, quiet bit forced.
    return static_cast<uint16_t>(sign | 0x7E00u | ((abs >> 13) & 0x3FFu));
  }
  if (abs >= 0x477FF000u) {  // >= 65520, the midpoint of 65504 and 2^16.
    return static_cast<uint16_t>(sign | 0x7C00u);
  }
  if (abs >= 0x38800000u) {  // >= 2^-14: the result is a normal half.
    // Rebias the exponent (127 -> 15) in place; then adding just under half
    // an output ulp, plus the output lsb, carries exactly when round-to-
    // nearest-even rounds up. A carry out of the mantissa correctly bumps
    // the exponent.
    const uint32_t rebiased = abs - 0x38000000u;
    return static_cast<uint16_t>(
        sign | ((rebiased + 0xFFFu + ((rebiased >> 13) & 1u)) >> 13));
  }
  if (abs <= 0x33000000u) {  // <= 2^-25: rounds to (signed) zero.
    return static_cast<uint16_t>(sign);
  }
  // Subnormal half: the result is value / 2^-24 rounded. The float exponent
  // is in [102, 112] here, so the shift is in [14, 24].
  const uint32_t mantissa = (abs & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - (abs >> 23);
  const uint32_t round = (1u << (shift - 1)) - 1u + ((mantissa >> shift) & 1u);
  // A carry into bit 10 yields 0x0400, the smallest normal, as it should.
  return static_cast<uint16_t>(sign | ((mantissa + round) >> shift));
}

// Returns the float equal to the binary16 value `bits` (exact; NaN quieted).
constexpr float HalfBitsToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1Fu;
  const uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0x1Fu) {  // Inf, or NaN with payload kept and quiet bit set.
    return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13) |
                                (mantissa != 0 ? 0x400000u : 0u));
  }
  if (exponent != 0) {  // Normal: rebias 15 -> 127.
    return std::bit_cast<float>(sign | ((exponent + 112u) << 23) |
                                (mantissa << 13));
  }
  if (mantissa == 0) return std::bit_cast<float>(sign);
  // Subnormal: mantissa * 2^-24, renormalised around its top set bit p, so
  // the value is 1.f * 2^(p - 24).
  const uint32_t p = 31u - static_cast<uint32_t>(std::countl_zero(mantissa));
  return std::bit_cast<float>(sign | ((p + 103u) << 23) |
                              ((mantissa << (23u - p)) & 0x7FFFFFu));
}

// Returns the bfloat16 encoding nearest to `value` (see the file comment for
// ties, overflow and NaN). bfloat16 is the top half of a float, so this only
// rounds the low 16 bits away.
constexpr uint16_t FloatToBFloat16Bits(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) {  // NaN: keep top bits, force quiet.
    return static_cast<uint16_t>((x >> 16) | 0x0040u);
  }
  // Same carry trick as FloatToHalfBits. It cannot carry into the sign bit:
  // that would need |x| >= 0x7FFF8000, which is NaN.
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

// Returns the float equal to the bfloat16 value `bits` (exact; NaN quieted).
constexpr float BFloat16BitsToFloat(uint16_t bits) {
  const uint32_t quiet = (bits & 0x7FFFu) > 0x7F80u ? 0x0040u : 0u;
  return std::bit_cast<float>(static_cast<uint32_t>(bits | quiet) << 16);
}

// IEEE binary16 value. Holds only the encoding; convert to float to compute.
// No comparison operators: whether bitwise or IEEE equality is meant (NaN,
// +/-0) depends on the caller, who can compare `bits` or the floats.
struct Half {
  // Like float, `Half h;` is uninitialised; `Half h{};` is +0.
  Half() = default;
  constexpr explicit Half(float value) : bits(FloatToHalfBits(value)) {}
  // Would round twice (double -> float -> half); see the file comment.
  explicit Half(double value) = delete;

  static constexpr Half FromBits(uint16_t raw) {
    Half h{};
    h.bits = raw;
    return h;
  }

  constexpr explicit operator float() const { return HalfBitsToFloat(bits); }

  uint16_t bits;
};

// bfloat16 value (8-bit exponent like float, 7-bit mantissa). Same interface
// and caveats as Half.
struct BFloat16 {
  BFloat16() = default;
  constexpr explicit BFloat16(float value) : bits(FloatToBFloat16Bits(value)) {}
  explicit BFloat16(double value) = delete;

  static constexpr BFloat16 FromBits(uint16_t raw) {
    BFloat16 b{};
    b.bits = raw;
    return b;
  }

  constexpr explicit operator float() const {
    return BFloat16BitsToFloat(bits);
  }

  uint16_t bits;
};

// Tensors reinterpret raw buffers as these types, so their layout is part of
// the API.
static_assert(sizeof(Half) == 2 && alignof(Half) == 2);
static_assert(sizeof(BFloat16) == 2 && alignof(BFloat16) == 2);
static_assert(std::is_trivial_v<Half> && std::is_standard_layout_v<Half>);
static_assert(std::is_trivial_v<BFloat16> &&
              std::is_standard_layout_v<BFloat16>);

// Print the value as a float (so 1.0 prints as "1", not as its encoding).
std::ostream& operator<<(std::ostream& os, Half value);
std::ostream& operator<<(std::ostream& os, BFloat16 value);

}  // namespace genesis

#endif  // GENESIS_CORE_HALF_H_
