#include "genesis/core/half.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "gtest/gtest.h"

namespace genesis {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }
float FromBits(uint32_t bits) { return std::bit_cast<float>(bits); }

// Describes one 16-bit format well enough to build an independent reference.
struct Format {
  const char* name;
  int mantissa_bits;  // Explicitly stored mantissa bits.
  int min_exponent;   // Unbiased exponent of the smallest normal.
  uint16_t inf_bits;  // Encoding of +Inf == largest finite + 1.
  uint16_t (*to_bits)(float);
  float (*to_float)(uint16_t);
};

// Names the format in gtest output instead of dumping its bytes.
void PrintTo(const Format& format, std::ostream* os) { *os << format.name; }

constexpr Format kHalf = {"half",         10, -14, 0x7C00, FloatToHalfBits,
                          HalfBitsToFloat};
constexpr Format kBFloat16 = {
    "bfloat16", 7, -126, 0x7F80, FloatToBFloat16Bits, BFloat16BitsToFloat};

// ladder[i] is the value of the non-negative encoding i, computed from the
// format's definition with std::ldexp rather than by bit manipulation, for
// i = 0 .. inf_bits. The last entry is the value the Inf encoding would have
// if the exponent range were unbounded (65536 for half, 2^128 for bfloat16):
// IEEE 754 rounds to it and then overflows, so it is the right upper
// neighbour for rounding decisions near the top.
std::vector<double> Ladder(const Format& format) {
  std::vector<double> ladder;
  const int m = format.mantissa_bits;
  for (uint32_t i = 0; i <= format.inf_bits; ++i) {
    const int exponent_field = static_cast<int>(i >> m);
    const int mantissa = static_cast<int>(i & ((1u << m) - 1));
    ladder.push_back(
        exponent_field == 0
            ? std::ldexp(mantissa, format.min_exponent - m)
            : std::ldexp((1 << m) + mantissa,
                         format.min_exponent - 1 + exponent_field - m));
  }
  return ladder;
}

// Reference float -> 16-bit conversion for non-NaN `value`: the nearest
// ladder entry, ties to the even encoding (even encoding == even mantissa),
// decided by exact double arithmetic.
uint16_t ReferenceBits(const Format& format, const std::vector<double>& ladder,
                       float value) {
  const uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  const double magnitude = std::fabs(static_cast<double>(value));
  if (magnitude >= ladder.back()) return sign | format.inf_bits;
  const size_t hi = static_cast<size_t>(
      std::upper_bound(ladder.begin(), ladder.end(), magnitude) -
      ladder.begin());
  const size_t lo = hi - 1;
  // Both differences are exact: the operands are floats of similar size.
  const double below = magnitude - ladder[lo];
  const double above = ladder[hi] - magnitude;
  size_t nearest;
  if (below < above) {
    nearest = lo;
  } else if (above < below) {
    nearest = hi;
  } else {
    nearest = lo % 2 == 0 ? lo : hi;
  }
  return static_cast<uint16_t>(sign | nearest);
}

// Every finite encoding, every midpoint between neighbours (including the
// one between the largest finite value and the overflow value), and the
// floats one ulp either side of each midpoint, with both signs; plus Inf,
// huge values and float subnormals.
std::vector<float> InterestingFloats(const std::vector<double>& ladder) {
  std::vector<float> values;
  for (size_t i = 0; i + 1 < ladder.size(); ++i) {
    const float exact = static_cast<float>(ladder[i]);
    const double mid_double = (ladder[i] + ladder[i + 1]) / 2;
    const float mid = static_cast<float>(mid_double);
    // Midpoints need one more bit than the format has; float has plenty.
    EXPECT_EQ(static_cast<double>(mid), mid_double) << "midpoint " << i;
    for (float v :
         {exact, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, kInf)}) {
      values.push_back(v);
      values.push_back(-v);
    }
  }
  for (float v : {kInf, std::numeric_limits<float>::max(), 1e10f, 65536.0f,
                  65535.0f, 1e30f, std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::denorm_min(), FromBits(0x7FFFFF),
                  FromBits(0x00400000)}) {
    values.push_back(v);
    values.push_back(-v);
  }
  return values;
}

bool IsNaN16(const Format& format, uint16_t bits) {
  return (bits & 0x7FFF) > format.inf_bits;
}

// Checks the conversion of `value` against the ladder reference; returns
// false (after reporting) on mismatch so callers can stop a long sweep.
bool MatchesReference(const Format& format, const std::vector<double>& ladder,
                      float value) {
  const uint16_t expected = ReferenceBits(format, ladder, value);
  const uint16_t actual = format.to_bits(value);
  if (actual == expected) return true;
  ADD_FAILURE() << format.name << ": float " << value << " (bits 0x" << std::hex
                << Bits(value) << ") -> 0x" << actual << ", expected 0x"
                << expected;
  return false;
}

