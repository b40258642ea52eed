#include "genesis/memory/pool/central_pool.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/fake_stream_events.h"
#include "genesis/memory/memory_stats.h"
#include "genesis/memory/pool/block.h"
#include "genesis/memory/pool/oom_message.h"
#include "genesis/memory/pool/pool_stats.h"
#include "genesis/memory/pool/stat_index.h"
#include "genesis/memory/segment_snapshot.h"
#include "genesis/memory/test_backend.h"

namespace genesis::memory::pool_internal {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr StreamId kOther = 0x55;

class CentralPoolTest : public ::testing::Test {
 protected:
  void Make(TestBackend::Options backend_options = {}) {
    backend_ = std::make_unique<TestBackend>(backend_options);
    pool_ = std::make_unique<CentralPool>(*backend_, options_, &events_,
                                          backend_->MemoryInfo()->total_bytes, stats_);
  }
  // A small block of `size` on stream 0, grown if need be.
  absl::StatusOr<Block*> Allocate(size_t size, bool may_grow, bool* hit) {
    OomReason why;
    return pool_->AllocateLocked(size, size, 2 * kMiB, kSmall, 0, may_grow, nullptr, &why,
                                 hit);
  }

  AllocatorOptions options_;
  FakeStreamEvents events_;
  PoolStats stats_;
  std::unique_ptr<TestBackend> backend_;
  std::unique_ptr<CentralPool> pool_;
};

TEST_F(CentralPoolTest, FreeBlocksAreReusedBeforeTheBackendIsAsked) {
  Make();
  std::lock_guard<std::mutex> lock(pool_->mu());
  bool hit = true;
  EXPECT_EQ(*Allocate(4096, /*may_grow=*/false, &hit), nullptr);
  Block* b = *Allocate(4096, /*may_grow=*/true, &hit);
  ASSERT_NE(b, nullptr);
  EXPECT_FALSE(hit);
  EXPECT_EQ(b->state.load(), State::kAllocated);
  EXPECT_EQ(stats_.GaugeNow(kAllocatedBytes, kAllPools), 4096);
  ASSERT_TRUE(pool_->FreeLocked(b, 4096).ok());
  EXPECT_EQ(stats_.GaugeNow(kAllocatedBytes, kAllPools), 0);
  EXPECT_EQ(pool_->LargestFreeBlockLocked(), static_cast<int64_t>(2 * kMiB));
  Block* again = *Allocate(4096, /*may_grow=*/false, &hit);
  EXPECT_TRUE(hit);
  EXPECT_EQ(again->ptr, b->ptr);
  EXPECT_EQ(backend_->state()->segment_allocs(), 1);
  const std::vector<SegmentSnapshot> snap = pool_->SnapshotLocked();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].blocks[0].state, BlockState::kAllocated);
  EXPECT_THAT(pool_->BadPointerLocked(again->ptr + 4096, "Free").message(),
              HasSubstr("double free"));
}

TEST_F(CentralPoolTest, AFreeWithRecordedStreamsWaitsForTheirEvents) {
  Make();
  std::lock_guard<std::mutex> lock(pool_->mu());
  bool hit = false;
  Block* b = *Allocate(4096, true, &hit);
  b->recorded_streams = {kOther};
  ASSERT_TRUE(pool_->FreeLocked(b, 4096).ok());
  EXPECT_EQ(b->state.load(), State::kPending);
  EXPECT_EQ(stats_.GaugeNow(kActiveBytes, kAllPools), 4096);
  EXPECT_TRUE(b->recorded_streams.empty());
  Block* c = *Allocate(4096, true, &hit);  // The pending block is not reused yet.
  EXPECT_NE(c->ptr, b->ptr);
  events_.Complete(kOther);
  ASSERT_TRUE(pool_->FreeLocked(c, 4096).ok());
  Block* d = *Allocate(4096, false, &hit);  // Events polled first: b is free again.
  EXPECT_TRUE(hit);
  EXPECT_EQ(d->ptr, b->ptr);
  EXPECT_EQ(stats_.GaugeNow(kActiveBytes, kAllPools), 4096);
  EXPECT_EQ(events_.outstanding(), 0);
}

TEST_F(CentralPoolTest, OutOfMemoryReleasesTheCacheRetriesAndExplains) {
  TestBackend::Options o;
  o.capacity = 2 * kMiB;
  Make(o);
  std::lock_guard<std::mutex> lock(pool_->mu());
  bool hit = false;
  OomReason why;
  // Fill the one segment the backend has room for, with a free large segment's worth.
  Block* small = *Allocate(4096, true, &hit);
  absl::StatusOr<Block*> large =
      pool_->AllocateLocked(4 * kMiB, 4 * kMiB, 20 * kMiB, kLarge, 0, true, nullptr, &why, &hit);
  EXPECT_EQ(large.status().code(), absl::StatusCode::kResourceExhausted);
  large = pool_->AllocateAfterOomLocked(4 * kMiB, 4 * kMiB, 20 * kMiB, kLarge, 0, nullptr, &why,
                                        &hit);
  ASSERT_EQ(large.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(large.status().message()),
              StartsWith("host OOM: cpu (test backend) could not allocate 4194304 bytes "
                         "(4.0 MiB)"));
  EXPECT_THAT(large.status().message(), HasSubstr("needing at most 20971520 bytes"));
  const MemoryStats m = stats_.Collect(CacheFigures());
  EXPECT_EQ(m.num_ooms, 1);
  EXPECT_EQ(m.num_alloc_retries, 1);

  // Once the small segment is free, the retry releases it and the large one fits.
  ASSERT_TRUE(pool_->FreeLocked(small, 4096).ok());
  backend_->set_capacity(20 * kMiB);
  large = pool_->AllocateAfterOomLocked(4 * kMiB, 4 * kMiB, 20 * kMiB, kLarge, 0, nullptr, &why,
                                        &hit);
  ASSERT_TRUE(large.ok()) << large.status();
  EXPECT_EQ(backend_->state()->segment_frees(), 1);
  EXPECT_EQ(stats_.GaugeNow(kReservedBytes, kAllPools), static_cast<int64_t>(20 * kMiB));
}

TEST_F(CentralPoolTest, ReleaseCacheReturnsEveryFullyFreeSegment) {
  Make();
  std::lock_guard<std::mutex> lock(pool_->mu());
  bool hit = false;
  Block* b = *Allocate(4096, true, &hit);
  ASSERT_TRUE(pool_->FreeLocked(b, 4096).ok());
  ASSERT_TRUE(pool_->ReleaseCacheLocked(/*wait=*/true, nullptr).ok());
  EXPECT_EQ(backend_->state()->live_segments(), 0);
  EXPECT_EQ(stats_.GaugeNow(kReservedBytes, kAllPools), 0);
}

}  // namespace
}  // namespace genesis::memory::pool_internal
