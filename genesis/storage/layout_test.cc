#include "genesis/storage/layout.h"
#include "genesis/storage/layout_test_util.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"

namespace genesis::storage {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// Passes if `status` has `code` and its message contains `needle`.
::testing::AssertionResult IsError(const absl::Status& status,
                                   absl::StatusCode code,
                                   std::string_view needle) {
  const std::string message(status.message());
  if (status.code() == code && message.find(needle) != std::string::npos) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "got " << status << ", expected code "
         << absl::StatusCodeToString(code) << " and a message containing \""
         << needle << "\"";
}

::testing::AssertionResult IsInvalid(const absl::Status& status,
                                     std::string_view needle) {
  return IsError(status, absl::StatusCode::kInvalidArgument, needle);
}

std::vector<int64_t> Vec(absl::Span<const int64_t> s) {
  return {s.begin(), s.end()};
}

// Checks shape, strides and offset at once, with a readable failure.
void ExpectGeometry(const absl::StatusOr<Layout>& layout,
                    const std::vector<int64_t>& shape,
                    const std::vector<int64_t>& strides, int64_t offset) {
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(Vec(layout->shape()), shape) << *layout;
  EXPECT_EQ(Vec(layout->strides()), strides) << *layout;
  EXPECT_EQ(layout->offset(), offset) << *layout;
}

Layout Contig(std::vector<int64_t> shape, int64_t offset = 0) {
  absl::StatusOr<Layout> layout = Layout::Contiguous(shape, offset);
  EXPECT_TRUE(layout.ok()) << layout.status();
  return layout.value_or(Layout());
}


TEST(LayoutTest, DefaultIsScalar) {
  const Layout scalar;
  EXPECT_EQ(scalar.rank(), 0);
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.extent(), 1);
  EXPECT_EQ(scalar.offset(), 0);
  EXPECT_TRUE(scalar.is_contiguous());
  EXPECT_EQ(scalar.ToString(), "shape [] strides [] offset 0");
  EXPECT_EQ(scalar, Contig({}));
}

TEST(LayoutTest, Contiguous) {
  const Layout layout = Contig({2, 3, 4}, 5);
  ExpectGeometry(layout, {2, 3, 4}, {12, 4, 1}, 5);
  EXPECT_EQ(layout.rank(), 3);
  EXPECT_EQ(layout.numel(), 24);
  EXPECT_EQ(layout.extent(), 24);
  EXPECT_EQ(layout.size(1), 3);
  EXPECT_EQ(layout.stride(0), 12);
  EXPECT_TRUE(layout.is_contiguous());
  EXPECT_EQ(layout.ToString(), "shape [2, 3, 4] strides [12, 4, 1] offset 5");
  std::ostringstream os;
  os << layout;
  EXPECT_EQ(os.str(), layout.ToString());
}

TEST(LayoutTest, ContiguousWithEmptyDims) {
  // Size-0 dims count as 1 for the strides before them, as in PyTorch.
  const Layout layout = Contig({2, 0, 3});
  ExpectGeometry(layout, {2, 0, 3}, {3, 3, 1}, 0);
  EXPECT_EQ(layout.numel(), 0);
  EXPECT_EQ(layout.extent(), 0);
  EXPECT_TRUE(layout.is_contiguous());
  // A huge shape is fine when a dim is 0: nothing is reached.
  const absl::StatusOr<Layout> huge =
      Layout::Contiguous({int64_t{1} << 40, 0, int64_t{1} << 40});
  ASSERT_TRUE(huge.ok()) << huge.status();
  EXPECT_EQ(huge->numel(), 0);
  ExpectGeometry(huge, {int64_t{1} << 40, 0, int64_t{1} << 40},
                 {int64_t{1} << 40, int64_t{1} << 40, 1}, 0);
  // Unless the strides themselves overflow.
  EXPECT_TRUE(IsInvalid(
      Layout::Contiguous({0, int64_t{1} << 40, int64_t{1} << 40, 1}).status(),
      "the row-major strides of shape [0, 1099511627776, 1099511627776, 1] "
      "overflow int64"));
}

TEST(LayoutTest, MaxRank) {
  const Layout layout = Contig({1, 2, 1, 2, 1, 2, 1, 2});
  EXPECT_EQ(layout.rank(), kMaxDims);
  EXPECT_EQ(layout.numel(), 16);
  EXPECT_TRUE(
      IsInvalid(Layout::Contiguous({1, 1, 1, 1, 1, 1, 1, 1, 1}).status(),
                "rank 9 of shape [1, 1, 1, 1, 1, 1, 1, 1, 1] exceeds "
                "the maximum of 8 dims"));
}

