// What a CachingAllocator reports about its memory: the numbers behind Stats(),
// Summary() and the OOM message.
//
// The names and meanings follow torch.cuda.memory_stats so that people who know PyTorch
// read them without a glossary, and ToMap() produces the same "name.pool.metric" keys.
// Every byte figure is a MemoryStat (current, peak, and the running totals of increases
// and decreases), kept for the small pool, the large pool and both together ("all").
#ifndef GENESIS_MEMORY_MEMORY_STATS_H_
#define GENESIS_MEMORY_MEMORY_STATS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace genesis::memory {

// One gauge. current/peak are levels; allocated/freed are the sums of all increases and
// decreases since creation (or ResetAccumulatedStats), so current == allocated - freed
// until a reset.
struct MemoryStat {
  int64_t current = 0;
  int64_t peak = 0;
  int64_t allocated = 0;
  int64_t freed = 0;
};

struct PoolMemoryStats {
  // Bytes in blocks handed to callers (block sizes, i.e. after rounding).
  MemoryStat allocated_bytes;
  // reserved - allocated: bytes the pool holds but no caller owns, including blocks
  // waiting on stream events and blocks in per-thread caches.
  MemoryStat cached_bytes;
  // Bytes in segments obtained from the backend.
  MemoryStat reserved_bytes;
  // allocated plus blocks freed by the caller but still waiting on stream events.
  MemoryStat active_bytes;
  // Free bytes in segments that also hold other blocks: memory that only requests that
  // fit the holes can use.
  MemoryStat inactive_split_bytes;
  // Bytes callers asked for (before rounding) in live allocations.
  MemoryStat requested_bytes;
};

struct MemoryStats {
  PoolMemoryStats all;
  PoolMemoryStats small_pool;
  PoolMemoryStats large_pool;

  int64_t num_allocations = 0;
  int64_t num_frees = 0;
  // Allocations served from cached memory / that needed a new segment.
  int64_t num_cache_hits = 0;
  int64_t num_cache_misses = 0;
  // Allocations that failed for lack of memory, and those that succeeded only after the
  // pool released its cache and asked the backend again.
  int64_t num_ooms = 0;
  int64_t num_alloc_retries = 0;
  int64_t num_segments = 0;  // Current.
  int64_t num_segment_allocs = 0;
  int64_t num_segment_frees = 0;
  // Expandable segments: successful VirtualMemory Map and Unmap calls. Their address
  // ranges count as segments above (a reservation is one backend call too).
  int64_t num_maps = 0;
  int64_t num_unmaps = 0;
  // Largest free block a request could get without a new segment (0 if none).
  int64_t largest_free_block = 0;

  // hits / (hits + misses); 0 before the first allocation.
  double cache_hit_rate() const;
  // 1 - largest_free_block / cached bytes: 0 when all cached memory is one block (or
  // nothing is cached), near 1 when it is scattered in small holes that a large
  // request cannot use.
  double fragmentation_ratio() const;

  // Flat view like torch.cuda.memory_stats(): "allocated_bytes.all.current",
  // "reserved_bytes.large_pool.peak", ..., "num_allocations", "num_ooms", ...
  std::map<std::string, int64_t> ToMap() const;
};


}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_MEMORY_STATS_H_
