#include "genesis/memory/pool/segment_growth.h"

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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
  void Make(bool expandable, size_t allowed_max = kNoLimit) {
    TestBackend::Options o;
    o.virtual_memory = expandable;
    o.granularity = kChunk;
    o.total_bytes = 64 * kMiB;
    backend_ = std::make_unique<TestBackend>(o);
    classic_ =
        std::make_unique<ClassicSegments>(*backend_, free_, segments_, stats_, allowed_max);
    if (expandable) {
      expandable_ = std::make_unique<ExpandableSegmentSet>(
          *backend_, *backend_->virtual_memory(), 64 * kMiB, PieceCut{.max_piece = kChunk},
          free_, segments_, stats_, kNoLimit);
    }
    releaser_ = std::make_unique<SegmentReleaser>(options_, 64 * kMiB, free_, *classic_,
                                                  expandable_.get(), stats_);
    growth_ = std::make_unique<SegmentGrowth>(options_, *classic_, expandable_.get(),
                                              *releaser_, segments_, stats_);
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
  absl::StatusOr<Block*> TryGrow(size_t size, size_t segment_size, int pool) {
    OomReason why;
    return growth_->NewSpace(size, segment_size, pool, 0, nullptr, &why);
  }
  Block* Grow(size_t size, size_t segment_size, int pool) {
    absl::StatusOr<Block*> b = TryGrow(size, segment_size, pool);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *b : nullptr;
  }
  // Takes the whole of a new block, so that its segment stays.
  void Hold(Block* b) { free_.Take(b, b->size, b->size); }
  // Options where shared large segments are 2 MiB and grow up to 16 MiB (an eighth of
  // 32 MiB reserved is 4 MiB).
  void SmallSegments() {
    options_.large_segment_size = 2 * kMiB;
    options_.large_segment_threshold = kMiB;
    options_.large_segment_max = 16 * kMiB;
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
  Hold(large);
  Block* small = Grow(4096, 2 * kMiB, kSmall);
  EXPECT_FALSE(small->segment->expandable);
  EXPECT_EQ(Reserved(), static_cast<int64_t>(2 * kChunk + 2 * kMiB));
  EXPECT_EQ(growth_->BackendRequest(100 * 1024, 20 * kMiB, kLarge), 2 * kChunk);
  EXPECT_EQ(growth_->BackendRequest(4096, 2 * kMiB, kSmall), 2 * kMiB);
}

TEST_F(SegmentGrowthTest, SmallSegmentsBeyondTheMarkTakeTheRoomOfIdleExpandableMemory) {
  Make(/*expandable=*/true);
  Block* large = Grow(4 * kMiB, 20 * kMiB, kLarge);
  Hold(large);
  Hold(Grow(4096, 2 * kMiB, kSmall));  // The mark: 6 MiB.
  free_.FreeAndMerge(large);
  // Beyond the mark, idle large memory makes room for a new small segment.
  Hold(Grow(4096, 2 * kMiB, kSmall));
  EXPECT_EQ(Reserved(), static_cast<int64_t>(6 * kMiB));
  EXPECT_EQ(segments_.high_water(), static_cast<int64_t>(6 * kMiB));
  EXPECT_EQ(backend_->state()->mapped_bytes(), 2 * kMiB);
  EXPECT_EQ(backend_->state()->unmap_calls(), 1);
  // The large pool needing it back means the two pools take turns: the mark rises.
  Hold(Grow(4 * kMiB, 20 * kMiB, kLarge));
  EXPECT_EQ(Reserved(), static_cast<int64_t>(8 * kMiB));
  EXPECT_EQ(segments_.high_water(), static_cast<int64_t>(8 * kMiB));
  EXPECT_EQ(backend_->state()->unmap_calls(), 1);
}

TEST_F(SegmentGrowthTest, WithoutExpandableSegmentsTheBackendGetsWholeSegments) {
  Make(/*expandable=*/false);
  EXPECT_EQ(growth_->BackendRequest(100 * 1024, 20 * kMiB, kLarge), 20 * kMiB);
  Block* large = Grow(100 * 1024, 20 * kMiB, kLarge);
  EXPECT_EQ(large->size, 20 * kMiB);
}

TEST_F(SegmentGrowthTest, SharedLargeSegmentsGrowWithThePool) {
  SmallSegments();
  Make(/*expandable=*/false);
  Hold(Grow(24 * kMiB, 24 * kMiB, kLarge));  // An eighth of 24 MiB: 2 MiB, no growth.
  Block* shared = Grow(kMiB, 2 * kMiB, kLarge);
  EXPECT_EQ(shared->segment->size, 2 * kMiB);
  Hold(shared);
  Hold(Grow(6 * kMiB, 6 * kMiB, kLarge));  // 32 MiB reserved now.
  shared = Grow(kMiB, 2 * kMiB, kLarge);
  EXPECT_EQ(shared->segment->size, 4 * kMiB);
  Hold(shared);
  // Blocks of half the grown size or more keep their own segment.
  EXPECT_EQ(Grow(2 * kMiB, 2 * kMiB, kLarge)->segment->size, 2 * kMiB);
  // The small pool never grows.
  EXPECT_EQ(Grow(4096, 2 * kMiB, kSmall)->segment->size, 2 * kMiB);
  EXPECT_EQ(backend_->state()->segment_allocs(), 6);
}

TEST_F(SegmentGrowthTest, AGrownSegmentThatDoesNotFitFallsBackToTheBlocksOwn) {
  SmallSegments();
  // The backend out of memory.
  Make(/*expandable=*/false);
  Hold(Grow(32 * kMiB, 32 * kMiB, kLarge));
  backend_->FailNextAllocations(1);
  Block* b = Grow(kMiB, 2 * kMiB, kLarge);
  EXPECT_EQ(b->segment->size, 2 * kMiB);
  EXPECT_EQ(backend_->state()->failed_allocs(), 1);
  // Out of memory both times: the caller sees the second.
  backend_->FailNextAllocations(2);
  EXPECT_TRUE(absl::IsResourceExhausted(TryGrow(kMiB, 2 * kMiB, kLarge).status()));
  EXPECT_EQ(backend_->state()->failed_allocs(), 3);
  // Another error is no reason to try a smaller segment.
  backend_->FailNextAllocations(1, absl::InternalError("broken"));
  EXPECT_TRUE(absl::IsInternal(TryGrow(kMiB, 2 * kMiB, kLarge).status()));
  EXPECT_EQ(backend_->state()->failed_allocs(), 4);
}

TEST_F(SegmentGrowthTest, AGrownSegmentBeyondTheMemoryFractionFallsBack) {
  SmallSegments();
  Make(/*expandable=*/false, /*allowed_max=*/35 * kMiB);
  Hold(Grow(32 * kMiB, 32 * kMiB, kLarge));
  Block* b = Grow(kMiB, 2 * kMiB, kLarge);  // 4 MiB would pass 35 MiB; 2 MiB does not.
  EXPECT_EQ(b->segment->size, 2 * kMiB);
  EXPECT_EQ(Reserved(), static_cast<int64_t>(34 * kMiB));
  EXPECT_EQ(backend_->state()->failed_allocs(), 0);
}

}  // namespace
}  // namespace genesis::memory::pool_internal
