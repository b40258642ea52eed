#include "genesis/storage/convert.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "genesis/core/dtype.h"
#include "genesis/core/half.h"
#include "genesis/storage/convert_rules.h"
#include "genesis/storage/layout.h"
#include "genesis/storage/layout_test_util.h"
#include "genesis/storage/strided_copy.h"
#include "gtest/gtest.h"

namespace genesis::storage {
namespace {

using convert_rules::BFloat16Format;
using convert_rules::HalfFormat;
using Bytes = std::vector<unsigned char>;
using Real = long double;

// The reference model below computes with exact values: x86-64's long double
// (64-bit significand) or a quad long double holds every value of every
// dtype exactly, int64 included.
static_assert(std::numeric_limits<Real>::digits >= 64,
              "the reference model needs a 64-bit long double significand");

constexpr DType kBool = DType::kBool;
constexpr DType kU8 = DType::kUInt8;
constexpr DType kI8 = DType::kInt8;
constexpr DType kI16 = DType::kInt16;
constexpr DType kI32 = DType::kInt32;
constexpr DType kI64 = DType::kInt64;
constexpr DType kF16 = DType::kFloat16;
constexpr DType kBF16 = DType::kBFloat16;
constexpr DType kF32 = DType::kFloat32;
constexpr DType kF64 = DType::kFloat64;

constexpr Real kNaN = std::numeric_limits<Real>::quiet_NaN();
constexpr Real kInf = std::numeric_limits<Real>::infinity();

bool IsIntegral(DType t) { return t == kBool || IsInteger(t); }

// ---- Reading and writing single elements as exact values.

template <typename T>
T Get(const unsigned char* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

template <typename T>
void Put(Bytes& out, T value) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}

// The exact value of the element at p (half.h decodes the 16-bit floats).
Real Read(DType type, const unsigned char* p) {
  switch (type) {
    case kBool:
      return p[0] != 0 ? 1 : 0;
    case kU8:
      return Get<uint8_t>(p);
    case kI8:
      return Get<int8_t>(p);
    case kI16:
      return Get<int16_t>(p);
    case kI32:
      return Get<int32_t>(p);
    case kI64:
      return Get<int64_t>(p);
    case kF16:
      return HalfBitsToFloat(Get<uint16_t>(p));
    case kBF16:
      return BFloat16BitsToFloat(Get<uint16_t>(p));
    case kF32:
      return Get<float>(p);
    case kF64:
      return Get<double>(p);
  }
  return kNaN;
}

// ---- The reference rules, written from convert_rules.h's file comment.

struct NarrowTable {
  std::vector<Real> values;  // Finite non-negative values by encoding, then
                             // the first power of two past the largest.
  uint16_t inf_bits;
};

NarrowTable MakeTable(bool half) {
  NarrowTable table;
  table.inf_bits = half ? 0x7C00 : 0x7F80;
  for (uint32_t bits = 0; bits <= table.inf_bits; ++bits) {
    const uint16_t b = static_cast<uint16_t>(bits);
    table.values.push_back(half ? HalfBitsToFloat(b) : BFloat16BitsToFloat(b));
  }
  // Where Inf sits for rounding: the next binade, 2^(emax + 1); its
  // encoding is even, so a tie with the largest finite (odd) goes to Inf.
  table.values.back() = half ? 65536.0L : std::ldexp(Real{1}, 128);
  return table;
}

// Nearest 16-bit encoding to v, ties to even encoding, overflow to Inf.
// NaN gives the canonical quiet NaN (only NaN-ness is compared).
uint16_t RefNarrow(Real v, bool half) {
  static const NarrowTable kHalf = MakeTable(true);
  static const NarrowTable kBFloat16 = MakeTable(false);
  const NarrowTable& table = half ? kHalf : kBFloat16;
  if (std::isnan(v)) return half ? 0x7E00 : 0x7FC0;
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const Real a = std::fabs(v);
  const auto it = std::lower_bound(table.values.begin(), table.values.end(), a);
  if (it == table.values.end()) return sign | table.inf_bits;
  uint16_t bits = static_cast<uint16_t>(it - table.values.begin());
  if (*it != a) {
    const Real above = *it - a;
    const Real below = a - *(it - 1);
    if (below < above || (below == above && (bits & 1) != 0)) --bits;
  }
  return sign | bits;
}

// Two's-complement wrap of the integer v into `bits` bits.
int64_t Wrap(Real v, int bits, bool is_signed) {
  const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  const uint64_t u = static_cast<uint64_t>(static_cast<int64_t>(v)) & mask;
  const bool negative = is_signed && ((u >> (bits - 1)) & 1) != 0;
  return negative ? static_cast<int64_t>(u | ~mask) : static_cast<int64_t>(u);
}

// Truncation with NaN -> 0 and saturation.
int64_t Saturate(Real v, int bits, bool is_signed) {
  if (std::isnan(v)) return 0;
  const Real lo = is_signed ? -std::ldexp(Real{1}, bits - 1) : 0;
  const Real hi = std::ldexp(Real{1}, is_signed ? bits - 1 : bits) - 1;
  const Real t = std::trunc(v);
  return static_cast<int64_t>(std::clamp(t, lo, hi));
}

// The element of type `to` that the exact value v becomes, where v came
// from an integral (integer or bool) or a floating-point dtype.
Bytes ByRules(Real v, bool from_integral, DType to) {
  Bytes out;
  const int bits = static_cast<int>(8 * ItemSize(to));
  const auto integer = [&] {
    return from_integral ? Wrap(v, bits, IsSigned(to))
                         : Saturate(v, bits, IsSigned(to));
  };
  switch (to) {
    case kBool:
      Put<uint8_t>(out, std::isnan(v) || v != 0 ? 1 : 0);
      break;
    case kU8:
      Put(out, static_cast<uint8_t>(integer()));
      break;
    case kI8:
      Put(out, static_cast<int8_t>(integer()));
      break;
    case kI16:
      Put(out, static_cast<int16_t>(integer()));
      break;
    case kI32:
      Put(out, static_cast<int32_t>(integer()));
      break;
    case kI64:
      Put(out, integer());
      break;
    case kF16:
      Put(out, RefNarrow(v, /*half=*/true));
      break;
    case kBF16:
      Put(out, RefNarrow(v, /*half=*/false));
      break;
    case kF32:
      Put(out, static_cast<float>(v));  // One rounding of the exact value.
      break;
    case kF64:
      Put(out, static_cast<double>(v));
      break;
  }
  return out;
}

bool IsNaNBits(DType type, const unsigned char* p) {
  switch (type) {
    case kF16:
      return (Get<uint16_t>(p) & 0x7FFF) > 0x7C00;
    case kBF16:
      return (Get<uint16_t>(p) & 0x7FFF) > 0x7F80;
    case kF32:
      return std::isnan(Get<float>(p));
    case kF64:
      return std::isnan(Get<double>(p));
    default:
      return false;
  }
}

// Whether `got` is what the rules expect: the same bytes, or NaN for NaN
// (quiet, for the 16-bit formats).
::testing::AssertionResult Matches(DType type, const unsigned char* got,
                                   const unsigned char* expected) {
  if (IsNaNBits(type, expected)) {
    const bool quiet16 = type == kF16    ? (Get<uint16_t>(got) & 0x0200) != 0
                         : type == kBF16 ? (Get<uint16_t>(got) & 0x0040) != 0
                                         : true;
    if (IsNaNBits(type, got) && quiet16) return ::testing::AssertionSuccess();
  } else if (std::memcmp(got, expected, ItemSize(type)) == 0) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "got " << static_cast<double>(Read(type, got)) << ", expected "
         << static_cast<double>(Read(type, expected));
}

// ---- Every pair on interesting values.

std::vector<Real> InterestingValues() {
  return {0.0L, -0.0L, 1, -1, 0.5L, -0.5L, 1.5L, 2.5L, -2.5L, 3.5L, 0.1L,
          // float16: largest finite, the overflow boundary, subnormals.
          65504, 65519, 65519.99L, 65520, -65520, 65536, 1e-8L, -1e-8L,
          0x1p-24L, 0x1p-25L, 0x1.8p-25L, 0x1p-14L,
          // Integer boundaries.
          127, 128, -128, -129, 255, 256, 32767, 32768, -32768, -32769,
          2147483647.0L, 2147483648.0L, -2147483648.0L, -2147483649.0L,
          9223372036854775807.0L, -0x1p63L, 0x1p63L, 0x1p64L,
          // Roundings: float (2^24 + 1), double (2^53 + 1), bfloat16 via
          // float (2^24 + 2^16 + 1), bfloat16 via double, float16 via float.
          0x1p24L + 1, 0x1p53L + 1, 0x1p24L + 0x1p16L + 1,
          0x1p62L + 0x1p54L + 1, 1 + 0x1p-11L + 0x1p-40L,
          1 + 0x1p-8L + 0x1p-40L, 300.7L, -300.7L, 1e20L, -1e20L, 3.4e38L,
          1e300L, -1e300L, 1e-45L, 1e-310L,
          // Specials.
          kNaN, -kNaN, kInf, -kInf};
}

// The values as elements of `type` (rounded / saturated as from float64).
Bytes Realise(const std::vector<Real>& values, DType type) {
  Bytes out;
  for (Real v : values) {
    const Bytes element = ByRules(v, /*from_integral=*/false, type);
    out.insert(out.end(), element.begin(), element.end());
  }
  return out;
}

TEST(ConvertTest, EveryPairOnInterestingValues) {
  const std::vector<Real> values = InterestingValues();
  const int64_t n = static_cast<int64_t>(values.size());
  for (DType from : kAllDTypes) {
    const Bytes src = Realise(values, from);
    const size_t from_size = ItemSize(from);
    for (DType to : kAllDTypes) {
      SCOPED_TRACE(testing::Message() << from << " -> " << to);
      const size_t to_size = ItemSize(to);
      Bytes dst(n * to_size, 0xAB);
      ASSERT_TRUE(ConvertContiguous(src.data(), from, dst.data(), to, n).ok());
      for (int64_t i = 0; i < n; ++i) {
        const unsigned char* in = &src[i * from_size];
        const Bytes expected =
            from == to ? Bytes(in, in + from_size)
                       : ByRules(Read(from, in), IsIntegral(from), to);
        EXPECT_TRUE(Matches(to, &dst[i * to_size], expected.data()))
            << "input " << static_cast<double>(Read(from, in)) << " (value "
            << static_cast<double>(values[i]) << ")";
      }
    }
  }
}

// ---- Edge cases, expected results worked out by hand from the rules.

struct Case {
  DType from;
  Real in;
  DType to;
  Real out;  // NaN: any NaN; zeros compare with their sign.
};

constexpr Real kTwo24 = 0x1p24L;
constexpr Real kTwo53 = 0x1p53L;
constexpr Real kTwo63 = 0x1p63L;
constexpr Real kI64Max = 9223372036854775807.0L;
constexpr Real kBF16Max = 0x1.FEp127L;  // (2 - 2^-7) * 2^127

const Case kCases[] = {
    // To bool: nonzero (NaN included) is true, both zeros false.
    {kF32, 0.0L, kBool, 0},
    {kF32, -0.0L, kBool, 0},
    {kF32, 0.5L, kBool, 1},
    {kF32, kNaN, kBool, 1},
    {kF32, -kInf, kBool, 1},
    {kF32, 0x1p-149L, kBool, 1},
    {kF64, 1e-310L, kBool, 1},
    {kF16, -0.0L, kBool, 0},
    {kF16, kNaN, kBool, 1},
    {kBF16, 0x1p-133L, kBool, 1},
    {kI32, 2, kBool, 1},
    {kI32, -1, kBool, 1},
    {kI64, 0, kBool, 0},
    {kU8, 255, kBool, 1},
    // From bool: 0 / 1.
    {kBool, 1, kF32, 1},
    {kBool, 1, kF16, 1},
    {kBool, 1, kBF16, 1},
    {kBool, 1, kI64, 1},
    {kBool, 1, kI8, 1},
    {kBool, 0, kF64, 0.0L},
    // Floating -> integer: truncate, NaN -> 0, saturate.
    {kF32, 2.5L, kI32, 2},
    {kF32, -2.5L, kI32, -2},
    {kF32, 0.99L, kI32, 0},
    {kF32, -0.99L, kI32, 0},
    {kF32, kNaN, kI32, 0},
    {kF32, kInf, kI32, 2147483647},
    {kF32, -kInf, kI32, -2147483648.0L},
    {kF32, 3e9L, kI32, 2147483647},
    {kF32, -3e9L, kI32, -2147483648.0L},
    {kF32, 2147483520, kI32, 2147483520},  // Largest float below 2^31.
    {kF32, -1, kU8, 0},
    {kF32, 300.7L, kU8, 255},
    {kF32, 255.9L, kU8, 255},
    {kF32, -0.5L, kU8, 0},
    {kF32, kNaN, kU8, 0},
    {kF32, 127.9L, kI8, 127},
    {kF32, -128.9L, kI8, -128},
    {kF32, 200, kI8, 127},
    {kF64, kTwo63, kI64, kI64Max},
    {kF64, -kTwo63, kI64, -kTwo63},
    {kF64, 9.2e18L, kI64, 9200000000000000000.0L},
    {kF64, 1e300L, kI64, kI64Max},
    {kF64, -kInf, kI64, -kTwo63},
    {kF64, -0.0L, kI64, 0},
    {kF16, 65504, kI16, 32767},
    {kF16, -65504, kI16, -32768},
    {kF16, kInf, kI16, 32767},
    {kF16, kNaN, kI16, 0},
    {kF16, 255.875L, kU8, 255},
    {kBF16, kBF16Max, kI64, kI64Max},
    {kBF16, -kInf, kU8, 0},
    // Integer -> integer: wrap around.
    {kI32, 300, kU8, 44},
    {kI32, -1, kU8, 255},
    {kI32, 256, kU8, 0},
    {kI64, 0x1p32L + 5, kI32, 5},
    {kI64, -2147483649.0L, kI32, 2147483647},
    {kI16, 128, kI8, -128},
    {kI16, -129, kI8, 127},
    {kU8, 200, kI8, -56},
    {kI8, -56, kU8, 200},
    {kI64, 65537, kI16, 1},
    // Integer -> float32 / float64: nearest, ties to even.
    {kI32, kTwo24 + 1, kF32, kTwo24},
    {kI32, kTwo24 + 3, kF32, kTwo24 + 4},
    {kI64, kTwo53 + 1, kF64, kTwo53},
    {kI64, kTwo53 + 3, kF64, kTwo53 + 4},
    {kI64, kI64Max, kF64, kTwo63},
    {kI64, kI64Max, kF32, kTwo63},
    // Integer -> float16 / bfloat16: one rounding, overflow to Inf.
    {kI32, 65504, kF16, 65504},
    {kI32, 65519, kF16, 65504},
    {kI32, 65520, kF16, kInf},
    {kI32, -65520, kF16, -kInf},
    {kI64, kI64Max, kF16, kInf},
    {kI32, 2049, kF16, 2048},
    {kI32, 2051, kF16, 2052},
    {kI16, -32768, kF16, -32768},
    {kI32, kTwo24 + 0x1p16L + 1, kBF16, kTwo24 + 0x1p17L},  // Not 2^24.
    {kI16, 257, kBF16, 256},
    {kI16, 259, kBF16, 260},
    {kI64, 0x1p62L + 0x1p54L + 1, kBF16, 0x1p62L + 0x1p55L},
    {kI64, -kTwo63, kBF16, -kTwo63},
    // float32 -> float16.
    {kF32, 65520, kF16, kInf},
    {kF32, 65519.99609375L, kF16, 65504},  // The float just below 65520.
    {kF32, 1e-8L, kF16, 0.0L},
    {kF32, -1e-8L, kF16, -0.0L},
    {kF32, 0x1p-24L, kF16, 0x1p-24L},
    {kF32, 0x1p-25L, kF16, 0.0L},  // Tie between 0 and 2^-24: even.
    {kF32, 0x1.8p-25L, kF16, 0x1p-24L},
    {kF32, 1 + 0x1p-11L, kF16, 1},            // Tie: to even 1.
    {kF32, 1 + 0x3p-11L, kF16, 1 + 0x1p-9L},  // Tie: to even.
    {kF32, 0x1.FFCp-15L, kF16, 0x1p-14L},     // Subnormal rounds up to normal.
    {kF32, kInf, kF16, kInf},
    {kF32, kNaN, kF16, kNaN},
    // float64 -> float16 / bfloat16 round once (double -> float -> 16 bit
    // would give 1 in both).
    {kF64, 1 + 0x1p-11L + 0x1p-40L, kF16, 1 + 0x1p-10L},
    {kF64, 1 + 0x1p-8L + 0x1p-40L, kBF16, 1 + 0x1p-7L},
    {kF64, 65519.999L, kF16, 65504},
    {kF64, 65520, kF16, kInf},
    {kF64, 1e-300L, kF16, 0.0L},
    {kF64, -1e-300L, kF16, -0.0L},
    {kF64, kNaN, kBF16, kNaN},
    // float32 -> bfloat16.
    {kF32, 1 + 0x1p-8L, kBF16, 1},         // Tie: to even.
    {kF32, 3.4e38L, kBF16, kInf},          // Above the overflow midpoint.
    {kF32, 0x1.FFFFFEp127L, kBF16, kInf},  // FLT_MAX.
    {kF32, 0x1p-149L, kBF16, 0.0L},        // Half of bfloat16's smallest: tie.
    // float64 -> float32.
    {kF64, 1e300L, kF32, kInf},
    {kF64, 1 + 0x1p-24L, kF32, 1},
    {kF64, kNaN, kF32, kNaN},
    // 16-bit sources go through exact float32.
    {kF16, 0x1p-24L, kF32, 0x1p-24L},
    {kF16, 65504, kF64, 65504},
    {kBF16, 0x1p17L, kF16, kInf},
    {kBF16, 0x1p-20L, kF16, 0x1p-20L},
    {kF16, 65504, kBF16, 65536},
    {kBF16, kNaN, kF16, kNaN},
};

// Builds the source element for a case. Decimal inputs (0.99, 1e-8) are
// rounded to the source type, and the cases are chosen so that this does
// not change the result; a binary input (exact in double) must be exact in
// the source type too, so that a case cannot silently test another value.
Bytes Element(DType type, Real v) {
  Bytes bytes = ByRules(v, /*from_integral=*/false, type);
  const Real back = Read(type, bytes.data());
  if (!std::isnan(v) && static_cast<Real>(static_cast<double>(v)) == v) {
    EXPECT_TRUE(back == v && std::signbit(back) == std::signbit(v))
        << static_cast<double>(v) << " is not exact in " << type;
  }
  return bytes;
}

TEST(ConvertTest, EdgeCasesFromTheRules) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(testing::Message()
                 << c.from << " " << static_cast<double>(c.in) << " -> "
                 << c.to);
    const Bytes src = Element(c.from, c.in);
    Bytes dst(ItemSize(c.to));
    ASSERT_TRUE(
        ConvertContiguous(src.data(), c.from, dst.data(), c.to, 1).ok());
    const Real got = Read(c.to, dst.data());
    if (std::isnan(c.out)) {
      EXPECT_TRUE(IsNaNBits(c.to, dst.data())) << static_cast<double>(got);
    } else {
      EXPECT_EQ(got, c.out)
          << static_cast<double>(got) << " vs " << static_cast<double>(c.out);
      EXPECT_EQ(std::signbit(got), std::signbit(c.out));
    }
  }
}