TEST(LayoutTest, ContiguousErrors) {
  EXPECT_TRUE(IsInvalid(Layout::Contiguous({2, -3}).status(),
                        "shape[1] = -3 is negative"));
  EXPECT_TRUE(IsInvalid(Layout::Contiguous({2}, -1).status(),
                        "offset = -1 is negative"));
  EXPECT_TRUE(IsInvalid(
      Layout::Contiguous({int64_t{1} << 40, int64_t{1} << 40}).status(),
      "number of elements of shape [1099511627776, 1099511627776] overflows"));
  // numel fits, but offset + numel does not.
  EXPECT_TRUE(IsInvalid(
      Layout::Contiguous({int64_t{1} << 62}, int64_t{1} << 62).status(),
      "beyond the largest int64 index"));
  // The largest possible view: indices 0 .. 2^63 - 2.
  EXPECT_TRUE(Layout::Contiguous({kInt64Max}).ok());
  EXPECT_TRUE(Layout::Contiguous({kInt64Max - 1}, 1).ok());
  EXPECT_FALSE(Layout::Contiguous({kInt64Max}, 1).ok());
}

TEST(LayoutTest, Strided) {
  const absl::StatusOr<Layout> layout = Layout::Strided({3, 4}, {1, 3}, 2);
  ExpectGeometry(layout, {3, 4}, {1, 3}, 2);
  EXPECT_EQ(layout->numel(), 12);
  EXPECT_EQ(layout->extent(), 12);
  EXPECT_FALSE(layout->is_contiguous());
  EXPECT_EQ(layout->ToString(), "shape [3, 4] strides [1, 3] offset 2");

  // Broadcast: stride 0 reaches one element many times.
  const absl::StatusOr<Layout> broadcast = Layout::Strided({5, 3}, {0, 1});
  ASSERT_TRUE(broadcast.ok());
  EXPECT_EQ(broadcast->numel(), 15);
  EXPECT_EQ(broadcast->extent(), 3);
  EXPECT_FALSE(broadcast->is_contiguous());
}

TEST(LayoutTest, StridedErrors) {
  EXPECT_TRUE(IsInvalid(Layout::Strided({2, 3}, {3}).status(),
                        "shape [2, 3] has 2 dims but strides [3] has 1"));
  EXPECT_TRUE(IsInvalid(Layout::Strided({2, 3}, {-3, 1}).status(),
                        "strides[0] = -3 is negative (negative strides are "
                        "not supported)"));
  EXPECT_TRUE(IsInvalid(Layout::Strided({2, -1}, {1, 1}).status(),
                        "shape[1] = -1 is negative"));
  EXPECT_TRUE(IsInvalid(Layout::Strided({2}, {1}, -4).status(),
                        "offset = -4 is negative"));
  // (2^31 - 1) * 2^33 overflows.
  EXPECT_TRUE(IsInvalid(
      Layout::Strided({int64_t{1} << 31}, {int64_t{1} << 33}).status(),
      "shape [2147483648] strides [8589934592] offset 0 lie beyond the "
      "largest int64 index"));
  EXPECT_TRUE(IsInvalid(
      Layout::Strided({int64_t{1} << 40, int64_t{1} << 40}, {0, 0}).status(),
      "overflows int64"));
  // A sum of fitting products can overflow too.
  EXPECT_FALSE(
      Layout::Strided({2, 2}, {int64_t{1} << 62, int64_t{1} << 62}).ok());
  EXPECT_TRUE(
      Layout::Strided({2, 2}, {int64_t{1} << 61, int64_t{1} << 61}).ok());
  // Empty views reach nothing, so any strides are fine.
  EXPECT_TRUE(Layout::Strided({0, 2}, {1, kInt64Max}).ok());
}

