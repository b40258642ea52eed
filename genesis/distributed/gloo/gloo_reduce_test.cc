#include "genesis/distributed/gloo/gloo_reduce.h"

#include <cstdint>
#include <vector>

#include "genesis/core/half.h"
#include "gtest/gtest.h"

namespace genesis::distributed::gloo_backend {
namespace {

template <typename T>
std::vector<T> Apply(DType dtype, ReduceOp op, std::vector<T> a, const std::vector<T>& b) {
  ReductionFor(dtype, op)(a.data(), a.data(), b.data(), a.size());
  return a;
}

TEST(GlooReduceTest, IntegersWrapInsteadOfOverflowing) {
  EXPECT_EQ(Apply<int8_t>(DType::kInt8, ReduceOp::kSum, {100, -3}, {100, 2}),
            (std::vector<int8_t>{-56, -1}));
  EXPECT_EQ(Apply<int32_t>(DType::kInt32, ReduceOp::kMin, {5, -7}, {3, 9}),
            (std::vector<int32_t>{3, -7}));
}

TEST(GlooReduceTest, BoolSumIsOrAndProdIsAnd) {
  bool a[3] = {true, false, false};
  const bool b[3] = {false, true, false};
  ReductionFor(DType::kBool, ReduceOp::kSum)(a, a, b, 3);
  EXPECT_TRUE(a[0] && a[1] && !a[2]);
  bool c[2] = {true, true};
  const bool d[2] = {false, true};
  ReductionFor(DType::kBool, ReduceOp::kProd)(c, c, d, 2);
  EXPECT_TRUE(!c[0] && c[1]);
}

TEST(GlooReduceTest, HalfAndBFloat16ReduceInFloat) {
  std::vector<BFloat16> a = {BFloat16(1.5f), BFloat16(-2.0f)};
  std::vector<BFloat16> b = {BFloat16(2.25f), BFloat16(8.0f)};
  ReductionFor(DType::kBFloat16, ReduceOp::kMax)(a.data(), a.data(), b.data(), 2);
  EXPECT_EQ(static_cast<float>(a[0]), 2.25f);
  EXPECT_EQ(static_cast<float>(a[1]), 8.0f);
  std::vector<Half> h = {Half(3.0f)};
  std::vector<Half> g = {Half(0.5f)};
  ReductionFor(DType::kFloat16, ReduceOp::kProd)(h.data(), h.data(), g.data(), 1);
  EXPECT_EQ(static_cast<float>(h[0]), 1.5f);
  DivideInPlace(h.data(), 1, DType::kFloat16, 3);
  EXPECT_EQ(static_cast<float>(h[0]), 0.5f);
}

}  // namespace
}  // namespace genesis::distributed::gloo_backend