TEST(ConvertTest, SixteenBitEncodings) {
  // Exact encodings for the cases where the value alone says too little.
  EXPECT_EQ(ConvertValue<Half>(65520.0f).bits, 0x7C00);
  EXPECT_EQ(ConvertValue<Half>(-65520.0f).bits, 0xFC00);
  EXPECT_EQ(ConvertValue<Half>(65519.99609375f).bits, 0x7BFF);
  EXPECT_EQ(ConvertValue<Half>(-0.0f).bits, 0x8000);
  EXPECT_EQ(ConvertValue<Half>(true).bits, 0x3C00);
  EXPECT_EQ(ConvertValue<BFloat16>(true).bits, 0x3F80);
  EXPECT_EQ(ConvertValue<Half>(int32_t{65520}).bits, 0x7C00);
  EXPECT_EQ(ConvertValue<BFloat16>(int32_t{16842753}).bits, 0x4B81);
  EXPECT_EQ(ConvertValue<Half>(1.0 + 0x1p-11 + 0x1p-40).bits, 0x3C01);
  // Double rounding would give 0x3C00: show the two paths differ.
  EXPECT_EQ(FloatToHalfBits(static_cast<float>(1.0 + 0x1p-11 + 0x1p-40)),
            0x3C00);
  // NaN: quiet, sign and top payload bits kept.
  EXPECT_EQ(ConvertValue<Half>(std::bit_cast<float>(0xFF800001u)).bits,
            0xFE00);  // Signalling, payload in low bits only: not Inf.
  EXPECT_EQ(
      ConvertValue<Half>(std::bit_cast<double>(0x7FF4000000000000ull)).bits,
      0x7F00);
  EXPECT_EQ(
      ConvertValue<BFloat16>(std::bit_cast<double>(0xFFF0000000000001ull)).bits,
      0xFFC0);
  EXPECT_EQ(
      std::bit_cast<uint32_t>(ConvertValue<float>(Half::FromBits(0x7C01))),
      0x7FC02000u);
}