TEST(LayoutTest, IsContiguous) {
  // Strides of size-1 dims do not matter.
  EXPECT_TRUE(Layout::Strided({1, 3, 1}, {100, 1, 7})->is_contiguous());
  EXPECT_TRUE(Layout::Strided({2, 1, 3}, {3, 0, 1})->is_contiguous());
  EXPECT_FALSE(Layout::Strided({2, 3}, {4, 1})->is_contiguous());
  EXPECT_FALSE(Layout::Strided({2, 3}, {3, 2})->is_contiguous());
  EXPECT_FALSE(Layout::Strided({3}, {0})->is_contiguous());
  EXPECT_TRUE(Layout::Strided({1}, {0})->is_contiguous());
  EXPECT_TRUE(Layout::Strided({3, 0}, {5, 9})->is_contiguous());
}

TEST(LayoutTest, CheckFits) {
  const Layout layout = Contig({10, 10}, 5);  // Reaches indices 5 .. 104.
  EXPECT_TRUE(layout.CheckFits(105).ok());
  EXPECT_TRUE(layout.CheckFits(1000).ok());
  EXPECT_TRUE(IsError(layout.CheckFits(104), absl::StatusCode::kOutOfRange,
                      "view shape [10, 10] strides [10, 1] offset 5 reaches "
                      "element index 104 but the base holds only 104 "
                      "elements"));
  EXPECT_TRUE(IsInvalid(layout.CheckFits(-1), "base_numel = -1 is negative"));

  // Strided: the furthest element is offset + sum (size - 1) * stride.
  const Layout strided = *Layout::Strided({3, 4}, {1, 10}, 2);  // Max 34.
  EXPECT_EQ(strided.extent(), 33);
  EXPECT_TRUE(strided.CheckFits(35).ok());
  EXPECT_FALSE(strided.CheckFits(34).ok());

  // Empty views fit anything, even an empty base.
  EXPECT_TRUE(Contig({0, 3}, 1000).CheckFits(0).ok());
  // A scalar needs its one element.
  EXPECT_TRUE(Contig({}, 3).CheckFits(4).ok());
  EXPECT_FALSE(Contig({}, 3).CheckFits(3).ok());
  EXPECT_FALSE(Contig({}).CheckFits(0).ok());
}

TEST(LayoutTest, Slice) {
  const Layout layout = Contig({4, 6});
  ExpectGeometry(layout.Slice(1, 1, 5), {4, 4}, {6, 1}, 1);
  ExpectGeometry(layout.Slice(1, 1, 6, 2), {4, 3}, {6, 2}, 1);  // 1, 3, 5
  ExpectGeometry(layout.Slice(1, 0, 6, 4), {4, 2}, {6, 4}, 0);  // 0, 4
  ExpectGeometry(layout.Slice(0, 1, 3), {2, 6}, {6, 1}, 6);
  ExpectGeometry(layout.Slice(-1, 2, 3), {4, 1}, {6, 1}, 2);
  // Negative bounds count from the end; out-of-range bounds clamp.
  ExpectGeometry(layout.Slice(1, -2, 6), {4, 2}, {6, 1}, 4);
  ExpectGeometry(layout.Slice(1, -100, 100), {4, 6}, {6, 1}, 0);
  ExpectGeometry(layout.Slice(1, 2, -1), {4, 3}, {6, 1}, 2);
  ExpectGeometry(layout.Slice(1, 0, 6, 100), {4, 1}, {6, 100}, 0);
  // Empty slices keep the offset.
  ExpectGeometry(layout.Slice(1, 4, 2), {4, 0}, {6, 1}, 0);
  ExpectGeometry(layout.Slice(1, 6, 100), {4, 0}, {6, 1}, 0);
  ExpectGeometry(layout.Slice(0, -1, -2), {0, 6}, {6, 1}, 0);
  // A step whose product with the stride overflows only happens for a single
  // element; the stride is then kept.
  ExpectGeometry(layout.Slice(0, 1, 4, kInt64Max), {1, 6}, {6, 1}, 6);
  EXPECT_TRUE(layout.Slice(1, 1, 5)->is_contiguous() == false);
  EXPECT_TRUE(layout.Slice(0, 1, 3)->is_contiguous());
}

TEST(LayoutTest, SliceErrors) {
  const Layout layout = Contig({4, 6});
  EXPECT_TRUE(IsInvalid(layout.Slice(2, 0, 1).status(),
                        "Slice: dim 2 is out of range [-2, 2) (layout shape "
                        "[4, 6] strides [6, 1] offset 0)"));
  EXPECT_TRUE(IsInvalid(layout.Slice(-3, 0, 1).status(), "dim -3"));
  EXPECT_TRUE(IsInvalid(layout.Slice(0, 0, 1, 0).status(),
                        "Slice: step = 0 must be at least 1"));
  EXPECT_TRUE(IsInvalid(layout.Slice(0, 0, 1, -1).status(), "step = -1"));
  EXPECT_TRUE(IsInvalid(Layout().Slice(0, 0, 1).status(), "[0, 0)"));
}

