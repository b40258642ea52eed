// Settings of a CachingAllocator: sizes, limits and caching policy.
//
// Set them in code, or for every pool of a process through the GENESIS_ALLOC_CONF
// environment variable (alloc_config.h parses it; the README lists the keys). Defaults
// suit GPU training; every limit defaults to "none".
#ifndef GENESIS_MEMORY_ALLOCATOR_OPTIONS_H_
#define GENESIS_MEMORY_ALLOCATOR_OPTIONS_H_

#include <cstddef>
#include <limits>
#include <vector>

#include "genesis/memory/piece_layout.h"

namespace genesis::memory {

inline constexpr size_t kMiB = size_t{1} << 20;
inline constexpr size_t kNoLimit = std::numeric_limits<size_t>::max();

// Whether large blocks live in expandable segments (see virtual_memory.h).
enum class ExpandableSegments {
  kAuto,  // Where the backend offers virtual memory; classic segments elsewhere.
  kOn,    // Always: creating a pool over a backend without virtual memory fails.
  kOff,   // Never: classic segments only.
};

struct AllocatorOptions {
  // Every block size is a multiple of this (a power of two, >= 512).
  size_t block_rounding = 512;
  // Requests below this are served from the small pool, packed into segments of
  // small_segment_size; larger ones from the large pool.
  size_t small_size_limit = 1 * kMiB;
  size_t small_segment_size = 2 * kMiB;
  // Large requests below large_segment_threshold share segments of this size (so a few
  // mid-size blocks do not each cost a backend call); larger ones get a segment of their
  // own, rounded up to large_segment_rounding.
  size_t large_segment_size = 20 * kMiB;
  size_t large_segment_threshold = 10 * kMiB;
  size_t large_segment_rounding = 2 * kMiB;
  // Shared large segments grow with the pool (classic segments only): a new one is an
  // eighth of the reserved memory, rounded down to a power of two, but no smaller than
  // large_segment_size and no larger than this; requests below half of it (or below
  // large_segment_threshold, if that is more) share it. So a pool that holds gigabytes
  // asks the backend for memory in a few large calls, while a small one stays at
  // large_segment_size. Where the backend has no room for a grown segment, the request
  // gets the segment it would have had without growth. At or below large_segment_size:
  // fixed sizes, as in PyTorch.
  size_t large_segment_max = 256 * kMiB;
  // 0: plain rounding. N (a power of two): sizes are rounded up to one of N steps
  // between consecutive powers of two, like PyTorch's roundup_power2_divisions, so
  // that slightly varying sizes reuse the same blocks.
  int roundup_power2_divisions = 0;
  // Free blocks larger than this are never split (kNoLimit: any block may be split);
  // limits fragmentation by big blocks serving small requests.
  size_t max_split_size = kNoLimit;
  // The pool never reserves more than this fraction of the backend's total memory.
  double memory_fraction = 1.0;
  // The pool keeps at most this many bytes cached (reserved but unallocated); above it,
  // freed segments go back to the backend, least recently used first.
  size_t cache_limit = kNoLimit;
  // 0 disables. In (0, 1]: once reserved memory exceeds this fraction of the allowed
  // maximum (memory_fraction of the total), the pool releases least recently used
  // cached segments before asking the backend for more.
  double garbage_collection_threshold = 0.0;
  // Sizes allocated and freed once at creation so that their segments are reserved.
  std::vector<size_t> warm_up_sizes;
  // Keep segments of sizes that recur; release sizes that have not recurred first.
  bool adaptive_caching = true;
  // Per-thread caches of freed blocks, so that a cached allocation and its free take no
  // pool-wide lock: at most this many blocks of one size and stream per thread, and at
  // most thread_cache_bytes bytes per thread. 0 disables them; every call then goes
  // through the pool's lock and frees merge at once. Cached blocks go back to the pool
  // on EmptyCache, Compact, before an allocation would fail, and when the thread exits.
  int thread_cache_blocks = 8;
  size_t thread_cache_bytes = 64 * kMiB;
  // Large blocks in expandable segments: one virtual address range per stream, mapped
  // chunk by chunk where blocks need memory. A request no free block fits grows a free
  // neighbour in place; when that would raise the pool's reserved memory above its
  // high-water mark, free chunks elsewhere are unmapped first and their memory mapped
  // where it is needed, so peaks follow allocated memory closely while a steady loop,
  // which stays under its high-water mark, maps and unmaps nothing. max_split_size and
  // the large segment sizes do not apply to them.
  ExpandableSegments expandable_segments = ExpandableSegments::kAuto;
  // The largest piece of physical memory that one map of an expandable segment creates
  // (a power of two, >= 2 MiB; mapping_pieces.h). Mapping costs driver calls per piece,
  // not per byte; memory goes back a whole piece at a time.
  size_t expandable_piece_size = 64 * kMiB;
  // How one map of an expandable segment is cut into pieces (piece_layout.h): aligned
  // powers of two (about 2 log2(n) pieces for n chunks; memory goes back closely) or
  // whole pieces (about one per map: fewer driver calls, memory goes back only where
  // a whole piece is free).
  PieceLayout expandable_piece_layout = PieceLayout::kAligned;
  // Aligned layout: neighbouring pieces of one map where one is smaller than this join
  // (up to expandable_piece_size), so a map's small end pieces cost no driver
  // allocations of their own (a power of two; 2 MiB or less: the pure aligned cut).
  // The defaults (16 MiB, 64 MiB pieces) map 57% and 61% fewer pieces than the pure
  // aligned cut of 32 MiB on the training traces; peak reserved memory is 0.5% more on
  // GPT-2 and 0.6% less on ResNet-50 (README, Measured).
  size_t expandable_min_piece = 16 * kMiB;
  // The least one map of an expandable segment adds when the pool grows (rounded up to
  // the granularity): a request that needs less maps this much ahead where the
  // unmapped range has room, so the next requests land in what is already mapped.
  // Each piece costs the driver about 30 us whatever its size, and growing training
  // steps map a few MiB at a time; 0 maps just what each request needs (fewest idle
  // bytes, most driver calls). Not beyond the memory_fraction cap, and a backend that
  // refuses the larger map gets the smaller one. The default, 16 MiB, maps 32% fewer
  // pieces than 0 on the ResNet-50 training trace and 24% fewer on GPT-2's, for 0.4%
  // and 0.6% more peak reserved memory; both then replay on an H200 in less time than
  // PyTorch's expandable segments (README, Measured).
  size_t expandable_min_map = 16 * kMiB;
};

}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_ALLOCATOR_OPTIONS_H_