// The rules are constexpr in host code.
static_assert(ConvertValue<int8_t>(300.7f) == 127);
static_assert(ConvertValue<uint8_t>(int32_t{300}) == 44);
static_assert(ConvertValue<Half>(1.0 + 0x1p-11 + 0x1p-40).bits == 0x3C01);
static_assert(ConvertValue<float>(BFloat16::FromBits(0x3F80)) == 1.0f);
static_assert(!ConvertValue<bool>(-0.0));

// ---- The device-compatible 16-bit rules against half.h, bit for bit.

TEST(ConvertRulesTest, SixteenBitToFloatMatchesHalfH) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    ASSERT_EQ(std::bit_cast<uint32_t>(convert_rules::HalfToFloat(bits)),
              std::bit_cast<uint32_t>(HalfBitsToFloat(bits)))
        << std::hex << b;
    ASSERT_EQ(std::bit_cast<uint32_t>(convert_rules::BFloat16ToFloat(bits)),
              std::bit_cast<uint32_t>(BFloat16BitsToFloat(bits)))
        << std::hex << b;
  }
}

void ExpectFloatRoundingMatchesHalfH(uint32_t x) {
  const float f = std::bit_cast<float>(x);
  ASSERT_EQ(convert_rules::RoundToNarrow<HalfFormat>(f), FloatToHalfBits(f))
      << std::hex << x;
  ASSERT_EQ(convert_rules::RoundToNarrow<BFloat16Format>(f),
            FloatToBFloat16Bits(f))
      << std::hex << x;
}

