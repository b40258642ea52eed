#include "genesis/memory/pool/thread_cache.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "genesis/memory/owner_lock.h"

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

constexpr size_t kMask = 511;  // Blocks round to 512 bytes.
constexpr ThreadCacheLimits kLimits{/*max_bytes=*/64 << 10, /*max_blocks_per_bin=*/2,
                                    /*large_blocks=*/false};

// Settles `c` on its owner's side, as the owner's own calls do.
void SettleAsOwner(ThreadCache& c) {
  OwnerLock::AsOwner lock(c.mu);
  c.Settle();
}

// Every running total and counter of `lazy`'s statistics equals `eager`'s.
void ExpectSameTotals(const ThreadCache& lazy, const ThreadCache& eager) {
  int64_t up_lazy[kNumGauges][kNumStatPools] = {}, down_lazy[kNumGauges][kNumStatPools] = {};
  int64_t up_eager[kNumGauges][kNumStatPools] = {}, down_eager[kNumGauges][kNumStatPools] = {};
  int64_t counters_lazy[kNumCounters] = {}, counters_eager[kNumCounters] = {};
  lazy.stats.AddTotals(up_lazy, down_lazy, counters_lazy);
  eager.stats.AddTotals(up_eager, down_eager, counters_eager);
  for (int g = 0; g < kNumGauges; ++g) {
    for (int p = 0; p < kNumStatPools; ++p) {
      EXPECT_EQ(up_lazy[g][p], up_eager[g][p]) << "gauge " << g << " pool " << p;
      EXPECT_EQ(down_lazy[g][p], down_eager[g][p]) << "gauge " << g << " pool " << p;
    }
  }
  for (int c = 0; c < kNumCounters; ++c) EXPECT_EQ(counters_lazy[c], counters_eager[c]);
}

// Caches `a` and `b`, then hands out a 4096-byte block for `requested` bytes and frees
// it, so that it becomes the hot block. Returns its pointer.
char* CacheBothAndHeat4096(ThreadCache& cache, TestBlock& a, TestBlock& b, size_t requested) {
  EXPECT_TRUE(cache.Push(&a.block, 1, kLimits));
  EXPECT_TRUE(cache.Push(&b.block, 1, kLimits));
  char* const p = cache.Pop(4096, kStream, requested);
  EXPECT_TRUE(cache.FreeOwn(p, kLimits, nullptr));
  return p;
}

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

TEST(ThreadCacheTest, TheBlockFreedLastIsHandedOutAgainFirst) {
  ThreadCache cache;
  TestBlock a(0x10000000, 4096), b(0x20000000, 4096);
  char* const p = CacheBothAndHeat4096(cache, a, b, /*requested=*/10);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(cache.hot.ptr, p);
  EXPECT_EQ(cache.bytes.load(), 8192u);  // The hot block is counted as cached.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(cache.Pop(4096, kStream, 20 + i), p);  // The same block, not its bin's top.
    EXPECT_EQ(cache.bytes.load(), 4096u);
    ASSERT_TRUE(cache.FreeOwn(p, kLimits, nullptr));
  }
  // A free of it again is not this thread's to take (the ordinary path calls it a
  // double free), and a request of another size settles it into its bin first.
  EXPECT_FALSE(cache.FreeOwn(p, kLimits, nullptr));
  EXPECT_EQ(cache.Pop(8192, kStream, 1), nullptr);
  EXPECT_EQ(cache.hot.block, nullptr);
  EXPECT_NE(cache.Pop(4096, kStream, 1), nullptr);
  EXPECT_NE(cache.Pop(4096, kStream, 1), nullptr);
  EXPECT_EQ(cache.Pop(4096, kStream, 1), nullptr);
}