TEST(LayoutTest, Select) {
  const Layout layout = Contig({4, 6}, 1);
  ExpectGeometry(layout.Select(0, 2), {6}, {1}, 13);
  ExpectGeometry(layout.Select(1, 5), {4}, {6}, 6);
  ExpectGeometry(layout.Select(1, -1), {4}, {6}, 6);
  ExpectGeometry(layout.Select(-2, -4), {6}, {1}, 1);
  ExpectGeometry(layout.Select(0, 3)->Select(0, 2), {}, {}, 21);
  // An empty result keeps the offset.
  ExpectGeometry(Contig({3, 0}).Select(0, 2), {0}, {1}, 0);
}

TEST(LayoutTest, SelectErrors) {
  const Layout layout = Contig({4, 6});
  EXPECT_TRUE(IsError(layout.Select(1, 6).status(),
                      absl::StatusCode::kOutOfRange,
                      "Select: index 6 is out of range for dim 1 of size 6"));
  EXPECT_TRUE(IsError(layout.Select(0, -5).status(),
                      absl::StatusCode::kOutOfRange, "index -5"));
  EXPECT_TRUE(IsError(Contig({0}).Select(0, 0).status(),
                      absl::StatusCode::kOutOfRange, "dim 0 of size 0"));
  EXPECT_TRUE(IsInvalid(layout.Select(5, 0).status(), "Select: dim 5"));
}

TEST(LayoutTest, Transpose) {
  const Layout layout = Contig({2, 3, 4});
  ExpectGeometry(layout.Transpose(0, 2), {4, 3, 2}, {1, 4, 12}, 0);
  ExpectGeometry(layout.Transpose(-1, 1), {2, 4, 3}, {12, 1, 4}, 0);
  EXPECT_EQ(*layout.Transpose(1, 1), layout);
  EXPECT_EQ(*layout.Transpose(0, 1)->Transpose(0, 1), layout);
  EXPECT_FALSE(layout.Transpose(0, 2)->is_contiguous());
  EXPECT_TRUE(IsInvalid(layout.Transpose(0, 3).status(),
                        "Transpose: dim 3 is out of range [-3, 3)"));
}

TEST(LayoutTest, Permute) {
  const Layout layout = Contig({2, 3, 4});
  ExpectGeometry(layout.Permute({2, 0, 1}), {4, 2, 3}, {1, 12, 4}, 0);
  ExpectGeometry(layout.Permute({-1, -2, -3}), {4, 3, 2}, {1, 4, 12}, 0);
  EXPECT_EQ(*layout.Permute({0, 1, 2}), layout);
  EXPECT_EQ(*Layout().Permute({}), Layout());
  EXPECT_TRUE(IsInvalid(layout.Permute({0, 1}).status(),
                        "Permute: dims [0, 1] has 2 entries but the layout "
                        "has rank 3"));
  EXPECT_TRUE(IsInvalid(layout.Permute({0, 2, -1}).status(),
                        "Permute: dims [0, 2, -1] names dim 2 twice"));
  EXPECT_TRUE(IsInvalid(layout.Permute({0, 1, 3}).status(),
                        "Permute: dim 3 is out of range"));
}

TEST(LayoutTest, ReshapeContiguous) {
  const Layout layout = Contig({2, 3, 4}, 7);
  ExpectGeometry(layout.Reshape({24}), {24}, {1}, 7);
  ExpectGeometry(layout.Reshape({6, 4}), {6, 4}, {4, 1}, 7);
  ExpectGeometry(layout.Reshape({4, -1}), {4, 6}, {6, 1}, 7);
  ExpectGeometry(layout.Reshape({1, 2, 1, 12, 1}), {1, 2, 1, 12, 1},
                 {24, 12, 12, 1, 1}, 7);
  ExpectGeometry(Contig({1}).Reshape({}), {}, {}, 0);
  ExpectGeometry(Layout().Reshape({1, 1, -1}), {1, 1, 1}, {1, 1, 1}, 0);
}

