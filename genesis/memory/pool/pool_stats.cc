#include "genesis/memory/pool/pool_stats.h"

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace genesis::memory::pool_internal {

void CacheFigures::Add(const ThreadStats& stats) {
  stats.AddTotals(up, down, counters);
  auto& e = excess.emplace_back();
  for (int g = 0; g < kNumGauges; ++g) {
    for (int p = 0; p < kNumStatPools; ++p) {
      const int64_t change = stats.Change(p, static_cast<Gauge>(g));
      current[g][p] += change;
      e[g][p] = stats.High(p, static_cast<Gauge>(g)) - change;
    }
  }
}

void PoolStats::RaisePeakSlow(Gauge g, int p, int64_t value) {
  int64_t peak = peak_[g][p].load(std::memory_order_relaxed);
  while (value > peak &&
         !peak_[g][p].compare_exchange_weak(peak, value, std::memory_order_relaxed)) {
  }
}

void PoolStats::FoldCurrent(ThreadStats& stats) {
  if (!stats.HasUnfolded()) return;
  for (int p = 0; p < kNumStatPools; ++p) {
    for (int g = 0; g < kNumGauges; ++g) {
      const auto gauge = static_cast<Gauge>(g);
      if (const int64_t high = stats.High(p, gauge); high > 0) {
        RaisePeakTo(gauge, p, GaugeNow(gauge, p) + high);
      }
      if (const int64_t change = stats.Change(p, gauge); change != 0) {
        folded_[g][p].fetch_add(change, std::memory_order_relaxed);
      }
    }
  }
  stats.ClearUnfolded();
}

void PoolStats::Fold(ThreadStats& stats) {
  FoldCurrent(stats);
  int64_t up[kNumGauges][kNumStatPools] = {};
  int64_t down[kNumGauges][kNumStatPools] = {};
  int64_t counters[kNumCounters] = {};
  stats.AddTotals(up, down, counters);
  stats.ClearTotals();
  CounterShard& shard = shards_[ThisThreadShard()];
  for (int g = 0; g < kNumGauges; ++g) {
    for (int p = 0; p < kNumStatPools; ++p) {
      if (up[g][p] != 0) shard.gauge_up[g][p].fetch_add(up[g][p], std::memory_order_relaxed);
      if (down[g][p] != 0) {
        shard.gauge_down[g][p].fetch_add(down[g][p], std::memory_order_relaxed);
      }
    }
  }
  for (int c = 0; c < kNumCounters; ++c) {
    if (counters[c] != 0) shard.counters[c].fetch_add(counters[c], std::memory_order_relaxed);
  }
}

MemoryStats PoolStats::Collect(const CacheFigures& figures) const {
  MemoryStats out;
  PoolMemoryStats* pools[kNumStatPools] = {&out.all, &out.small_pool, &out.large_pool};
  for (int p = 0; p < kNumStatPools; ++p) {
    MemoryStat* stats[kNumGauges] = {
        &pools[p]->allocated_bytes,      &pools[p]->cached_bytes,
        &pools[p]->reserved_bytes,       &pools[p]->active_bytes,
        &pools[p]->inactive_split_bytes, &pools[p]->requested_bytes};
    for (int g = 0; g < kNumGauges; ++g) {
      stats[g]->current = GaugeNow(static_cast<Gauge>(g), p) + figures.current[g][p];
      stats[g]->peak =
          std::max(peak_[g][p].load(std::memory_order_relaxed), stats[g]->current);
      for (const auto& e : figures.excess) {
        if (g != kReservedBytes) {
          stats[g]->peak = std::max(stats[g]->peak, stats[g]->current + e[g][p]);
        }
      }
      stats[g]->allocated = figures.up[g][p] + up_[g][p].load(std::memory_order_relaxed);
      stats[g]->freed = figures.down[g][p] + down_[g][p].load(std::memory_order_relaxed);
      for (const CounterShard& s : shards_) {
        stats[g]->allocated += s.gauge_up[g][p].load(std::memory_order_relaxed);
        stats[g]->freed += s.gauge_down[g][p].load(std::memory_order_relaxed);
      }
    }
  }
  int64_t counters[kNumCounters] = {};
  for (int c = 0; c < kNumCounters; ++c) {
    counters[c] = figures.counters[c] + counters_[c].load(std::memory_order_relaxed);
  }
  for (const CounterShard& s : shards_) {
    for (int c = 0; c < kNumCounters; ++c) {
      counters[c] += s.counters[c].load(std::memory_order_relaxed);
    }
  }
  out.num_allocations = counters[kNumAllocations];
  out.num_frees = counters[kNumFrees];
  out.num_cache_hits = counters[kNumCacheHits];
  out.num_cache_misses = counters[kNumCacheMisses];
  out.num_ooms = counters[kNumOoms];
  out.num_alloc_retries = counters[kNumAllocRetries];
  out.num_segment_allocs = counters[kNumSegmentAllocs];
  out.num_segment_frees = counters[kNumSegmentFrees];
  out.num_maps = counters[kNumMaps];
  out.num_unmaps = counters[kNumUnmaps];
  out.num_segments = num_segments_.load(std::memory_order_relaxed);
  return out;
}

void PoolStats::ResetPeaks() {
  for (int g = 0; g < kNumGauges; ++g) {
    for (int p = 0; p < kNumStatPools; ++p) {
      peak_[g][p].store(GaugeNow(static_cast<Gauge>(g), p), std::memory_order_relaxed);
    }
  }
}

void PoolStats::ResetAccumulated() {
  for (auto& c : counters_) c.store(0, std::memory_order_relaxed);
  for (int g = 0; g < kNumGauges; ++g) {
    for (int p = 0; p < kNumStatPools; ++p) {
      up_[g][p].store(0, std::memory_order_relaxed);
      down_[g][p].store(0, std::memory_order_relaxed);
    }
  }
  for (CounterShard& s : shards_) {
    for (auto& c : s.counters) c.store(0, std::memory_order_relaxed);
    for (int g = 0; g < kNumGauges; ++g) {
      for (int p = 0; p < kNumStatPools; ++p) {
        s.gauge_up[g][p].store(0, std::memory_order_relaxed);
        s.gauge_down[g][p].store(0, std::memory_order_relaxed);
      }
    }
  }
}

}  // namespace genesis::memory::pool_internal
