// A pool's statistics: the current value and peak of each gauge per stats pool, running
// totals and event counters, and folding in what the thread caches kept for the fast
// path (ThreadStats). MemoryStats is built from all of them.
//
// The slow paths change them under the pool lock, so their part is atomics that only
// lock holders write, each with a relaxed load and store: no locked instruction (a slow
// allocate+free pair changes about thirty figures). Folds run under a thread cache's
// lock instead, at the same time as the slow paths, so what they add goes to atomics of
// their own (read-modify-write; totals and counters in shards, one per group of
// threads, so that threads do not write one cache line). A reader adds the two parts.
#ifndef GENESIS_MEMORY_POOL_POOL_STATS_H_
#define GENESIS_MEMORY_POOL_POOL_STATS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "genesis/memory/memory_stats.h"
#include "genesis/memory/pool/stat_index.h"
#include "genesis/memory/pool/thread_stats.h"

namespace genesis::memory::pool_internal {

struct alignas(64) CounterShard {
  std::atomic<int64_t> counters[kNumCounters] = {};
  std::atomic<int64_t> gauge_up[kNumGauges][kNumStatPools] = {};
  std::atomic<int64_t> gauge_down[kNumGauges][kNumStatPools] = {};
};
inline constexpr int kNumCounterShards = 16;

// The calling thread's counter shard: threads take shards in turn, once each.
inline int ThisThreadShard() {
  static std::atomic<int> next{0};
  thread_local const int shard = next.fetch_add(1, std::memory_order_relaxed) %
                                 kNumCounterShards;
  return shard;
}

// The thread caches' unfolded figures, added up for MemoryStats (PoolStats::Collect).
// Read each cache under its lock.
struct CacheFigures {
  int64_t current[kNumGauges][kNumStatPools] = {};
  int64_t up[kNumGauges][kNumStatPools] = {};
  int64_t down[kNumGauges][kNumStatPools] = {};
  int64_t counters[kNumCounters] = {};
  // Per cache, gauge and stats pool: its high minus its unfolded change.
  std::vector<std::array<std::array<int64_t, kNumStatPools>, kNumGauges>> excess;

  // Adds one cache's figures.
  void Add(const ThreadStats& stats);
};

class PoolStats {
 public:
  // Adds `delta` to gauge `g` of `pool` and of kAllPools, counts it in the running
  // totals (allocated if positive, freed if negative) and raises the peaks. The caller
  // holds the pool lock.
  // Always inlined, both stats pools written out: a pair through the pool's lock makes
  // eight of these calls, and inlined they cost about 10% fewer instructions on that
  // path (callgrind: a 64 MiB pair and a ResNet-50 trace's replay).
  [[gnu::always_inline]] void AddGauge(Gauge g, int pool, int64_t delta) {
    if (delta > 0) {
      Grow(g, kAllPools, delta);
      Grow(g, pool, delta);
    } else if (delta < 0) {
      Shrink(g, kAllPools, -delta);
      Shrink(g, pool, -delta);
    }
  }
  // Raises the peak of gauge `g` of stats pool `p` to `value` if that is higher.
  void RaisePeakTo(Gauge g, int p, int64_t value) {
    if (value > peak_[g][p].load(std::memory_order_relaxed)) [[unlikely]] {
      RaisePeakSlow(g, p, value);
    }
  }
  // Adds `n` to counter `c`. The caller holds the pool lock.
  void Count(Counter c, int64_t n = 1) { Bump(counters_[c], n); }
  // Count for a caller that does not hold the pool lock.
  void CountUnlocked(Counter c, int64_t n = 1) {
    shards_[ThisThreadShard()].counters[c].fetch_add(n, std::memory_order_relaxed);
  }
  // The current value of gauge `g` of stats pool `pool`, without the thread caches'
  // unfolded changes.
  int64_t GaugeNow(Gauge g, int pool) const {
    return cur_[g][pool].load(std::memory_order_relaxed) +
           folded_[g][pool].load(std::memory_order_relaxed);
  }
  // Adds `n` (may be negative) to the number of segments.
  void AddSegments(int64_t n) { num_segments_.fetch_add(n, std::memory_order_relaxed); }

  // Raises the peaks to what the cache's highs say they reached, then adds the cache's
  // unfolded changes to the current values and clears them. The caller holds the
  // cache's lock. Peaks are exact with one thread; with several, a high is set against
  // the current values as they are now, not as they were when the high was reached.
  void FoldCurrent(ThreadStats& stats);
  // FoldCurrent, and moves the cache's running totals and counters into the atomics
  // too, clearing them. The caller holds the cache's lock.
  void Fold(ThreadStats& stats);

  // The statistics: these atomics plus the caches' unfolded `figures`. A cache's high
  // says how far above the pool's current value its unfolded changes went: with the
  // other caches' unfolded changes as they are now, that is a peak. largest_free_block
  // is left 0 (the free sets know it).
  MemoryStats Collect(const CacheFigures& figures) const;
  // Sets every peak to its current value (fold the caches first). The caller holds the
  // pool lock.
  void ResetPeaks();
  // Zeroes the running totals and the counters (fold the caches first). The caller
  // holds the pool lock.
  void ResetAccumulated();

 private:
  // Adds `n` to an atomic that only holders of the pool lock write.
  static void Bump(std::atomic<int64_t>& a, int64_t n) {
    a.store(a.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  // AddGauge of `n` > 0 (Grow) or of -`n` (Shrink) to stats pool `p` alone.
  void Grow(Gauge g, int p, int64_t n) {
    Bump(cur_[g][p], n);
    Bump(up_[g][p], n);
    RaisePeakTo(g, p, GaugeNow(g, p));
  }
  void Shrink(Gauge g, int p, int64_t n) {
    Bump(cur_[g][p], -n);
    Bump(down_[g][p], n);
  }
  // RaisePeakTo once `value` was seen above the peak (compare-exchange: folds raise
  // peaks without the pool lock).
  void RaisePeakSlow(Gauge g, int p, int64_t value);

  // Written under the pool lock (Bump).
  std::atomic<int64_t> cur_[kNumGauges][kNumStatPools] = {};
  std::atomic<int64_t> up_[kNumGauges][kNumStatPools] = {};
  std::atomic<int64_t> down_[kNumGauges][kNumStatPools] = {};
  std::atomic<int64_t> counters_[kNumCounters] = {};
  // Written by folds (read-modify-write).
  std::atomic<int64_t> folded_[kNumGauges][kNumStatPools] = {};
  CounterShard shards_[kNumCounterShards];
  // Raised by both (compare-exchange, only when a value passes the peak).
  std::atomic<int64_t> peak_[kNumGauges][kNumStatPools] = {};
  std::atomic<int64_t> num_segments_{0};
};

}  // namespace genesis::memory::pool_internal

#endif  // GENESIS_MEMORY_POOL_POOL_STATS_H_