TEST(LayoutTest, ReshapeStrided) {
  // Transposed [6, 4]: strides [1, 6]. Each dim is its own chunk, so a dim
  // can be split but the two cannot be merged.
  const Layout t = *Contig({4, 6}).Transpose(0, 1);
  ExpectGeometry(t.Reshape({2, 3, 4}), {2, 3, 4}, {3, 1, 6}, 0);
  ExpectGeometry(t.Reshape({6, 2, 2}), {6, 2, 2}, {1, 12, 6}, 0);
  // A new size-1 dim gets the stride PyTorch gives it (size * stride of the
  // chunk below it); it is never used.
  ExpectGeometry(t.Reshape({6, 1, 4}), {6, 1, 4}, {1, 24, 6}, 0);
  EXPECT_TRUE(IsInvalid(t.Reshape({24}).status(),
                        "cannot reshape shape [6, 4] strides [1, 6] offset 0 "
                        "to [24] without a copy"));
  EXPECT_TRUE(IsInvalid(t.Reshape({4, 6}).status(), "without a copy"));

  // A slice with a step keeps its rows contiguous with each other only if
  // the row stride matches: x[:, ::2] of [4, 6] is [4, 3] strides [6, 2],
  // elements 0, 2, 4, 6, ... (one stride throughout), but x[:, :4:2] is
  // [4, 2] strides [6, 2], elements 0, 2, 6, 8, ...
  const Layout even = *Contig({4, 6}).Slice(1, 0, 6, 2);
  ExpectGeometry(even.Reshape({12}), {12}, {2}, 0);
  const Layout stepped = *Contig({4, 6}).Slice(1, 0, 4, 2);
  ExpectGeometry(stepped.Reshape({4, 2, 1}), {4, 2, 1}, {6, 2, 2}, 0);
  ExpectGeometry(stepped.Reshape({2, 2, 2}), {2, 2, 2}, {12, 6, 2}, 0);
  EXPECT_TRUE(IsInvalid(stepped.Reshape({8}).status(), "without a copy"));
  // x[::2] of [4, 6]: rows 0 and 2, each contiguous: [2, 6] strides [12, 1].
  const Layout rows = *Contig({4, 6}).Slice(0, 0, 4, 2);
  ExpectGeometry(rows.Reshape({2, 2, 3}), {2, 2, 3}, {12, 3, 1}, 0);
  EXPECT_FALSE(rows.Reshape({3, 4}).ok());

  // Size-1 dims with odd strides do not break a chunk.
  const Layout ones = *Layout::Strided({2, 1, 3}, {3, 100, 1});
  ExpectGeometry(ones.Reshape({6}), {6}, {1}, 0);

  // Broadcast dims can be split but not merged with others.
  const Layout b = *Contig({4}).Expand({3, 4});
  ExpectGeometry(b.Reshape({3, 2, 2}), {3, 2, 2}, {0, 2, 1}, 0);
  EXPECT_FALSE(b.Reshape({12}).ok());
  const Layout all_b = *Contig({1}).Expand({3, 4});
  ExpectGeometry(all_b.Reshape({12}), {12}, {0}, 0);
}

TEST(LayoutTest, ReshapeEmpty) {
  const Layout empty = *Contig({3, 0}, 4).Transpose(0, 1);
  ExpectGeometry(empty.Reshape({0, 5}), {0, 5}, {5, 1}, 4);
  ExpectGeometry(empty.Reshape({2, -1}), {2, 0}, {1, 1}, 4);
  EXPECT_TRUE(IsInvalid(empty.Reshape({0, -1}).status(),
                        "the -1 in [0, -1] is ambiguous"));
}

TEST(LayoutTest, ReshapeErrors) {
  const Layout layout = Contig({2, 3});
  EXPECT_TRUE(IsInvalid(layout.Reshape({4, 2}).status(),
                        "Reshape: shape [4, 2] is invalid for 6 elements"));
  EXPECT_TRUE(IsInvalid(layout.Reshape({4, -1}).status(),
                        "shape [4, -1] is invalid for 6 elements"));
  EXPECT_TRUE(IsInvalid(layout.Reshape({-1, -1}).status(),
                        "new_shape[1] = -1 is a second -1"));
  EXPECT_TRUE(IsInvalid(layout.Reshape({-2, -3}).status(),
                        "new_shape[0] = -2 is negative"));
  EXPECT_TRUE(IsInvalid(layout.Reshape({1, 1, 1, 1, 1, 1, 1, 1, 6}).status(),
                        "exceeds the maximum of 8 dims"));
  EXPECT_TRUE(IsInvalid(
      layout.Reshape({int64_t{1} << 40, int64_t{1} << 40, -1}).status(),
      "is invalid for 6 elements"));
  EXPECT_TRUE(
      IsInvalid(layout.Reshape({int64_t{1} << 40, int64_t{1} << 40}).status(),
                "is invalid for 6 elements"));
}

