#include "genesis/memory/pool/thread_stats.h"

#include <cstdint>
#include <initializer_list>

namespace genesis::memory::pool_internal {

namespace {

// Of figures kept for allocated, cached, requested and inactive-split bytes, the one
// gauge `g` reads (active bytes move with allocated bytes); 0 for gauges the fast path
// does not move.
int64_t ForGauge(Gauge g, int64_t allocated, int64_t cached, int64_t requested,
                 int64_t split) {
  switch (g) {
    case kAllocatedBytes:
    case kActiveBytes:
      return allocated;
    case kCachedBytes:
      return cached;
    case kRequestedBytes:
      return requested;
    case kInactiveSplitBytes:
      return split;
    default:
      return 0;
  }
}

}  // namespace

int64_t ThreadStats::Change(int p, Gauge g) const {
  if (p == kAllPools) return Change(kSmall, g) + Change(kLarge, g);
  const Changes& u = unfolded_[p];
  return ForGauge(g, u.allocated, -u.allocated, u.requested, u.split);
}

int64_t ThreadStats::High(int p, Gauge g) const {
  const Highs& h = highs_[p];
  return ForGauge(g, h.allocated, h.cached, h.requested, h.split);
}

bool ThreadStats::HasUnfolded() const {
  for (int p = 0; p < kNumStatPools; ++p) {
    const Changes& u = unfolded_[p];
    const Highs& h = highs_[p];
    if ((u.allocated | u.requested | u.split | h.allocated | h.cached | h.requested |
         h.split) != 0) {
      return true;
    }
  }
  return false;
}

void ThreadStats::ClearUnfolded() {
  ++version_;
  for (int p : {kSmall, kLarge}) {
    folded_[p].allocated += unfolded_[p].allocated;
    folded_[p].requested += unfolded_[p].requested;
    folded_[p].split += unfolded_[p].split;
    unfolded_[p] = {};
  }
  for (Highs& h : highs_) h = {};
}

void ThreadStats::AddTotals(int64_t up[kNumGauges][kNumStatPools],
                            int64_t down[kNumGauges][kNumStatPools],
                            int64_t counters[kNumCounters]) const {
  for (int p : {kSmall, kLarge}) {
    const Totals& t = totals_[p];
    // The net change since the totals were cleared: taken less put back.
    const int64_t net_allocated = folded_[p].allocated + unfolded_[p].allocated;
    const int64_t net_requested = folded_[p].requested + unfolded_[p].requested;
    const int64_t net_split = folded_[p].split + unfolded_[p].split;
    const int64_t pushed = t.popped - net_allocated;
    const int64_t requested_pushed = t.requested_popped - net_requested;
    const int64_t split_pushed = t.split_popped + net_split;
    auto add = [&](Gauge g, int64_t increase, int64_t decrease) {
      for (int q : {kAllPools, p}) {
        up[g][q] += increase;
        down[g][q] += decrease;
      }
    };
    add(kAllocatedBytes, t.popped, pushed);
    add(kActiveBytes, t.popped, pushed);
    add(kCachedBytes, pushed, t.popped);
    add(kRequestedBytes, t.requested_popped, requested_pushed);
    add(kInactiveSplitBytes, split_pushed, t.split_popped);
    counters[kNumAllocations] += t.num_popped;
    counters[kNumCacheHits] += t.num_popped;
    counters[kNumFrees] += t.num_pushed;
  }
}

void ThreadStats::ClearTotals() {
  for (int p : {kSmall, kLarge}) {
    totals_[p] = {};
    // The net change restarts from here: what is still unfolded is not in new totals.
    folded_[p].allocated = -unfolded_[p].allocated;
    folded_[p].requested = -unfolded_[p].requested;
    folded_[p].split = -unfolded_[p].split;
  }
}

}  // namespace genesis::memory::pool_internal
