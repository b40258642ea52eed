#include "genesis/storage/kernels/fill.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/core/dtype.h"
#include "genesis/core/half.h"
#include "genesis/storage/convert_rules.h"
#include "genesis/storage/kernels/dtype_dispatch.h"
#include "gtest/gtest.h"

namespace genesis::storage::kernels {
namespace {

using Bytes = std::vector<uint8_t>;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

bool Contains(const absl::Status& status, const std::string& needle) {
  return std::string(status.message()).find(needle) != std::string::npos;
}

template <typename T>
Bytes BytesOf(T value) {
  Bytes bytes(sizeof(T));
  std::memcpy(bytes.data(), &value, sizeof(T));
  return bytes;
}

// ---- ScalarPattern.

TEST(ScalarPatternTest, IsTheConvertedValueForEveryDType) {
  for (DType dtype : kAllDTypes) {
    for (double value : {0.0, -0.0, 1.0, -1.5, 2.5, 300.7, 65520.0, 1e10,
                         -1e300, 1e-40, kInf, -kInf, kNaN}) {
      absl::StatusOr<ElementBytes> pattern = ScalarPattern(value, dtype);
      ASSERT_TRUE(pattern.ok()) << pattern.status();
      const size_t item = ItemSize(dtype);
      Bytes want;
      ASSERT_TRUE(
          VisitDType(dtype, "test", "dtype", [&]<typename T>(TypeTag<T>) {
            want = BytesOf(ConvertValue<T>(value));
            return absl::OkStatus();
          }).ok());
      EXPECT_EQ(Bytes(pattern->begin(), pattern->begin() + item), want)
          << DTypeName(dtype) << " " << value;
      for (size_t b = item; b < pattern->size(); ++b) {
        EXPECT_EQ((*pattern)[b], 0) << DTypeName(dtype) << " byte " << b;
      }
    }
  }
}

TEST(ScalarPatternTest, KnownEncodings) {
  const auto first_bytes = [](double value, DType dtype) {
    const ElementBytes bytes = ScalarPattern(value, dtype).value();
    return Bytes(bytes.begin(), bytes.begin() + ItemSize(dtype));
  };
  EXPECT_EQ(first_bytes(1.0, DType::kBFloat16), (Bytes{0x80, 0x3F}));
  EXPECT_EQ(first_bytes(1.0, DType::kFloat16), (Bytes{0x00, 0x3C}));
  EXPECT_EQ(first_bytes(65520.0, DType::kFloat16), (Bytes{0x00, 0x7C}));
  EXPECT_EQ(first_bytes(-1.0, DType::kUInt8), (Bytes{0}));
  EXPECT_EQ(first_bytes(300.7, DType::kInt8), (Bytes{127}));
  EXPECT_EQ(first_bytes(kNaN, DType::kInt32), (Bytes{0, 0, 0, 0}));
  EXPECT_EQ(first_bytes(0.5, DType::kBool), (Bytes{1}));
  EXPECT_EQ(first_bytes(-0.0, DType::kBool), (Bytes{0}));
  EXPECT_EQ(first_bytes(-2.0, DType::kInt16), (Bytes{0xFE, 0xFF}));
  EXPECT_EQ(first_bytes(1.0, DType::kFloat64), BytesOf(1.0));
}

TEST(ScalarPatternTest, RejectsAnInvalidDType) {
  const absl::StatusOr<ElementBytes> pattern =
      ScalarPattern(1.0, static_cast<DType>(10));
  ASSERT_FALSE(pattern.ok());
  EXPECT_EQ(pattern.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      Contains(pattern.status(), "ScalarPattern: dtype = 10 is not a DType"))
      << pattern.status();
}

// ---- FillHost.

TEST(FillHostTest, RepeatsThePatternForEveryElementSizeAndAlignment) {
  const uint8_t pattern[8] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88};
  for (size_t size : {1, 2, 4, 8}) {
    for (size_t misalign = 0; misalign < 8; ++misalign) {
      for (int64_t numel : {0, 1, 2, 3, 15, 16, 17, 100}) {
        Bytes buffer(misalign + numel * size + 8, 0xA5);
        ASSERT_TRUE(
            FillHost(buffer.data() + misalign, numel, pattern, size).ok());
        for (size_t b = 0; b < buffer.size(); ++b) {
          const bool inside =
              b >= misalign && b < misalign + static_cast<size_t>(numel) * size;
          const uint8_t want = inside ? pattern[(b - misalign) % size] : 0xA5;
          ASSERT_EQ(buffer[b], want)
              << "size " << size << " misalign " << misalign << " numel "
              << numel << " byte " << b;
        }
      }
    }
  }
}

TEST(FillHostTest, FullOfEveryDType) {
  for (DType dtype : kAllDTypes) {
    const ElementBytes pattern = ScalarPattern(-2.75, dtype).value();
    const size_t item = ItemSize(dtype);
    Bytes buffer(37 * item);
    ASSERT_TRUE(FillHost(buffer.data(), 37, pattern.data(), item).ok());
    for (size_t i = 0; i < 37; ++i) {
      EXPECT_EQ(std::memcmp(buffer.data() + i * item, pattern.data(), item), 0)
          << DTypeName(dtype) << " element " << i;
    }
  }
}

TEST(FillHostTest, RejectsBadArguments) {
  const uint8_t pattern[8] = {};
  uint8_t out[64];
  struct Case {
    void* dst;
    int64_t numel;
    const void* pattern;
    size_t size;
    std::string message;
  };
  const Case cases[] = {
      {out, -1, pattern, 4, "FillHost: numel = -1 is negative"},
      {out, 4, pattern, 3, "FillHost: elem_size = 3 is not 1, 2, 4 or 8"},
      {out, 4, pattern, 0, "FillHost: elem_size = 0 is not 1, 2, 4 or 8"},
      {out, 4, pattern, 16, "FillHost: elem_size = 16 is not 1, 2, 4 or 8"},
      {nullptr, 4, pattern, 4, "FillHost: dst is null but numel = 4"},
      {out, 4, nullptr, 4, "FillHost: pattern is null but numel = 4"},
      {out, std::numeric_limits<int64_t>::max() / 4, pattern, 8,
       "elements of 8 bytes overflow int64_t"},
  };
  for (const Case& c : cases) {
    std::memset(out, 0x5A, sizeof(out));
    const absl::Status status = FillHost(c.dst, c.numel, c.pattern, c.size);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_TRUE(Contains(status, c.message)) << status;
    for (uint8_t byte : out)
      ASSERT_EQ(byte, 0x5A) << "wrote despite " << status;
  }
}

TEST(FillHostTest, NothingToWriteNeedsNoBuffer) {
  EXPECT_TRUE(FillHost(nullptr, 0, nullptr, 4).ok());
}

// ---- ArangeHost.

TEST(ArangeHostTest, FollowsTheRuleForEveryDType) {
  const double cases[][2] = {{0, 1},    {-3.5, 0.25}, {1e9, 12345.678},
                             {0, 1e-3}, {100, -0.7},  {250, 1},
                             {kNaN, 1}, {0, kInf},    {-1, 1.0 / 3}};
  for (DType dtype : kAllDTypes) {
    for (const auto& [start, step] : cases) {
      const int64_t n = 300;
      Bytes out(n * ItemSize(dtype));
      ASSERT_TRUE(ArangeHost(out.data(), n, start, step, dtype).ok());
      ASSERT_TRUE(
          VisitDType(dtype, "test", "dtype", [&]<typename T>(TypeTag<T>) {
            for (int64_t i = 0; i < n; ++i) {
              double value = std::fma(static_cast<double>(i), step, start);
              if (std::isnan(value)) value = kNaN;
              const Bytes want = BytesOf(ConvertValue<T>(value));
              EXPECT_EQ(Bytes(out.begin() + i * sizeof(T),
                              out.begin() + (i + 1) * sizeof(T)),
                        want)
                  << DTypeName(dtype) << " start " << start << " step " << step
                  << " element " << i;
            }
            return absl::OkStatus();
          }).ok());
    }
  }
}

template <typename T>
std::vector<T> Arange(int64_t n, double start, double step) {
  std::vector<T> out(n);
  EXPECT_TRUE(ArangeHost(out.data(), n, start, step, DTypeOf<T>()).ok());
  return out;
}

TEST(ArangeHostTest, KnownSequences) {
  EXPECT_EQ(Arange<int32_t>(5, 0, 1), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(Arange<uint8_t>(8, 250, 1),
            (std::vector<uint8_t>{250, 251, 252, 253, 254, 255, 255, 255}));
  EXPECT_EQ(Arange<int8_t>(4, 1.5, -1),  // 1.5, 0.5, -0.5, -1.5: truncated.
            (std::vector<int8_t>{1, 0, 0, -1}));
  const std::vector<bool> bools = [] {
    std::vector<uint8_t> bytes(4);
    EXPECT_TRUE(ArangeHost(bytes.data(), 4, 0, 1, DType::kBool).ok());
    return std::vector<bool>(bytes.begin(), bytes.end());
  }();
  EXPECT_EQ(bools, (std::vector<bool>{false, true, true, true}));
  std::vector<float> halves;
  for (Half h : Arange<Half>(5, -1, 0.25)) halves.push_back(float(h));
  EXPECT_EQ(halves, (std::vector<float>{-1, -0.75, -0.5, -0.25, 0}));
  EXPECT_EQ(Arange<int64_t>(2, 9007199254740992.0, 2)[1], 9007199254740994);
}

TEST(ArangeHostTest, RoundsOnceAndFixesNaN) {
  // 3 * (1/3) is 1 - 2^-54 exactly; as a separate product it would round to
  // 1 and the sum to 0.
  EXPECT_EQ(Arange<double>(4, -1, 1.0 / 3)[3], -0x1p-54);
  uint32_t bits;
  const float nan = Arange<float>(1, -std::nan("0x123"), 1)[0];
  std::memcpy(&bits, &nan, sizeof(bits));
  EXPECT_EQ(bits, 0x7FC00000u);
  EXPECT_EQ(Arange<int32_t>(1, kNaN, 1)[0], 0);
}

TEST(ArangeHostTest, RejectsBadArguments) {
  uint8_t out[16];
  absl::Status status = ArangeHost(out, -2, 0, 1, DType::kInt32);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status, "ArangeHost: numel = -2 is negative")) << status;
  status = ArangeHost(out, 2, 0, 1, static_cast<DType>(200));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status, "ArangeHost: dtype = 200 is not a DType"))
      << status;
  status = ArangeHost(nullptr, 2, 0, 1, DType::kInt32);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status, "ArangeHost: dst is null but numel = 2"))
      << status;
  EXPECT_TRUE(ArangeHost(nullptr, 0, 0, 1, DType::kInt32).ok());
}

}  // namespace
}  // namespace genesis::storage::kernels