TEST(LayoutTest, Squeeze) {
  const Layout layout = *Layout::Strided({1, 3, 1, 2}, {9, 2, 5, 1}, 3);
  ExpectGeometry(layout.Squeeze(), {3, 2}, {2, 1}, 3);
  ExpectGeometry(layout.Squeeze(2), {1, 3, 2}, {9, 2, 1}, 3);
  ExpectGeometry(layout.Squeeze(-4), {3, 1, 2}, {2, 5, 1}, 3);
  EXPECT_EQ(Contig({1, 1}).Squeeze(), Layout());
  EXPECT_EQ(layout.Squeeze().numel(), 6);
  EXPECT_EQ(layout.Squeeze().extent(), layout.extent());
  EXPECT_TRUE(IsInvalid(layout.Squeeze(1).status(),
                        "Squeeze: dim 1 has size 3, not 1"));
  EXPECT_TRUE(IsInvalid(layout.Squeeze(4).status(), "Squeeze: dim 4"));
}

TEST(LayoutTest, Unsqueeze) {
  const Layout layout = Contig({2, 3});
  ExpectGeometry(layout.Unsqueeze(0), {1, 2, 3}, {6, 3, 1}, 0);
  ExpectGeometry(layout.Unsqueeze(1), {2, 1, 3}, {3, 3, 1}, 0);
  ExpectGeometry(layout.Unsqueeze(2), {2, 3, 1}, {3, 1, 1}, 0);
  ExpectGeometry(layout.Unsqueeze(-1), {2, 3, 1}, {3, 1, 1}, 0);
  ExpectGeometry(layout.Unsqueeze(-3), {1, 2, 3}, {6, 3, 1}, 0);
  ExpectGeometry(Layout().Unsqueeze(0), {1}, {1}, 0);
  EXPECT_TRUE(layout.Unsqueeze(1)->is_contiguous());
  EXPECT_TRUE(IsInvalid(layout.Unsqueeze(3).status(),
                        "Unsqueeze: dim 3 is out of range [-3, 3)"));
  EXPECT_TRUE(IsInvalid(Contig({1, 1, 1, 1, 1, 1, 1, 1}).Unsqueeze(0).status(),
                        "already has the maximum of 8 dims"));
}

TEST(LayoutTest, Expand) {
  const Layout layout = Contig({3, 1});
  ExpectGeometry(layout.Expand({3, 4}), {3, 4}, {1, 0}, 0);
  ExpectGeometry(layout.Expand({2, 3, 4}), {2, 3, 4}, {0, 1, 0}, 0);
  ExpectGeometry(layout.Expand({-1, 5}), {3, 5}, {1, 0}, 0);
  ExpectGeometry(layout.Expand({3, 0}), {3, 0}, {1, 0}, 0);
  ExpectGeometry(Layout().Expand({2, 2}), {2, 2}, {0, 0}, 0);
  const Layout e = *layout.Expand({2, 3, 4});
  EXPECT_EQ(e.numel(), 24);
  EXPECT_EQ(e.extent(), 3);
  EXPECT_TRUE(e.CheckFits(3).ok());

  EXPECT_TRUE(IsInvalid(layout.Expand({4, 4}).status(),
                        "Expand: dim 0 has size 3 and cannot become 4"));
  EXPECT_TRUE(
      IsInvalid(layout.Expand({4}).status(), "new_shape [4] has fewer dims"));
  EXPECT_TRUE(IsInvalid(layout.Expand({-1, 3, 4}).status(),
                        "new_shape[0] = -1 is negative (-1 cannot name a new "
                        "leading dim)"));
  EXPECT_TRUE(IsInvalid(layout.Expand({3, -2}).status(),
                        "new_shape[1] = -2 is negative"));
  EXPECT_TRUE(IsInvalid(
      Contig({1}).Expand({int64_t{1} << 40, int64_t{1} << 40}).status(),
      "overflows int64"));
}