// PopHot and FreeHot serve only the pair of the hot block: anything else is left to Pop
// and FreeOwn, with nothing changed.
TEST(ThreadCacheTest, PopHotAndFreeHotServeOnlyTheHotPair) {
  ThreadCache cache;
  TestBlock b(0x10000000, 4096);
  EXPECT_EQ(cache.PopHot(4000, kStream, kMask), nullptr);  // Nothing hot.
  ASSERT_TRUE(cache.Push(&b.block, 1, kLimits));
  EXPECT_EQ(cache.PopHot(4000, kStream, kMask), nullptr);  // In its bin, not hot.
  char* const p = cache.Pop(4096, kStream, 4000);
  ASSERT_EQ(p, b.ptr());
  EXPECT_FALSE(cache.FreeHot(p, kLimits));  // Handed out from its bin: FreeOwn's.
  ASSERT_TRUE(cache.FreeOwn(p, kLimits, nullptr));
  EXPECT_EQ(cache.PopHot(8192, kStream, kMask), nullptr);  // Another size.
  EXPECT_EQ(cache.PopHot(4000, kStream + 1, kMask), nullptr);
  for (int i = 0; i < 3; ++i) {
    // The same request, or another of the same block size.
    ASSERT_EQ(cache.PopHot(i == 1 ? 3900 : 4000, kStream, kMask), p);
    EXPECT_EQ(b.block.state.load(), State::kAllocated);
    EXPECT_EQ(b.block.alloc_seq.load(), 7u + i);
    EXPECT_EQ(b.block.requested.load(), i == 1 ? 3900u : 4000u);
    EXPECT_EQ(cache.bytes.load(), 0u);
    EXPECT_FALSE(cache.FreeHot(p + 512, kLimits));
    ASSERT_TRUE(cache.FreeHot(p, kLimits));
    EXPECT_EQ(b.block.state.load(), State::kThreadCached);
    EXPECT_EQ(cache.bytes.load(), 4096u);
    EXPECT_FALSE(cache.FreeHot(p, kLimits));  // A double free is not the fast path's.
  }
}

// The hot block's free skips the limit checks only while nothing was pushed since it
// last fitted: a bin filled while it was handed out sends it down the ordinary path.
TEST(ThreadCacheTest, AHotBlockIsRefusedWhenItsBinFilledMeanwhile) {
  ThreadCache cache;
  TestBlock hot(0x10000000, 4096), c(0x20000000, 4096), d(0x30000000, 4096);
  ASSERT_TRUE(cache.Push(&hot.block, 1, kLimits));
  char* const p = cache.Pop(4096, kStream, 1);
  ASSERT_TRUE(cache.FreeOwn(p, kLimits, nullptr));  // Hot.
  ASSERT_EQ(cache.PopHot(1, kStream, kMask), p);
  ASSERT_TRUE(cache.FreeHot(p, kLimits));  // Fitted, nothing pushed since.
  ASSERT_EQ(cache.PopHot(1, kStream, kMask), p);
  ASSERT_TRUE(cache.Push(&c.block, 1, kLimits));
  ASSERT_TRUE(cache.Push(&d.block, 1, kLimits));  // The bin is full (two blocks).
  EXPECT_FALSE(cache.FreeHot(p, kLimits));
  EXPECT_EQ(cache.hot.block, nullptr);  // Forgotten: the pool takes the block back.
  EXPECT_EQ(cache.bytes.load(), 8192u);
}

// A hot block handed out stays the hot record, taken; its free must still find it
// after another block became hot (it moves to handed_out), and a stale record (the
// block freed elsewhere and handed out again) sends the free down the ordinary path.
TEST(ThreadCacheTest, ATakenHotBlockIsStillFreedThroughTheCache) {
  ThreadCache cache;
  TestBlock a(0x10000000, 4096), b(0x20000000, 8192);
  char* const pa = CacheBothAndHeat4096(cache, a, b, /*requested=*/1);
  ASSERT_EQ(pa, a.ptr());
  ASSERT_EQ(cache.Pop(4096, kStream, 1), pa);  // Taken hot.
  char* const pb = cache.Pop(8192, kStream, 1);
  ASSERT_EQ(pb, b.ptr());
  ASSERT_TRUE(cache.FreeOwn(pb, kLimits, nullptr));  // b is hot now; a's record moved.
  EXPECT_EQ(cache.hot.ptr, pb);
  FastFreed freed;
  ASSERT_TRUE(cache.FreeOwn(pa, kLimits, &freed));
  EXPECT_EQ(freed.size, 4096u);
  EXPECT_EQ(a.block.state.load(), State::kThreadCached);
  EXPECT_EQ(cache.bytes.load(), 4096u + 8192u);

  ASSERT_EQ(cache.Pop(4096, kStream, 1), pa);  // a, hot again, taken.
  a.block.alloc_seq.fetch_add(1);  // Freed elsewhere and handed out again.
  EXPECT_FALSE(cache.FreeHot(pa, kLimits));
  EXPECT_FALSE(cache.FreeOwn(pa, kLimits, nullptr));
  EXPECT_EQ(cache.hot.block, nullptr);
}

