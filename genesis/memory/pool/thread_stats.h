// The statistics one thread's cache keeps for the fast path: what the thread took from
// and put into its cache since its figures were last folded into the pool's atomics
// (PoolStats), so that a cached allocate or free writes no shared cache line. Guarded
// by the cache's lock, like its blocks.
//
// A cached allocate or free is a few additions here, so the figures are kept lean: the
// unfolded changes per pool (both pools' change is their sum), the highs those changes
// reached (per pool and for both, raised only when passed), and of the running totals
// only what taking blocks added and how many were put back. What putting blocks back
// took away follows: it is what taking them added less the net change since the totals
// were last cleared.
#ifndef GENESIS_MEMORY_POOL_THREAD_STATS_H_
#define GENESIS_MEMORY_POOL_THREAD_STATS_H_

#include <cstdint>

#include "genesis/memory/pool/stat_index.h"

namespace genesis::memory::pool_internal {

class ThreadStats {
 public:
  // Accounts for a block of `size` bytes (`requested` asked for; `split`: it does not
  // span its segment) of `pool` (kSmall or kLarge) taken from the cache (kTaken) or put
  // into it (!kTaken). Taking a block raises allocated, active and requested bytes and
  // lowers cached (and inactive-split) bytes; putting one back does the reverse.
  template <bool kTaken>
  void Account(int pool, int64_t size, int64_t requested, bool split) {
    ++version_;
    const int64_t split_size = split ? size : 0;
    Changes& u = unfolded_[pool];
    const Changes& other = unfolded_[kSmall + kLarge - pool];
    Highs& h = highs_[pool];
    Highs& all = highs_[kAllPools];
    if constexpr (kTaken) {
      Totals& t = totals_[pool];
      t.popped += size;
      t.requested_popped += requested;
      t.split_popped += split_size;
      ++t.num_popped;
      u.allocated += size;
      u.requested += requested;
      u.split -= split_size;
      Raise(h.allocated, u.allocated);
      Raise(h.requested, u.requested);
      Raise(all.allocated, u.allocated + other.allocated);
      Raise(all.requested, u.requested + other.requested);
    } else {
      ++totals_[pool].num_pushed;
      u.allocated -= size;
      u.requested -= requested;
      u.split += split_size;
      Raise(h.cached, -u.allocated);
      Raise(h.split, u.split);
      Raise(all.cached, -(u.allocated + other.allocated));
      Raise(all.split, u.split + other.split);
    }
  }

  // A block of `size` bytes (`split` as in Account) put into the cache with its push
  // deferred (the cache's hot block): raises the highs that the push would raise,
  // changing nothing else. Account<false> or AccountPair follows. Raising them again
  // for the same block changes nothing while version() stays.
  void RaiseForDeferredPush(int pool, int64_t size, bool split) {
    const int64_t split_size = split ? size : 0;
    const Changes& u = unfolded_[pool];
    const Changes& other = unfolded_[kSmall + kLarge - pool];
    Raise(highs_[pool].cached, size - u.allocated);
    Raise(highs_[pool].split, u.split + split_size);
    Raise(highs_[kAllPools].cached, size - (u.allocated + other.allocated));
    Raise(highs_[kAllPools].split, u.split + split_size + other.split);
  }

  // The deferred push of a block (`requested_before` bytes asked for), then taking it
  // again for `requested` bytes: Account<false> and Account<true> in one, with no
  // change to the allocated and split gauges.
  void AccountPair(int pool, int64_t size, int64_t requested_before, int64_t requested,
                   bool split) {
    Totals& t = totals_[pool];
    t.popped += size;
    t.requested_popped += requested;
    t.split_popped += split ? size : 0;
    ++t.num_popped;
    ++t.num_pushed;
    Changes& u = unfolded_[pool];
    u.requested += requested - requested_before;
    Raise(highs_[pool].requested, u.requested);
    Raise(highs_[kAllPools].requested,
          u.requested + unfolded_[kSmall + kLarge - pool].requested);
  }

  // Moves whenever the allocated or split changes or the highs may fall (Account,
  // ClearUnfolded); AccountPair and raising highs leave it.
  uint64_t version() const { return version_; }

  // `n` times AccountPair with `requested` bytes both before and after: the totals
  // alone move.
  void AccountPairs(int pool, int64_t size, int64_t requested, bool split, int64_t n) {
    Totals& t = totals_[pool];
    t.popped += n * size;
    t.requested_popped += n * requested;
    t.split_popped += split ? n * size : 0;
    t.num_popped += n;
    t.num_pushed += n;
  }

  // The unfolded change of gauge `g` of stats pool `p` (0 for gauges the fast path does
  // not move).
  int64_t Change(int p, Gauge g) const;
  // The highest unfolded change of gauge `g` of stats pool `p` since the last fold
  // (never negative).
  int64_t High(int p, Gauge g) const;
  // True if the cache was used since its changes were last folded.
  bool HasUnfolded() const;
  // Clears the unfolded changes and their highs, once the pool has taken them in.
  void ClearUnfolded();

  // Adds the running totals (allocated and freed of each gauge, per stats pool) and the
  // counters these totals stand for (allocations, cache hits, frees) to the arrays.
  void AddTotals(int64_t up[kNumGauges][kNumStatPools],
                 int64_t down[kNumGauges][kNumStatPools],
                 int64_t counters[kNumCounters]) const;
  // Zeroes the running totals, once the pool has taken them in (AddTotals).
  void ClearTotals();

 private:
  struct Changes {
    int64_t allocated = 0;  // Active bytes move with it, cached bytes against it.
    int64_t requested = 0;
    int64_t split = 0;  // Inactive-split bytes.
  };
  struct Highs {
    int64_t allocated = 0;
    int64_t cached = 0;
    int64_t requested = 0;
    int64_t split = 0;
  };
  // Since the totals were last cleared.
  struct Totals {
    int64_t popped = 0;  // Bytes of blocks taken from the cache.
    int64_t requested_popped = 0;
    int64_t split_popped = 0;  // Of those, bytes of blocks that do not span a segment.
    int64_t num_popped = 0;
    int64_t num_pushed = 0;
  };

  static void Raise(int64_t& high, int64_t value) {
    // Passed rarely once a loop settles: a branch costs less than a store every call.
    if (value > high) [[unlikely]] high = value;
  }

  // Indexed by kSmall and kLarge; the kAllPools entries of unfolded_, folded_ and
  // totals_ stay zero (both pools' figures are the sums of the two).
  Changes unfolded_[kNumStatPools];
  Highs highs_[kNumStatPools];  // kAllPools included.
  Totals totals_[kNumStatPools];
  // The changes folded into the pool since the totals were last cleared: with the
  // unfolded ones, the net change the totals made.
  Changes folded_[kNumStatPools];
  uint64_t version_ = 0;
};

}  // namespace genesis::memory::pool_internal

#endif  // GENESIS_MEMORY_POOL_THREAD_STATS_H_