TEST(LayoutTest, Chain) {
  // x = arange(120).reshape(2, 3, 4, 5); y = x.permute(3, 1, 0, 2)[1:5:2, :, 1]
  const Layout x = Contig({2, 3, 4, 5});
  absl::StatusOr<Layout> y = x.Permute({3, 1, 0, 2});
  ASSERT_TRUE(y.ok());
  y = y->Slice(0, 1, 5, 2);
  ASSERT_TRUE(y.ok());
  y = y->Select(2, 1);
  ExpectGeometry(y, {2, 3, 4}, {2, 20, 5}, 61);
  EXPECT_EQ(BaseIndices(*y).front(), 61);  // x[1, 0, 0, 1]
  // y.transpose(0, 2).reshape(4, 3, 2) then unsqueeze / squeeze round trip.
  absl::StatusOr<Layout> z = y->Transpose(0, 2);
  ASSERT_TRUE(z.ok());
  z = z->Reshape({4, 3, 2});
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z->Unsqueeze(1)->Squeeze(), *z);
  // The furthest element is x[1, 2, 3, 3] = 60 + 40 + 15 + 3.
  EXPECT_EQ(z->offset() + z->extent() - 1, 118);
  EXPECT_TRUE(z->CheckFits(119).ok());
  EXPECT_FALSE(z->CheckFits(118).ok());
}

// ---- Random chains against a reference model: an explicit list of the
// base indices each element reaches, transformed by naive index arithmetic.

struct RefView {
  std::vector<int64_t> shape;
  std::vector<int64_t> at;  // Base index of each element, row-major.
};

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

// Row-major strides of `shape` over the element list (not the base).
std::vector<int64_t> ListStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * shape[i + 1];
  }
  return strides;
}

// Builds a new view of `shape` whose element at multi-index idx is
// in.at[source(idx)] (a flat index into in's element list).
template <typename SourceFn>
RefView Gather(const RefView& in, std::vector<int64_t> shape, SourceFn source) {
  RefView out{shape, {}};
  const int64_t n = Numel(shape);
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t rem = k;
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      idx[d] = rem % shape[d];
      rem /= shape[d];
    }
    out.at.push_back(in.at[source(idx)]);
  }
  return out;
}

int64_t Flat(const std::vector<int64_t>& strides,
             const std::vector<int64_t>& idx) {
  int64_t f = 0;
  for (size_t d = 0; d < idx.size(); ++d) f += idx[d] * strides[d];
  return f;
}

RefView RefSlice(const RefView& in, int d, int64_t first, int64_t count,
                 int64_t step) {
  std::vector<int64_t> shape = in.shape;
  shape[d] = count;
  const std::vector<int64_t> strides = ListStrides(in.shape);
  return Gather(in, shape, [&](std::vector<int64_t> idx) {
    idx[d] = first + idx[d] * step;
    return Flat(strides, idx);
  });
}

RefView RefPermute(const RefView& in, const std::vector<int>& perm) {
  std::vector<int64_t> shape;
  for (int p : perm) shape.push_back(in.shape[p]);
  const std::vector<int64_t> strides = ListStrides(in.shape);
  return Gather(in, shape, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> src(idx.size());
    for (size_t i = 0; i < perm.size(); ++i) src[perm[i]] = idx[i];
    return Flat(strides, src);
  });
}

RefView RefSelect(const RefView& in, int d, int64_t index) {
  std::vector<int64_t> shape = in.shape;
  shape.erase(shape.begin() + d);
  const std::vector<int64_t> strides = ListStrides(in.shape);
  return Gather(in, shape, [&](std::vector<int64_t> idx) {
    idx.insert(idx.begin() + d, index);
    return Flat(strides, idx);
  });
}

RefView RefExpand(const RefView& in, const std::vector<int64_t>& shape) {
  const size_t lead = shape.size() - in.shape.size();
  const std::vector<int64_t> strides = ListStrides(in.shape);
  return Gather(in, shape, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> src(in.shape.size());
    for (size_t i = 0; i < src.size(); ++i) {
      src[i] = in.shape[i] == 1 ? 0 : idx[i + lead];
    }
    return Flat(strides, src);
  });
}

