#include "genesis/memory/pool/size_classes.h"

#include <cstddef>
#include <limits>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/pool/stat_index.h"

namespace genesis::memory::pool_internal {
namespace {

using ::testing::HasSubstr;

constexpr size_t kMax = std::numeric_limits<size_t>::max();

TEST(SizeClassesTest, RoundUpReportsOverflow) {
  size_t out = 7;
  EXPECT_TRUE(RoundUp(1000, 512, &out));
  EXPECT_EQ(out, 1024u);
  EXPECT_TRUE(RoundUp(1024, 512, &out));
  EXPECT_EQ(out, 1024u);
  EXPECT_FALSE(RoundUp(kMax - 10, 512, &out));
  EXPECT_EQ(out, 1024u);
}

TEST(SizeClassesTest, RequestsRoundToBlockRounding) {
  AllocatorOptions o;
  EXPECT_EQ(*RoundSize(0, o), 512u);
  EXPECT_EQ(*RoundSize(1, o), 512u);
  EXPECT_EQ(*RoundSize(513, o), 1024u);
  EXPECT_EQ(*RoundSize(1000000, o), 1000448u);
  absl::StatusOr<size_t> bad = RoundSize(kMax - 100, o);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("overflows when rounded up to 512 bytes"));
}

TEST(SizeClassesTest, PowerOfTwoDivisionsRoundToSteps) {
  AllocatorOptions o;
  o.roundup_power2_divisions = 4;
  EXPECT_EQ(*RoundSize(300, o), 512u);  // At most block_rounding: plain rounding.
  // Between 1 MiB and 2 MiB the steps are 256 KiB.
  EXPECT_EQ(*RoundSize(kMiB + 1, o), kMiB + 256 * 1024);
  EXPECT_EQ(*RoundSize(kMiB, o), kMiB);  // Powers of two stay.
  EXPECT_EQ(*RoundSize(3 * kMiB + 5, o), 3 * kMiB + 512 * 1024);
  EXPECT_THAT(RoundSize(kMax - 100, o).status().message(),
              HasSubstr("power-of-two division"));
}

TEST(SizeClassesTest, PoolsAndSegmentSizes) {
  AllocatorOptions o;
  EXPECT_EQ(PoolFor(kMiB - 512, o), kSmall);
  EXPECT_EQ(PoolFor(kMiB, o), kLarge);
  EXPECT_EQ(*SegmentSize(4096, kSmall, o), 2 * kMiB);
  EXPECT_EQ(*SegmentSize(kMiB, kLarge, o), 20 * kMiB);
  EXPECT_EQ(*SegmentSize(10 * kMiB - 512, kLarge, o), 20 * kMiB);
  EXPECT_EQ(*SegmentSize(10 * kMiB, kLarge, o), 10 * kMiB);
  EXPECT_EQ(*SegmentSize(11 * kMiB + 512, kLarge, o), 12 * kMiB);
  EXPECT_THAT(SegmentSize(kMax - 100, kLarge, o).status().message(),
              HasSubstr("overflows when rounded up to a segment of 2097152 bytes"));
}

TEST(SizeClassesTest, SharedLargeSegmentsGrowWithReservedMemory) {
  AllocatorOptions o;  // 20 MiB shared below 10 MiB, up to 256 MiB.
  constexpr size_t kGiB = size_t{1} << 30;
  // Below 256 MiB reserved an eighth is under 32 MiB: the fixed sizes.
  EXPECT_EQ(GrownSegmentSize(kMiB, 20 * kMiB, 0, o), 20 * kMiB);
  EXPECT_EQ(GrownSegmentSize(12 * kMiB, 12 * kMiB, 256 * kMiB - 512, o), 12 * kMiB);
  // 300 MiB: 32 MiB segments, shared by blocks below 16 MiB.
  EXPECT_EQ(GrownSegmentSize(kMiB, 20 * kMiB, 300 * kMiB, o), 32 * kMiB);
  EXPECT_EQ(GrownSegmentSize(16 * kMiB - 512, 16 * kMiB, 300 * kMiB, o), 32 * kMiB);
  EXPECT_EQ(GrownSegmentSize(16 * kMiB, 16 * kMiB, 300 * kMiB, o), 16 * kMiB);
  // 1 GiB: 128 MiB, shared below 64 MiB.
  EXPECT_EQ(GrownSegmentSize(40 * kMiB, 40 * kMiB, kGiB, o), 128 * kMiB);
  EXPECT_EQ(GrownSegmentSize(64 * kMiB, 64 * kMiB, kGiB, o), 64 * kMiB);
  // No larger than large_segment_max, however much is reserved.
  EXPECT_EQ(GrownSegmentSize(100 * kMiB, 100 * kMiB, 100 * kGiB, o), 256 * kMiB);
  EXPECT_EQ(GrownSegmentSize(128 * kMiB, 128 * kMiB, 100 * kGiB, o), 128 * kMiB);
  o.large_segment_max = 100 * kMiB;  // Need not be a power of two.
  EXPECT_EQ(GrownSegmentSize(kMiB, 20 * kMiB, 100 * kGiB, o), 100 * kMiB);
  // large_segment_threshold, where it is higher than half the grown size, still decides.
  o.large_segment_threshold = 80 * kMiB;
  o.large_segment_size = 80 * kMiB;
  EXPECT_EQ(GrownSegmentSize(60 * kMiB, 80 * kMiB, 100 * kGiB, o), 100 * kMiB);
  EXPECT_EQ(GrownSegmentSize(80 * kMiB, 80 * kMiB, 100 * kGiB, o), 80 * kMiB);
  // At or below large_segment_size: fixed sizes, as in PyTorch.
  o = AllocatorOptions();
  o.large_segment_max = 20 * kMiB;
  EXPECT_EQ(GrownSegmentSize(kMiB, 20 * kMiB, 100 * kGiB, o), 20 * kMiB);
  EXPECT_EQ(GrownSegmentSize(12 * kMiB, 12 * kMiB, 100 * kGiB, o), 12 * kMiB);
  o.large_segment_max = 512;
  EXPECT_EQ(GrownSegmentSize(kMiB, 20 * kMiB, 100 * kGiB, o), 20 * kMiB);
}

}  // namespace
}  // namespace genesis::memory::pool_internal