// Pairs for the same requested size wait in the hot record; whoever settles the cache
// (a reader of its statistics, a flush) accounts for them, taken or not.
TEST(ThreadCacheTest, PendingHotPairsAreAccountedWhenSettled) {
  ThreadCache lazy, eager;
  TestBlock a(0x10000000, 4096), b(0x10000000, 4096);
  ASSERT_TRUE(lazy.Push(&a.block, 1, kLimits));
  ASSERT_TRUE(eager.Push(&b.block, 1, kLimits));
  char* const p = lazy.Pop(4096, kStream, 50);
  ASSERT_EQ(eager.Pop(4096, kStream, 50), p);
  for (ThreadCache* c : {&lazy, &eager}) {
    ASSERT_TRUE(c->FreeOwn(p, kLimits, nullptr));
    c->stats.ClearUnfolded();
    c->stats.ClearTotals();
  }
  for (bool end_taken : {true, false}) {
    for (int i = 0; i < 5; ++i) {
      ASSERT_EQ(lazy.PopHot(50, kStream, kMask), p);
      ASSERT_EQ(eager.Pop(4096, kStream, 50), p);
      SettleAsOwner(eager);
      if (end_taken && i == 4) break;
      ASSERT_TRUE(lazy.FreeHot(p, kLimits));
      ASSERT_TRUE(eager.FreeOwn(p, kLimits, nullptr));
      SettleAsOwner(eager);
    }
    SettleAsOwner(lazy);
    ExpectSameTotals(lazy, eager);
    int64_t up[kNumGauges][kNumStatPools] = {}, down[kNumGauges][kNumStatPools] = {};
    int64_t counters[kNumCounters] = {};
    lazy.stats.AddTotals(up, down, counters);
    EXPECT_EQ(up[kAllocatedBytes][kSmall], 4096 * (end_taken ? 5 : 10));  // Pops.
    if (end_taken) {  // Free the taken block, so the next round starts from hot.
      ASSERT_TRUE(lazy.FreeOwn(p, kLimits, nullptr));
      ASSERT_TRUE(eager.FreeOwn(p, kLimits, nullptr));
      SettleAsOwner(eager);
    }
  }
}

// The free of a hot pair raised the cached and inactive-split highs as a push would,
// though its statistics were deferred and the pair left the gauges where they were.
TEST(ThreadCacheTest, AHotPairRaisesTheHighsOfItsFree) {
  ThreadCache cache;
  TestBlock b(0x10000000, 4096);
  ASSERT_TRUE(cache.Push(&b.block, 1, kLimits));
  char* const p = cache.Pop(4096, kStream, 100);
  cache.stats.ClearUnfolded();  // As after a fold: the highs start from here.
  ASSERT_TRUE(cache.FreeOwn(p, kLimits, nullptr));
  ASSERT_EQ(cache.Pop(4096, kStream, 300), p);
  SettleAsOwner(cache);  // The pair is taken: only its accounting could be pending.
  EXPECT_EQ(cache.stats.High(kSmall, kCachedBytes), 4096);
  EXPECT_EQ(cache.stats.High(kSmall, kInactiveSplitBytes), 4096);
  EXPECT_EQ(cache.stats.High(kAllPools, kCachedBytes), 4096);
  EXPECT_EQ(cache.stats.Change(kSmall, kCachedBytes), 0);
  EXPECT_EQ(cache.stats.Change(kSmall, kRequestedBytes), 200);
  EXPECT_EQ(cache.stats.High(kSmall, kRequestedBytes), 200);
}

