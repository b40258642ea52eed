#include "genesis/distributed/bucket_plan.h"

#include <cstddef>
#include <limits>
#include <random>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace genesis::distributed {
namespace {

using storage::Storage;

Storage Floats(int64_t n) { return *storage::Zeros({n}, DType::kFloat32, Device::Cpu()); }

std::vector<std::vector<size_t>> Members(const std::vector<Bucket>& buckets) {
  std::vector<std::vector<size_t>> out;
  for (const Bucket& b : buckets) out.push_back(b.members);
  return out;
}

TEST(BucketPlanTest, FillsBucketsInOrderUpToTheLimit) {
  // 400, 400, 400, 2000 and 100 bytes with 1000-byte buckets.
  std::vector<Storage> s = {Floats(100), Floats(100), Floats(100), Floats(500), Floats(25)};
  auto plan = PlanBuckets(s, {.bucket_bytes = 1000});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Members(*plan), (std::vector<std::vector<size_t>>{{0, 1}, {2}, {3}, {4}}));
  EXPECT_EQ((*plan)[0].bytes, 800u);
  EXPECT_EQ((*plan)[2].bytes, 2000u);  // Larger than a bucket: alone.
  EXPECT_FALSE((*plan)[0].in_place);   // Separate allocations are packed.
}

TEST(BucketPlanTest, FirstBucketMayBeSmaller) {
  std::vector<Storage> s(6, Floats(100));
  for (Storage& x : s) x = Floats(100);
  auto plan = PlanBuckets(s, {.bucket_bytes = 1200, .first_bucket_bytes = 400});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Members(*plan), (std::vector<std::vector<size_t>>{{0}, {1, 2, 3}, {4, 5}}));
}

TEST(BucketPlanTest, TheTailTapersTowardsTheLastBucket) {
  // Ten storages of 100 bytes, 1000-byte buckets, the last at most 100 and a taper of
  // 4: the tail's buckets hold at most 100 and 400 bytes (the next, 1600, is past
  // bucket_bytes), and the rest is planned from the front.
  std::vector<Storage> s;
  for (int i = 0; i < 10; ++i) s.push_back(Floats(25));
  auto plan = PlanBuckets(s, {.bucket_bytes = 1000, .last_bucket_bytes = 100, .taper = 4});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Members(*plan),
            (std::vector<std::vector<size_t>>{{0, 1, 2, 3, 4}, {5, 6, 7, 8}, {9}}));
  EXPECT_EQ((*plan)[1].offsets, (std::vector<size_t>{0, 112, 224, 336}));  // Packed.
  EXPECT_EQ((*plan)[1].bytes, 436u);
  // The front keeps its own first-bucket limit.
  plan = PlanBuckets(s, {.bucket_bytes = 1000, .first_bucket_bytes = 200,
                         .last_bucket_bytes = 100, .taper = 4});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Members(*plan),
            (std::vector<std::vector<size_t>>{{0, 1}, {2, 3, 4}, {5, 6, 7, 8}, {9}}));
  // A storage larger than its tail bucket's limit gets a bucket of its own.
  s[9] = Floats(100);
  plan = PlanBuckets(s, {.bucket_bytes = 1000, .last_bucket_bytes = 100, .taper = 4});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Members(*plan),
            (std::vector<std::vector<size_t>>{{0, 1, 2, 3, 4}, {5, 6, 7, 8}, {9}}));
  EXPECT_EQ((*plan)[2].bytes, 400u);
  // Storages that all fit the tail; a limit of bucket_bytes or more is no taper.
  std::vector<Storage> few(s.begin(), s.begin() + 3);
  plan = PlanBuckets(few, {.bucket_bytes = 1000, .last_bucket_bytes = 100, .taper = 4});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Members(*plan), (std::vector<std::vector<size_t>>{{0, 1}, {2}}));
  plan = PlanBuckets(s, {.bucket_bytes = 1000, .last_bucket_bytes = 1000});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Members(*plan),
            (std::vector<std::vector<size_t>>{{0, 1, 2, 3, 4, 5, 6, 7, 8}, {9}}));
  // The default taper, 2: limits of 100, 200, 400 and 800 bytes from the end, which
  // take every storage.
  plan = PlanBuckets(s, {.bucket_bytes = 1000, .last_bucket_bytes = 100});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Members(*plan),
            (std::vector<std::vector<size_t>>{{0, 1, 2}, {3, 4, 5, 6}, {7, 8}, {9}}));
}

