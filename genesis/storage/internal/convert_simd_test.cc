// The vectorised conversions against the scalar reference (genesis/core/half.h), bit for
// bit, on every instruction set this machine runs: every float16 and bfloat16 encoding,
// float32 values around every rounding boundary and a sweep of the whole range, specials
// (NaNs with payloads, infinities, subnormals, values beyond float16's range), and every
// length around the vector width (tails, unaligned buffers).
#include "genesis/storage/internal/convert_simd.h"

#include <bit>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "genesis/core/half.h"
#include "gtest/gtest.h"

namespace genesis::storage::simd {
namespace {

std::vector<float> Float32Sweep() {
  std::vector<float> values;
  // Every float16 and bfloat16 rounding boundary: each 16-bit encoding's float, the
  // midpoints next to it and one ulp either side.
  for (uint32_t top = 0; top < 0x10000u; ++top) {
    const uint32_t base = top << 16;
    for (uint32_t low : {0x0000u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu, 0x0001u}) {
      values.push_back(std::bit_cast<float>(base | low));
    }
  }
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = HalfBitsToFloat(static_cast<uint16_t>(h));
    const uint32_t b = std::bit_cast<uint32_t>(f);
    for (uint32_t d : {0u, 1u, 0xFFFu, 0x1000u, 0x1001u}) {
      values.push_back(std::bit_cast<float>(b + d));
      values.push_back(std::bit_cast<float>(b - d));
    }
  }
  std::mt19937 random(7);
  for (int i = 0; i < 1 << 20; ++i) values.push_back(std::bit_cast<float>(static_cast<uint32_t>(random())));
  for (uint32_t bits : {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7F800001u, 0xFFFFFFFFu,
                        0x7FBFFFFFu, 0x477FF000u, 0x477FEFFFu, 0x33000000u, 0x33000001u,
                        0x38800000u, 0x387FFFFFu, 0x00000001u, 0x80000001u, 0x7F7FFFFFu}) {
    values.push_back(std::bit_cast<float>(bits));
  }
  return values;
}

class ConvertSimdTest : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override { ForceTarget(GetParam()); }
  void TearDown() override { ForceTarget(0); }
};

TEST_P(ConvertSimdTest, FloatToBFloat16AndHalfMatchTheScalarRounding) {
  ASSERT_EQ(CurrentTarget(), GetParam());
  const std::vector<float> in = Float32Sweep();
  std::vector<uint16_t> bf(in.size()), h(in.size());
  FloatToBFloat16(in.data(), bf.data(), in.size());
  FloatToHalf(in.data(), h.data(), in.size());
  int bad = 0;
  for (size_t i = 0; i < in.size() && bad < 10; ++i) {
    const uint32_t bits = std::bit_cast<uint32_t>(in[i]);
    if (bf[i] != FloatToBFloat16Bits(in[i])) {
      ADD_FAILURE() << "bfloat16 of 0x" << std::hex << bits << ": 0x" << bf[i] << ", expected 0x"
                    << FloatToBFloat16Bits(in[i]);
      ++bad;
    }
    if (h[i] != FloatToHalfBits(in[i])) {
      ADD_FAILURE() << "float16 of 0x" << std::hex << bits << ": 0x" << h[i] << ", expected 0x"
                    << FloatToHalfBits(in[i]);
      ++bad;
    }
  }
}

TEST_P(ConvertSimdTest, EverySixteenBitEncodingWidensExactly) {
  std::vector<uint16_t> in(0x10000);
  for (uint32_t i = 0; i < 0x10000u; ++i) in[i] = static_cast<uint16_t>(i);
  std::vector<float> from_bf(in.size()), from_h(in.size());
  BFloat16ToFloat(in.data(), from_bf.data(), in.size());
  HalfToFloat(in.data(), from_h.data(), in.size());
  int bad = 0;
  for (uint32_t i = 0; i < 0x10000u && bad < 10; ++i) {
    const uint16_t b = static_cast<uint16_t>(i);
    if (std::bit_cast<uint32_t>(from_bf[i]) != std::bit_cast<uint32_t>(BFloat16BitsToFloat(b))) {
      ADD_FAILURE() << "bfloat16 0x" << std::hex << i;
      ++bad;
    }
    if (std::bit_cast<uint32_t>(from_h[i]) != std::bit_cast<uint32_t>(HalfBitsToFloat(b))) {
      ADD_FAILURE() << "float16 0x" << std::hex << i << ": 0x"
                    << std::bit_cast<uint32_t>(from_h[i]) << ", expected 0x"
                    << std::bit_cast<uint32_t>(HalfBitsToFloat(b));
      ++bad;
    }
  }
}

