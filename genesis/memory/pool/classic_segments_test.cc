#include "genesis/memory/pool/classic_segments.h"

#include <memory>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/pool/block.h"
#include "genesis/memory/pool/free_sets.h"
#include "genesis/memory/pool/oom_message.h"
#include "genesis/memory/pool/pool_events.h"
#include "genesis/memory/pool/pool_stats.h"
#include "genesis/memory/pool/segment_map.h"
#include "genesis/memory/pool/stat_index.h"
#include "genesis/memory/pool/segment_test_base.h"
#include "genesis/memory/test_backend.h"

namespace genesis::memory::pool_internal {
namespace {

using ::testing::HasSubstr;

class ClassicSegmentsTest : public SegmentTestBase {
 protected:
  void Make(size_t allowed_max) {
    classic_ = std::make_unique<ClassicSegments>(backend_, free_, segments_, stats_, allowed_max);
  }

  TestBackend backend_;
  std::unique_ptr<ClassicSegments> classic_;
};

TEST_F(ClassicSegmentsTest, NewSegmentIsOneFreeBlockCountedAsReserved) {
  Make(kNoLimit);
  OomReason why;
  Sink sink;
  absl::StatusOr<Block*> b = classic_->NewSegment(2 * kMiB, kSmall, 5, &sink, &why);
  ASSERT_TRUE(b.ok()) << b.status();
  Segment* s = (*b)->segment;
  EXPECT_EQ((*b)->size, 2 * kMiB);
  EXPECT_EQ((*b)->ptr, s->ptr);
  EXPECT_EQ(s->stream, 5u);
  EXPECT_EQ((*b)->state.load(), State::kFree);
  EXPECT_EQ(free_.FindBestFit(kSmall, 5, 4096), *b);
  EXPECT_TRUE(free_.fully_free().contains(s));
  EXPECT_EQ(segments_.Containing(s->ptr + 100), s);
  EXPECT_EQ(segments_.high_water(), static_cast<int64_t>(2 * kMiB));
  EXPECT_EQ(stats_.GaugeNow(kReservedBytes, kSmall), static_cast<int64_t>(2 * kMiB));
  EXPECT_EQ(stats_.GaugeNow(kCachedBytes, kAllPools), static_cast<int64_t>(2 * kMiB));
  ASSERT_EQ(sink.size(), 1u);
  EXPECT_EQ(sink[0].type, AllocatorEventType::kSegmentAlloc);
  EXPECT_TRUE(sink[0].small_pool);
  EXPECT_FALSE(classic_->Recurs(2 * kMiB));

  classic_->Release(s, &sink);
  EXPECT_EQ(segments_.size(), 0u);
  EXPECT_EQ(stats_.GaugeNow(kReservedBytes, kAllPools), 0);
  EXPECT_EQ(backend_.state()->live_segments(), 0);
  EXPECT_EQ(sink.back().type, AllocatorEventType::kSegmentFree);
  EXPECT_EQ(segments_.high_water(), static_cast<int64_t>(2 * kMiB));  // Stays.

  b = classic_->NewSegment(2 * kMiB, kSmall, 5, nullptr, &why);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(classic_->Recurs(2 * kMiB));
  classic_->Release((*b)->segment, nullptr);
}

TEST_F(ClassicSegmentsTest, MemoryFractionCapRefusesBeforeTheBackend) {
  Make(3 * kMiB);
  OomReason why;
  absl::StatusOr<Block*> b = classic_->NewSegment(2 * kMiB, kSmall, 0, nullptr, &why);
  ASSERT_TRUE(b.ok());
  absl::StatusOr<Block*> c = classic_->NewSegment(2 * kMiB, kSmall, 0, nullptr, &why);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(why.limit_hit);
  EXPECT_EQ(backend_.state()->segment_allocs(), 1);
  classic_->Release((*b)->segment, nullptr);
}

TEST_F(ClassicSegmentsTest, BackendErrorsSayWhy) {
  Make(kNoLimit);
  OomReason why;
  why.limit_hit = true;
  backend_.FailNextAllocations(1);
  absl::StatusOr<Block*> b = classic_->NewSegment(2 * kMiB, kSmall, 0, nullptr, &why);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(why.limit_hit);
  EXPECT_EQ(why.backend_message, "injected failure");

  backend_.FailNextAllocations(1, absl::InternalError("broken"));
  b = classic_->NewSegment(2 * kMiB, kSmall, 0, nullptr, &why);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(b.status().message(),
              HasSubstr("allocating a segment of 2097152 bytes from test backend"));
  EXPECT_EQ(segments_.size(), 0u);
}

}  // namespace
}  // namespace genesis::memory::pool_internal