// A block the thread just allocated from the pool and frees at once, for which the
// cache has no room, is held as its hot block over the cache's bytes: allocating its
// size again is the hot pair. The next other call settles it into `overflow`, out of
// the bins and of `bytes`, accounted as a push.
TEST(ThreadCacheTest, AFreshBlockWithoutRoomIsHeldOverBudgetUntilTheNextCall) {
  ThreadCache cache;
  TestBlock a(0x10000000, 4096), big(0x20000000, 64 << 10);
  ASSERT_TRUE(cache.Push(&a.block, 1, kLimits));
  cache.MarkFresh(big.ptr());
  ASSERT_FALSE(cache.Push(&big.block, 100, kLimits));  // 4 KiB + 64 KiB > 64 KiB.
  ASSERT_TRUE(cache.HoldOverBudget(&big.block, 100, kLimits));
  EXPECT_EQ(big.block.state.load(), State::kThreadCached);
  EXPECT_EQ(big.block.requested.load(), 0u);
  EXPECT_EQ(cache.bytes.load(), (4u << 10) + (64u << 10));
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(cache.PopHot(100, kStream, kMask), big.ptr());
    EXPECT_EQ(big.block.state.load(), State::kAllocated);
    EXPECT_EQ(cache.bytes.load(), 4u << 10);
    ASSERT_TRUE(cache.FreeHot(big.ptr(), kLimits));
    EXPECT_EQ(cache.bytes.load(), (4u << 10) + (64u << 10));
  }
  EXPECT_EQ(cache.overflow.load(), nullptr);

  ASSERT_EQ(cache.Pop(4096, kStream, 1), a.ptr());  // Another call.
  EXPECT_EQ(cache.overflow.load(), &big.block);
  EXPECT_EQ(cache.hot.block, nullptr);
  EXPECT_EQ(cache.bytes.load(), 0u);
  EXPECT_EQ(big.block.state.load(), State::kThreadCached);
  EXPECT_EQ(cache.stats.Change(kSmall, kCachedBytes), 64 << 10);  // a: pushed and taken.
  EXPECT_EQ(cache.stats.Change(kSmall, kRequestedBytes), -100);
  EXPECT_EQ(cache.Pop(64 << 10, kStream, 100), nullptr);  // Never handed out from there.
  {
    OwnerLock::AsOwner lock(cache.mu);
    EXPECT_EQ(cache.TakeOverflow(), &big.block);
    EXPECT_EQ(cache.TakeOverflow(), nullptr);
  }
}

TEST(ThreadCacheTest, OnlyTheFreshAllocationIsHeldOverBudget) {
  ThreadCache cache;
  TestBlock a(0x10000000, 4096), big(0x20000000, 64 << 10), other(0x30000000, 64 << 10);
  ASSERT_TRUE(cache.Push(&a.block, 1, kLimits));

  cache.MarkFresh(other.ptr());
  EXPECT_FALSE(cache.HoldOverBudget(&big.block, 1, kLimits));  // Not the fresh one.
  cache.MarkFresh(big.ptr());
  ASSERT_EQ(cache.Pop(4096, kStream, 1), a.ptr());  // A call in between.
  ASSERT_TRUE(cache.FreeOwn(a.ptr(), kLimits, nullptr));
  EXPECT_FALSE(cache.HoldOverBudget(&big.block, 1, kLimits));
  EXPECT_EQ(big.block.state.load(), State::kAllocated);

  TestBlock huge(0x40000000, 128 << 10), large(0x50000000, 64 << 10, kLarge);
  cache.MarkFresh(huge.ptr());
  EXPECT_FALSE(cache.HoldOverBudget(&huge.block, 1, kLimits));  // More than max_bytes.
  cache.MarkFresh(large.ptr());
  EXPECT_FALSE(cache.HoldOverBudget(&large.block, 1, kLimits));  // Large blocks not cached.

  // While a settled block waits in `overflow`, no other is held.
  cache.MarkFresh(big.ptr());
  ASSERT_TRUE(cache.HoldOverBudget(&big.block, 1, kLimits));
  SettleAsOwner(cache);
  ASSERT_EQ(cache.overflow.load(), &big.block);
  cache.MarkFresh(other.ptr());
  EXPECT_FALSE(cache.HoldOverBudget(&other.block, 1, kLimits));
  EXPECT_EQ(other.block.state.load(), State::kAllocated);
  {
    OwnerLock::AsOwner lock(cache.mu);
    ASSERT_EQ(cache.TakeOverflow(), &big.block);
  }
  cache.MarkFresh(other.ptr());
  EXPECT_TRUE(cache.HoldOverBudget(&other.block, 1, kLimits));
}

