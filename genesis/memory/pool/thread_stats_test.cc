#include "genesis/memory/pool/thread_stats.h"

#include <algorithm>
#include <cstdint>
#include <random>

#include "gtest/gtest.h"
#include "genesis/memory/pool/stat_index.h"

namespace genesis::memory::pool_internal {
namespace {

// The figures written out in full on every call, as the fast path kept them before it
// was made lean: what ThreadStats must agree with at every step.
struct Reference {
  int64_t change[kNumGauges][kNumStatPools] = {};
  int64_t high[kNumGauges][kNumStatPools] = {};
  int64_t up[kNumGauges][kNumStatPools] = {};
  int64_t down[kNumGauges][kNumStatPools] = {};
  int64_t counters[kNumCounters] = {};

  void Account(bool taken, int pool, int64_t size, int64_t requested, bool split) {
    const int64_t sign = taken ? 1 : -1;
    const int64_t split_size = split ? size : 0;
    for (int p : {kAllPools, pool}) {
      Move(kAllocatedBytes, p, sign * size);
      Move(kActiveBytes, p, sign * size);
      Move(kCachedBytes, p, -sign * size);
      Move(kRequestedBytes, p, sign * requested);
      Move(kInactiveSplitBytes, p, -sign * split_size);
    }
    counters[kNumAllocations] += taken;
    counters[kNumCacheHits] += taken;
    counters[kNumFrees] += !taken;
  }
  void Move(Gauge g, int p, int64_t delta) {
    change[g][p] += delta;
    high[g][p] = std::max(high[g][p], change[g][p]);
    (delta > 0 ? up : down)[g][p] += delta > 0 ? delta : -delta;
  }
  void ClearUnfolded() {
    for (auto& row : change) std::fill(std::begin(row), std::end(row), 0);
    for (auto& row : high) std::fill(std::begin(row), std::end(row), 0);
  }
  void ClearTotals() {
    for (auto& row : up) std::fill(std::begin(row), std::end(row), 0);
    for (auto& row : down) std::fill(std::begin(row), std::end(row), 0);
    std::fill(std::begin(counters), std::end(counters), 0);
  }
};

void ExpectSame(const ThreadStats& t, const Reference& r, int step) {
  int64_t up[kNumGauges][kNumStatPools] = {};
  int64_t down[kNumGauges][kNumStatPools] = {};
  int64_t counters[kNumCounters] = {};
  t.AddTotals(up, down, counters);
  for (int g = 0; g < kNumGauges; ++g) {
    for (int p = 0; p < kNumStatPools; ++p) {
      const auto gauge = static_cast<Gauge>(g);
      ASSERT_EQ(t.Change(p, gauge), r.change[g][p]) << "step " << step << " gauge " << g;
      ASSERT_EQ(t.High(p, gauge), r.high[g][p]) << "step " << step << " gauge " << g;
      ASSERT_EQ(up[g][p], r.up[g][p]) << "step " << step << " gauge " << g << " pool " << p;
      ASSERT_EQ(down[g][p], r.down[g][p]) << "step " << step << " gauge " << g;
    }
  }
  for (int c = 0; c < kNumCounters; ++c) ASSERT_EQ(counters[c], r.counters[c]) << c;
}

// Random calls on both pools, with the pool's folds (changes, then totals) in between:
// every figure matches the one written out in full, after every call.
TEST(ThreadStatsTest, LeanFiguresMatchFiguresWrittenInFull) {
  std::mt19937_64 rng(17);
  ThreadStats t;
  Reference r;
  for (int step = 0; step < 20000; ++step) {
    const uint64_t dice = rng() % 100;
    if (dice < 3) {
      t.ClearUnfolded();
      r.ClearUnfolded();
    } else if (dice < 5) {
      // Fold as the pool does: changes first, then totals.
      t.ClearUnfolded();
      r.ClearUnfolded();
      t.ClearTotals();
      r.ClearTotals();
    } else if (dice < 6) {
      // Totals alone, with changes still unfolded.
      t.ClearTotals();
      r.ClearTotals();
    } else {
      const bool taken = rng() % 2 == 0;
      const int pool = rng() % 2 == 0 ? kSmall : kLarge;
      const int64_t size = int64_t{512} << (rng() % 12);
      const int64_t requested = size - static_cast<int64_t>(rng() % 512);
      const bool split = rng() % 3 != 0;
      if (taken) {
        t.Account<true>(pool, size, requested, split);
      } else {
        t.Account<false>(pool, size, requested, split);
      }
      r.Account(taken, pool, size, requested, split);
    }
    ASSERT_NO_FATAL_FAILURE(ExpectSame(t, r, step));
    ASSERT_EQ(t.HasUnfolded(), [&] {
      for (int g = 0; g < kNumGauges; ++g) {
        for (int p = 0; p < kNumStatPools; ++p) {
          if (r.change[g][p] != 0 || r.high[g][p] != 0) return true;
        }
      }
      return false;
    }()) << "step " << step;
  }
}

}  // namespace
}  // namespace genesis::memory::pool_internal