TEST(ConvertRulesTest, FloatToSixteenBitMatchesHalfH) {
  // Every sign, exponent and top-11 mantissa bits (which include the bits
  // kept and the rounding bit of every normal and subnormal result), with
  // the low 12 bits at the values that decide rounding, then random floats.
  constexpr uint32_t kLow[] = {0x000, 0x001, 0x7FF, 0x800, 0x801, 0xFFF};
  for (uint32_t high = 0; high < (1u << 20); ++high) {
    for (uint32_t low : kLow) {
      ExpectFloatRoundingMatchesHalfH((high << 12) | low);
    }
  }
  std::mt19937 rng(1);
  for (int i = 0; i < 1'000'000; ++i) ExpectFloatRoundingMatchesHalfH(rng());
}

// Doubles near every 16-bit value and midpoint, plus random ones.
std::vector<double> DoublesToRound(bool half, std::mt19937_64& rng) {
  std::vector<double> out = {0.0,
                             -0.0,
                             1e-300,
                             5e-324,
                             1e300,
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity()};
  const uint32_t inf = half ? 0x7C00 : 0x7F80;
  for (uint32_t b = 0; b < inf; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const double v = half ? HalfBitsToFloat(bits) : BFloat16BitsToFloat(bits);
    const uint16_t next_bits = static_cast<uint16_t>(b + 1);
    const double next = b + 1 == inf ? (half ? 65536.0 : std::ldexp(1.0, 128))
                        : half       ? HalfBitsToFloat(next_bits)
                                     : BFloat16BitsToFloat(next_bits);
    const double mid = (v + next) / 2;  // Exact in double.
    for (double x :
         {v, mid, std::nextafter(mid, 0.0), std::nextafter(mid, 1e308)}) {
      out.push_back(x);
      out.push_back(-x);
    }
  }
  // Random significands over the format's exponent range and beyond.
  const int lo = half ? -30 : -140;
  const int hi = half ? 20 : 130;
  for (int i = 0; i < 200'000; ++i) {
    const double m = 1.0 + static_cast<double>(rng() >> 12) * 0x1p-52;
    const int e = lo + static_cast<int>(rng() % (hi - lo));
    out.push_back((rng() & 1) ? std::ldexp(m, e) : -std::ldexp(m, e));
  }
  return out;
}

