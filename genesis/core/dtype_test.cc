#include "genesis/core/dtype.h"

#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/core/half.h"
#include "gtest/gtest.h"

namespace genesis {
namespace {

// Passes if `status`'s message contains `needle`; on failure shows both.
::testing::AssertionResult MessageContains(const absl::Status& status,
                                           std::string_view needle) {
  const std::string message(status.message());
  if (message.find(needle) != std::string::npos) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "message \"" << message << "\" does not contain \"" << needle
         << "\"";
}

struct Expected {
  DType dtype;
  std::string_view name;
  size_t size;
  bool floating;
  bool integer;
  bool is_signed;
};

// Written out independently of the implementation's switch statements.
constexpr Expected kExpected[] = {
    {DType::kBool, "bool", 1, false, false, false},
    {DType::kUInt8, "uint8", 1, false, true, false},
    {DType::kInt8, "int8", 1, false, true, true},
    {DType::kInt16, "int16", 2, false, true, true},
    {DType::kInt32, "int32", 4, false, true, true},
    {DType::kInt64, "int64", 8, false, true, true},
    {DType::kFloat16, "float16", 2, true, false, true},
    {DType::kBFloat16, "bfloat16", 2, true, false, true},
    {DType::kFloat32, "float32", 4, true, false, true},
    {DType::kFloat64, "float64", 8, true, false, true},
};

TEST(DTypeTest, AllDTypesIsEveryEnumeratorInOrder) {
  ASSERT_EQ(kAllDTypes.size(), std::size(kExpected));
  for (size_t i = 0; i < kAllDTypes.size(); ++i) {
    EXPECT_EQ(kAllDTypes[i], kExpected[i].dtype);
    EXPECT_EQ(static_cast<size_t>(kAllDTypes[i]), i);
  }
}

TEST(DTypeTest, PropertiesAndNames) {
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(e.name);
    EXPECT_EQ(DTypeName(e.dtype), e.name);
    EXPECT_EQ(ItemSize(e.dtype), e.size);
    EXPECT_EQ(IsFloatingPoint(e.dtype), e.floating);
    EXPECT_EQ(IsInteger(e.dtype), e.integer);
    EXPECT_EQ(IsSigned(e.dtype), e.is_signed);
  }
}

TEST(DTypeTest, InvalidEnumValue) {
  const DType bogus = static_cast<DType>(200);
  EXPECT_EQ(ItemSize(bogus), 0u);
  EXPECT_EQ(DTypeName(bogus), "invalid");
  EXPECT_FALSE(IsFloatingPoint(bogus));
  EXPECT_FALSE(IsInteger(bogus));
  EXPECT_FALSE(IsSigned(bogus));
}

TEST(DTypeTest, ParseCanonicalNamesRoundTrip) {
  for (DType dtype : kAllDTypes) {
    absl::StatusOr<DType> parsed = ParseDType(DTypeName(dtype));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, dtype);
  }
}

TEST(DTypeTest, ParseAliases) {
  const std::pair<const char*, DType> cases[] = {
      {"float", DType::kFloat32},  {"fp32", DType::kFloat32},
      {"double", DType::kFloat64}, {"fp64", DType::kFloat64},
      {"half", DType::kFloat16},   {"fp16", DType::kFloat16},
      {"bf16", DType::kBFloat16},  {"int", DType::kInt32},
      {"long", DType::kInt64},     {"short", DType::kInt16},
  };
  for (const auto& [alias, dtype] : cases) {
    absl::StatusOr<DType> parsed = ParseDType(alias);
    ASSERT_TRUE(parsed.ok()) << alias << ": " << parsed.status();
    EXPECT_EQ(*parsed, dtype) << alias;
  }
}

TEST(DTypeTest, ParseRejectsUnknownNames) {
  for (const char* name :
       {"xyz", "", "char", "byte", "Float32", "FLOAT", "float32 ", " int8",
        "int128", "uint16", "complex64", "torch.float32", "bfloat", "f32"}) {
    absl::StatusOr<DType> parsed = ParseDType(name);
    ASSERT_FALSE(parsed.ok()) << "'" << name << "' parsed as " << *parsed;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(MessageContains(parsed.status(),
                                "unknown dtype '" + std::string(name) + "'"));
    EXPECT_TRUE(
        MessageContains(parsed.status(),
                        "expected one of bool, uint8, int8, int16, int32, "
                        "int64, float16, bfloat16, float32, float64"));
  }
}

TEST(DTypeTest, ParseHintsAtCase) {
  EXPECT_TRUE(MessageContains(ParseDType("Float32").status(),
                              "did you mean 'float32'"));
  EXPECT_TRUE(
      MessageContains(ParseDType("HALF").status(), "did you mean 'half'"));
  EXPECT_FALSE(MessageContains(ParseDType("xyz").status(), "did you mean"));
}

TEST(DTypeTest, Streams) {
  std::ostringstream os;
  os << DType::kBFloat16 << "," << DType::kUInt8;
  EXPECT_EQ(os.str(), "bfloat16,uint8");
}

// Compile-time mapping checks; a wrong mapping fails the build.
static_assert(DTypeOf<bool>() == DType::kBool);
static_assert(DTypeOf<uint8_t>() == DType::kUInt8);
static_assert(DTypeOf<int8_t>() == DType::kInt8);
static_assert(DTypeOf<int16_t>() == DType::kInt16);
static_assert(DTypeOf<int32_t>() == DType::kInt32);
static_assert(DTypeOf<int64_t>() == DType::kInt64);
static_assert(DTypeOf<Half>() == DType::kFloat16);
static_assert(DTypeOf<BFloat16>() == DType::kBFloat16);
static_assert(DTypeOf<float>() == DType::kFloat32);
static_assert(DTypeOf<const double>() == DType::kFloat64);
static_assert(std::is_same_v<CppTypeOf<DType::kFloat16>, Half>);
static_assert(std::is_same_v<CppTypeOf<DType::kInt64>, int64_t>);
static_assert(!ElementType<char>);
static_assert(!ElementType<long double>);
static_assert(!ElementType<std::string>);

// Every dtype's C++ type maps back to it and has the advertised size.
template <size_t... I>
constexpr bool AllMappingsRoundTrip(std::index_sequence<I...>) {
  return ((DTypeOf<CppTypeOf<kAllDTypes[I]>>() == kAllDTypes[I] &&
           sizeof(CppTypeOf<kAllDTypes[I]>) == ItemSize(kAllDTypes[I])) &&
          ...);
}
static_assert(
    AllMappingsRoundTrip(std::make_index_sequence<kAllDTypes.size()>()));

}  // namespace
}  // namespace genesis