// A flush takes a held block with the others, held or settled.
TEST(ThreadCacheTest, TakeBlocksTakesAHeldBlockToo) {
  for (bool settled : {false, true}) {
    ThreadCache cache;
    TestBlock a(0x10000000, 4096), big(0x20000000, 64 << 10);
    ASSERT_TRUE(cache.Push(&a.block, 1, kLimits));
    cache.MarkFresh(big.ptr());
    ASSERT_TRUE(cache.HoldOverBudget(&big.block, 1, kLimits));
    if (settled) SettleAsOwner(cache);
    std::vector<Block*> blocks;
    {
      OwnerLock::AsOwner lock(cache.mu);
      cache.TakeBlocks(&blocks);
    }
    EXPECT_THAT(blocks, UnorderedElementsAre(&a.block, &big.block)) << settled;
    EXPECT_EQ(cache.bytes.load(), 0u);
    EXPECT_EQ(cache.overflow.load(), nullptr);
    EXPECT_EQ(cache.stats.Change(kSmall, kCachedBytes), (4 << 10) + (64 << 10));
  }
}

// The hot block defers statistics; settled, every figure is what the cache would have
// without it: the same operations on a cache settled after each one agree on every
// change, high and total.
TEST(ThreadCacheTest, HotBlockStatisticsAreExactOnceSettled) {
  ThreadCache lazy, eager;
  std::vector<std::unique_ptr<TestBlock>> blocks_lazy, blocks_eager;
  for (int i = 0; i < 4; ++i) {
    blocks_lazy.push_back(
        std::make_unique<TestBlock>(0x10000000 + i * 0x100000, i < 2 ? 4096 : 8192));
    blocks_eager.push_back(
        std::make_unique<TestBlock>(0x10000000 + i * 0x100000, i < 2 ? 4096 : 8192));
    blocks_lazy[i]->block.split = i % 2 == 0;
    blocks_eager[i]->block.split = i % 2 == 0;
    ASSERT_TRUE(lazy.Push(&blocks_lazy[i]->block, 5, kLimits));
    ASSERT_TRUE(eager.Push(&blocks_eager[i]->block, 5, kLimits));
  }
  // Start with every block handed out and the figures cleared, as after a fold, so
  // that the highs come from the operations below (hot pairs included).
  std::vector<char*> held;
  for (size_t size : {4096, 4096, 8192, 8192}) {
    char* p = lazy.Pop(size, kStream, 5);
    ASSERT_EQ(eager.Pop(size, kStream, 5), p);
    held.push_back(p);
  }
  for (ThreadCache* c : {&lazy, &eager}) {
    c->stats.ClearUnfolded();
    c->stats.ClearTotals();
  }
  uint64_t state = 12345;
  for (int step = 0; step < 400; ++step) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const int r = static_cast<int>(state >> 33);
    if (held.empty() || (r % 3 == 0 && held.size() < 4)) {
      const size_t size = r % 2 ? 4096 : 8192;
      const size_t requested = 1 + r % 4000;
      char* p = lazy.Pop(size, kStream, requested);
      char* q = eager.Pop(size, kStream, requested);
      SettleAsOwner(eager);
      ASSERT_EQ(p == nullptr, q == nullptr) << "step " << step;
      if (p != nullptr) held.push_back(p);
    } else {
      char* p = held[r % held.size()];
      std::erase(held, p);
      ASSERT_TRUE(lazy.FreeOwn(p, kLimits, nullptr)) << "step " << step;
      ASSERT_TRUE(eager.FreeOwn(p, kLimits, nullptr)) << "step " << step;
      SettleAsOwner(eager);
    }
  }
  SettleAsOwner(lazy);
  EXPECT_EQ(lazy.bytes.load(), eager.bytes.load());
  for (int p = 0; p < kNumStatPools; ++p) {
    for (int g = 0; g < kNumGauges; ++g) {
      EXPECT_EQ(lazy.stats.Change(p, static_cast<Gauge>(g)),
                eager.stats.Change(p, static_cast<Gauge>(g))) << "pool " << p << " gauge " << g;
      EXPECT_EQ(lazy.stats.High(p, static_cast<Gauge>(g)),
                eager.stats.High(p, static_cast<Gauge>(g))) << "pool " << p << " gauge " << g;
    }
  }
  ExpectSameTotals(lazy, eager);
}

}  // namespace
}  // namespace genesis::memory::pool_internal
