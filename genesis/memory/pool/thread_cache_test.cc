#include "genesis/memory/pool/thread_cache.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "genesis/memory/pool/block.h"
#include "genesis/memory/pool/stat_index.h"

namespace genesis::memory::pool_internal {
namespace {

using ::testing::UnorderedElementsAre;

constexpr StreamId kStream = 7;

// An allocated block at a made-up address (the cache never touches the memory).
struct TestBlock {
  explicit TestBlock(uintptr_t address, size_t size, int pool = kSmall) {
    block.ptr = reinterpret_cast<char*>(address);
    block.size = size;
    block.stream = kStream;
    block.pool = pool;
    block.split = true;
    block.state.store(State::kAllocated);
    block.alloc_seq.store(5);
  }
  char* ptr() { return block.ptr; }
  Block block;
};

constexpr ThreadCacheLimits kLimits{/*max_bytes=*/64 << 10, /*max_blocks_per_bin=*/2,
                                    /*large_blocks=*/false};

TEST(ThreadCacheTest, PopFromAnEmptyCacheIsNull) {
  ThreadCache cache;
  EXPECT_EQ(cache.Pop(4096, kStream, 4096), nullptr);
}

TEST(ThreadCacheTest, APushedBlockIsHandedOutAgainForItsSizeAndStream) {
  ThreadCache cache;
  TestBlock b(0x10000000, 4096);
  ASSERT_TRUE(cache.Push(&b.block, 1000, kLimits));
  EXPECT_EQ(b.block.state.load(), State::kThreadCached);
  EXPECT_EQ(b.block.requested.load(), 0u);
  EXPECT_EQ(cache.bytes.load(), 4096u);
  EXPECT_EQ(cache.stats.Change(kSmall, kCachedBytes), 4096);
  EXPECT_EQ(cache.stats.Change(kSmall, kRequestedBytes), -1000);
  EXPECT_EQ(cache.stats.Change(kSmall, kInactiveSplitBytes), 4096);

  EXPECT_EQ(cache.Pop(8192, kStream, 1), nullptr);
  EXPECT_EQ(cache.Pop(4096, kStream + 1, 1), nullptr);
  EXPECT_EQ(cache.Pop(4096, kStream, 2000), b.ptr());
  EXPECT_EQ(b.block.state.load(), State::kAllocated);
  EXPECT_EQ(b.block.alloc_seq.load(), 6u);
  EXPECT_EQ(b.block.requested.load(), 2000u);
  EXPECT_EQ(cache.bytes.load(), 0u);
  EXPECT_EQ(cache.stats.Change(kSmall, kAllocatedBytes), 0);
  EXPECT_EQ(cache.stats.Change(kAllPools, kRequestedBytes), 1000);
  EXPECT_EQ(cache.Pop(4096, kStream, 1), nullptr);
}

TEST(ThreadCacheTest, LimitsRefuseBlocksWithoutChangingThem) {
  ThreadCache cache;
  TestBlock big(0x10000000, 128 << 10);
  EXPECT_FALSE(cache.Push(&big.block, 1, kLimits));  // Over max_bytes.
  EXPECT_EQ(big.block.state.load(), State::kAllocated);

  TestBlock a(0x20000000, 4096), b(0x30000000, 4096), c(0x40000000, 4096);
  EXPECT_TRUE(cache.Push(&a.block, 1, kLimits));
  EXPECT_TRUE(cache.Push(&b.block, 1, kLimits));
  EXPECT_FALSE(cache.Push(&c.block, 1, kLimits));  // The bin holds two.
  EXPECT_EQ(cache.bytes.load(), 8192u);

  TestBlock large(0x50000000, 8192, kLarge);
  EXPECT_FALSE(cache.Push(&large.block, 1, kLimits));
  ThreadCacheLimits with_large = kLimits;
  with_large.large_blocks = true;
  EXPECT_TRUE(cache.Push(&large.block, 1, with_large));
}

TEST(ThreadCacheTest, FreeOwnTakesBackOnlyTheAllocationThisThreadHandedOut) {
  ThreadCache cache;
  TestBlock b(0x10000000, 4096);
  ASSERT_TRUE(cache.Push(&b.block, 100, kLimits));
  ASSERT_EQ(cache.Pop(4096, kStream, 300), b.ptr());

  FastFreed freed;
  EXPECT_FALSE(cache.FreeOwn(b.ptr() + 512, kLimits, &freed));  // Never handed out.
  ASSERT_TRUE(cache.FreeOwn(b.ptr(), kLimits, &freed));
  EXPECT_EQ(freed.size, 4096u);
  EXPECT_EQ(freed.requested, 300u);
  EXPECT_EQ(freed.stream, kStream);
  EXPECT_EQ(b.block.state.load(), State::kThreadCached);
  EXPECT_FALSE(cache.FreeOwn(b.ptr(), kLimits, &freed));  // The entry is used up.

  // Handed out again, then freed and reused elsewhere: the remembered entry is stale.
  ASSERT_EQ(cache.Pop(4096, kStream, 300), b.ptr());
  b.block.alloc_seq.fetch_add(1);
  EXPECT_FALSE(cache.FreeOwn(b.ptr(), kLimits, nullptr));

  // A block with recorded streams goes down the ordinary path.
  b.block.alloc_seq.store(0);
  b.block.state.store(State::kAllocated);
  ASSERT_TRUE(cache.Push(&b.block, 1, kLimits));
  ASSERT_EQ(cache.Pop(4096, kStream, 1), b.ptr());
  b.block.has_recorded_streams.store(true);
  EXPECT_FALSE(cache.FreeOwn(b.ptr(), kLimits, nullptr));
}

TEST(ThreadCacheTest, TakeBlocksEmptiesEveryBin) {
  ThreadCache cache;
  TestBlock a(0x10000000, 4096), b(0x20000000, 8192);
  ASSERT_TRUE(cache.Push(&a.block, 1, kLimits));
  ASSERT_TRUE(cache.Push(&b.block, 1, kLimits));
  std::vector<Block*> blocks;
  {
    OwnerLock::AsOwner lock(cache.mu);
    cache.TakeBlocks(&blocks);
  }
  EXPECT_THAT(blocks, UnorderedElementsAre(&a.block, &b.block));
  EXPECT_EQ(cache.bytes.load(), 0u);
  EXPECT_EQ(cache.Pop(4096, kStream, 1), nullptr);
  EXPECT_EQ(cache.Pop(8192, kStream, 1), nullptr);
}

}  // namespace
}  // namespace genesis::memory::pool_internal