class FormatTest : public ::testing::TestWithParam<Format> {};

TEST_P(FormatTest, LadderIsStrictlyIncreasing) {
  // Guards the reference itself: upper_bound needs a sorted ladder.
  const std::vector<double> ladder = Ladder(GetParam());
  EXPECT_TRUE(std::adjacent_find(ladder.begin(), ladder.end(),
                                 std::greater_equal<double>()) == ladder.end());
}

TEST_P(FormatTest, EveryEncodingToFloatIsExact) {
  const Format& format = GetParam();
  const std::vector<double> ladder = Ladder(format);
  for (uint32_t i = 0; i <= 0xFFFF; ++i) {
    const uint16_t bits = static_cast<uint16_t>(i);
    const float value = format.to_float(bits);
    const uint16_t magnitude = bits & 0x7FFF;
    if (IsNaN16(format, bits)) {
      ASSERT_TRUE(std::isnan(value)) << std::hex << i;
    } else if (magnitude == format.inf_bits) {
      ASSERT_TRUE(std::isinf(value)) << std::hex << i;
    } else {
      ASSERT_EQ(static_cast<double>(std::fabs(value)), ladder[magnitude])
          << std::hex << i;
    }
    ASSERT_EQ(std::signbit(value), (bits & 0x8000) != 0) << std::hex << i;
  }
}

TEST_P(FormatTest, EveryEncodingRoundTrips) {
  const Format& format = GetParam();
  const uint16_t quiet_bit = 1u << (format.mantissa_bits - 1);
  for (uint32_t i = 0; i <= 0xFFFF; ++i) {
    const uint16_t bits = static_cast<uint16_t>(i);
    const uint16_t round_trip = format.to_bits(format.to_float(bits));
    if (IsNaN16(format, bits)) {
      // Still NaN, same sign and payload, now quiet.
      ASSERT_EQ(round_trip, bits | quiet_bit) << std::hex << i;
    } else {
      ASSERT_EQ(round_trip, bits) << std::hex << i;
    }
  }
}

TEST_P(FormatTest, MidpointsAndNeighboursMatchReference) {
  const Format& format = GetParam();
  const std::vector<double> ladder = Ladder(format);
  for (float v : InterestingFloats(ladder)) {
    if (!MatchesReference(format, ladder, v)) return;
  }
}

TEST_P(FormatTest, SweepOfAllFloatsMatchesReference) {
  const Format& format = GetParam();
  const std::vector<double> ladder = Ladder(format);
  // An odd stride visits every residue of the low bits, which hold the
  // rounding decision, across the whole exponent range of both signs.
  constexpr uint64_t kStride = 1009;
  for (uint64_t b = 0; b <= 0xFFFFFFFFu; b += kStride) {
    const float v = FromBits(static_cast<uint32_t>(b));
    if (std::isnan(v)) continue;
    if (!MatchesReference(format, ladder, v)) return;
  }
}