TEST(BucketPlanTest, TheTailKeepsViewsInPlaceAndDTypesApart) {
  Storage flat = Floats(250);
  std::vector<Storage> s;
  for (int i = 0; i < 10; ++i) s.push_back(*flat.Slice(0, 25 * i, 25 * (i + 1)));
  s[6] = *storage::Zeros({50}, DType::kBFloat16, Device::Cpu());
  auto plan = PlanBuckets(s, {.bucket_bytes = 1000, .last_bucket_bytes = 100, .taper = 4});
  ASSERT_TRUE(plan.ok()) << plan.status();
  // From the end: {9} (100 bytes), then up to 400 bytes: {7, 8} (the bfloat16 storage
  // 6 is another dtype). The next limit, 1600, passes bucket_bytes: the rest is planned
  // from the front.
  EXPECT_EQ(Members(*plan),
            (std::vector<std::vector<size_t>>{{0, 1, 2, 3, 4, 5}, {6}, {7, 8}, {9}}));
  EXPECT_TRUE((*plan)[0].in_place);
  EXPECT_TRUE((*plan)[2].in_place);
  EXPECT_EQ((*plan)[2].offsets, (std::vector<size_t>{0, 100}));
  EXPECT_EQ((*plan)[1].dtype, DType::kBFloat16);
}

TEST(BucketPlanTest, DTypesDoNotShareABucket) {
  std::vector<Storage> s = {Floats(10), *storage::Zeros({10}, DType::kBFloat16, Device::Cpu()),
                            Floats(10)};
  auto plan = PlanBuckets(s);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->size(), 3u);
  EXPECT_EQ((*plan)[1].dtype, DType::kBFloat16);
}

TEST(BucketPlanTest, ViewsOfOneFlatBufferNeedNoCopies) {
  Storage flat = Floats(1000);
  std::vector<Storage> grads = {*flat.Slice(0, 0, 300), *flat.Slice(0, 300, 700),
                                *flat.Slice(0, 700, 1000)};
  auto plan = PlanBuckets(grads);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 1u);
  EXPECT_TRUE((*plan)[0].in_place);
  // A gap breaks it.
  std::vector<Storage> gaps = {*flat.Slice(0, 0, 300), *flat.Slice(0, 400, 700)};
  plan = PlanBuckets(gaps);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE((*plan)[0].in_place);
}

TEST(BucketPlanTest, PackedMembersStartAlignedAndInPlaceOnesBackToBack) {
  // 12, 400, 4 and 36 bytes: packed at 0, 16, 416 and 432.
  std::vector<Storage> s = {Floats(3), Floats(100), Floats(1), Floats(9)};
  auto plan = PlanBuckets(s);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 1u);
  EXPECT_EQ((*plan)[0].offsets, (std::vector<size_t>{0, 16, 416, 432}));
  EXPECT_EQ((*plan)[0].bytes, 468u);
  for (size_t offset : (*plan)[0].offsets) EXPECT_EQ(offset % kPackAlignment, 0u);
  Storage flat = Floats(113);
  std::vector<Storage> views = {*flat.Slice(0, 0, 3), *flat.Slice(0, 3, 103),
                                *flat.Slice(0, 103, 113)};
  plan = PlanBuckets(views);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE((*plan)[0].in_place);
  EXPECT_EQ((*plan)[0].offsets, (std::vector<size_t>{0, 12, 412}));
  EXPECT_EQ((*plan)[0].bytes, 452u);
}