TEST(ConvertRulesTest, DoubleToSixteenBitRoundsOnce) {
  std::mt19937_64 rng(2);
  for (bool half : {true, false}) {
    for (double d : DoublesToRound(half, rng)) {
      const uint16_t got =
          half ? convert_rules::RoundToNarrow<HalfFormat>(d)
               : convert_rules::RoundToNarrow<BFloat16Format>(d);
      ASSERT_EQ(got, RefNarrow(d, half))
          << (half ? "half " : "bfloat16 ") << std::hexfloat << d;
    }
  }
  // NaN payloads: the top bits that fit, quiet bit set, sign kept.
  const double nan =
      std::bit_cast<double>(0xFFF8000000000000ull | (0x155ull << 42));
  EXPECT_EQ(convert_rules::RoundToNarrow<HalfFormat>(nan), 0xFF55);
}

TEST(ConvertRulesTest, IntegerToSixteenBitRoundsOnce) {
  std::vector<int64_t> values;
  for (int64_t v = -70000; v <= 70000; ++v) values.push_back(v);
  std::mt19937_64 rng(3);
  for (int i = 0; i < 200'000; ++i) {
    // Random magnitudes of every width, so every rounding position occurs.
    const int width = static_cast<int>(rng() % 63) + 1;
    const int64_t v = static_cast<int64_t>(rng() >> (64 - width));
    values.push_back((rng() & 1) ? v : -v);
  }
  values.push_back(std::numeric_limits<int64_t>::max());
  values.push_back(std::numeric_limits<int64_t>::min());
  for (int64_t v : values) {
    ASSERT_EQ(convert_rules::IntegerToNarrow<HalfFormat>(v),
              RefNarrow(static_cast<Real>(v), true))
        << v;
    ASSERT_EQ(convert_rules::IntegerToNarrow<BFloat16Format>(v),
              RefNarrow(static_cast<Real>(v), false))
        << v;
  }
}