TEST_P(FormatTest, FloatNaNStaysNaN) {
  const Format& format = GetParam();
  const int drop = 23 - format.mantissa_bits;  // Payload bits that don't fit.
  for (uint32_t nan :
       {0x7F800001u, 0x7F800002u, 0x7F801FFFu, 0x7F802000u, 0x7FBFFFFFu,
        0x7FC00000u, 0x7FC00001u, 0x7FFFFFFFu, 0x7F810000u, 0x7F80FFFFu}) {
    for (uint32_t sign : {0u, 0x80000000u}) {
      const uint32_t input = nan | sign;
      ASSERT_TRUE(std::isnan(FromBits(input)));
      const uint16_t out = format.to_bits(FromBits(input));
      EXPECT_TRUE(IsNaN16(format, out)) << std::hex << input << " -> " << out;
      EXPECT_EQ((out & 0x8000) != 0, sign != 0) << std::hex << input;
      // The leading payload bits survive and the quiet bit is set.
      const uint32_t payload = (input & 0x7FFFFF) >> drop;
      const uint32_t mantissa_mask = (1u << format.mantissa_bits) - 1;
      EXPECT_EQ(out & mantissa_mask,
                payload | (1u << (format.mantissa_bits - 1)))
          << std::hex << input;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, FormatTest,
                         ::testing::Values(kHalf, kBFloat16),
                         [](const ::testing::TestParamInfo<Format>& info) {
                           return std::string(info.param.name);
                         });

#if defined(__FLT16_MAX__)  // The compiler has _Float16 (GCC 12+, Clang).

uint16_t CompilerHalfBits(float value) {
  return std::bit_cast<uint16_t>(static_cast<_Float16>(value));
}

float CompilerHalfToFloat(uint16_t bits) {
  return static_cast<float>(std::bit_cast<_Float16>(bits));
}

TEST(HalfCompilerTest, EveryEncodingToFloatMatchesFloat16) {
  for (uint32_t i = 0; i <= 0xFFFF; ++i) {
    const uint16_t bits = static_cast<uint16_t>(i);
    // Bitwise, NaNs included: our NaN rule is the one GCC and F16C use.
    ASSERT_EQ(Bits(HalfBitsToFloat(bits)), Bits(CompilerHalfToFloat(bits)))
        << std::hex << i;
  }
}

TEST(HalfCompilerTest, MidpointsAndNeighboursMatchFloat16) {
  for (float v : InterestingFloats(Ladder(kHalf))) {
    ASSERT_EQ(FloatToHalfBits(v), CompilerHalfBits(v))
        << v << " (bits 0x" << std::hex << Bits(v) << ")";
  }
}

TEST(HalfCompilerTest, SweepOfAllFloatsMatchesFloat16) {
  constexpr uint64_t kStride = 1009;
  for (uint64_t b = 0; b <= 0xFFFFFFFFu; b += kStride) {
    const float v = FromBits(static_cast<uint32_t>(b));
    ASSERT_EQ(FloatToHalfBits(v), CompilerHalfBits(v))
        << "bits 0x" << std::hex << b;
  }
}

#endif  // defined(__FLT16_MAX__)

TEST(HalfTest, KnownValues) {
  EXPECT_EQ(FloatToHalfBits(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalfBits(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalfBits(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalfBits(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalfBits(0.1f), 0x2E66);
  EXPECT_EQ(FloatToHalfBits(1.0f / 3), 0x3555);
  EXPECT_EQ(FloatToHalfBits(65504.0f), 0x7BFF);  // Largest finite.
  EXPECT_EQ(FloatToHalfBits(std::nextafter(65520.0f, 0.0f)), 0x7BFF);
  EXPECT_EQ(FloatToHalfBits(65520.0f), 0x7C00);  // Tie rounds to Inf.
  EXPECT_EQ(FloatToHalfBits(-65520.0f), 0xFC00);
  EXPECT_EQ(FloatToHalfBits(1e6f), 0x7C00);
  EXPECT_EQ(FloatToHalfBits(kInf), 0x7C00);
  EXPECT_EQ(FloatToHalfBits(-kInf), 0xFC00);
  EXPECT_EQ(FloatToHalfBits(0x1p-14f), 0x0400);  // Smallest normal.
  EXPECT_EQ(FloatToHalfBits(0x1p-24f), 0x0001);  // Smallest subnormal.
  EXPECT_EQ(FloatToHalfBits(0x1p-25f), 0x0000);  // Tie to even: 0.
  EXPECT_EQ(FloatToHalfBits(-0x1p-25f), 0x8000);
  EXPECT_EQ(FloatToHalfBits(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(FloatToHalfBits(3 * 0x1p-26f), 0x0001);
  EXPECT_EQ(FloatToHalfBits(3 * 0x1p-25f), 0x0002);         // Tie 1|2 -> 2.
  EXPECT_EQ(FloatToHalfBits(0x1p-14f - 0x1p-25f), 0x0400);  // Tie 3FF|400.
  EXPECT_EQ(FloatToHalfBits(1.0f + 0x1p-11f), 0x3C00);      // Tie 3C00|3C01.
  EXPECT_EQ(FloatToHalfBits(1.0f + 3 * 0x1p-11f), 0x3C02);  // Tie 3C01|3C02.
  EXPECT_EQ(FloatToHalfBits(2049.0f), 0x6800);
  EXPECT_EQ(FloatToHalfBits(2051.0f), 0x6802);
  EXPECT_EQ(FloatToHalfBits(std::numeric_limits<float>::denorm_min()), 0);
  EXPECT_EQ(FloatToHalfBits(FromBits(0x7F800001)), 0x7E00);  // sNaN, not Inf.
  EXPECT_EQ(FloatToHalfBits(FromBits(0xFFC00000)), 0xFE00);

  EXPECT_EQ(HalfBitsToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(HalfBitsToFloat(0x03FF), 1023 * 0x1p-24f);
  EXPECT_EQ(HalfBitsToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(HalfBitsToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(HalfBitsToFloat(0xFC00), -kInf);
  EXPECT_EQ(Bits(HalfBitsToFloat(0x8000)), 0x80000000u);
  EXPECT_EQ(Bits(HalfBitsToFloat(0x7C01)), 0x7FC02000u);  // Quieted.
}

TEST(BFloat16Test, KnownValues) {
  EXPECT_EQ(FloatToBFloat16Bits(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBFloat16Bits(-2.0f), 0xC000);
  EXPECT_EQ(FloatToBFloat16Bits(-0.0f), 0x8000);
  EXPECT_EQ(FloatToBFloat16Bits(3.14159265f), 0x4049);
  EXPECT_EQ(FloatToBFloat16Bits(FromBits(0x3F808000)), 0x3F80);  // Tie even.
  EXPECT_EQ(FloatToBFloat16Bits(FromBits(0x3F818000)), 0x3F82);  // Tie odd.
  EXPECT_EQ(FloatToBFloat16Bits(FromBits(0x3F808001)), 0x3F81);
  EXPECT_EQ(FloatToBFloat16Bits(FromBits(0x3F807FFF)), 0x3F80);
  EXPECT_EQ(FloatToBFloat16Bits(FromBits(0x7F7F0000)), 0x7F7F);  // Max.
  EXPECT_EQ(FloatToBFloat16Bits(FromBits(0x7F7F7FFF)), 0x7F7F);
  EXPECT_EQ(FloatToBFloat16Bits(FromBits(0x7F7F8000)), 0x7F80);  // Tie: Inf.
  EXPECT_EQ(FloatToBFloat16Bits(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(FloatToBFloat16Bits(-std::numeric_limits<float>::max()), 0xFF80);
  EXPECT_EQ(FloatToBFloat16Bits(kInf), 0x7F80);
  EXPECT_EQ(FloatToBFloat16Bits(FromBits(0x00000001)), 0x0000);
  EXPECT_EQ(FloatToBFloat16Bits(FromBits(0x00008000)), 0x0000);  // Tie even.
  EXPECT_EQ(FloatToBFloat16Bits(FromBits(0x00018000)), 0x0002);  // Tie odd.
  EXPECT_EQ(FloatToBFloat16Bits(FromBits(0x00008001)), 0x0001);
  EXPECT_EQ(FloatToBFloat16Bits(FromBits(0x007FFFFF)), 0x0080);  // To normal.
  EXPECT_EQ(FloatToBFloat16Bits(FromBits(0x7F800001)), 0x7FC0);  // sNaN.
  EXPECT_EQ(FloatToBFloat16Bits(FromBits(0xFF800001)), 0xFFC0);

  EXPECT_EQ(BFloat16BitsToFloat(0x3F80), 1.0f);
  EXPECT_EQ(BFloat16BitsToFloat(0x0001), 0x1p-133f);
  EXPECT_EQ(BFloat16BitsToFloat(0xFF80), -kInf);
  EXPECT_EQ(Bits(BFloat16BitsToFloat(0x7F81)), 0x7FC10000u);  // Quieted.
}

// The conversions are usable in constant expressions.
static_assert(FloatToHalfBits(1.0f) == 0x3C00);
static_assert(HalfBitsToFloat(0x0001) == 0x1p-24f);
static_assert(FloatToBFloat16Bits(1.0f) == 0x3F80);
static_assert(BFloat16BitsToFloat(0x3F80) == 1.0f);

// Only float converts: double would round twice, and the constructors are
// explicit so no conversion happens behind the caller's back.
static_assert(std::is_constructible_v<Half, float>);
static_assert(!std::is_constructible_v<Half, double>);
static_assert(!std::is_convertible_v<float, Half>);
static_assert(!std::is_convertible_v<Half, float>);
static_assert(!std::is_constructible_v<BFloat16, double>);
static_assert(!std::is_convertible_v<float, BFloat16>);

TEST(HalfTypeTest, ValueSemantics) {
  EXPECT_EQ(Half(1.5f).bits, 0x3E00);
  EXPECT_EQ(static_cast<float>(Half(1.5f)), 1.5f);
  EXPECT_EQ(static_cast<float>(Half::FromBits(0xC000)), -2.0f);
  EXPECT_EQ(Half{}.bits, 0);
  EXPECT_EQ(BFloat16(1.5f).bits, 0x3FC0);
  EXPECT_EQ(static_cast<float>(BFloat16::FromBits(0x4049)), 3.140625f);
  EXPECT_EQ(BFloat16{}.bits, 0);
}

TEST(HalfTypeTest, StreamsAsFloat) {
  std::ostringstream os;
  os << Half(1.5f) << " " << BFloat16(-2.0f);
  EXPECT_EQ(os.str(), "1.5 -2");
}

}  // namespace
}  // namespace genesis
