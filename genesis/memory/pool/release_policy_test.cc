#include "genesis/memory/pool/release_policy.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/pool/block.h"
#include "genesis/memory/pool/classic_segments.h"
#include "genesis/memory/pool/free_sets.h"
#include "genesis/memory/pool/oom_message.h"
#include "genesis/memory/pool/pool_stats.h"
#include "genesis/memory/pool/segment_map.h"
#include "genesis/memory/pool/stat_index.h"
#include "genesis/memory/pool/segment_test_base.h"
#include "genesis/memory/test_backend.h"

namespace genesis::memory::pool_internal {
namespace {

using ::testing::ElementsAre;

Segment MakeSegment(size_t size, uint64_t last_used) {
  Segment s;
  s.size = size;
  s.last_used = last_used;
  return s;
}

TEST(ReleaseOrderTest, LeastRecentlyUsedFirst) {
  Segment a = MakeSegment(100, 3);
  Segment b = MakeSegment(200, 1);
  Segment c = MakeSegment(300, 2);
  const absl::flat_hash_set<Segment*> free = {&a, &b, &c};
  auto recurs = [](size_t) { return false; };
  EXPECT_THAT(ReleaseOrder(free, recurs, /*adaptive=*/true), ElementsAre(&b, &c, &a));
}

TEST(ReleaseOrderTest, AdaptiveCachingReleasesSizesThatDoNotRecurFirst) {
  Segment a = MakeSegment(100, 3);
  Segment b = MakeSegment(200, 1);  // Its size recurs.
  Segment c = MakeSegment(300, 2);
  const absl::flat_hash_set<Segment*> free = {&a, &b, &c};
  auto recurs = [](size_t size) { return size == 200; };
  EXPECT_THAT(ReleaseOrder(free, recurs, /*adaptive=*/true), ElementsAre(&c, &a, &b));
  EXPECT_THAT(ReleaseOrder(free, recurs, /*adaptive=*/false), ElementsAre(&b, &c, &a));
}

TEST(ReleasePolicyTest, LimitsFromOptions) {
  AllocatorOptions o;
  EXPECT_FALSE(OverCacheLimit(o, int64_t{1} << 50));
  o.cache_limit = 1000;
  EXPECT_FALSE(OverCacheLimit(o, 1000));
  EXPECT_TRUE(OverCacheLimit(o, 1001));
  EXPECT_EQ(GarbageCollectionLimit(o, 1000), 0.0);
  o.garbage_collection_threshold = 0.5;
  o.memory_fraction = 0.8;
  EXPECT_EQ(GarbageCollectionLimit(o, 1000), 400.0);
  EXPECT_EQ(GarbageCollectionLimit(o, 0), 0.0);
}

// Classic segments of a TestBackend, released by the policies.
class SegmentReleaserTest : public SegmentTestBase {
 protected:
  SegmentReleaserTest() {
    TestBackend::Options backend_options;
    backend_options.total_bytes = 16 * kMiB;
    backend_ = std::make_unique<TestBackend>(backend_options);
    classic_ = std::make_unique<ClassicSegments>(*backend_, free_, segments_, stats_, kNoLimit);
    releaser_ = std::make_unique<SegmentReleaser>(options_, 16 * kMiB, free_, *classic_,
                                                  nullptr, stats_);
  }
  ~SegmentReleaserTest() override {
    releaser_->ReleaseFreeSegments([] { return false; }, nullptr);
  }

  // Three free 2 MiB segments, used last in the order `ages` gives.
  std::vector<Segment*> ThreeSegments(std::vector<uint64_t> ages) {
    std::vector<Segment*> out;
    for (uint64_t age : ages) {
      OomReason why;
      Block* b = *classic_->NewSegment(2 * kMiB, kSmall, kNoStream, nullptr, &why);
      b->segment->last_used = age;
      out.push_back(b->segment);
    }
    return out;
  }
  bool Live(const Segment* s) const {
    for (const auto& [addr, seg] : segments_) {
      if (seg == s) return true;
    }
    return false;
  }

  std::unique_ptr<TestBackend> backend_;
  std::unique_ptr<ClassicSegments> classic_;
  std::unique_ptr<SegmentReleaser> releaser_;
};

TEST_F(SegmentReleaserTest, CacheLimitReleasesLeastRecentlyUsedUntilUnderIt) {
  std::vector<Segment*> s = ThreeSegments({2, 1, 3});
  releaser_->EnforceCacheLimit(nullptr);  // No limit: nothing happens.
  EXPECT_EQ(segments_.size(), 3u);
  options_.cache_limit = 4 * kMiB;
  releaser_->EnforceCacheLimit(nullptr);
  EXPECT_EQ(segments_.size(), 2u);
  EXPECT_FALSE(Live(s[1]));
  EXPECT_TRUE(Live(s[0]));
  EXPECT_TRUE(Live(s[2]));
  EXPECT_EQ(stats_.GaugeNow(kCachedBytes, kAllPools), static_cast<int64_t>(4 * kMiB));
  EXPECT_EQ(backend_->state()->segment_frees(), 1);
}

TEST_F(SegmentReleaserTest, GarbageCollectionMakesRoomForTheNextSegment) {
  ThreeSegments({1, 2, 3});
  releaser_->CollectGarbage(4 * kMiB, nullptr);  // Off.
  EXPECT_EQ(segments_.size(), 3u);
  options_.garbage_collection_threshold = 0.5;  // 8 MiB of the 16.
  releaser_->CollectGarbage(4 * kMiB, nullptr);
  EXPECT_EQ(segments_.size(), 2u);
  EXPECT_EQ(stats_.GaugeNow(kReservedBytes, kAllPools), static_cast<int64_t>(4 * kMiB));
  releaser_->CollectGarbage(2 * kMiB, nullptr);  // 4 + 2 <= 8: nothing to do.
  EXPECT_EQ(segments_.size(), 2u);
}

TEST_F(SegmentReleaserTest, ReleaseFreeSegmentsStopsWhenDone) {
  std::vector<Segment*> s = ThreeSegments({3, 2, 1});
  releaser_->ReleaseFreeSegments([&] { return segments_.size() <= 1; }, nullptr);
  EXPECT_EQ(segments_.size(), 1u);
  EXPECT_TRUE(Live(s[0]));  // The most recently used stays.
}

}  // namespace
}  // namespace genesis::memory::pool_internal
