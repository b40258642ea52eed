// The statistics one thread's cache keeps for the fast path: what the thread took from
// and put into its cache since its figures were last folded into the pool's atomics
// (PoolStats), so that a cached allocate or free writes no shared cache line. Guarded
// by the cache's lock, like its blocks.
#ifndef GENESIS_MEMORY_POOL_THREAD_STATS_H_
#define GENESIS_MEMORY_POOL_THREAD_STATS_H_

#include <algorithm>
#include <cstdint>

#include "genesis/memory/pool/stat_index.h"

namespace genesis::memory::pool_internal {

struct ThreadStats {
  // The running totals per pool (kSmall, kLarge). Taking a block from the cache raises
  // allocated, active and requested bytes and lowers cached (and inactive-split) bytes;
  // putting one back does the reverse.
  struct Totals {
    int64_t popped = 0;  // Bytes of blocks taken from the cache.
    int64_t pushed = 0;  // Bytes of blocks put into it.
    int64_t requested_popped = 0;
    int64_t requested_pushed = 0;
    int64_t split_popped = 0;  // Of those, bytes of blocks that do not span a segment.
    int64_t split_pushed = 0;
    int64_t num_popped = 0;
    int64_t num_pushed = 0;
  };
  // Per stats pool (kAllPools included): the change of the current values that the
  // pool's atomics lack, and the highest each gauge's change reached since the pool's
  // peaks last saw this cache (PoolStats::FoldCurrent): the peak the pool would have
  // recorded had the fast path written its atomics. Active bytes move with allocated
  // bytes, cached bytes against them.
  struct Unfolded {
    int64_t allocated = 0;
    int64_t requested = 0;
    int64_t split = 0;  // Inactive-split bytes.
    int64_t allocated_high = 0;
    int64_t cached_high = 0;
    int64_t requested_high = 0;
    int64_t split_high = 0;
    // Compared with Unfolded{}: nothing to fold (the cache was not used since).
    bool operator==(const Unfolded&) const = default;

    // The unfolded change of gauge `g` (0 for gauges the fast path does not move).
    int64_t Change(Gauge g) const {
      switch (g) {
        case kAllocatedBytes:
        case kActiveBytes:
          return allocated;
        case kCachedBytes:
          return -allocated;
        case kRequestedBytes:
          return requested;
        case kInactiveSplitBytes:
          return split;
        default:
          return 0;
      }
    }
    // The highest unfolded change of gauge `g` since the last fold (never negative).
    int64_t High(Gauge g) const {
      switch (g) {
        case kAllocatedBytes:
        case kActiveBytes:
          return allocated_high;
        case kCachedBytes:
          return cached_high;
        case kRequestedBytes:
          return requested_high;
        case kInactiveSplitBytes:
          return split_high;
        default:
          return 0;
      }
    }
  };

  Totals totals[kNumStatPools];  // Index kSmall or kLarge.
  Unfolded unfolded[kNumStatPools];

  // Accounts for a block of `size` bytes (`requested` asked for; `split`: it does not
  // span its segment) of `pool` (kSmall or kLarge) taken from the cache (kTaken) or put
  // into it (!kTaken), in the totals and the unfolded changes and highs.
  template <bool kTaken>
  void Account(int pool, int64_t size, int64_t requested, bool split) {
    const int64_t split_size = split ? size : 0;
    Totals& t = totals[pool];
    if constexpr (kTaken) {
      t.popped += size;
      t.requested_popped += requested;
      t.split_popped += split_size;
      ++t.num_popped;
    } else {
      t.pushed += size;
      t.requested_pushed += requested;
      t.split_pushed += split_size;
      ++t.num_pushed;
    }
    AccountUnfolded<kTaken>(unfolded[pool], size, requested, split_size);
    AccountUnfolded<kTaken>(unfolded[kAllPools], size, requested, split_size);
  }

  // Adds the running totals (allocated and freed of each gauge, per stats pool) and the
  // counters these totals stand for (allocations, cache hits, frees) to the arrays.
  void AddTotals(int64_t up[kNumGauges][kNumStatPools],
                 int64_t down[kNumGauges][kNumStatPools],
                 int64_t counters[kNumCounters]) const;

 private:
  template <bool kTaken>
  static void AccountUnfolded(Unfolded& u, int64_t size, int64_t requested,
                              int64_t split_size) {
    if constexpr (kTaken) {
      u.allocated += size;
      u.requested += requested;
      u.split -= split_size;
      u.allocated_high = std::max(u.allocated_high, u.allocated);
      u.requested_high = std::max(u.requested_high, u.requested);
    } else {
      u.allocated -= size;
      u.requested -= requested;
      u.split += split_size;
      u.cached_high = std::max(u.cached_high, -u.allocated);
      u.split_high = std::max(u.split_high, u.split);
    }
  }
};

}  // namespace genesis::memory::pool_internal

#endif  // GENESIS_MEMORY_POOL_THREAD_STATS_H_
