#include "genesis/memory/pool/thread_stats.h"

#include <cstdint>
#include <initializer_list>

namespace genesis::memory::pool_internal {

void ThreadStats::AddTotals(int64_t up[kNumGauges][kNumStatPools],
                            int64_t down[kNumGauges][kNumStatPools],
                            int64_t counters[kNumCounters]) const {
  for (int p : {kSmall, kLarge}) {
    const Totals& t = totals[p];
    auto add = [&](Gauge g, int64_t increase, int64_t decrease) {
      for (int q : {kAllPools, p}) {
        up[g][q] += increase;
        down[g][q] += decrease;
      }
    };
    add(kAllocatedBytes, t.popped, t.pushed);
    add(kActiveBytes, t.popped, t.pushed);
    add(kCachedBytes, t.pushed, t.popped);
    add(kRequestedBytes, t.requested_popped, t.requested_pushed);
    add(kInactiveSplitBytes, t.split_pushed, t.split_popped);
    counters[kNumAllocations] += t.num_popped;
    counters[kNumCacheHits] += t.num_popped;
    counters[kNumFrees] += t.num_pushed;
  }
}

}  // namespace genesis::memory::pool_internal