// ---- All 16-bit patterns through float32 / float64 and back.

TEST(ConvertTest, SixteenBitRoundTrips) {
  std::vector<uint16_t> all(65536);
  for (uint32_t b = 0; b <= 0xFFFF; ++b) all[b] = static_cast<uint16_t>(b);
  const int64_t n = static_cast<int64_t>(all.size());
  for (DType narrow : {kF16, kBF16}) {
    const uint16_t quiet = narrow == kF16 ? 0x0200 : 0x0040;
    for (DType wide : {kF32, kF64}) {
      SCOPED_TRACE(testing::Message() << narrow << " <-> " << wide);
      std::vector<double> wide_values(all.size());  // Room for either.
      std::vector<uint16_t> back(all.size());
      ASSERT_TRUE(
          ConvertContiguous(all.data(), narrow, wide_values.data(), wide, n)
              .ok());
      ASSERT_TRUE(
          ConvertContiguous(wide_values.data(), wide, back.data(), narrow, n)
              .ok());
      for (uint32_t b = 0; b <= 0xFFFF; ++b) {
        const unsigned char* w =
            reinterpret_cast<const unsigned char*>(wide_values.data()) +
            b * ItemSize(wide);
        const float exact = narrow == kF16
                                ? HalfBitsToFloat(static_cast<uint16_t>(b))
                                : BFloat16BitsToFloat(static_cast<uint16_t>(b));
        if (wide == kF32) {
          ASSERT_EQ(Get<uint32_t>(w), std::bit_cast<uint32_t>(exact))
              << std::hex << b;
        } else if (!std::isnan(exact)) {
          ASSERT_EQ(Get<double>(w), static_cast<double>(exact))
              << std::hex << b;
        }
        const bool nan =
            IsNaNBits(narrow, reinterpret_cast<const unsigned char*>(&all[b]));
        ASSERT_EQ(back[b], nan ? (all[b] | quiet) : all[b]) << std::hex << b;
      }
    }
    // float16 <-> bfloat16 agree with the reference on every pattern.
    const DType other = narrow == kF16 ? kBF16 : kF16;
    std::vector<uint16_t> converted(all.size());
    ASSERT_TRUE(
        ConvertContiguous(all.data(), narrow, converted.data(), other, n).ok());
    for (uint32_t b = 0; b <= 0xFFFF; ++b) {
      const unsigned char* in = reinterpret_cast<const unsigned char*>(&all[b]);
      const Bytes expected = ByRules(Read(narrow, in), false, other);
      ASSERT_TRUE(Matches(other,
                          reinterpret_cast<const unsigned char*>(&converted[b]),
                          expected.data()))
          << std::hex << b;
    }
  }
}

// ---- The buffer API.

