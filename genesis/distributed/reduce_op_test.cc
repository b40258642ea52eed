#include "genesis/distributed/reduce_op.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace genesis::distributed {
namespace {

TEST(ReduceOpTest, NamesParseBack) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                      ReduceOp::kAvg}) {
    auto parsed = ParseReduceOp(ReduceOpName(op));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, op);
  }
  absl::Status status = ParseReduceOp("mean").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "'mean'")) << status;
}

TEST(ReduceOpTest, AverageNeedsAFloatingDType) {
  EXPECT_TRUE(CheckReduction(ReduceOp::kAvg, DType::kBFloat16).ok());
  EXPECT_TRUE(CheckReduction(ReduceOp::kSum, DType::kInt32).ok());
  absl::Status status = CheckReduction(ReduceOp::kAvg, DType::kInt64);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "int64")) << status;
}

}  // namespace
}  // namespace genesis::distributed
