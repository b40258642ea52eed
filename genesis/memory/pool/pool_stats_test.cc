#include "genesis/memory/pool/pool_stats.h"

#include <cstdint>

#include "gtest/gtest.h"
#include "genesis/memory/memory_stats.h"
#include "genesis/memory/pool/stat_index.h"
#include "genesis/memory/pool/thread_stats.h"

namespace genesis::memory::pool_internal {
namespace {

TEST(PoolStatsTest, GaugesKeepCurrentPeakAndRunningTotals) {
  PoolStats stats;
  stats.AddGauge(kAllocatedBytes, kSmall, 1000);
  stats.AddGauge(kAllocatedBytes, kLarge, 5000);
  stats.AddGauge(kAllocatedBytes, kLarge, -4000);
  stats.Count(kNumAllocations, 2);
  stats.AddSegments(3);
  const MemoryStats m = stats.Collect(CacheFigures());
  EXPECT_EQ(m.all.allocated_bytes.current, 2000);
  EXPECT_EQ(m.all.allocated_bytes.peak, 6000);
  EXPECT_EQ(m.all.allocated_bytes.allocated, 6000);
  EXPECT_EQ(m.all.allocated_bytes.freed, 4000);
  EXPECT_EQ(m.small_pool.allocated_bytes.current, 1000);
  EXPECT_EQ(m.large_pool.allocated_bytes.current, 1000);
  EXPECT_EQ(m.large_pool.allocated_bytes.peak, 5000);
  EXPECT_EQ(m.num_allocations, 2);
  EXPECT_EQ(m.num_segments, 3);
  EXPECT_EQ(stats.GaugeNow(kAllocatedBytes, kAllPools), 2000);
}

TEST(PoolStatsTest, ThreadStatsAccountTakenAndPutBackBlocks) {
  ThreadStats t;
  t.Account</*kTaken=*/true>(kSmall, 4096, 4000, /*split=*/true);
  t.Account</*kTaken=*/false>(kSmall, 4096, 4000, /*split=*/true);
  t.Account</*kTaken=*/true>(kSmall, 4096, 3000, /*split=*/true);
  for (int p : {kAllPools, kSmall}) {
    EXPECT_EQ(t.Change(p, kAllocatedBytes), 4096);
    EXPECT_EQ(t.Change(p, kCachedBytes), -4096);
    EXPECT_EQ(t.Change(p, kRequestedBytes), 3000);
    EXPECT_EQ(t.Change(p, kInactiveSplitBytes), -4096);
    EXPECT_EQ(t.Change(p, kReservedBytes), 0);
    EXPECT_EQ(t.High(p, kAllocatedBytes), 4096);
    EXPECT_EQ(t.High(p, kRequestedBytes), 4000);
    EXPECT_EQ(t.High(p, kCachedBytes), 0);
    EXPECT_EQ(t.High(p, kInactiveSplitBytes), 0);
  }
  EXPECT_EQ(t.Change(kLarge, kAllocatedBytes), 0);
  EXPECT_FALSE(ThreadStats().HasUnfolded());
  EXPECT_TRUE(t.HasUnfolded());

  int64_t up[kNumGauges][kNumStatPools] = {};
  int64_t down[kNumGauges][kNumStatPools] = {};
  int64_t counters[kNumCounters] = {};
  t.AddTotals(up, down, counters);
  EXPECT_EQ(up[kAllocatedBytes][kAllPools], 8192);
  EXPECT_EQ(down[kAllocatedBytes][kSmall], 4096);
  EXPECT_EQ(up[kCachedBytes][kSmall], 4096);
  EXPECT_EQ(down[kCachedBytes][kSmall], 8192);
  EXPECT_EQ(up[kAllocatedBytes][kLarge], 0);
  EXPECT_EQ(up[kRequestedBytes][kSmall], 7000);
  EXPECT_EQ(down[kRequestedBytes][kSmall], 4000);
  EXPECT_EQ(up[kInactiveSplitBytes][kSmall], 4096);
  EXPECT_EQ(down[kInactiveSplitBytes][kSmall], 8192);
  EXPECT_EQ(counters[kNumAllocations], 2);
  EXPECT_EQ(counters[kNumCacheHits], 2);
  EXPECT_EQ(counters[kNumFrees], 1);
}

// Both pools' highs are those of the two pools' changes together, not the sum of
// each pool's high.
TEST(PoolStatsTest, ThreadStatsHighsOfBothPoolsFollowTheirSum) {
  ThreadStats t;
  t.Account<true>(kSmall, 1000, 1000, false);
  t.Account<false>(kSmall, 1000, 1000, false);
  t.Account<true>(kLarge, 5000, 4000, true);
  t.Account<false>(kLarge, 5000, 4000, true);
  EXPECT_EQ(t.High(kSmall, kAllocatedBytes), 1000);
  EXPECT_EQ(t.High(kLarge, kAllocatedBytes), 5000);
  EXPECT_EQ(t.High(kAllPools, kAllocatedBytes), 5000);
  EXPECT_EQ(t.High(kAllPools, kRequestedBytes), 4000);
  // Taken and put back: split bytes never rose above where they began.
  EXPECT_EQ(t.High(kAllPools, kInactiveSplitBytes), 0);
  t.Account<true>(kSmall, 1000, 1000, false);
  t.Account<true>(kLarge, 5000, 5000, false);
  EXPECT_EQ(t.High(kAllPools, kAllocatedBytes), 6000);
  EXPECT_EQ(t.Change(kAllPools, kAllocatedBytes), 6000);
  // Both back: cached bytes went 6000 below the start.
  t.Account<false>(kSmall, 1000, 1000, false);
  t.Account<false>(kLarge, 5000, 5000, false);
  EXPECT_EQ(t.High(kAllPools, kCachedBytes), 0);
  t.Account<false>(kLarge, 5000, 5000, true);  // A block the slow path handed out.
  EXPECT_EQ(t.High(kAllPools, kCachedBytes), 5000);
  EXPECT_EQ(t.High(kSmall, kCachedBytes), 0);
  EXPECT_EQ(t.High(kLarge, kInactiveSplitBytes), 5000);
  EXPECT_EQ(t.High(kAllPools, kInactiveSplitBytes), 5000);
}

// The freed totals follow from what was taken and the net change, across folds of the
// changes and clears of the totals.
TEST(PoolStatsTest, ThreadStatsTotalsSurviveFoldsOfTheirChanges) {
  int64_t up[kNumGauges][kNumStatPools] = {};
  int64_t down[kNumGauges][kNumStatPools] = {};
  int64_t counters[kNumCounters] = {};
  ThreadStats t;
  t.Account<true>(kSmall, 512, 500, true);
  t.Account<true>(kSmall, 512, 400, true);
  t.ClearUnfolded();  // As a fold of the changes does.
  EXPECT_FALSE(t.HasUnfolded());
  t.Account<false>(kSmall, 512, 500, true);
  t.AddTotals(up, down, counters);
  EXPECT_EQ(up[kAllocatedBytes][kSmall], 1024);
  EXPECT_EQ(down[kAllocatedBytes][kSmall], 512);
  EXPECT_EQ(down[kRequestedBytes][kSmall], 500);
  EXPECT_EQ(up[kInactiveSplitBytes][kSmall], 512);
  // Cleared while a change is unfolded: later totals leave out what came before.
  t.ClearTotals();
  t.Account<false>(kSmall, 512, 400, true);
  int64_t up2[kNumGauges][kNumStatPools] = {};
  int64_t down2[kNumGauges][kNumStatPools] = {};
  int64_t counters2[kNumCounters] = {};
  t.AddTotals(up2, down2, counters2);
  EXPECT_EQ(up2[kAllocatedBytes][kAllPools], 0);
  EXPECT_EQ(down2[kAllocatedBytes][kAllPools], 512);
  EXPECT_EQ(down2[kRequestedBytes][kSmall], 400);
  EXPECT_EQ(up2[kInactiveSplitBytes][kSmall], 512);
  EXPECT_EQ(counters2[kNumFrees], 1);
  EXPECT_EQ(counters2[kNumAllocations], 0);
}

TEST(PoolStatsTest, FoldingRaisesPeaksByTheCacheHighThenAddsItsChange) {
  PoolStats stats;
  stats.AddGauge(kAllocatedBytes, kSmall, 10000);
  stats.AddGauge(kCachedBytes, kSmall, 8192);
  ThreadStats t;
  // Two blocks out (peak +8192), one back: +4096 net.
  t.Account<true>(kSmall, 4096, 4096, false);
  t.Account<true>(kSmall, 4096, 4096, false);
  t.Account<false>(kSmall, 4096, 4096, false);
  stats.FoldCurrent(t);
  EXPECT_EQ(stats.GaugeNow(kAllocatedBytes, kAllPools), 14096);
  EXPECT_EQ(stats.GaugeNow(kCachedBytes, kSmall), 4096);
  MemoryStats m = stats.Collect(CacheFigures());
  EXPECT_EQ(m.all.allocated_bytes.peak, 18192);
  EXPECT_EQ(m.all.active_bytes.current, 4096);  // Only the fast path's change moved it.
  EXPECT_EQ(t.Change(kAllPools, kAllocatedBytes), 0);
  EXPECT_FALSE(t.HasUnfolded());
  // The totals stay in the cache until Fold.
  EXPECT_EQ(m.num_allocations, 0);
  stats.Fold(t);
  m = stats.Collect(CacheFigures());
  EXPECT_EQ(m.num_allocations, 2);
  EXPECT_EQ(m.num_cache_hits, 2);
  EXPECT_EQ(m.num_frees, 1);
  EXPECT_EQ(m.all.allocated_bytes.allocated, 10000 + 8192);
  EXPECT_EQ(m.all.allocated_bytes.freed, 4096);
  int64_t up[kNumGauges][kNumStatPools] = {};
  int64_t down[kNumGauges][kNumStatPools] = {};
  int64_t counters[kNumCounters] = {};
  t.AddTotals(up, down, counters);  // Cleared by the fold.
  EXPECT_EQ(counters[kNumAllocations], 0);
  EXPECT_EQ(down[kAllocatedBytes][kAllPools], 0);
}

TEST(PoolStatsTest, CollectAddsUnfoldedCachesAndTheirPeaks) {
  PoolStats stats;
  stats.AddGauge(kAllocatedBytes, kSmall, 1000);
  ThreadStats a;
  a.Account<true>(kSmall, 512, 512, false);
  a.Account<true>(kSmall, 512, 512, false);
  a.Account<false>(kSmall, 512, 512, false);  // +512 now, +1024 at its high.
  ThreadStats b;
  b.Account<true>(kSmall, 2048, 2048, false);  // +2048.
  CacheFigures figures;
  figures.Add(a);
  figures.Add(b);
  const MemoryStats m = stats.Collect(figures);
  EXPECT_EQ(m.all.allocated_bytes.current, 1000 + 512 + 2048);
  // a's high (+1024) with b's change now: 1000 + 1024 + 2048.
  EXPECT_EQ(m.all.allocated_bytes.peak, 4072);
  EXPECT_EQ(m.small_pool.allocated_bytes.allocated, 1000 + 1024 + 2048);
  EXPECT_EQ(m.num_allocations, 3);
  EXPECT_EQ(m.num_frees, 1);
  // Reserved memory never moves on the fast path.
  EXPECT_EQ(m.all.reserved_bytes.peak, 0);
}

TEST(PoolStatsTest, ResetsSetPeaksToCurrentAndZeroTotals) {
  PoolStats stats;
  stats.AddGauge(kReservedBytes, kLarge, 1 << 20);
  stats.AddGauge(kReservedBytes, kLarge, -(1 << 19));
  stats.Count(kNumSegmentAllocs);
  stats.ResetPeaks();
  MemoryStats m = stats.Collect(CacheFigures());
  EXPECT_EQ(m.all.reserved_bytes.peak, 1 << 19);
  EXPECT_EQ(m.num_segment_allocs, 1);
  stats.ResetAccumulated();
  m = stats.Collect(CacheFigures());
  EXPECT_EQ(m.all.reserved_bytes.current, 1 << 19);
  EXPECT_EQ(m.all.reserved_bytes.allocated, 0);
  EXPECT_EQ(m.all.reserved_bytes.freed, 0);
  EXPECT_EQ(m.num_segment_allocs, 0);
}

TEST(PoolStatsTest, LockedAndFoldedPartsAddUp) {
  PoolStats stats;
  stats.AddGauge(kAllocatedBytes, kSmall, 4096);  // Under the pool lock.
  ThreadStats t;
  t.Account<true>(kSmall, 512, 512, false);
  t.Account<true>(kSmall, 512, 512, false);
  stats.Fold(t);  // Under a cache's lock.
  stats.AddGauge(kAllocatedBytes, kSmall, -4096);
  stats.Count(kNumCacheMisses);
  stats.CountUnlocked(kNumCacheMisses, 2);
  EXPECT_EQ(stats.GaugeNow(kAllocatedBytes, kSmall), 1024);
  MemoryStats m = stats.Collect(CacheFigures());
  EXPECT_EQ(m.all.allocated_bytes.current, 1024);
  EXPECT_EQ(m.all.allocated_bytes.peak, 4096 + 1024);
  EXPECT_EQ(m.all.allocated_bytes.allocated, 4096 + 1024);
  EXPECT_EQ(m.all.allocated_bytes.freed, 4096);
  EXPECT_EQ(m.num_cache_misses, 3);
  EXPECT_EQ(m.num_allocations, 2);
  // A slow-path change after the fold raises the peak from both parts.
  stats.AddGauge(kAllocatedBytes, kSmall, 8192);
  EXPECT_EQ(stats.Collect(CacheFigures()).all.allocated_bytes.peak, 1024 + 8192);
  stats.ResetPeaks();
  stats.ResetAccumulated();
  m = stats.Collect(CacheFigures());
  EXPECT_EQ(m.all.allocated_bytes.peak, 1024 + 8192);
  EXPECT_EQ(m.all.allocated_bytes.allocated, 0);
  EXPECT_EQ(m.all.allocated_bytes.freed, 0);
  EXPECT_EQ(m.num_cache_misses, 0);
  EXPECT_EQ(m.num_allocations, 0);
}

}  // namespace
}  // namespace genesis::memory::pool_internal