TEST(ConvertTest, ContiguousErrors) {
  float src[2] = {1, 2};
  int32_t dst[2] = {7, 7};
  absl::Status status =
      ConvertContiguous(src, static_cast<DType>(42), dst, kI32, 2);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      status.message(),
      "ConvertContiguous: src_type = 42 is not a DType (expected 0 to 9)");
  status = ConvertContiguous(src, kF32, dst, static_cast<DType>(10), 2);
  EXPECT_EQ(
      status.message(),
      "ConvertContiguous: dst_type = 10 is not a DType (expected 0 to 9)");
  status = ConvertContiguous(src, kF32, dst, kI32, -1);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "ConvertContiguous: count = -1 is negative");
  status = ConvertContiguous(nullptr, kF32, dst, kI32, 1);
  EXPECT_EQ(status.message(), "ConvertContiguous: src is null but count = 1");
  status = ConvertContiguous(src, kF32, nullptr, kI32, 1);
  EXPECT_EQ(status.message(), "ConvertContiguous: dst is null but count = 1");
  EXPECT_EQ(dst[0], 7);  // Nothing written on error.
  EXPECT_TRUE(ConvertContiguous(nullptr, kF32, nullptr, kI32, 0).ok());
}

TEST(ConvertTest, SameDTypeCopiesBytes) {
  const uint8_t bools[3] = {0, 2, 255};
  uint8_t out[3] = {};
  ASSERT_TRUE(ConvertContiguous(bools, kBool, out, kBool, 3).ok());
  EXPECT_EQ(std::vector<uint8_t>(out, out + 3),
            std::vector<uint8_t>(bools, bools + 3));
  const uint16_t signalling = 0x7C01;
  uint16_t copy = 0;
  ASSERT_TRUE(ConvertContiguous(&signalling, kF16, &copy, kF16, 1).ok());
  EXPECT_EQ(copy, 0x7C01);
}

TEST(ConvertTest, BoolBytesOtherThanOneAreTrue) {
  const uint8_t bools[4] = {0, 1, 2, 255};
  int32_t ints[4];
  float floats[4];
  uint8_t canonical[4];
  ASSERT_TRUE(ConvertContiguous(bools, kBool, ints, kI32, 4).ok());
  ASSERT_TRUE(ConvertContiguous(bools, kBool, floats, kF32, 4).ok());
  ASSERT_TRUE(ConvertContiguous(bools, kBool, canonical, kU8, 4).ok());
  EXPECT_EQ(std::vector<int32_t>(ints, ints + 4),
            std::vector<int32_t>({0, 1, 1, 1}));
  EXPECT_EQ(std::vector<float>(floats, floats + 4),
            std::vector<float>({0, 1, 1, 1}));
  EXPECT_EQ(std::vector<uint8_t>(canonical, canonical + 4),
            std::vector<uint8_t>({0, 1, 1, 1}));
}

TEST(ConvertTest, UnalignedBuffers) {
  // Elements at odd addresses, for every pair.
  const std::vector<Real> values = {1.5L, -2, 300, kNaN, 65520, 0.25L, 7};
  const int64_t n = static_cast<int64_t>(values.size());
  for (DType from : kAllDTypes) {
    const Bytes element_bytes = Realise(values, from);
    Bytes src(element_bytes.size() + 1);
    std::memcpy(src.data() + 1, element_bytes.data(), element_bytes.size());
    for (DType to : kAllDTypes) {
      Bytes aligned(n * ItemSize(to));
      Bytes unaligned(n * ItemSize(to) + 3);
      ASSERT_TRUE(
          ConvertContiguous(element_bytes.data(), from, aligned.data(), to, n)
              .ok());
      ASSERT_TRUE(
          ConvertContiguous(src.data() + 1, from, unaligned.data() + 3, to, n)
              .ok());
      EXPECT_EQ(
          0, std::memcmp(aligned.data(), unaligned.data() + 3, aligned.size()))
          << from << " -> " << to;
    }
  }
}

// ---- Strided conversion against element-by-element conversion.


void CheckStrided(const Layout& src_layout, int64_t src_numel,
                  const Layout& dst_layout, int64_t dst_numel, DType from,
                  DType to, std::mt19937& rng) {
  SCOPED_TRACE(testing::Message() << from << " " << src_layout << " -> " << to
                                  << " " << dst_layout);
  const std::vector<Real> pool = InterestingValues();
  std::vector<Real> values(src_numel);
  for (Real& v : values) v = pool[rng() % pool.size()];
  const Bytes src = Realise(values, from);
  Bytes dst(dst_numel * ItemSize(to));
  for (unsigned char& b : dst) b = static_cast<unsigned char>(rng());
  Bytes expected = dst;
  const std::vector<int64_t> from_at = BaseIndices(src_layout);
  const std::vector<int64_t> to_at = BaseIndices(dst_layout);
  for (size_t i = 0; i < from_at.size(); ++i) {
    ASSERT_TRUE(ConvertContiguous(&src[from_at[i] * ItemSize(from)], from,
                                  &expected[to_at[i] * ItemSize(to)], to, 1)
                    .ok());
  }
  ASSERT_TRUE(
      ConvertStrided(src.data(), src_layout, from, dst.data(), dst_layout, to)
          .ok());
  EXPECT_EQ(dst, expected);
}