TEST(BucketPlanTest, BadInputIsNamed) {
  Storage m = *storage::Zeros({4, 4}, DType::kFloat32, Device::Cpu());
  std::vector<Storage> s = {Floats(4), *m.Transpose(0, 1)};
  absl::Status status = PlanBuckets(s).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "storage 1")) << status;
  s = {Storage()};
  EXPECT_TRUE(absl::StrContains(PlanBuckets(s).status().message(), "storage 0 is undefined"));
  EXPECT_EQ(PlanBuckets({}, {.bucket_bytes = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  status = PlanBuckets({}, {.last_bucket_bytes = 1 << 20, .taper = 1}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "taper is 1")) << status;
}

using Counts = std::vector<size_t>;

TEST(BucketPlanTest, PackedCollectivesGrowFromBothEnds) {
  EXPECT_EQ(PackedCollectives({}), Counts{});
  EXPECT_EQ(PackedCollectives({5}), Counts{1});
  EXPECT_EQ(PackedCollectives({5, 5}), (Counts{1, 1}));
  EXPECT_EQ(PackedCollectives({5, 5, 5}), (Counts{1, 1, 1}));
  // Four 25 MiB buckets and a short last one (BucketedAllReduce of 100 MiB): the second
  // and third go as one; the fourth alone, since four times the last is less.
  EXPECT_EQ(PackedCollectives({25, 25, 25, 25, 2}), (Counts{1, 2, 1, 1}));
  EXPECT_EQ(PackedCollectives(std::vector<size_t>(10, 25)), (Counts{1, 4, 4, 1}));
  EXPECT_EQ(PackedCollectives(std::vector<size_t>(40, 25)), (Counts{1, 4, 16, 14, 4, 1}));
  // Growth 1: one bucket each, as without grouping; 0 counts as 1.
  EXPECT_EQ(PackedCollectives(std::vector<size_t>(4, 25), 1), (Counts{1, 1, 1, 1}));
  EXPECT_EQ(PackedCollectives(std::vector<size_t>(4, 25), 0), (Counts{1, 1, 1, 1}));
  // A collective holds at least one bucket, however large, and sizes near the largest
  // size_t do not wrap.
  const size_t huge = std::numeric_limits<size_t>::max() / 2;
  EXPECT_EQ(PackedCollectives({1, huge, 1}), (Counts{1, 1, 1}));
  EXPECT_EQ(PackedCollectives({huge, 1, 1, 1, huge}), (Counts{1, 3, 1}));
  EXPECT_EQ(PackedCollectives({0, 0, 0, 7, 0}), (Counts{1, 2, 1, 1}));  // Empty ones join.
}

TEST(BucketPlanTest, PackedCollectivesKeepTheirBounds) {
  std::mt19937 random(11);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<size_t> bytes(std::uniform_int_distribution<size_t>(0, 60)(random));
    for (size_t& b : bytes) b = std::uniform_int_distribution<size_t>(1, 1000)(random);
    const size_t growth = std::uniform_int_distribution<size_t>(1, 8)(random);
    const Counts counts = PackedCollectives(bytes, growth);
    std::vector<size_t> sums;
    size_t at = 0;
    for (size_t c : counts) {
      ASSERT_GE(c, 1u);
      size_t sum = 0;
      for (size_t k = 0; k < c; ++k) sum += bytes.at(at++);
      sums.push_back(sum);
    }
    ASSERT_EQ(at, bytes.size());
    if (bytes.size() >= 2) {
      EXPECT_EQ(counts.front(), 1u);
      EXPECT_EQ(counts.back(), 1u);
    }
    // A collective of several buckets holds at most `growth` times the one beside it
    // on the side it grew from (before or after it).
    for (size_t i = 1; i + 1 < counts.size(); ++i) {
      if (counts[i] == 1) continue;
      EXPECT_TRUE(sums[i] <= growth * sums[i - 1] || sums[i] <= growth * sums[i + 1])
          << "collective " << i << " of trial " << trial;
    }
  }
}

}  // namespace
}  // namespace genesis::distributed