TEST(LayoutTest, RandomChainsMatchReference) {
  std::mt19937 rng(1234);
  const auto uniform = [&rng](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  int reshapes_ok = 0;
  int reshapes_refused = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<int64_t> shape;
    const int rank = static_cast<int>(uniform(0, 5));
    for (int d = 0; d < rank; ++d) shape.push_back(uniform(1, 5));
    const int64_t offset = uniform(0, 3);
    Layout layout = Contig(shape, offset);
    RefView ref{shape, {}};
    for (int64_t i = 0; i < Numel(shape); ++i) ref.at.push_back(offset + i);

    for (int step = 0; step < 6; ++step) {
      SCOPED_TRACE(testing::Message() << "trial " << trial << " step " << step
                                      << " layout " << layout);
      const int r = layout.rank();
      const int op = static_cast<int>(uniform(0, 5));
      if (op == 0 && r > 0) {  // Slice with Python bounds.
        const int d = static_cast<int>(uniform(0, r - 1));
        const int64_t size = layout.size(d);
        const int64_t start = uniform(-size - 1, size + 1);
        const int64_t stop = uniform(-size - 1, size + 1);
        const int64_t st = uniform(1, 3);
        int64_t first = start < 0 ? start + size : start;
        int64_t last = stop < 0 ? stop + size : stop;
        first = std::clamp<int64_t>(first, 0, size);
        last = std::clamp<int64_t>(last, 0, size);
        const int64_t count = last > first ? (last - first + st - 1) / st : 0;
        layout = *layout.Slice(d, start, stop, st);
        ref = RefSlice(ref, d, first, count, st);
      } else if (op == 1 && r > 0) {
        std::vector<int> perm(r);
        for (int i = 0; i < r; ++i) perm[i] = i;
        std::shuffle(perm.begin(), perm.end(), rng);
        layout = *layout.Permute(perm);
        ref = RefPermute(ref, perm);
      } else if (op == 2 && r > 0) {
        const int d = static_cast<int>(uniform(0, r - 1));
        if (layout.size(d) == 0) continue;
        const int64_t index = uniform(0, layout.size(d) - 1);
        layout = *layout.Select(d, index);
        ref = RefSelect(ref, d, index);
      } else if (op == 3 && r < kMaxDims) {
        std::vector<int64_t> target;
        if (uniform(0, 1) == 1) target.push_back(uniform(1, 3));
        for (int d = 0; d < r; ++d) {
          target.push_back(layout.size(d) == 1 ? uniform(1, 3)
                                               : layout.size(d));
        }
        layout = *layout.Expand(target);
        ref = RefExpand(ref, target);
      } else if (op == 4) {
        // Reshape into a random factorisation of numel (elements in the same
        // row-major order, so the reference only changes its shape).
        std::vector<int64_t> target;
        int64_t left = layout.numel();
        while (left > 1 && target.size() < 4) {
          int64_t f = uniform(1, left);
          while (left % f != 0) --f;
          target.push_back(f);
          left /= f;
        }
        target.push_back(left);
        const absl::StatusOr<Layout> reshaped = layout.Reshape(target);
        if (!reshaped.ok()) {
          EXPECT_TRUE(IsInvalid(reshaped.status(), "without a copy"));
          ++reshapes_refused;
          continue;
        }
        ++reshapes_ok;
        layout = *reshaped;
        ref.shape = target;
      } else if (op == 5 && r < kMaxDims) {
        const int d = static_cast<int>(uniform(0, r));
        layout = *layout.Unsqueeze(d);
        ref.shape.insert(ref.shape.begin() + d, 1);
      }
      ASSERT_EQ(Vec(layout.shape()), ref.shape);
      ASSERT_EQ(BaseIndices(layout), ref.at);
      // Every reached index lies in [offset, offset + extent), and the
      // extremes are reached.
      if (!ref.at.empty()) {
        EXPECT_EQ(*std::min_element(ref.at.begin(), ref.at.end()),
                  layout.offset());
        EXPECT_EQ(*std::max_element(ref.at.begin(), ref.at.end()),
                  layout.offset() + layout.extent() - 1);
      }
      if (layout.is_contiguous()) {
        for (size_t i = 0; i < ref.at.size(); ++i) {
          ASSERT_EQ(ref.at[i], layout.offset() + static_cast<int64_t>(i));
        }
      }
    }
  }
  // The random chains exercise both outcomes of Reshape.
  EXPECT_GT(reshapes_ok, 50);
  EXPECT_GT(reshapes_refused, 10);
}

}  // namespace
}  // namespace genesis::storage