TEST(ConvertTest, StridedMatchesElementwise) {
  std::mt19937 rng(5);
  const Layout base = *Layout::Contiguous({4, 5, 6}, 2);  // 122 elements.
  const std::vector<Layout> sources = {
      base,
      *base.Permute({2, 0, 1}),
      *base.Slice(2, 1, 6, 2)->Transpose(0, 1),
      *base.Select(1, 3)->Unsqueeze(0)->Expand({3, 4, 6}),
      *base.Slice(0, 1, 3)->Permute({1, 2, 0}),
      *Layout::Contiguous({}, 5),
      *base.Slice(1, 2, 2),
  };
  for (const Layout& src : sources) {
    // A contiguous destination, and a transposed one.
    const Layout contiguous = *Layout::Contiguous(src.shape(), 1);
    std::vector<int> reverse(src.rank());
    for (int i = 0; i < src.rank(); ++i) reverse[i] = src.rank() - 1 - i;
    std::vector<int64_t> reversed_shape(src.shape().rbegin(),
                                        src.shape().rend());
    const Layout transposed =
        *Layout::Contiguous(reversed_shape, 3)->Permute(reverse);
    for (DType from : kAllDTypes) {
      for (DType to : kAllDTypes) {
        CheckStrided(src, 122, contiguous, contiguous.numel() + 1, from, to,
                     rng);
        CheckStrided(src, 122, transposed, transposed.numel() + 3, from, to,
                     rng);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Conversions of 2 MiB and more shared among threads write the same bytes as on one
// thread: contiguous (a count that is no multiple of the parts' 64-item alignment),
// transposed, and a batch whose outermost loop has three items.
TEST(ConvertTest, SharedAmongThreadsMatchesOneThread) {
  std::mt19937 rng(11);
  constexpr int64_t kCount = 1'000'003;
  const std::vector<Layout> views = {
      *Layout::Contiguous({kCount}),
      *Layout::Contiguous({1031, 1033})->Transpose(0, 1),
      *Layout::Contiguous({3, 700, 500})->Permute({0, 2, 1}),
  };
  const std::pair<DType, DType> pairs[] = {{DType::kFloat32, DType::kBFloat16},
                                           {DType::kFloat16, DType::kFloat32},
                                           {DType::kFloat64, DType::kInt32},
                                           {DType::kUInt8, DType::kFloat32}};
  for (const Layout& view : views) {
    const Layout dst = *Layout::Contiguous(view.shape());
    for (const auto& [from, to] : pairs) {
      std::vector<uint8_t> src(static_cast<size_t>(view.numel()) * ItemSize(from));
      for (uint8_t& b : src) b = static_cast<uint8_t>(rng());
      std::vector<uint8_t> one(static_cast<size_t>(dst.numel()) * ItemSize(to));
      ASSERT_TRUE(ConvertStrided(src.data(), view, from, one.data(), dst, to).ok());
      for (const int threads : {4, kAllCores}) {
        std::vector<uint8_t> shared(one.size(), 0xAB);
        ASSERT_TRUE(
            ConvertStrided(src.data(), view, from, shared.data(), dst, to, threads).ok());
        EXPECT_TRUE(shared == one) << DTypeName(from) << " -> " << DTypeName(to) << ", "
                                   << view.ToString() << ", " << threads << " threads";
        if (view.is_contiguous()) {
          std::vector<uint8_t> flat(one.size(), 0xCD);
          ASSERT_TRUE(
              ConvertContiguous(src.data(), from, flat.data(), to, kCount, threads).ok());
          EXPECT_TRUE(flat == one) << DTypeName(from) << " -> " << DTypeName(to);
        }
      }
    }
  }
}

TEST(ConvertTest, StridedErrors) {
  const Layout a = *Layout::Contiguous({2, 3});
  const Layout b = *Layout::Contiguous({3, 2});
  float src[6] = {};
  double dst[6] = {};
  absl::Status status = ConvertStrided(src, a, kF32, dst, b, kF64);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "ConvertStrided: source shape [2, 3] differs from destination "
            "shape [3, 2]");
  status = ConvertStrided(src, a, static_cast<DType>(255), dst, a, kF64);
  EXPECT_EQ(status.message(),
            "ConvertStrided: src_type = 255 is not a DType (expected 0 to 9)");
  const Layout broadcast = *Layout::Contiguous({3})->Expand({2, 3});
  for (DType to : {kF64, kF32}) {  // The same-dtype path checks it too.
    status = ConvertStrided(src, a, kF32, dst, broadcast, to);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find(
                  "ConvertStrided: destination dim 0 has stride 0 and size 2"),
              absl::string_view::npos)
        << status;
  }
  // Empty views convert nothing, even through null buffers.
  const Layout empty = *Layout::Contiguous({0, 3});
  EXPECT_TRUE(ConvertStrided(nullptr, empty, kF32, nullptr, empty, kI8).ok());
}

}  // namespace
}  // namespace genesis::storage
