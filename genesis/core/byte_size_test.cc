#include "genesis/core/byte_size.h"

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace genesis {
namespace {

constexpr uint64_t kKiB = uint64_t{1} << 10;
constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kTiB = uint64_t{1} << 40;
constexpr uint64_t kPiB = uint64_t{1} << 50;

uint64_t Parsed(std::string_view text) {
  absl::StatusOr<uint64_t> bytes = ParseByteSize(text);
  EXPECT_TRUE(bytes.ok()) << "'" << text << "': " << bytes.status();
  return bytes.value_or(~uint64_t{0});
}

// The error message for `text`, which must fail with InvalidArgument.
std::string ErrorOf(std::string_view text) {
  absl::StatusOr<uint64_t> bytes = ParseByteSize(text);
  EXPECT_FALSE(bytes.ok()) << "'" << text << "' parsed as " << *bytes;
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument) << bytes.status();
  return std::string(bytes.status().message());
}

TEST(ParseByteSizeTest, PlainBytes) {
  EXPECT_EQ(Parsed("0"), 0u);
  EXPECT_EQ(Parsed("4096"), 4096u);
  EXPECT_EQ(Parsed("17B"), 17u);
  EXPECT_EQ(Parsed("17 b"), 17u);
  EXPECT_EQ(Parsed("007"), 7u);
}

TEST(ParseByteSizeTest, DecimalUnits) {
  EXPECT_EQ(Parsed("2GB"), 2'000'000'000u);
  EXPECT_EQ(Parsed("1 TB"), 1'000'000'000'000u);
  EXPECT_EQ(Parsed("3kB"), 3'000u);
  EXPECT_EQ(Parsed("3KB"), 3'000u);
  EXPECT_EQ(Parsed("5mb"), 5'000'000u);
  EXPECT_EQ(Parsed("2PB"), 2'000'000'000'000'000u);
}

TEST(ParseByteSizeTest, BinaryUnits) {
  EXPECT_EQ(Parsed("512MiB"), 512 * kMiB);
  EXPECT_EQ(Parsed("1KiB"), kKiB);
  EXPECT_EQ(Parsed("3 gib"), 3 * kGiB);
  EXPECT_EQ(Parsed("2TIB"), 2 * kTiB);
  EXPECT_EQ(Parsed("1PiB"), kPiB);
}

TEST(ParseByteSizeTest, SingleLettersAreBinary) {
  EXPECT_EQ(Parsed("64k"), 64 * kKiB);
  EXPECT_EQ(Parsed("64K"), 64 * kKiB);
  EXPECT_EQ(Parsed("256m"), 256 * kMiB);
  EXPECT_EQ(Parsed("2G"), 2 * kGiB);
  EXPECT_EQ(Parsed("1T"), kTiB);
  EXPECT_EQ(Parsed("1p"), kPiB);
}

TEST(ParseByteSizeTest, WhitespaceBetweenAndAround) {
  EXPECT_EQ(Parsed("1.5 GiB"), 3 * kGiB / 2);
  EXPECT_EQ(Parsed("1.5\tGiB"), 3 * kGiB / 2);
  EXPECT_EQ(Parsed("  8   MiB  "), 8 * kMiB);
  EXPECT_EQ(Parsed("\n42\n"), 42u);
}

TEST(ParseByteSizeTest, FractionsRoundDownToWholeBytes) {
  EXPECT_EQ(Parsed("1.5"), 1u);
  EXPECT_EQ(Parsed("0.999"), 0u);
  EXPECT_EQ(Parsed("1.5KiB"), 1536u);
  EXPECT_EQ(Parsed("0.1KiB"), 102u);  // 102.4
  EXPECT_EQ(Parsed("0.5GB"), 500'000'000u);
  EXPECT_EQ(Parsed("0.0000000001GB"), 0u);
  EXPECT_EQ(Parsed("0.000000001GB"), 1u);
  // 1/1024 KiB is exactly one byte; a little less is zero, whatever the digit count.
  EXPECT_EQ(Parsed("0.0009765625KiB"), 1u);
  EXPECT_EQ(Parsed("0.000976562499999999999999999999999KiB"), 0u);
  EXPECT_EQ(Parsed("1.99999999999999999999999999999999999999999"), 1u);
  EXPECT_EQ(Parsed("2.50 MiB"), 5 * kMiB / 2);
}

TEST(ParseByteSizeTest, LargestValues) {
  EXPECT_EQ(Parsed("18446744073709551615"), ~uint64_t{0});
  // (16384 - 10^-15) PiB = 2^64 - 1.13: rounded down to 2^64 - 2.
  EXPECT_EQ(Parsed("16383.999999999999999PiB"), ~uint64_t{0} - 1);
  EXPECT_EQ(Parsed("17179869183GiB"), 17179869183 * kGiB);
  EXPECT_EQ(Parsed("18446744073709551615.9"), ~uint64_t{0});
}

TEST(ParseByteSizeTest, Overflow) {
  EXPECT_NE(ErrorOf("18446744073709551616").find("2^64 - 1"), std::string::npos);
  ErrorOf("16384PiB");
  ErrorOf("17179869184GiB");
  ErrorOf("99999999999999999999999999999");
  ErrorOf("18446744073709551615.5KiB");
}

TEST(ParseByteSizeTest, ErrorsQuoteTheInputAndSayWhy) {
  EXPECT_NE(ErrorOf("").find("empty"), std::string::npos);
  EXPECT_NE(ErrorOf("   ").find("empty"), std::string::npos);
  EXPECT_NE(ErrorOf("-1").find("negative"), std::string::npos);
  EXPECT_NE(ErrorOf("-1GiB").find("'-1GiB'"), std::string::npos);
  EXPECT_NE(ErrorOf("nan").find("finite"), std::string::npos);
  EXPECT_NE(ErrorOf("NaN GB").find("finite"), std::string::npos);
  EXPECT_NE(ErrorOf("inf").find("finite"), std::string::npos);
  const std::string unknown = ErrorOf("2GBx");
  EXPECT_NE(unknown.find("'2GBx'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("unknown unit 'GBx'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("KiB"), std::string::npos) << unknown;
  EXPECT_NE(ErrorOf("GB").find("expected a number"), std::string::npos);
  EXPECT_NE(ErrorOf("1.2.3").find("unexpected '.3'"), std::string::npos);
  EXPECT_NE(ErrorOf(".5G").find("before '.'"), std::string::npos);
  EXPECT_NE(ErrorOf("5.G").find("after '.'"), std::string::npos);
  ErrorOf("+5");
  ErrorOf("1e9");
  ErrorOf("0x10");
  ErrorOf("1,5GiB");
  ErrorOf("1 2");
  ErrorOf("12 MiB B");
  ErrorOf("2 EiB");
  ErrorOf("1Gi");
  ErrorOf("1bytes");
}

TEST(ParseByteSizeTest, ControlCharactersAreEscapedInMessages) {
  const std::string message = ErrorOf("1\x01GiB");
  EXPECT_EQ(message.find('\x01'), std::string::npos) << message;
  EXPECT_NE(message.find("\\x01"), std::string::npos) << message;
}

// The cases of the former genesis::cli::FormatBytes (tools/genesis), unchanged.
TEST(FormatByteSizeTest, UsesBinaryUnits) {
  EXPECT_EQ(FormatByteSize(0), "0 B");
  EXPECT_EQ(FormatByteSize(1023), "1023 B");
  EXPECT_EQ(FormatByteSize(1024), "1.0 KiB");
  EXPECT_EQ(FormatByteSize(512ull << 20), "512.0 MiB");
  EXPECT_EQ(FormatByteSize(150'754'820'096ull), "140.4 GiB");
  EXPECT_EQ(FormatByteSize(3ull << 50), "3.0 PiB");
  EXPECT_EQ(FormatByteSize(~0ull), "16384.0 PiB");
}

TEST(FormatByteSizeTest, OneDecimal) {
  EXPECT_EQ(FormatByteSize(17), "17 B");
  EXPECT_EQ(FormatByteSize(1536), "1.5 KiB");
  EXPECT_EQ(FormatByteSize(150'110'011'392ull), "139.8 GiB");
}

TEST(FormatByteSizeExactTest, LargestExactUnit) {
  EXPECT_EQ(FormatByteSizeExact(0), "0");
  EXPECT_EQ(FormatByteSizeExact(1000), "1000");
  EXPECT_EQ(FormatByteSizeExact(1024), "1KiB");
  EXPECT_EQ(FormatByteSizeExact(1536), "1536");
  EXPECT_EQ(FormatByteSizeExact(3 * kKiB), "3KiB");
  EXPECT_EQ(FormatByteSizeExact(256 * kMiB), "256MiB");
  EXPECT_EQ(FormatByteSizeExact(1536 * kMiB), "1536MiB");
  EXPECT_EQ(FormatByteSizeExact(3 * kGiB), "3GiB");
  EXPECT_EQ(FormatByteSizeExact(5 * kPiB), "5PiB");
  EXPECT_EQ(FormatByteSizeExact(~uint64_t{0}), "18446744073709551615");
}

TEST(FormatByteSizeExactTest, ParsesBack) {
  for (uint64_t bytes : {uint64_t{0}, uint64_t{1}, uint64_t{512}, uint64_t{1536},
                         20 * kMiB, 3 * kGiB + kKiB, 7 * kTiB, 16383 * kPiB, ~uint64_t{0},
                         ~uint64_t{0} - kPiB + 1}) {
    EXPECT_EQ(Parsed(FormatByteSizeExact(bytes)), bytes) << FormatByteSizeExact(bytes);
  }
}

}  // namespace
}  // namespace genesis
