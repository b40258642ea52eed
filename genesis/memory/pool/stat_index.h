// Indices of the pool's statistics: the stats pools (both pools together, the small
// pool, the large pool), the gauges and the event counters. Blocks and segments store
// kSmall or kLarge, so a block's pool is its stats index without translation on the
// fast path.
#ifndef GENESIS_MEMORY_POOL_STAT_INDEX_H_
#define GENESIS_MEMORY_POOL_STAT_INDEX_H_

namespace genesis::memory::pool_internal {

inline constexpr int kAllPools = 0;
inline constexpr int kSmall = 1;
inline constexpr int kLarge = 2;
inline constexpr int kNumStatPools = 3;

enum Gauge {
  kAllocatedBytes,
  kCachedBytes,
  kReservedBytes,
  kActiveBytes,
  kInactiveSplitBytes,
  kRequestedBytes,
  kNumGauges,
};

enum Counter {
  kNumAllocations,
  kNumFrees,
  kNumCacheHits,
  kNumCacheMisses,
  kNumOoms,
  kNumAllocRetries,
  kNumSegmentAllocs,
  kNumSegmentFrees,
  kNumMaps,
  kNumUnmaps,
  kNumCounters,
};

}  // namespace genesis::memory::pool_internal

#endif  // GENESIS_MEMORY_POOL_STAT_INDEX_H_
