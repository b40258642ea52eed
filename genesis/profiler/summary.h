// MemorySummary: what a recorded history says in a few numbers: per pool the peak
// allocated and reserved bytes and when they were reached, call counts, the cache hit
// rate and the time spent in the pool; over all pools, allocations by size class.
#ifndef GENESIS_PROFILER_SUMMARY_H_
#define GENESIS_PROFILER_SUMMARY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "genesis/profiler/history.h"

namespace genesis::profiler {

struct PoolSummary {
  std::string label;  // SourceLabel.
  int64_t peak_allocated = 0;
  // Since the history's start.
  int64_t peak_allocated_at_ns = 0;
  int64_t peak_reserved = 0;
  int64_t peak_reserved_at_ns = 0;
  int64_t allocs = 0;
  int64_t frees = 0;
  int64_t cache_hits = 0;
  // Of the hits, those served by the thread cache (the fast path).
  int64_t thread_cache_hits = 0;
  int64_t segment_allocs = 0;
  int64_t segment_frees = 0;
  int64_t maps = 0;
  int64_t unmaps = 0;
  int64_t ooms = 0;
  // Sum of the measured time of allocate and free calls (the fast path counts 0).
  int64_t time_in_pool_ns = 0;
  double hit_rate = 0.0;  // cache_hits / allocs.
};

struct SizeClass {
  // Blocks of size in [min_bytes, max_bytes).
  uint64_t min_bytes = 0;
  uint64_t max_bytes = 0;
  int64_t allocs = 0;
  uint64_t bytes = 0;
  int64_t cache_hits = 0;
};

struct MemorySummary {
  int64_t duration_ns = 0;
  std::vector<PoolSummary> pools;
  // Powers of four from 512 B; only classes with allocations.
  std::vector<SizeClass> size_classes;
  int64_t markers = 0;
  uint64_t dropped_events = 0;
  int num_threads = 0;
  int64_t time_resolution_ns = 0;

  // A readable table.
  std::string ToText() const;
  nlohmann::json ToJson() const;
};

MemorySummary Summarize(const History& history);

}  // namespace genesis::profiler

#endif  // GENESIS_PROFILER_SUMMARY_H_
