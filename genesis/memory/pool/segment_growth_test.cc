#include "genesis/memory/pool/segment_growth.h"

#include <memory>

#include "gtest/gtest.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/pool/block.h"
#include "genesis/memory/pool/classic_segments.h"
#include "genesis/memory/pool/expandable_segments.h"
#include "genesis/memory/pool/free_sets.h"
#include "genesis/memory/pool/oom_message.h"
#include "genesis/memory/pool/pool_stats.h"
#include "genesis/memory/pool/release_policy.h"
#include "genesis/memory/pool/segment_map.h"
#include "genesis/memory/pool/stat_index.h"
#include "genesis/memory/pool/segment_test_base.h"
#include "genesis/memory/test_backend.h"

namespace genesis::memory::pool_internal {
namespace {

constexpr size_t kChunk = 64 * 1024;

// Growth over a TestBackend, with or without expandable segments (64 KiB chunks).
class SegmentGrowthTest : public SegmentTestBase {
 protected:
  void Make(bool expandable) {
    TestBackend::Options o;
    o.virtual_memory = expandable;
    o.granularity = kChunk;
    o.total_bytes = 64 * kMiB;
    backend_ = std::make_unique<TestBackend>(o);
    classic_ = std::make_unique<ClassicSegments>(*backend_, free_, segments_, stats_, kNoLimit);
    if (expandable) {
      expandable_ = std::make_unique<ExpandableSegmentSet>(
          *backend_, *backend_->virtual_memory(), 64 * kMiB, /*max_piece=*/kChunk, free_,
          segments_, stats_, kNoLimit);
    }
    releaser_ = std::make_unique<SegmentReleaser>(options_, 64 * kMiB, free_, *classic_,
                                                  expandable_.get(), stats_);
    growth_ = std::make_unique<SegmentGrowth>(*classic_, expandable_.get(), *releaser_,
                                              segments_, stats_);
  }
  ~SegmentGrowthTest() override {
    for (auto& [addr, s] : segments_) {
      if (s->expandable) {
        expandable_->Destroy(s);
      } else {
        classic_->FreeMemory(s);
      }
      DeleteSegmentRecords(s);
    }
  }
  Block* Grow(size_t size, size_t segment_size, int pool) {
    OomReason why;
    absl::StatusOr<Block*> b = growth_->NewSpace(size, segment_size, pool, 0, nullptr, &why);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *b : nullptr;
  }

  std::unique_ptr<TestBackend> backend_;
  std::unique_ptr<ClassicSegments> classic_;
  std::unique_ptr<ExpandableSegmentSet> expandable_;
  std::unique_ptr<SegmentReleaser> releaser_;
  std::unique_ptr<SegmentGrowth> growth_;
};

TEST_F(SegmentGrowthTest, ClassicSegmentsAboveTheHighWaterMarkReleaseFreeOnesFirst) {
  Make(/*expandable=*/false);
  Block* a = Grow(4096, 2 * kMiB, kSmall);
  free_.Take(a, 4096, 4096);  // In use: never released.
  Block* b = Grow(4096, 2 * kMiB, kSmall);
  EXPECT_EQ(segments_.high_water(), static_cast<int64_t>(4 * kMiB));
  classic_->Release(b->segment, nullptr);
  // Up to the mark, growth keeps fully free segments.
  Grow(4096, 2 * kMiB, kSmall);
  EXPECT_EQ(segments_.size(), 2u);
  EXPECT_EQ(backend_->state()->segment_frees(), 1);
  // Beyond it, they go back first (here the one just made), just enough to stay at it.
  Grow(4096, 2 * kMiB, kSmall);
  EXPECT_EQ(segments_.size(), 2u);
  EXPECT_EQ(backend_->state()->segment_frees(), 2);
  EXPECT_EQ(Reserved(), static_cast<int64_t>(4 * kMiB));
  EXPECT_EQ(segments_.high_water(), static_cast<int64_t>(4 * kMiB));
}

TEST_F(SegmentGrowthTest, LargeBlocksMapChunksAndSmallOnesGetClassicSegments) {
  Make(/*expandable=*/true);
  Block* large = Grow(100 * 1024, 20 * kMiB, kLarge);
  EXPECT_TRUE(large->segment->expandable);
  EXPECT_EQ(large->size, 2 * kChunk);
  Block* small = Grow(4096, 2 * kMiB, kSmall);
  EXPECT_FALSE(small->segment->expandable);
  EXPECT_EQ(Reserved(), static_cast<int64_t>(2 * kChunk + 2 * kMiB));
  EXPECT_EQ(growth_->BackendRequest(100 * 1024, 20 * kMiB, kLarge), 2 * kChunk);
  EXPECT_EQ(growth_->BackendRequest(4096, 2 * kMiB, kSmall), 2 * kMiB);
}

TEST_F(SegmentGrowthTest, WithoutExpandableSegmentsTheBackendGetsWholeSegments) {
  Make(/*expandable=*/false);
  EXPECT_EQ(growth_->BackendRequest(100 * 1024, 20 * kMiB, kLarge), 20 * kMiB);
  Block* large = Grow(100 * 1024, 20 * kMiB, kLarge);
  EXPECT_EQ(large->size, 20 * kMiB);
}

}  // namespace
}  // namespace genesis::memory::pool_internal