TEST_P(ConvertSimdTest, EveryLengthAndOffsetIsHandled) {
  // Tails shorter than a vector, and buffers that start one element off alignment.
  std::vector<float> in(200);
  for (size_t i = 0; i < in.size(); ++i) in[i] = 0.1f * static_cast<float>(i) - 7.3f;
  for (size_t offset : {0u, 1u}) {
    for (size_t n = 0; n + offset <= 130; ++n) {
      std::vector<uint16_t> out(n + 2, 0xABCD);
      FloatToHalf(in.data() + offset, out.data() + 1, n);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i + 1], FloatToHalfBits(in[offset + i]));
      EXPECT_EQ(out[0], 0xABCD);  // Nothing written outside.
      EXPECT_EQ(out[n + 1], 0xABCD);
      std::vector<float> back(n + 2, -1.0f);
      HalfToFloat(out.data() + 1, back.data() + 1, n);
      EXPECT_EQ(back[0], -1.0f);
      EXPECT_EQ(back[n + 1], -1.0f);
    }
  }
}

TEST_P(ConvertSimdTest, BigConversionsStreamAlignedAndMatchTheScalarOnes) {
  // Outputs of kStreamBytes and more go through non-temporal stores after a head of
  // items up to the first aligned vector: destinations one item off alignment, and one
  // byte off (not streamed), around a tail.
  const size_t n = kStreamBytes / sizeof(uint16_t) + 45;
  std::vector<float> in(n);
  std::mt19937 random(11);
  for (float& f : in) f = std::bit_cast<float>(static_cast<uint32_t>(random()));
  for (size_t byte_offset : {size_t{0}, sizeof(uint16_t), size_t{1}}) {
    SCOPED_TRACE(byte_offset);
    std::vector<char> narrow(n * sizeof(uint16_t) + 8, '\x5A');
    std::vector<char> wide(n * sizeof(float) + 8, '\x5A');
    // Narrows with `narrow_fn`, widens back with `widen_fn`; both bit for bit against
    // the scalar `narrow_ref` and `widen_ref`.
    auto round_trip = [&](auto narrow_fn, auto widen_fn, auto narrow_ref, auto widen_ref,
                          const char* name) {
      auto* const h = reinterpret_cast<uint16_t*>(narrow.data() + byte_offset);
      auto* const f = reinterpret_cast<float*>(wide.data() + byte_offset);
      narrow_fn(in.data(), h, n);
      widen_fn(h, f, n);
      for (size_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, reinterpret_cast<const char*>(h) + i * 2, 2);
        ASSERT_EQ(b, narrow_ref(in[i])) << name << " " << i;
        float back;
        std::memcpy(&back, reinterpret_cast<const char*>(f) + i * 4, 4);
        ASSERT_EQ(std::bit_cast<uint32_t>(back), std::bit_cast<uint32_t>(widen_ref(b)))
            << name << " " << i;
      }
    };
    round_trip(FloatToBFloat16, BFloat16ToFloat, FloatToBFloat16Bits, BFloat16BitsToFloat,
               "bfloat16");
    round_trip(FloatToHalf, HalfToFloat, FloatToHalfBits, HalfBitsToFloat, "float16");
    // Nothing written past the end.
    for (size_t i = byte_offset + n * sizeof(uint16_t); i < narrow.size(); ++i) {
      ASSERT_EQ(narrow[i], '\x5A');
    }
    for (size_t i = byte_offset + n * sizeof(float); i < wide.size(); ++i) {
      ASSERT_EQ(wide[i], '\x5A');
    }
  }
}

std::vector<int64_t> Targets() { return AvailableTargets(); }

INSTANTIATE_TEST_SUITE_P(EveryTargetOfThisCpu, ConvertSimdTest, ::testing::ValuesIn(Targets()),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           std::string name = TargetName(info.param);
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

TEST(ConvertSimdTargetsTest, TheBestTargetIsUsedAndTheScalarOneIsAmongThem) {
  const std::vector<int64_t> targets = AvailableTargets();
  ASSERT_FALSE(targets.empty());
  EXPECT_EQ(CurrentTarget(), targets.front());
  std::string names;
  for (int64_t t : targets) names += TargetName(t) + " ";
  RecordProperty("targets", names);
}

}  // namespace
}  // namespace genesis::storage::simd
